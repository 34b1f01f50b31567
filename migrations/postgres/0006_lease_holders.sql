-- Who holds a lease. Every process (every open store) has a holder id and
-- holds a session-level advisory lock keyed on it, on a connection of its
-- own, for as long as it lives. A leased task whose holder's lock is free
-- belongs to a process that is gone: other processes take it over in
-- seconds instead of waiting for its lease to expire (crates/store/src/liveness.rs).
ALTER TABLE tasks ADD COLUMN lease_holder TEXT;

-- The holders of leased tasks, for the probe that looks for dead ones.
CREATE INDEX tasks_leased_by_holder ON tasks (lease_holder) WHERE state = 'leased';

-- The claim of migration 0003, recording the holder. One function: a
-- process that calls it with five arguments (an older binary during an
-- upgrade) leases with no holder, which only the lease's expiry takes over.
DROP FUNCTION herald_claim_task(text, bigint, bigint, text[], text[]);

CREATE FUNCTION herald_claim_task(token text, expires_at bigint, now_ms bigint, channels text[], conversations text[],
                                  holder text DEFAULT NULL)
RETURNS SETOF tasks
LANGUAGE sql VOLATILE
SET enable_sort = off
AS $$
UPDATE tasks SET state = 'leased', lease_token = token, lease_expires_at = expires_at, lease_holder = holder,
                 attempts = attempts + 1, updated_at = now_ms
WHERE id = (
    SELECT t.id FROM tasks t
    WHERE t.state IN ('queued', 'leased')
      AND ((t.state = 'queued' AND t.run_at <= now_ms) OR (t.state = 'leased' AND t.lease_expires_at <= now_ms))
      AND (channels IS NULL OR t.channel = ANY(channels))
      AND (conversations IS NULL OR t.conversation_id = ANY(conversations))
      AND NOT EXISTS (
          SELECT 1 FROM tasks e
          WHERE e.conversation_id = t.conversation_id AND e.state IN ('queued', 'leased') AND e.id < t.id)
    ORDER BY t.priority, t.id
    LIMIT 1
    FOR NO KEY UPDATE SKIP LOCKED)
RETURNING *
$$;
