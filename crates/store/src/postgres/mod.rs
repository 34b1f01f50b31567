//! PostgreSQL: several Herald processes may share one database and its queue.
//!
//! The pool serves reads and writes alike (PostgreSQL has no single-writer
//! limit). Idle workers are woken by `LISTEN herald_tasks`: every change that
//! may make a task claimable (enqueue, retry, release, and a head finishing so
//! the next task moves up) sends `pg_notify('herald_tasks', conversation)`:
//! enqueue inside its transaction (PostgreSQL delivers it at commit), the
//! others right after their update, so a woken worker always sees the change.
//! One background task per [`PgEngine`] holds the listening
//! connection, in its own one-connection pool so it never takes a connection
//! from the queries; it wakes the local waiters on every notification and
//! after every reconnect (notifications sent meanwhile are lost).

mod batched;
mod claim;
mod listener;

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use herald_core::{ClaimFilter, ConversationId, ExclusiveLocks, HeldLock, StoreError};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Postgres, Transaction};
use tokio::task::JoinHandle;

use crate::config::StorageConfig;
use crate::engine::Engine;
use crate::locks::{self, PgLocks};
use crate::statement::{self, Columns, On, Statement};
use crate::wake::Wakeup;
use crate::{error, sql};

/// The NOTIFY channel of the task queue.
pub(crate) const CHANNEL: &str = "herald_tasks";

/// `Engine::HISTORY_AND_STATE`; `json_agg` of no rows is NULL, hence the
/// empty array.
const HISTORY_AND_STATE: &str = concat!(
    "SELECT (SELECT COALESCE(json_agg(json_build_array(id, task_id, role, actor, text, at))::text, '[]') FROM (",
    sql::newest_entries!(),
    ") AS newest) AS history,
    (SELECT value FROM state WHERE scope = $3 AND key = $1) AS value"
);

const NOTIFY: &str = "SELECT pg_notify('herald_tasks', $1)";

pub(crate) struct PgEngine {
    pool: PgPool,
    listener_pool: PgPool,
    /// Whether the listener is connected; without it idle workers poll.
    listening: Arc<AtomicBool>,
    listener: JoinHandle<()>,
    locks: Arc<PgLocks>,
}

impl PgEngine {
    /// Connects, and listens for other processes' announcements, which wake
    /// `wakeup` (retrying every `retry_every` while the listener is down).
    pub(crate) async fn connect(
        storage: &StorageConfig,
        wakeup: Arc<Wakeup>,
        retry_every: Duration,
    ) -> Result<Self, StoreError> {
        let options = PgConnectOptions::from_str(storage.url.expose())
            .map_err(|e| StoreError::Unavailable(format!("invalid storage url `{}`: {e}", storage.url)))?;
        let pool = PgPoolOptions::new()
            .before_acquire(|_, _| Box::pin(async { statement::count_ping() }))
            .max_connections(storage.postgres_connections().max(1))
            .connect_with(options.clone())
            .await
            .map_err(|e| StoreError::Unavailable(format!("cannot connect to {}: {e}", storage.url)))?;
        let locks = Arc::new(PgLocks {
            options: options.clone(),
            url: storage.url.clone(),
        });
        let listener_pool = PgPoolOptions::new().max_connections(1).connect_lazy_with(options);
        let listening = Arc::new(AtomicBool::new(false));
        let listener = listener::start(listener_pool.clone(), wakeup, listening.clone(), retry_every)
            .await
            .map_err(|e| StoreError::Unavailable(format!("cannot listen on {}: {e}", storage.url)))?;
        Ok(Self {
            pool,
            listener_pool,
            listening,
            listener,
            locks,
        })
    }

    /// The one pool every read and write goes through.
    pub(crate) fn pool(&self) -> &PgPool {
        &self.pool
    }
}

impl Engine for PgEngine {
    type Db = Postgres;

    const NAME: &'static str = "postgres";
    const CLAIM: &'static str = claim::CLAIM;
    const PENDING: &'static str = claim::PENDING;
    const ENQUEUE: &'static str = batched::ENQUEUE;
    /// Many connections write at once here: no one writer to queue behind.
    const ENQUEUE_ALL: Option<&'static str> = None;
    const COMPLETE_DELIVERED: &'static str = batched::COMPLETE_DELIVERED;
    const HISTORY_AND_STATE: &'static str = HISTORY_AND_STATE;

    fn record_turn_and_state(rows: usize) -> Option<&'static str> {
        batched::record_turn_and_state(rows)
    }
    const LIVENESS_CAN_BE_LOST: bool = true;

    fn reads(&self) -> &PgPool {
        &self.pool
    }

    fn writes(&self) -> On<'_, Postgres> {
        On::Pool(&self.pool)
    }

    async fn begin_write(&self) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
        statement::count("BEGIN");
        self.pool.begin().await
    }

    fn bind_filter(statement: Statement<Postgres>, filter: &ClaimFilter) -> Statement<Postgres> {
        claim::bind_filter(statement, filter)
    }

    async fn announce(&self, conversation: &ConversationId, on: On<'_, Postgres>) -> Result<(), StoreError> {
        Statement::<Postgres>::new(NOTIFY)
            .text(conversation.as_str())
            .execute(on)
            .await?;
        Ok(())
    }

    fn polls(&self) -> bool {
        !self.listening.load(Ordering::Acquire)
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        crate::migrations::postgres()
            .run(&self.pool)
            .await
            .map_err(error::migrate)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        Statement::<Postgres>::new("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    async fn close(&self) {
        // Closing the listener's pool ends its task.
        self.listener_pool.close().await;
        self.pool.close().await;
    }

    fn locks(&self) -> Arc<dyn ExclusiveLocks> {
        self.locks.clone()
    }

    async fn hold(&self, id: &str) -> Result<Box<dyn HeldLock>, StoreError> {
        self.locks.hold(id).await
    }

    async fn dead_holders(&self, me: &str) -> Result<Vec<String>, StoreError> {
        let rows = Statement::<Postgres>::new(locks::DEAD_HOLDERS)
            .text(me)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|row| row.text("holder")).collect()
    }
}

impl Drop for PgEngine {
    fn drop(&mut self) {
        self.listener.abort();
    }
}
