-- PostgreSQL's migration 0009 adds a function that claims several tasks at
-- once. SQLite's claim is a statement in the binary (crates/store/src/sqlite/claim.rs)
-- and already takes a limit, so its schema does not change; this version
-- keeps both engines' schema versions in step.
SELECT 1;
