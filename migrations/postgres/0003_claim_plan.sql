-- Nothing reads tasks by state and age; every claim and completion paid to
-- keep this index, and planners without statistics used it to fetch and
-- sort every unfinished task instead of walking the claim's own index.
DROP INDEX tasks_by_state;

-- The claim, as a function so it can be planned with sorts off: it must
-- walk tasks_unfinished_by_priority in order and stop at the first
-- claimable conversation head. With stale statistics (a fresh table, or a
-- burst after a quiet spell, when 'queued' looks rare) PostgreSQL would
-- rather fetch every unfinished task and sort them, and a backlog of 10,000
-- made each claim take ~40 ms.
CREATE FUNCTION herald_claim_task(token text, expires_at bigint, now_ms bigint, channels text[], conversations text[])
RETURNS SETOF tasks
LANGUAGE sql VOLATILE
SET enable_sort = off
AS $$
UPDATE tasks SET state = 'leased', lease_token = token, lease_expires_at = expires_at,
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
