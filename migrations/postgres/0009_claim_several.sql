-- A claimer with room for several turns takes several conversation heads in
-- one statement: a backlog costs one claim per batch instead of one per
-- task. The same walk as herald_claim_task (0003, 0006), which stays for
-- older binaries during an upgrade; `IN` keeps every row it picks, each
-- locked with SKIP LOCKED, so two processes claiming together split the
-- heads between them and never take one twice.
CREATE FUNCTION herald_claim_tasks(token text, expires_at bigint, now_ms bigint, channels text[], conversations text[],
                                   holder text, max_tasks bigint)
RETURNS SETOF tasks
LANGUAGE sql VOLATILE
SET enable_sort = off
AS $$
UPDATE tasks SET state = 'leased', lease_token = token, lease_expires_at = expires_at, lease_holder = holder,
                 attempts = attempts + 1, updated_at = now_ms
WHERE id IN (
    SELECT t.id FROM tasks t
    WHERE t.state IN ('queued', 'leased')
      AND ((t.state = 'queued' AND t.run_at <= now_ms) OR (t.state = 'leased' AND t.lease_expires_at <= now_ms))
      AND (channels IS NULL OR t.channel = ANY(channels))
      AND (conversations IS NULL OR t.conversation_id = ANY(conversations))
      AND NOT EXISTS (
          SELECT 1 FROM tasks e
          WHERE e.conversation_id = t.conversation_id AND e.state IN ('queued', 'leased') AND e.id < t.id)
    ORDER BY t.priority, t.id
    LIMIT max_tasks
    FOR NO KEY UPDATE SKIP LOCKED)
RETURNING *
$$;
