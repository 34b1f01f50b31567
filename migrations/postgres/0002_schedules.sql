-- Scheduled tasks, the same table as on SQLite. The timing is
-- herald-schedule's JSON (`spec`); the store keeps it as text and answers
-- only which schedules are due, by `next_run_at` (unix milliseconds from
-- Herald's clock; NULL once a schedule has no run left).

CREATE TABLE schedules (
    id              BIGSERIAL PRIMARY KEY,
    conversation_id TEXT NOT NULL,
    -- The ConversationRef the runs' tasks go to, as JSON.
    ref             TEXT NOT NULL,
    actor           TEXT,
    instruction     TEXT NOT NULL,
    spec            TEXT NOT NULL,
    next_run_at     BIGINT,
    last_run_at     BIGINT,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL
);

CREATE INDEX schedules_due ON schedules (next_run_at) WHERE next_run_at IS NOT NULL;
CREATE INDEX schedules_by_conversation ON schedules (conversation_id, id);
