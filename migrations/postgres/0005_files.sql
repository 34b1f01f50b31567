-- Files that came with messages, stored once per content (the SHA-256 of
-- their bytes) before the message is queued, so a task finds its files
-- after a crash and in every process that shares the queue. Files go after
-- attachments.retention since they were last stored (used_at).
CREATE TABLE files (
    sha256       TEXT PRIMARY KEY,
    content_type TEXT NOT NULL,
    size         BIGINT NOT NULL,
    bytes        BYTEA NOT NULL,
    stored_at    BIGINT NOT NULL,
    used_at      BIGINT NOT NULL
);
CREATE INDEX files_by_use ON files (used_at);
