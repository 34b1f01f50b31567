//! The message path's multi-write steps on PostgreSQL, each one statement.
//!
//! Data-modifying `WITH` clauses run together in one statement, so each step
//! is one round trip and atomic. Enqueue and completion carry their
//! `pg_notify` too (delivered when the statement commits), where a separate
//! `NOTIFY` was one more round trip. In the enqueue the task's insert reads
//! the conversation's, so the conversation row is locked before the task id
//! is drawn: concurrent enqueues of one conversation get ids in commit order
//! (`sql::insert_task`). An event seen before changes nothing: its key is
//! looked for before the conversation is touched (two processes storing the
//! same event at once may both write its ref; only one stores the task).

use std::sync::LazyLock;

use crate::sql;

pub(super) const ENQUEUE: &str = concat!(
    "WITH conversation AS (
    INSERT INTO conversations (id, channel, ref, created_at, updated_at)
    SELECT $1, $2, $3, $4, $4 WHERE $9::text IS NULL OR NOT EXISTS (SELECT 1 FROM tasks WHERE dedup_key = $9)
    ON CONFLICT (id) DO UPDATE SET channel = excluded.channel, ref = excluded.ref, updated_at = excluded.updated_at
    RETURNING id
), task AS (
",
    sql::insert_task!(),
    "
    SELECT conversation.id, $2, $5, $6, 'queued', 0, $7, $8, $4, $4, $9 FROM conversation
    ON CONFLICT (dedup_key) DO NOTHING
    RETURNING id, conversation_id
)
SELECT task.id, pg_notify('herald_tasks', task.conversation_id) AS announced FROM task"
);

pub(super) const COMPLETE_DELIVERED: &str = concat!(
    "WITH receipt AS (
",
    sql::insert_delivery!(),
    "
), done AS (
",
    sql::complete_task!(),
    "
)
SELECT done.id, done.next_waits,
    (SELECT pg_notify('herald_tasks', done.conversation_id) WHERE done.next_waits = 1) AS announced
FROM done"
);

/// [`sql::record_turn_text`] and the state upsert, with its parameters after
/// the entries'; returns the entries written.
pub(super) fn record_turn_and_state(rows: usize) -> Option<&'static str> {
    static STATEMENTS: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
        sql::per_size(|rows| {
            format!(
                "WITH recorded AS (\n{}\nRETURNING seq\n), kept AS (\n{}\n)\nSELECT seq FROM recorded",
                sql::record_turn_text(rows),
                sql::put_state_text(sql::state_params_after(rows))
            )
        })
    });
    sql::sized(&STATEMENTS, rows)
}
