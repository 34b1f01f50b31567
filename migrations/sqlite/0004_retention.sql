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
-- drops its delivery receipts. SQLite cannot change a foreign key in place,
-- so both tables are rebuilt with the same columns and rows. AUTOINCREMENT
-- carries on from the highest id copied.
CREATE TABLE messages_new (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id TEXT NOT NULL REFERENCES conversations (id),
    task_id         INTEGER REFERENCES tasks (id) ON DELETE SET NULL,
    seq             INTEGER NOT NULL,
    role            TEXT NOT NULL,
    actor           TEXT,
    text            TEXT NOT NULL,
    at              INTEGER NOT NULL,
    UNIQUE (task_id, seq)
);
INSERT INTO messages_new (id, conversation_id, task_id, seq, role, actor, text, at)
    SELECT id, conversation_id, task_id, seq, role, actor, text, at FROM messages;
DROP TABLE messages;
ALTER TABLE messages_new RENAME TO messages;
CREATE INDEX messages_by_conversation ON messages (conversation_id, id);

CREATE TABLE deliveries_new (
    task_id              INTEGER NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    slot                 TEXT NOT NULL,
    conversation_id      TEXT NOT NULL,
    platform_message_ids TEXT NOT NULL,
    delivered_at         INTEGER NOT NULL,
    PRIMARY KEY (task_id, slot)
);
INSERT INTO deliveries_new (task_id, slot, conversation_id, platform_message_ids, delivered_at)
    SELECT task_id, slot, conversation_id, platform_message_ids, delivered_at FROM deliveries;
DROP TABLE deliveries;
ALTER TABLE deliveries_new RENAME TO deliveries;
