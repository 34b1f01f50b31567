-- Herald's first schema on PostgreSQL, the same tables as on SQLite. Times are
-- unix milliseconds from Herald's clock (never now()), so tests can move time
-- and both engines agree. Integers are BIGINT so both engines decode them as
-- i64. JSON is stored as text, not jsonb: the store never
-- queries inside it, and jsonb would refuse chat text containing U+0000.

CREATE TABLE conversations (
    id         TEXT PRIMARY KEY,
    channel    TEXT NOT NULL,
    -- The latest ConversationRef a queued task carried, as JSON.
    ref        TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE tasks (
    id               BIGSERIAL PRIMARY KEY,
    conversation_id  TEXT NOT NULL REFERENCES conversations (id),
    channel          TEXT NOT NULL,
    payload          TEXT NOT NULL,
    priority         BIGINT NOT NULL DEFAULT 0,
    state            TEXT NOT NULL CHECK (state IN ('queued', 'leased', 'done', 'dead')),
    attempts         BIGINT NOT NULL DEFAULT 0,
    max_attempts     BIGINT NOT NULL,
    run_at           BIGINT NOT NULL,
    lease_token      TEXT,
    lease_expires_at BIGINT,
    last_error       TEXT,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
);

-- Finds a conversation's head (its lowest unfinished task) without a scan.
CREATE INDEX tasks_unfinished_by_conversation ON tasks (conversation_id, id)
    WHERE state IN ('queued', 'leased');
-- The claim walks unfinished tasks in the order it hands them out.
CREATE INDEX tasks_unfinished_by_priority ON tasks (priority, id)
    WHERE state IN ('queued', 'leased');
CREATE INDEX tasks_by_state ON tasks (state, created_at);

CREATE TABLE messages (
    id              BIGSERIAL PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id),
    task_id         BIGINT REFERENCES tasks (id),
    seq             BIGINT NOT NULL,
    role            TEXT NOT NULL,
    actor           TEXT,
    text            TEXT NOT NULL,
    at              BIGINT NOT NULL,
    UNIQUE (task_id, seq)
);

CREATE INDEX messages_by_conversation ON messages (conversation_id, id);

CREATE TABLE inbound_dedup (
    key     TEXT PRIMARY KEY,
    task_id BIGINT NOT NULL REFERENCES tasks (id),
    seen_at BIGINT NOT NULL
);

CREATE TABLE deliveries (
    task_id              BIGINT NOT NULL REFERENCES tasks (id),
    slot                 TEXT NOT NULL,
    conversation_id      TEXT NOT NULL,
    platform_message_ids TEXT NOT NULL,
    delivered_at         BIGINT NOT NULL,
    PRIMARY KEY (task_id, slot)
);

CREATE TABLE state (
    scope      TEXT NOT NULL,
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (scope, key)
);
