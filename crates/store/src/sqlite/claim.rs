//! The claim on SQLite.
//!
//! The claim is one `UPDATE … WHERE id IN (SELECT … LIMIT n) RETURNING`:
//! SQLite takes the write lock when the statement starts, so choosing the
//! tasks and leasing them are one atomic step, even against another process on the same file.
//! The subquery keeps only each conversation's head (its lowest-id task still
//! queued or leased) and of those the ones due now: queued with `run_at`
//! passed, or leased with the lease expired (its worker died). A
//! conversation whose head is leased and alive offers nothing, which is what
//! serves each conversation in arrival order.

use herald_core::ClaimFilter;
use sqlx::Sqlite;

use crate::engine::filter_lists;
use crate::sql::task_columns;
use crate::statement::Statement;

/// The claimable conversation heads for the filter (`$4`, `$5`) at `$3`, in
/// the order they are handed out. `INDEXED BY` holds the planner to a walk
/// of `tasks_unfinished_by_priority`: without statistics it preferred to
/// fetch and sort every unfinished task, and a backlog of 10,000 made each
/// claim take ~8 ms instead of ~0.3.
macro_rules! claimable_heads {
    () => {
        "SELECT t.id FROM tasks t INDEXED BY tasks_unfinished_by_priority
    WHERE t.state IN ('queued', 'leased')
      AND ((t.state = 'queued' AND t.run_at <= $3) OR (t.state = 'leased' AND t.lease_expires_at <= $3))
      AND ($4 IS NULL OR t.channel IN (SELECT value FROM json_each($4)))
      AND ($5 IS NULL OR t.conversation_id IN (SELECT value FROM json_each($5)))
      AND NOT EXISTS (
          SELECT 1 FROM tasks e
          WHERE e.conversation_id = t.conversation_id AND e.state IN ('queued', 'leased') AND e.id < t.id)
    ORDER BY t.priority, t.id"
    };
}

/// Takes the first `$7` claimable conversation heads (a claimer with room
/// for several turns takes a backlog's tasks in one write, not one write
/// each). When nothing more is claimable after them (or at all), the same round trip reads when the next
/// task becomes due, as a row of its own: the claimer's next claim and its
/// idle wait then need no round trip (`wake.rs`). Run with `fetch_all`: the
/// second statement runs after the claim's row.
pub(super) const CLAIM: &str = concat!(
    "UPDATE tasks SET state = 'leased', lease_token = $1, lease_expires_at = $2, lease_holder = $6, attempts = attempts + 1,
    updated_at = $3
WHERE id IN (
    ",
    claimable_heads!(),
    "
    LIMIT $7)
RETURNING ",
    task_columns!(),
    ";
SELECT due FROM (",
    crate::sql::next_due!("$3"),
    ") AS next WHERE NOT EXISTS (",
    claimable_heads!(),
    ")"
);

pub(super) const PENDING: &str = "\
SELECT COUNT(*) AS pending FROM tasks
WHERE state IN ('queued', 'leased')
  AND ($1 IS NULL OR channel IN (SELECT value FROM json_each($1)))
  AND ($2 IS NULL OR conversation_id IN (SELECT value FROM json_each($2)))";

/// A claim filter's lists as JSON arrays for `json_each`; `None` allows all.
pub(super) fn bind_filter(statement: Statement<Sqlite>, filter: &ClaimFilter) -> Statement<Sqlite> {
    let json = |names: Vec<&str>| serde_json::Value::from(names).to_string();
    let (channels, conversations) = filter_lists(filter);
    statement
        .opt_text(channels.map(json).as_deref())
        .opt_text(conversations.map(json).as_deref())
}
