-- Send windows shared by several processes live in PostgreSQL (see
-- migrations/postgres/0007_send_windows.sql). A SQLite database is served by
-- one process, whose windows are kept in memory (herald_core::rate), so
-- there is nothing to create here; this version keeps the two engines'
-- migration histories alike.
SELECT 1;
