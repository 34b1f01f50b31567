//! Statements both engines run as they are. SQLite reads `$1` as the first
//! parameter just as PostgreSQL does, and both have `ON CONFLICT`,
//! `RETURNING` and `FILTER`, so only the claim and the count of pending tasks
//! differ (they live beside each engine, see `engine.rs`). A computed column
//! is named (`AS …`): the stores read every column by name.

/// The columns `rows::task` reads, and the priority a claim orders by, as a
/// literal for `concat!`.
macro_rules! task_columns {
    () => {
        "id, conversation_id, channel, payload, attempts, max_attempts, created_at, last_error, priority"
    };
}
pub(crate) use task_columns;

/// The task an event's dedup key became.
pub(crate) const FIND_DEDUP: &str = "SELECT id FROM tasks WHERE dedup_key = $1";

/// The conversation row is written before the task, in the same round trip.
/// On PostgreSQL that row lock orders concurrent enqueues of one
/// conversation, so task ids (which come after it) follow commit order and a
/// claimer can never see a later task of a conversation without its earlier
/// one. The engines' `ENQUEUE` (`sqlite/batched.rs`, `postgres/batched.rs`)
/// are built from these.
macro_rules! insert_task {
    () => {
        "INSERT INTO tasks (conversation_id, channel, payload, priority, state, attempts, max_attempts, run_at, created_at, updated_at, dedup_key)"
    };
}
pub(crate) use insert_task;

/// A receipt: `$1` task, `$2` slot, `$3` conversation, `$4` message ids,
/// `$5` when. The first receipt of a slot stands: a task delivers each slot
/// once.
macro_rules! insert_delivery {
    () => {
        "INSERT INTO deliveries (task_id, slot, conversation_id, platform_message_ids, delivered_at) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (task_id, slot) DO NOTHING"
    };
}
pub(crate) use insert_delivery;

/// Completing a task after its receipt ([`insert_delivery`]'s parameters):
/// `$6` now, `$7` the lease token. Returns the task's `id` and, as
/// `next_waits` (1 or 0), whether a later task of its conversation waits:
/// only then may the completion have made something claimable.
macro_rules! complete_task {
    () => {
        "UPDATE tasks SET state = 'done', lease_token = NULL, lease_expires_at = NULL, updated_at = $6
WHERE id = $1 AND lease_token = $7 AND state = 'leased'
RETURNING id, conversation_id, CAST(CASE WHEN EXISTS (
    SELECT 1 FROM tasks n
    WHERE n.conversation_id = tasks.conversation_id AND n.state IN ('queued', 'leased') AND n.id > tasks.id
) THEN 1 ELSE 0 END AS BIGINT) AS next_waits"
    };
}
pub(crate) use complete_task;

// Every change below names the lease token: a worker whose lease expired and
// was claimed by another changes nothing and learns it lost the lease. The
// task id and the token are always the last two parameters.

pub(crate) const EXTEND: &str = "\
UPDATE tasks SET lease_expires_at = $1, updated_at = $2
WHERE id = $3 AND lease_token = $4 AND state = 'leased'";

pub(crate) const COMPLETE: &str = "\
UPDATE tasks SET state = 'done', lease_token = NULL, lease_expires_at = NULL, updated_at = $1
WHERE id = $2 AND lease_token = $3 AND state = 'leased'";

pub(crate) const RETRY: &str = "\
UPDATE tasks SET state = 'queued', run_at = $1, last_error = $2, lease_token = NULL, lease_expires_at = NULL, updated_at = $3
WHERE id = $4 AND lease_token = $5 AND state = 'leased'";

pub(crate) const BURY: &str = "\
UPDATE tasks SET state = 'dead', last_error = $1, lease_token = NULL, lease_expires_at = NULL, updated_at = $2
WHERE id = $3 AND lease_token = $4 AND state = 'leased'";

/// A graceful shutdown gives the task back without counting the attempt.
pub(crate) const RELEASE: &str = "\
UPDATE tasks SET state = 'queued', attempts = attempts - 1, run_at = $1, lease_token = NULL, lease_expires_at = NULL,
    updated_at = $1
WHERE id = $2 AND lease_token = $3 AND state = 'leased'";

/// When the next conversation head becomes claimable by itself: a queued
/// head's `run_at` or a leased head's expiry, whichever comes first after
/// now (the parameter named). Tasks behind a head do not count: they wait
/// for the head, not the clock.
macro_rules! next_due {
    ($now:literal) => {
        concat!(
            "SELECT MIN(CASE WHEN t.state = 'queued' THEN t.run_at ELSE t.lease_expires_at END) AS due
FROM tasks t
WHERE t.state IN ('queued', 'leased')
  AND (CASE WHEN t.state = 'queued' THEN t.run_at ELSE t.lease_expires_at END) > ",
            $now,
            "
  AND NOT EXISTS (
      SELECT 1 FROM tasks e
      WHERE e.conversation_id = t.conversation_id AND e.state IN ('queued', 'leased') AND e.id < t.id)"
        )
    };
}
pub(crate) use next_due;

/// [`next_due!`] after `$1`.
pub(crate) const NEXT_DUE: &str = next_due!("$1");

/// Reads only unfinished tasks (through their partial indexes) and the dead
/// ones (through `tasks_finished`), never the done ones, however many the
/// retention keeps. The dead count repeats the index's own condition because
/// SQLite uses a partial index only for a query that states it.
pub(crate) const STATS: &str = "\
SELECT COUNT(*) FILTER (WHERE state = 'queued') AS queued,
       COUNT(*) FILTER (WHERE state = 'leased') AS leased,
       MIN(created_at) FILTER (WHERE state = 'queued') AS oldest_queued_at,
       (SELECT COUNT(*) FROM tasks WHERE state IN ('done', 'dead') AND state = 'dead') AS dead
FROM tasks
WHERE state IN ('queued', 'leased')";

/// The newest `$2` entries of conversation `$1`, newest first, as the
/// columns `rows::history_entry` reads; a literal for `concat!`.
macro_rules! newest_entries {
    () => {
        "SELECT id, task_id, role, actor, text, at FROM messages WHERE conversation_id = $1 ORDER BY id DESC LIMIT $2"
    };
}
pub(crate) use newest_entries;

pub(crate) const HISTORY: &str = concat!(
    "SELECT id, task_id, role, actor, text, at FROM (",
    newest_entries!(),
    ") AS newest ORDER BY id"
);

pub(crate) const TASK_ENTRIES: &str =
    "SELECT id, task_id, role, actor, text, at FROM messages WHERE task_id = $1 ORDER BY seq";

pub(crate) const TASK_HAS_ENTRIES: &str = "SELECT COUNT(*) AS entries FROM messages WHERE task_id = $1";

/// A turn of up to [`RECORD_ROWS`] entries in one statement: `$1` the
/// conversation, `$2` the task, `$3` the time, then role, actor and text of
/// each entry (its `seq` is its place). Nothing is written when the task has
/// entries already; the insert is one statement, so it is whole or nothing.
pub(crate) fn record_turn(rows: usize) -> Option<&'static str> {
    static STATEMENTS: std::sync::LazyLock<Vec<&'static str>> = std::sync::LazyLock::new(|| per_size(record_turn_text));
    sized(&STATEMENTS, rows)
}

/// A statement's text for each turn size from 1 to [`RECORD_ROWS`], built
/// once and kept for the process's life, as the `'static` text a
/// `Statement` is labelled by.
pub(crate) fn per_size(build: impl Fn(usize) -> String) -> Vec<&'static str> {
    (1..=RECORD_ROWS)
        .map(|rows| String::leak(build(rows)) as &'static str)
        .collect()
}

/// The text [`per_size`] built for `rows` entries; `None` past its sizes.
pub(crate) fn sized(statements: &[&'static str], rows: usize) -> Option<&'static str> {
    rows.checked_sub(1).and_then(|index| statements.get(index).copied())
}

/// The text of [`record_turn`] for `rows` entries (at least one).
pub(crate) fn record_turn_text(rows: usize) -> String {
    let values: Vec<String> = (0..rows)
        .map(|seq| {
            let first = 4 + seq * 3;
            format!(
                "SELECT {seq} AS seq, ${first} AS role, ${} AS actor, ${} AS text",
                first + 1,
                first + 2
            )
        })
        .collect();
    format!(
        "INSERT INTO messages (conversation_id, task_id, seq, role, actor, text, at)\n\
         SELECT $1, $2, entry.seq, entry.role, entry.actor, entry.text, $3 FROM ({}) AS entry\n\
         WHERE NOT EXISTS (SELECT 1 FROM messages WHERE task_id = $2)\n\
         ON CONFLICT (task_id, seq) DO NOTHING",
        values.join(" UNION ALL ")
    )
}

/// The most entries [`record_turn`] writes in one statement; a person's turn
/// has two (what they said, what Herald answered).
pub(crate) const RECORD_ROWS: usize = 4;

/// A second `record_turn` of a task conflicts on `(task_id, seq)` and writes nothing.
pub(crate) const INSERT_ENTRY: &str = "\
INSERT INTO messages (conversation_id, task_id, seq, role, actor, text, at) VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (task_id, seq) DO NOTHING";

pub(crate) const CONVERSATION: &str = "SELECT ref FROM conversations WHERE id = $1";

pub(crate) const DELIVERY: &str = "\
SELECT task_id, slot, conversation_id, platform_message_ids, delivered_at FROM deliveries
WHERE task_id = $1 AND slot = $2";

pub(crate) const INSERT_DELIVERY: &str = insert_delivery!();

pub(crate) const GET_STATE: &str = "SELECT value FROM state WHERE scope = $1 AND key = $2";

pub(crate) const PUT_STATE: &str = "\
INSERT INTO state (scope, key, value, updated_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (scope, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at";

/// [`PUT_STATE`] with scope, key and value at `$first`.. and the time at
/// `$3` (a turn record's), for a state value written with a turn.
pub(crate) fn put_state_text(first: usize) -> String {
    format!(
        "INSERT INTO state (scope, key, value, updated_at) VALUES (${first}, ${}, ${}, $3)\n\
         ON CONFLICT (scope, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        first + 1,
        first + 2
    )
}

/// The first parameter after a [`record_turn`] of `rows` entries.
pub(crate) fn state_params_after(rows: usize) -> usize {
    4 + rows * 3
}

pub(crate) const DELETE_STATE: &str = "DELETE FROM state WHERE scope = $1 AND key = $2";

pub(crate) const LIST_STATE: &str = "SELECT key, value FROM state WHERE scope = $1 ORDER BY key";
