//! The claim on PostgreSQL, shared safely by several processes.
//!
//! The claim is one `UPDATE … WHERE id IN (SELECT … LIMIT n FOR NO KEY
//! UPDATE SKIP LOCKED)`. Under READ COMMITTED the subquery sees the statement's snapshot
//! and keeps each conversation's head (its lowest-id task still queued or
//! leased) when that head is due: queued with `run_at` passed, or leased with
//! the lease expired. Why two workers never lease two tasks of one
//! conversation at once:
//! - Both may pick the same head; the row lock lets one take it. The other
//!   skips it (SKIP LOCKED), or, if the winner already committed, re-checks
//!   the new row version and finds it leased and not expired.
//! - A task behind a head stays unclaimable while the head is queued or
//!   leased, since the head only leaves those states for `done`/`dead`, which
//!   are final.
//! - A claimer's snapshot cannot hold a conversation's later task without its
//!   earlier one: enqueue locks the conversation row before it takes a task id
//!   (`sql::insert_task`), so one conversation's ids follow commit order.
//!
//! SKIP LOCKED also means a head that another worker is claiming right now
//! does not make this claim wait: it moves on to the next conversation. The
//! lock is `FOR NO KEY UPDATE` because the claim changes no key, so it does
//! not conflict with the key-share locks that foreign-key checks take.

use herald_core::ClaimFilter;
use sqlx::Postgres;

use crate::engine::filter_lists;
use crate::sql::task_columns;
use crate::statement::Statement;

/// `herald_claim_tasks` (migration 0009, the walk of 0003 and 0006) walks
/// `tasks_unfinished_by_priority` in order, planned with sorts off, and
/// takes the first `$7` claimable conversation heads, skipping rows another
/// worker is claiming.
pub(super) const CLAIM: &str = concat!(
    "SELECT ",
    task_columns!(),
    " FROM herald_claim_tasks($1, $2, $3, $4, $5, $6, $7)"
);

pub(super) const PENDING: &str = "\
SELECT COUNT(*) AS pending FROM tasks
WHERE state IN ('queued', 'leased')
  AND ($1::text[] IS NULL OR channel = ANY($1))
  AND ($2::text[] IS NULL OR conversation_id = ANY($2))";

/// A claim filter's lists as text arrays for `ANY`; `None` allows all.
pub(super) fn bind_filter(statement: Statement<Postgres>, filter: &ClaimFilter) -> Statement<Postgres> {
    let (channels, conversations) = filter_lists(filter);
    statement.bind(channels).bind(conversations)
}
