//! PostgreSQL: several Herald processes may share one database and its queue.
//!
//! The pool serves reads and writes alike (PostgreSQL has no single-writer
//! limit). Idle workers are woken by `LISTEN herald_tasks`: every change that
//! may make a task claimable (enqueue, retry, release, and a head finishing so
//! the next task moves up) sends `pg_notify('herald_tasks', conversation)`:
//! enqueue inside its transaction (PostgreSQL delivers it at commit), the
//! others right after their update, so a woken worker always sees the change.
//! One background task per [`PgStore`] holds the listening
//! connection, in its own one-connection pool so it never takes a connection
//! from the queries; it wakes the local waiters on every notification and
//! after every reconnect (notifications sent meanwhile are lost).

mod conversations;
mod listener;
mod queue;
mod schedules;

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use herald_core::{Clock, StoreError};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use tokio::task::JoinHandle;

use crate::config::{QueueConfig, StorageConfig};
use crate::error;
use crate::wake::Wakeup;
use herald_core::redact;

/// The NOTIFY channel of the task queue.
pub(crate) const CHANNEL: &str = "herald_tasks";

pub(crate) struct PgStore {
    pool: PgPool,
    listener_pool: PgPool,
    clock: Arc<dyn Clock>,
    queue: QueueConfig,
    wakeup: Arc<Wakeup>,
    /// Whether the listener is connected; without it idle workers poll.
    listening: Arc<AtomicBool>,
    listener: JoinHandle<()>,
    pub(crate) locks: Arc<crate::locks::PgLocks>,
}

impl PgStore {
    pub(crate) async fn connect(
        storage: &StorageConfig,
        queue: &QueueConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StoreError> {
        let options = PgConnectOptions::from_str(&storage.url).map_err(|e| {
            StoreError::Unavailable(format!("invalid storage url `{}`: {e}", redact::url(&storage.url)))
        })?;
        let pool = PgPoolOptions::new()
            .max_connections(storage.max_connections.max(1))
            .connect_with(options.clone())
            .await
            .map_err(|e| StoreError::Unavailable(format!("cannot connect to {}: {e}", redact::url(&storage.url))))?;
        let locks = Arc::new(crate::locks::PgLocks {
            options: options.clone(),
            url: storage.url.clone(),
        });
        let listener_pool = PgPoolOptions::new().max_connections(1).connect_lazy_with(options);
        let wakeup = Arc::new(Wakeup::default());
        let listening = Arc::new(AtomicBool::new(false));
        let listener = listener::start(
            listener_pool.clone(),
            wakeup.clone(),
            listening.clone(),
            queue.poll_interval,
        )
        .await
        .map_err(|e| StoreError::Unavailable(format!("cannot listen on {}: {e}", redact::url(&storage.url))))?;
        Ok(Self {
            pool,
            listener_pool,
            clock,
            queue: queue.clone(),
            wakeup,
            listening,
            listener,
            locks,
        })
    }

    pub(crate) async fn migrate(&self) -> Result<(), StoreError> {
        crate::migrations::postgres()
            .run(&self.pool)
            .await
            .map_err(error::migrate)
    }

    pub(crate) async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await.map_err(error::db)?;
        Ok(())
    }

    pub(crate) async fn close(&self) {
        // Closing the listener's pool ends its task.
        self.listener_pool.close().await;
        self.pool.close().await;
    }

    fn now(&self) -> i64 {
        herald_core::time::to_millis(self.clock.now())
    }

    fn listening(&self) -> bool {
        self.listening.load(Ordering::Acquire)
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        self.listener.abort();
    }
}
