//! Herald's storage: conversations, their history, the durable task queue,
//! delivery receipts and small persistent state, on SQLite or PostgreSQL.
//!
//! The rest of Herald sees only core's [`TaskQueue`], [`ConversationStore`]
//! and [`ScheduleStore`]; [`Storage`] picks the engine from the URL and hands
//! out all three. Both engines keep the same tables (`migrations/sqlite`,
//! `migrations/postgres`, embedded in the binary) and pass the same test suite
//! (`tests/suite`).
//!
//! The stores are written once (`queue.rs`, `conversations.rs`,
//! `schedules.rs`, over the shared statements in `sql.rs`) for a generic
//! `Engine` (`engine.rs`); `sqlite/` and `postgres/` hold only what truly differs:
//! connections, the claim, how other processes hear of new work, migrations
//! and locks. `statement.rs` lets the shared code bind and read values on
//! either sqlx driver.
//!
//! Architecture invariants:
//! - Time comes from the injected [`Clock`], stored as unix milliseconds,
//!   never from the database's `now()`: tests move time by hand and both
//!   engines agree on it.
//! - Queries are built at run time (no `query!` macros), so a build needs no
//!   database.
//! - Each conversation has at most one task leased at a time, its lowest-id
//!   unfinished one: see the claim in `sqlite/claim.rs` and `postgres/claim.rs`.
//! - Each open store is a holder with a liveness lock; a dead holder's tasks
//!   are taken over in seconds, and a holder that lost its lock stops its
//!   turns before anyone takes them (`liveness.rs`).
//! - Text is written without U+0000 on both engines (`text.rs`): PostgreSQL
//!   cannot hold it, and a message must never fail to be stored for it.
//! - Finished tasks are pruned after `queue.retention` (`prune.rs`); history
//!   never is, and a dedup key outlives the platforms' redelivery window.
//! - Files that came with messages are kept once per content (`files.rs`),
//!   in the database so every process sharing the queue finds them.
//! - A SQLite database and its `-wal` and `-shm` files are private to their
//!   owner (`sqlite/files.rs`).
//! - No store decides policy (who may do what): it keeps what it is given.

mod config;
mod conversations;
mod engine;
mod error;
mod files;
mod group_commit;
mod liveness;
mod locks;
mod migrations;
mod postgres;
mod prune;
mod queue;
mod rows;
mod schedules;
mod send_windows;
mod sql;
mod sqlite;
mod statement;
mod store;
mod text;
mod url;
mod wake;

use std::sync::Arc;

use herald_core::{
    Clock, ConversationStore, ExclusiveLocks, FileStore, ScheduleStore, SendLimiter, StoreError, TaskQueue,
};

pub use crate::config::{QueueConfig, StorageConfig};
pub use crate::files::sha256_hex;
use crate::postgres::PgEngine;
pub use crate::prune::Pruned;
use crate::send_windows::SharedSendWindows;
use crate::sqlite::SqliteEngine;
use crate::store::{Backend, Store};
use crate::url::Engine;
use crate::wake::Wakeup;

/// An open database: the task queue, the conversation store and the schedule
/// store over one set of connections. Clones share them.
#[derive(Clone)]
pub struct Storage {
    store: Arc<dyn Backend>,
    /// The platforms' send windows in the database, on PostgreSQL only.
    send_windows: Option<Arc<dyn SendLimiter>>,
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Storage")
            .field("backend", &self.backend())
            .finish_non_exhaustive()
    }
}

impl Storage {
    /// Opens the database `storage.url` names. A SQLite file is created when
    /// missing. Migrations are not applied: call [`Storage::migrate`].
    pub async fn connect(
        storage: &StorageConfig,
        queue: &QueueConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StoreError> {
        queue.validate()?;
        let wakeup = Arc::new(Wakeup::default());
        let (store, send_windows): (Arc<dyn Backend>, Option<Arc<dyn SendLimiter>>) = match url::engine(&storage.url)? {
            Engine::Sqlite => {
                let engine = SqliteEngine::connect(storage).await?;
                (Store::open(engine, clock, queue, wakeup).await?, None)
            }
            Engine::Postgres => {
                let engine = PgEngine::connect(storage, wakeup.clone(), queue.poll_interval).await?;
                let windows = SharedSendWindows::new(engine.pool().clone(), clock.clone());
                (
                    Store::open(engine, clock, queue, wakeup).await?,
                    Some(Arc::new(windows) as Arc<dyn SendLimiter>),
                )
            }
        };
        tracing::debug!(url = %storage.url, "storage connected");
        Ok(Self { store, send_windows })
    }

    /// Applies the embedded migrations that the database has not seen yet.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        self.store.migrate().await
    }

    pub fn queue(&self) -> Arc<dyn TaskQueue> {
        self.store.clone()
    }

    pub fn conversations(&self) -> Arc<dyn ConversationStore> {
        self.store.clone()
    }

    pub fn schedules(&self) -> Arc<dyn ScheduleStore> {
        self.store.clone()
    }

    /// The platforms' send windows kept in the database, which every process
    /// on it shares (PostgreSQL); `None` on SQLite, where one process serves
    /// and keeps them itself.
    pub fn send_limiter(&self) -> Option<Arc<dyn SendLimiter>> {
        self.send_windows.clone()
    }

    /// Files that came with messages, stored once per content.
    pub fn files(&self) -> Arc<dyn FileStore> {
        self.store.clone()
    }

    /// Locks that one process at a time holds, for single-consumer ingress.
    pub fn locks(&self) -> Arc<dyn ExclusiveLocks> {
        self.store.locks()
    }

    /// Whether the database answers.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.store.ping().await
    }

    /// Deletes finished tasks older than `queue.retention` and dedup keys
    /// past their window, now. The store does this by itself every few
    /// minutes; history is never deleted.
    pub async fn prune(&self) -> Result<Pruned, StoreError> {
        self.store.prune().await
    }

    /// Takes over, now, the tasks of processes found gone (their liveness
    /// lock free, for long enough that they stopped their turns); returns
    /// how many. The store does this by itself every second.
    pub async fn take_over_dead_holders(&self) -> Result<u64, StoreError> {
        self.store.take_over_dead_holders().await
    }

    /// `"sqlite"` or `"postgres"`.
    pub fn backend(&self) -> &'static str {
        self.store.name()
    }

    /// Closes every connection, waiting for queries in flight; later calls
    /// through any clone fail as unavailable.
    pub async fn close(&self) {
        self.store.close().await;
    }
}
