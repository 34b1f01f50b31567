//! [`ExclusiveLocks`] on both engines, tied to the holder's life.
//!
//! - PostgreSQL: a session-level advisory lock on a connection of its own,
//!   outside the pool. The server frees it when that connection ends,
//!   including when the holder's process is killed. The key is a hash of the
//!   lock name and the connection's schema, so Herald installs that share a
//!   database in separate schemas do not exclude each other.
//! - SQLite: an exclusive `flock` on a file beside the database
//!   (`herald.db.<name>.lock`, created private like the database); the
//!   kernel frees it when the process dies.
//!   An in-memory database belongs to one process: every lock is granted.

use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use herald_core::{ExclusiveLocks, HeldLock, StoreError};
use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection};

use herald_core::redact;

/// How long a liveness query on a lock's connection may take before the
/// lock counts as lost.
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) struct PgLocks {
    pub(crate) options: PgConnectOptions,
    pub(crate) url: String,
}

#[async_trait]
impl ExclusiveLocks for PgLocks {
    async fn try_acquire(&self, name: &str) -> Result<Option<Box<dyn HeldLock>>, StoreError> {
        let mut connection = PgConnection::connect_with(&self.options)
            .await
            .map_err(|e| StoreError::Unavailable(format!("cannot connect to {}: {e}", redact::url(&self.url))))?;
        let taken: bool = sqlx::query_scalar(
            "SELECT pg_try_advisory_lock(hashtextextended('herald:' || current_schema() || ':' || $1, 0))",
        )
        .bind(name)
        .fetch_one(&mut connection)
        .await
        .map_err(crate::error::db)?;
        if !taken {
            let _ = connection.close().await;
            return Ok(None);
        }
        Ok(Some(Box::new(PgHeld { connection })))
    }
}

struct PgHeld {
    connection: PgConnection,
}

#[async_trait]
impl HeldLock for PgHeld {
    async fn still_held(&mut self) -> bool {
        matches!(
            tokio::time::timeout(CHECK_TIMEOUT, self.connection.ping()).await,
            Ok(Ok(()))
        )
    }

    async fn release(self: Box<Self>) {
        // Ending the session frees every advisory lock it holds.
        let _ = self.connection.close().await;
    }
}

pub(crate) struct SqliteLocks {
    /// The database file; `None` for an in-memory database.
    pub(crate) database: Option<PathBuf>,
}

#[async_trait]
impl ExclusiveLocks for SqliteLocks {
    async fn try_acquire(&self, name: &str) -> Result<Option<Box<dyn HeldLock>>, StoreError> {
        let Some(database) = &self.database else {
            return Ok(Some(Box::new(FileHeld { _file: None })));
        };
        let safe_name: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' })
            .collect();
        let mut path = database.clone().into_os_string();
        path.push(format!(".{safe_name}.lock"));
        let path = PathBuf::from(path);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| StoreError::Unavailable(format!("cannot open the lock file {}: {e}", path.display())))?;
        match file.try_lock() {
            Ok(()) => Ok(Some(Box::new(FileHeld { _file: Some(file) }))),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => {
                Err(StoreError::Unavailable(format!("cannot lock {}: {e}", path.display())))
            }
        }
    }
}

/// Holds the lock while the file stays open.
struct FileHeld {
    _file: Option<std::fs::File>,
}

#[async_trait]
impl HeldLock for FileHeld {
    async fn still_held(&mut self) -> bool {
        true
    }

    async fn release(self: Box<Self>) {}
}
