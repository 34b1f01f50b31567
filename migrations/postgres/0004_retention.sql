-- Finished tasks are pruned after queue.retention (and dedup keys after
-- their own window), so these indexes keep the prune and /metrics cheap.

-- Finished tasks by state and age: the prune walks the old ones, and the
-- dead count reads only the dead ones. Partial, so claims and completions
-- of unfinished tasks never pay for it.
CREATE INDEX tasks_finished ON tasks (state, updated_at) WHERE state IN ('done', 'dead');
-- Dedup keys by the task they name (whether a task still has a live key, and
-- the foreign-key check when a task is deleted) and by age (their own prune).
CREATE INDEX inbound_dedup_by_task ON inbound_dedup (task_id);
CREATE INDEX inbound_dedup_by_age ON inbound_dedup (seen_at);

-- Pruning a task keeps its history (the entries lose their task link) and
-- drops its delivery receipts.
ALTER TABLE messages
    DROP CONSTRAINT messages_task_id_fkey,
    ADD CONSTRAINT messages_task_id_fkey FOREIGN KEY (task_id) REFERENCES tasks (id) ON DELETE SET NULL;
ALTER TABLE deliveries
    DROP CONSTRAINT deliveries_task_id_fkey,
    ADD CONSTRAINT deliveries_task_id_fkey FOREIGN KEY (task_id) REFERENCES tasks (id) ON DELETE CASCADE;
