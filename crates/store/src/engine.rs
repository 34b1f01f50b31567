//! What truly differs between SQLite and PostgreSQL, as one trait. The
//! stores (`queue.rs`, `conversations.rs`, `schedules.rs`) are written once
//! over it; `sqlite/` and `postgres/` each implement it.
//!
//! The differences, and nothing else:
//! - connections: SQLite writes through exactly one connection and reads
//!   beside it; PostgreSQL has one pool for both;
//! - a writing transaction: SQLite takes its write lock up front
//!   (`BEGIN IMMEDIATE`), PostgreSQL needs no such thing;
//! - the claim and the count of pending tasks, and how a claim filter's lists
//!   are bound (a JSON array for `json_each`, or a text array for `ANY`);
//! - telling other processes that a task may be claimable (PostgreSQL's
//!   `NOTIFY`; SQLite cannot, so its idle workers poll);
//! - migrations, the exclusive locks, closing;
//! - each store's liveness lock and the probe for dead holders
//!   (`liveness.rs`): a connection-bound advisory lock that a live process
//!   can lose with its connection, or a file lock that it cannot.

use std::future::Future;
use std::sync::Arc;

use herald_core::{ClaimFilter, ConversationId, ExclusiveLocks, HeldLock, StoreError};
use sqlx::{Pool, Transaction};

use crate::statement::{On, Sql, Statement};

pub(crate) trait Engine: Send + Sync + 'static {
    type Db: Sql;

    /// `"sqlite"` or `"postgres"`.
    const NAME: &'static str;

    /// Leases the next claimable tasks, at most `$7` and each the head of a
    /// conversation of its own: `$1` the lease token (one per claim; every
    /// change under a lease names the task too), `$2` its expiry, `$3` now,
    /// `$4`/`$5` the filter's channel and conversation lists (see
    /// [`Engine::bind_filter`]), `$6` the holder id; returns the columns of
    /// `sql::task_columns!` for each, in the order they are handed out. An engine may add a row of one column, `due`
    /// (`sql::next_due!` as of `$3`), when nothing more is claimable for the
    /// filter after this claim. Run with `fetch_all`.
    const CLAIM: &'static str;

    /// Whether a live process can lose its liveness lock (PostgreSQL: with
    /// its connection). Then it must keep confirming the lock, and others
    /// wait out a grace before taking a free holder's tasks.
    const LIVENESS_CAN_BE_LOST: bool;

    /// Stores a conversation's ref and a new task in one round trip: `$1`
    /// the conversation, `$2` the channel, `$3` the ref, `$4` now, `$5` the
    /// payload, `$6` the priority, `$7` the attempts allowed, `$8` when it
    /// is due, `$9` the dedup key or NULL. Returns the task's `id`, or no row
    /// when the key was stored before; a stored task is announced. Run with
    /// `fetch_all` (see `sqlite/batched.rs`).
    const ENQUEUE: &'static str;

    /// Stores several conversations' refs and tasks in one round trip: `$1`
    /// a JSON array of objects (`conversation`, `channel`, `ref`, `payload`,
    /// `priority`, `max_attempts`, `run_at`, `dedup_key`, each what
    /// [`Engine::ENQUEUE`] binds), `$2` now; the tasks get ids in the
    /// array's order. Returns `id` and `dedup_key` of each task stored.
    /// `None`: the engine enqueues one task per round trip. Run with
    /// `fetch_all`.
    const ENQUEUE_ALL: Option<&'static str>;

    /// Writes a receipt (`sql::insert_delivery`'s parameters) and completes
    /// its task under the lease (`$6` now, `$7` the token) in one round
    /// trip; returns the task's `id` when the lease held. The receipt is
    /// kept either way. A completed task is announced. Run with `fetch_all`.
    const COMPLETE_DELIVERED: &'static str;

    /// A turn's record (`sql::record_turn`) and a state value (parameters
    /// from `sql::state_params_after`) in one round trip; returns the `seq`
    /// of each entry written. Run with `fetch_all`.
    fn record_turn_and_state(rows: usize) -> Option<&'static str>;

    /// A turn's history and state in one row of one round trip: `history`,
    /// the newest `$2` entries of conversation `$1` as one JSON array of
    /// `[id, task_id, role, actor, text, at]` arrays (`rows::history_json`),
    /// and `value`, the conversation's state in scope `$3` or NULL. One
    /// value instead of a row per entry: the entries are not copied and
    /// handed over one by one. Run with `fetch_one`.
    const HISTORY_AND_STATE: &'static str;

    /// Counts the unfinished tasks that `$1`/`$2` (the filter's lists) allow,
    /// as `pending`.
    const PENDING: &'static str;

    /// Where reads go.
    fn reads(&self) -> &Pool<Self::Db>;

    /// Where writes outside a transaction go: single statements, claims,
    /// the batched steps of the message path.
    fn writes(&self) -> On<'_, Self::Db>;

    /// A transaction that will write.
    fn begin_write(&self) -> impl Future<Output = Result<Transaction<'static, Self::Db>, sqlx::Error>> + Send;

    /// Binds a claim filter's channel and conversation lists (`None`: any)
    /// the way [`Engine::CLAIM`] and [`Engine::PENDING`] read them.
    fn bind_filter(statement: Statement<Self::Db>, filter: &ClaimFilter) -> Statement<Self::Db>;

    /// Tells workers in other processes that `conversation` may have a task
    /// to claim. Inside a transaction, they hear it when it commits.
    fn announce<'e>(
        &'e self,
        conversation: &'e ConversationId,
        on: On<'e, Self::Db>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send + 'e;

    /// Whether idle workers must look for work every `queue.poll_interval`
    /// because announcements from other processes may not reach them.
    fn polls(&self) -> bool;

    fn migrate(&self) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Whether every pool answers.
    fn ping(&self) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Closes every connection, waiting for queries in flight.
    fn close(&self) -> impl Future<Output = ()> + Send;

    fn locks(&self) -> Arc<dyn ExclusiveLocks>;

    /// Takes the liveness lock of holder `id`, held until released or dropped.
    fn hold(&self, id: &str) -> impl Future<Output = Result<Box<dyn HeldLock>, StoreError>> + Send;

    /// The holders of leased tasks, other than `me`, whose liveness lock is
    /// free.
    fn dead_holders(&self, me: &str) -> impl Future<Output = Result<Vec<String>, StoreError>> + Send;
}

/// A claim filter's channel and conversation lists; `None` allows all.
pub(crate) fn filter_lists(filter: &ClaimFilter) -> (Option<Vec<&str>>, Option<Vec<&str>>) {
    (
        filter
            .channels
            .as_ref()
            .map(|list| list.iter().map(|c| c.as_str()).collect()),
        filter
            .conversations
            .as_ref()
            .map(|list| list.iter().map(|c| c.as_str()).collect()),
    )
}
