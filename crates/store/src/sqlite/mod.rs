//! SQLite: one file, WAL, and one writer.
//!
//! SQLite lets one connection write at a time, whatever we do; many writing
//! connections only queue up on its file lock and fail with "database is
//! locked" when `busy_timeout` runs out. So every write in this process goes
//! through a pool of exactly one connection, where writes wait their turn in
//! order, and reads (history, state, counts) go through a separate pool that
//! WAL lets run beside the writer. Writes are single statements or short
//! `BEGIN IMMEDIATE` transactions (the lock is taken up front, so a
//! transaction never fails half-way to upgrade its read lock) and nothing is
//! awaited while the write connection is held, so the writer never waits on
//! the model, a channel or the network: the program is not serialised, only
//! its few-millisecond writes are. Writes that arrive while the writer is
//! busy are committed together, one transaction for the group
//! (`group_commit.rs`).
//!
//! Other processes may use the same file (`herald chat` beside `herald run`);
//! `busy_timeout` covers their writes, and idle workers look for their tasks
//! every `queue.poll_interval` since SQLite cannot notify across processes.
//!
//! The database file and its `-wal` and `-shm` files are private to the
//! user Herald runs as (`files.rs`).
//!
//! `sqlite::memory:` keeps one connection for reads and writes: each
//! connection would otherwise see its own empty database once the last
//! connection to it closed.

mod batched;
mod claim;
mod files;
#[cfg(test)]
mod plans;
mod stable_plans;

use std::str::FromStr;
use std::sync::Arc;

use herald_core::redact::SecretUrl;
use herald_core::{ClaimFilter, ConversationId, ExclusiveLocks, HeldLock, StoreError};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, Transaction};
use tracing::warn;

use crate::config::StorageConfig;
use crate::engine::Engine;
use crate::group_commit::GroupCommit;
use crate::locks::SqliteLocks;
use crate::statement::{self, Columns, On, Statement};
use crate::{error, sql};

/// Each connection's page cache, in SQLite's units (negative: KiB): at most
/// 512 KiB of pages where SQLite's default is 2 MiB. The kernel caches the
/// file for all connections anyway, and at the default the writer's and
/// eight readers' caches would grow Herald by 18 MiB as the file grows (a
/// heap profile of a soak found them the largest thing Herald holds).
const PAGE_CACHE: &str = "-512";

pub(crate) struct SqliteEngine {
    /// Exactly one connection: every write goes through it.
    write: SqlitePool,
    /// Writes outside a transaction, committed together when they arrive
    /// together (`group_commit.rs`).
    grouped: GroupCommit<Sqlite>,
    /// Reads; the same pool as `write` for an in-memory database.
    read: SqlitePool,
    locks: Arc<SqliteLocks>,
}

impl SqliteEngine {
    pub(crate) async fn connect(storage: &StorageConfig) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::from_str(storage.url.expose())
            .map_err(|e| StoreError::Unavailable(format!("invalid storage url `{}`: {e}", storage.url)))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(storage.busy_timeout);
        let in_memory = storage.url.expose().contains(":memory:") || storage.url.expose().contains("mode=memory");
        let database = (!in_memory).then(|| options.get_filename().to_path_buf());
        if let Some(database) = &database {
            files::prepare(database)?;
        }
        // No ping before a connection is handed out (sqlx's default): a
        // connection to a local file does not go stale, and each ping is a
        // round trip to the connection's thread, about a third of all the
        // round trips a message made.
        let write = SqlitePoolOptions::new()
            .test_before_acquire(false)
            .max_connections(1)
            .min_connections(if in_memory { 1 } else { 0 })
            .idle_timeout(None)
            .max_lifetime(None)
            .after_connect(|connection, _| Box::pin(stable_plans::plan_once(connection)))
            .connect_with(options.clone().pragma("cache_size", PAGE_CACHE))
            .await
            .map_err(|e| opening(&storage.url, e))?;
        let read = if in_memory {
            write.clone()
        } else {
            SqlitePoolOptions::new()
                .test_before_acquire(false)
                .max_connections(storage.sqlite_readers().max(1))
                .after_connect(|connection, _| Box::pin(stable_plans::plan_once(connection)))
                .connect_with(options.pragma("cache_size", PAGE_CACHE))
                .await
                .map_err(|e| opening(&storage.url, e))?
        };
        if let Some(database) = &database {
            files::make_companions_private(database);
        }
        let locks = Arc::new(SqliteLocks { database });
        locks.sweep();
        let grouped = GroupCommit::start(write.clone(), BEGIN_WRITE);
        Ok(Self {
            write,
            grouped,
            read,
            locks,
        })
    }
}

#[cfg(test)]
impl SqliteEngine {
    /// An engine on a new database file in `dir`, for tests that need a real
    /// file (separate writer and readers).
    pub(crate) async fn on_file_in(dir: &std::path::Path) -> Self {
        Self::connect(&StorageConfig {
            url: format!("sqlite://{}", dir.join("herald.db").display()).into(),
            ..StorageConfig::default()
        })
        .await
        .unwrap()
    }
}

impl Engine for SqliteEngine {
    type Db = Sqlite;

    const NAME: &'static str = "sqlite";
    const CLAIM: &'static str = claim::CLAIM;
    const PENDING: &'static str = claim::PENDING;
    const ENQUEUE: &'static str = batched::ENQUEUE;
    const ENQUEUE_ALL: Option<&'static str> = Some(batched::ENQUEUE_ALL);
    const COMPLETE_DELIVERED: &'static str = batched::COMPLETE_DELIVERED;
    const HISTORY_AND_STATE: &'static str = HISTORY_AND_STATE;

    fn record_turn_and_state(rows: usize) -> Option<&'static str> {
        batched::record_turn_and_state(rows)
    }
    const LIVENESS_CAN_BE_LOST: bool = false;

    fn reads(&self) -> &SqlitePool {
        &self.read
    }

    fn writes(&self) -> On<'_, Sqlite> {
        On::Grouped(&self.grouped)
    }

    /// When SQLite ended a transaction by itself (a full disk, an I/O
    /// error), its commit and rollback failed and sqlx still counts it open
    /// on the connection, refusing every later `BEGIN` there: that
    /// connection is closed and the transaction begun on a new one (not for
    /// an in-memory database, which would go with its last connection).
    async fn begin_write(&self) -> Result<Transaction<'static, Sqlite>, sqlx::Error> {
        statement::count(BEGIN_WRITE);
        match self.write.begin_with(BEGIN_WRITE).await {
            Err(sqlx::Error::InvalidSavePointStatement) if self.locks.database.is_some() => {
                warn!("the database connection was left in a failed transaction; opening a new one");
                self.write.acquire().await?.close().await?;
                self.write.begin_with(BEGIN_WRITE).await
            }
            begun => begun,
        }
    }

    fn bind_filter(statement: Statement<Sqlite>, filter: &ClaimFilter) -> Statement<Sqlite> {
        claim::bind_filter(statement, filter)
    }

    /// SQLite cannot tell other processes; their workers poll.
    async fn announce(&self, _conversation: &ConversationId, _on: On<'_, Sqlite>) -> Result<(), StoreError> {
        Ok(())
    }

    fn polls(&self) -> bool {
        true
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        crate::migrations::sqlite()
            .run(&self.write)
            .await
            .map_err(error::migrate)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        for pool in [&self.write, &self.read] {
            Statement::<Sqlite>::new("SELECT 1").execute(pool).await?;
        }
        Ok(())
    }

    async fn close(&self) {
        self.read.close().await;
        self.write.close().await;
    }

    fn locks(&self) -> Arc<dyn ExclusiveLocks> {
        self.locks.clone()
    }

    async fn hold(&self, id: &str) -> Result<Box<dyn HeldLock>, StoreError> {
        self.locks.hold(id)
    }

    /// Holders are processes on this machine; an in-memory database has
    /// only this one.
    async fn dead_holders(&self, me: &str) -> Result<Vec<String>, StoreError> {
        if self.locks.database.is_none() {
            return Ok(Vec::new());
        }
        let rows = Statement::<Sqlite>::new(LEASE_HOLDERS)
            .text(me)
            .fetch_all(&self.read)
            .await?;
        let holders = rows
            .iter()
            .map(|row| row.text("holder"))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(holders.into_iter().filter(|id| self.locks.is_dead(id)).collect())
    }
}

/// Takes the write lock up front, so a transaction never fails half-way to
/// upgrade a read lock.
const BEGIN_WRITE: &str = "BEGIN IMMEDIATE";

/// `Engine::HISTORY_AND_STATE`: the entries come out of the subquery newest
/// first (`rows::history_json` puts them in order).
const HISTORY_AND_STATE: &str = concat!(
    "SELECT (SELECT json_group_array(json_array(id, task_id, role, actor, text, at)) FROM (",
    sql::newest_entries!(),
    ")) AS history,
    (SELECT value FROM state WHERE scope = $3 AND key = $1) AS value"
);

/// The holders of leased tasks other than `$1`, through `tasks_leased_by_holder`.
const LEASE_HOLDERS: &str = "\
SELECT DISTINCT lease_holder AS holder FROM tasks WHERE state = 'leased' AND lease_holder IS NOT NULL AND lease_holder <> $1";

fn opening(url: &SecretUrl, err: sqlx::Error) -> StoreError {
    StoreError::Unavailable(format!("cannot open {url}: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SQLite can end a transaction by itself (a full disk, an I/O error,
    /// a trigger's `RAISE(ROLLBACK)`); the one write connection must still
    /// take the next transaction.
    #[tokio::test]
    async fn a_transaction_sqlite_ended_does_not_break_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let engine = SqliteEngine::on_file_in(dir.path()).await;
        for setup in [
            "CREATE TABLE names (name TEXT NOT NULL)",
            "CREATE TRIGGER poison BEFORE INSERT ON names WHEN NEW.name = 'poison'
             BEGIN SELECT RAISE(ROLLBACK, 'poisoned'); END",
        ] {
            Statement::<Sqlite>::new(setup).execute(engine.writes()).await.unwrap();
        }
        let insert = "INSERT INTO names (name) VALUES ($1)";

        let mut ended = engine.begin_write().await.unwrap();
        Statement::<Sqlite>::new(insert)
            .text("kept?")
            .execute(&mut ended)
            .await
            .unwrap();
        let poisoned = Statement::<Sqlite>::new(insert)
            .text("poison")
            .execute(&mut ended)
            .await;
        assert!(poisoned.is_err());
        assert!(statement::commit(ended).await.is_err(), "nothing is left to commit");

        let mut next = engine.begin_write().await.expect("the next transaction begins");
        Statement::<Sqlite>::new(insert)
            .text("next")
            .execute(&mut next)
            .await
            .unwrap();
        statement::commit(next).await.unwrap();
        let names = Statement::<Sqlite>::new("SELECT group_concat(name) AS names FROM names")
            .fetch_one(engine.reads())
            .await
            .unwrap();
        assert_eq!(names.text("names").unwrap(), "next");
    }
}
