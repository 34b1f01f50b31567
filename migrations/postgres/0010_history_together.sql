-- SQLite's migration 0010 makes the history read an index-only scan. On
-- PostgreSQL the history read stays on `messages_by_conversation`: an index
-- entry there cannot hold a long text (a B-tree entry is limited to about a
-- third of a page), and the server's shared buffers keep the pages the
-- read visits. This version keeps both engines' schema versions in step.
SELECT 1;
