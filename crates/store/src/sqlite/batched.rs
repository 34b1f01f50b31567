//! The message path's multi-write steps on SQLite, each one round trip.
//!
//! sqlx runs a text of several statements as one command on the connection's
//! thread, binding `$n` by number in each, so two writes cost one hand-off
//! instead of a `BEGIN`, the writes and a `COMMIT`. They run as separate
//! statements on the one writer, which is why each pair is chosen so that
//! either half standing alone is harmless:
//! - enqueue (of one task or of a batch): an event seen before changes
//!   nothing (its key is looked for first); a conversation's ref stored
//!   without a task (another process stored the same event in between) is
//!   the ref that event carries; the tasks are one insert, and their dedup
//!   keys (unique) make each whole or nothing;
//! - a receipt and the completion: the receipt is written whether or not the
//!   lease still holds (the message was sent either way), and a task completed
//!   without its receipt is never run again to need it;
//! - a turn's record and the prompt's accounting for `herald explain`.
//!
//! Run them with `fetch_all`: sqlx stops a command at its first row when
//! asked for one, and the statements after it would not run.

use std::sync::LazyLock;

use crate::sql;

pub(super) const ENQUEUE: &str = concat!(
    "INSERT INTO conversations (id, channel, ref, created_at, updated_at)
SELECT $1, $2, $3, $4, $4 WHERE $9 IS NULL OR NOT EXISTS (SELECT 1 FROM tasks WHERE dedup_key = $9)
ON CONFLICT (id) DO UPDATE SET channel = excluded.channel, ref = excluded.ref, updated_at = excluded.updated_at;
",
    sql::insert_task!(),
    "
VALUES ($1, $2, $5, $6, 'queued', 0, $7, $8, $4, $4, $9)
ON CONFLICT (dedup_key) DO NOTHING
RETURNING id"
);

/// [`ENQUEUE`] for a batch (`Engine::ENQUEUE_ALL`): the same two writes,
/// each over the rows of the JSON array `$1`, the tasks inserted in the
/// array's order. One statement each, so each is whole or nothing.
pub(super) const ENQUEUE_ALL: &str = concat!(
    "INSERT INTO conversations (id, channel, ref, created_at, updated_at)
SELECT json_extract(value, '$.conversation'), json_extract(value, '$.channel'), json_extract(value, '$.ref'), $2, $2
FROM json_each($1)
WHERE json_extract(value, '$.dedup_key') IS NULL
   OR NOT EXISTS (SELECT 1 FROM tasks WHERE dedup_key = json_extract(value, '$.dedup_key'))
ON CONFLICT (id) DO UPDATE SET channel = excluded.channel, ref = excluded.ref, updated_at = excluded.updated_at;
",
    sql::insert_task!(),
    "
SELECT json_extract(value, '$.conversation'), json_extract(value, '$.channel'), json_extract(value, '$.payload'),
    json_extract(value, '$.priority'), 'queued', 0, json_extract(value, '$.max_attempts'), json_extract(value, '$.run_at'),
    $2, $2, json_extract(value, '$.dedup_key')
FROM json_each($1) WHERE true ORDER BY key
ON CONFLICT (dedup_key) DO NOTHING
RETURNING id, dedup_key"
);

pub(super) const COMPLETE_DELIVERED: &str = concat!(
    sql::insert_delivery!(),
    ";
",
    sql::complete_task!()
);

/// [`sql::record_turn_text`] returning the entries it wrote, then the state
/// upsert with its parameters after the entries'.
pub(super) fn record_turn_and_state(rows: usize) -> Option<&'static str> {
    static STATEMENTS: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
        sql::per_size(|rows| {
            format!(
                "{}\nRETURNING seq;\n{}",
                sql::record_turn_text(rows),
                sql::put_state_text(sql::state_params_after(rows))
            )
        })
    });
    sql::sized(&STATEMENTS, rows)
}
