-- Nothing reads tasks by state and age; every claim and completion paid to
-- keep this index, and without statistics SQLite's planner used it to fetch
-- and sort every unfinished task instead of walking the claim's own index
-- (the claim now names that index with INDEXED BY).
DROP INDEX tasks_by_state;
