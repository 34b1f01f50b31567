//! Herald's storage: conversations, their history, the durable task queue,
//! delivery receipts and small persistent state, on SQLite or PostgreSQL.
//!
//! The rest of Herald sees only core's [`TaskQueue`], [`ConversationStore`]
//! and [`ScheduleStore`]; [`Storage`] picks the engine from the URL and hands
//! out all three. Both engines keep the same tables (`migrations/sqlite`,
//! `migrations/postgres`, embedded in the binary) and pass the same test suite
//! (`tests/suite`).
//!
//! Architecture invariants:
//! - Time comes from the injected [`Clock`], stored as unix milliseconds,
//!   never from the database's `now()`: tests move time by hand and both
//!   engines agree on it.
//! - Queries are built at run time (no `query!` macros), so a build needs no
//!   database.
//! - Each conversation has at most one task leased at a time, its lowest-id
//!   unfinished one: see the claim in `sqlite/queue.rs` and `postgres/queue.rs`.

mod config;
mod error;
mod locks;
mod migrations;
mod postgres;
mod rows;
mod schedules;
mod sql;
mod sqlite;
mod url;
mod wake;

use std::sync::Arc;

use herald_core::{Clock, ConversationStore, ExclusiveLocks, ScheduleStore, StoreError, TaskQueue};

pub use crate::config::{QueueConfig, StorageConfig};
use crate::postgres::PgStore;
use crate::sqlite::SqliteStore;
use crate::url::Engine;

/// An open database: the task queue and the conversation store over one set
/// of connections. Clones share them.
#[derive(Clone)]
pub struct Storage {
    engine: Backend,
}

#[derive(Clone)]
enum Backend {
    Sqlite(Arc<SqliteStore>),
    Postgres(Arc<PgStore>),
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
        let engine = match url::engine(&storage.url)? {
            Engine::Sqlite => Backend::Sqlite(Arc::new(SqliteStore::connect(storage, queue, clock).await?)),
            Engine::Postgres => Backend::Postgres(Arc::new(PgStore::connect(storage, queue, clock).await?)),
        };
        tracing::debug!(url = %herald_core::redact::url(&storage.url), "storage connected");
        Ok(Self { engine })
    }

    /// Applies the embedded migrations that the database has not seen yet.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        match &self.engine {
            Backend::Sqlite(store) => store.migrate().await,
            Backend::Postgres(store) => store.migrate().await,
        }
    }

    pub fn queue(&self) -> Arc<dyn TaskQueue> {
        match &self.engine {
            Backend::Sqlite(store) => store.clone(),
            Backend::Postgres(store) => store.clone(),
        }
    }

    pub fn conversations(&self) -> Arc<dyn ConversationStore> {
        match &self.engine {
            Backend::Sqlite(store) => store.clone(),
            Backend::Postgres(store) => store.clone(),
        }
    }

    pub fn schedules(&self) -> Arc<dyn ScheduleStore> {
        match &self.engine {
            Backend::Sqlite(store) => store.clone(),
            Backend::Postgres(store) => store.clone(),
        }
    }

    /// Locks that one process at a time holds, for single-consumer ingress.
    pub fn locks(&self) -> Arc<dyn ExclusiveLocks> {
        match &self.engine {
            Backend::Sqlite(store) => store.locks.clone(),
            Backend::Postgres(store) => store.locks.clone(),
        }
    }

    /// Whether the database answers.
    pub async fn ping(&self) -> Result<(), StoreError> {
        match &self.engine {
            Backend::Sqlite(store) => store.ping().await,
            Backend::Postgres(store) => store.ping().await,
        }
    }

    /// `"sqlite"` or `"postgres"`.
    pub fn backend(&self) -> &'static str {
        match &self.engine {
            Backend::Sqlite(_) => "sqlite",
            Backend::Postgres(_) => "postgres",
        }
    }

    /// Closes every connection, waiting for queries in flight; later calls
    /// through any clone fail as unavailable.
    pub async fn close(&self) {
        match &self.engine {
            Backend::Sqlite(store) => store.close().await,
            Backend::Postgres(store) => store.close().await,
        }
    }
}
