-- Herald's first schema on SQLite. Times are unix milliseconds from Herald's
-- clock (never the database's), so tests can move time and both engines agree.
-- JSON is stored as text: the store never queries inside it.

CREATE TABLE conversations (
    id         TEXT PRIMARY KEY NOT NULL,
    channel    TEXT NOT NULL,
    -- The latest ConversationRef a queued task carried, as JSON.
    ref        TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE TABLE tasks (
    -- AUTOINCREMENT: ids are never reused, so id order is arrival order.
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id  TEXT NOT NULL REFERENCES conversations (id),
    channel          TEXT NOT NULL,
    payload          TEXT NOT NULL,
    priority         INTEGER NOT NULL DEFAULT 0,
    state            TEXT NOT NULL CHECK (state IN ('queued', 'leased', 'done', 'dead')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL,
    run_at           INTEGER NOT NULL,
    lease_token      TEXT,
    lease_expires_at INTEGER,
    last_error       TEXT,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);

-- Finds a conversation's head (its lowest unfinished task) without a scan.
CREATE INDEX tasks_unfinished_by_conversation ON tasks (conversation_id, id)
    WHERE state IN ('queued', 'leased');
-- The claim walks unfinished tasks in the order it hands them out.
CREATE INDEX tasks_unfinished_by_priority ON tasks (priority, id)
    WHERE state IN ('queued', 'leased');
CREATE INDEX tasks_by_state ON tasks (state, created_at);

CREATE TABLE messages (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id TEXT NOT NULL REFERENCES conversations (id),
    task_id         INTEGER REFERENCES tasks (id),
    seq             INTEGER NOT NULL,
    role            TEXT NOT NULL,
    actor           TEXT,
    text            TEXT NOT NULL,
    at              INTEGER NOT NULL,
    UNIQUE (task_id, seq)
);

CREATE INDEX messages_by_conversation ON messages (conversation_id, id);

CREATE TABLE inbound_dedup (
    key     TEXT PRIMARY KEY NOT NULL,
    task_id INTEGER NOT NULL REFERENCES tasks (id),
    seen_at INTEGER NOT NULL
);

CREATE TABLE deliveries (
    task_id              INTEGER NOT NULL REFERENCES tasks (id),
    slot                 TEXT NOT NULL,
    conversation_id      TEXT NOT NULL,
    platform_message_ids TEXT NOT NULL,
    delivered_at         INTEGER NOT NULL,
    PRIMARY KEY (task_id, slot)
);

CREATE TABLE state (
    scope      TEXT NOT NULL,
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (scope, key)
);
