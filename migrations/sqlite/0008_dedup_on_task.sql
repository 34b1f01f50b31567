-- A platform event's dedup key moves onto the task it became, so enqueueing
-- is one insert that a unique key makes whole or nothing (no transaction of
-- three writes). A task lives as long as its key must (prune.rs), which is
-- what `inbound_dedup` kept it for anyway.
ALTER TABLE tasks ADD COLUMN dedup_key TEXT;
UPDATE tasks SET dedup_key = d.key FROM inbound_dedup d WHERE d.task_id = tasks.id;
-- Unique: a key seen before stores nothing. Tasks without a key are NULL,
-- and NULLs never conflict.
CREATE UNIQUE INDEX tasks_by_dedup_key ON tasks (dedup_key);
DROP TABLE inbound_dedup;
