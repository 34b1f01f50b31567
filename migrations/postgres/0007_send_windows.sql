-- The platforms' send windows, shared by every Herald process on this
-- database: per key (`telegram:chat:42`, `telegram:bot`), the unix-ms times
-- of its latest sends, ascending, at most the window's count of them.
CREATE TABLE send_windows (
    key TEXT PRIMARY KEY,
    sends BIGINT[] NOT NULL DEFAULT '{}'
);

-- Takes a send in every window at once, or in none: returns 0 when taken
-- (each key's log got now_ms), else how many ms to wait. `keys` must be
-- distinct and sorted, so two callers lock rows in the same order. Each key
-- row is locked with FOR UPDATE, which under READ COMMITTED waits for a
-- concurrent taker and then reads what it wrote: two processes never both
-- see the last place free.
CREATE FUNCTION herald_take_send(keys text[], counts integer[], spans bigint[], now_ms bigint)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    wait_ms bigint := 0;
    recent bigint[];
    i integer;
BEGIN
    FOR i IN 1 .. coalesce(cardinality(keys), 0) LOOP
        INSERT INTO send_windows (key) VALUES (keys[i]) ON CONFLICT (key) DO NOTHING;
        SELECT w.sends INTO recent FROM send_windows w WHERE w.key = keys[i] FOR UPDATE;
        recent := ARRAY(SELECT s FROM unnest(recent) s WHERE s + spans[i] > now_ms ORDER BY s);
        IF cardinality(recent) >= counts[i] THEN
            wait_ms := greatest(wait_ms, recent[cardinality(recent) - counts[i] + 1] + spans[i] - now_ms);
        END IF;
    END LOOP;
    IF wait_ms > 0 THEN
        RETURN wait_ms;
    END IF;
    FOR i IN 1 .. coalesce(cardinality(keys), 0) LOOP
        UPDATE send_windows w
        SET sends = ARRAY(
            SELECT latest.s FROM (
                SELECT s FROM unnest(w.sends || now_ms) s
                WHERE s + spans[i] > now_ms ORDER BY s DESC LIMIT counts[i]
            ) latest ORDER BY latest.s
        )
        WHERE w.key = keys[i];
    END LOOP;
    RETURN 0;
END
$$;

-- The send taken at taken_ms finished at finished_ms: it counts from then.
CREATE FUNCTION herald_sent(keys text[], taken_ms bigint, finished_ms bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    i integer;
    found_at integer;
BEGIN
    FOR i IN 1 .. coalesce(cardinality(keys), 0) LOOP
        SELECT array_position(w.sends, taken_ms) INTO found_at FROM send_windows w WHERE w.key = keys[i] FOR UPDATE;
        UPDATE send_windows w
        SET sends = ARRAY(
            SELECT s FROM unnest(
                CASE WHEN found_at IS NULL THEN w.sends ELSE w.sends[:found_at - 1] || w.sends[found_at + 1:] END
                || greatest(finished_ms, taken_ms)
            ) s ORDER BY s
        )
        WHERE w.key = keys[i];
    END LOOP;
END
$$;
