-- Who holds a lease. Every process (every open store) has a holder id and
-- holds an exclusive file lock beside the database (`herald.db.holder-ID.lock`)
-- for as long as it lives. A leased task whose holder's file lock is free
-- belongs to a process that is gone: other processes take it over at once
-- instead of waiting for its lease to expire (crates/store/src/liveness.rs).
ALTER TABLE tasks ADD COLUMN lease_holder TEXT;

-- The holders of leased tasks, for the probe that looks for dead ones.
CREATE INDEX tasks_leased_by_holder ON tasks (lease_holder) WHERE state = 'leased';
