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
//!
//! The same machinery holds each open store's liveness lock, keyed on its
//! holder id (`liveness.rs`): `holder:ID` on PostgreSQL, on a connection
//! named `herald holder ID`; `herald.db.holder-ID.lock` on SQLite. The probe
//! that finds dead holders is here too, so both sides use one key. A holder
//! file is only ever removed by whoever holds its lock, after checking the
//! name still points at the file it locked, so a live holder's file is never
//! removed from under it.

use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use herald_core::{ExclusiveLocks, HeldLock, StoreError};
use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection};

use herald_core::redact::SecretUrl;

/// How long a liveness query on a lock's connection may take before the
/// lock counts as lost.
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) struct PgLocks {
    pub(crate) options: PgConnectOptions,
    pub(crate) url: SecretUrl,
}

/// What a holder's liveness connection calls itself (`application_name`,
/// followed by the holder id), so `pg_stat_activity` shows whose it is.
pub(crate) const HOLDER_APPLICATION: &str = "herald holder";

/// The holders of leased tasks, other than `$1`, whose liveness lock is free:
/// their process is gone (or lost its connection, see `liveness.rs`). The
/// probe takes each lock shared for the statement's own transaction, so
/// probers never exclude each other and a live holder's exclusive session
/// lock refuses them. The key is the one [`PgLocks::hold`] takes.
pub(crate) const DEAD_HOLDERS: &str = "\
SELECT holder FROM (
    SELECT DISTINCT lease_holder AS holder FROM tasks WHERE state = 'leased' AND lease_holder <> $1
) AS leased
WHERE pg_try_advisory_xact_lock_shared(hashtextextended('herald:' || current_schema() || ':holder:' || holder, 0))";

impl PgLocks {
    /// A new connection that holds the session-level advisory lock `name`,
    /// or `None` when another session holds it.
    async fn lock_on_new_connection(
        &self,
        options: &PgConnectOptions,
        name: &str,
    ) -> Result<Option<PgConnection>, StoreError> {
        let mut connection = PgConnection::connect_with(options)
            .await
            .map_err(|e| StoreError::Unavailable(format!("cannot connect to {}: {e}", self.url)))?;
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
        Ok(Some(connection))
    }

    /// Takes the liveness lock of holder `id` (a fresh id, so nobody else
    /// holds it) on a connection of its own, named after the holder.
    pub(crate) async fn hold(&self, id: &str) -> Result<Box<dyn HeldLock>, StoreError> {
        let options = self
            .options
            .clone()
            .application_name(&format!("{HOLDER_APPLICATION} {id}"));
        match self.lock_on_new_connection(&options, &format!("holder:{id}")).await? {
            Some(connection) => Ok(Box::new(PgHeld { connection })),
            None => Err(StoreError::Unavailable(format!(
                "the liveness lock of holder {id} is taken"
            ))),
        }
    }
}

#[async_trait]
impl ExclusiveLocks for PgLocks {
    async fn try_acquire(&self, name: &str) -> Result<Option<Box<dyn HeldLock>>, StoreError> {
        let connection = self.lock_on_new_connection(&self.options, name).await?;
        Ok(connection.map(|connection| Box::new(PgHeld { connection }) as Box<dyn HeldLock>))
    }

    /// Waits in the server: `pg_advisory_lock` returns as soon as the
    /// holder's session ends (its process killed included), and
    /// `lock_timeout` bounds the wait.
    async fn acquire_within(&self, name: &str, patience: Duration) -> Result<Option<Box<dyn HeldLock>>, StoreError> {
        let mut connection = PgConnection::connect_with(&self.options)
            .await
            .map_err(|e| StoreError::Unavailable(format!("cannot connect to {}: {e}", self.url)))?;
        let millis = patience.as_millis().clamp(1, i32::MAX as u128);
        sqlx::query("SELECT set_config('lock_timeout', $1, false)")
            .bind(millis.to_string())
            .execute(&mut connection)
            .await
            .map_err(crate::error::db)?;
        let taken =
            sqlx::query("SELECT pg_advisory_lock(hashtextextended('herald:' || current_schema() || ':' || $1, 0))")
                .bind(name)
                .execute(&mut connection)
                .await;
        match taken {
            Ok(_) => {
                sqlx::query("SELECT set_config('lock_timeout', '0', false)")
                    .execute(&mut connection)
                    .await
                    .map_err(crate::error::db)?;
                Ok(Some(Box::new(PgHeld { connection })))
            }
            // 55P03 lock_not_available: the wait ran out.
            Err(sqlx::Error::Database(err)) if err.code().as_deref() == Some("55P03") => {
                let _ = connection.close().await;
                Ok(None)
            }
            Err(err) => Err(crate::error::db(err)),
        }
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

impl SqliteLocks {
    /// `herald.db.holder-ID.lock`, beside the database (resolved through
    /// links, so every process finds the same file); `None` in memory.
    fn holder_path(&self, id: &str) -> Option<PathBuf> {
        let database = self.database.as_ref()?;
        let database = std::fs::canonicalize(database).unwrap_or_else(|_| database.clone());
        let mut path = database.into_os_string();
        path.push(format!(".{HOLDER_FILE}{id}.lock"));
        Some(PathBuf::from(path))
    }

    /// Takes the liveness lock of holder `id`: an exclusive `flock` on its
    /// own file, held while the store is open.
    pub(crate) fn hold(&self, id: &str) -> Result<Box<dyn HeldLock>, StoreError> {
        let Some(path) = self.holder_path(id) else {
            return Ok(Box::new(FileHeld { _file: None }));
        };
        let unavailable =
            |e: std::io::Error| StoreError::Unavailable(format!("cannot take the lock file {}: {e}", path.display()));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&path)
            .map_err(unavailable)?;
        file.try_lock().map_err(|e| unavailable(e.into()))?;
        // A sweep may have unlinked the file between our open and our lock;
        // a lock on an unlinked file would tell nobody we are alive.
        if !still_named(&file, &path) {
            return Err(StoreError::Unavailable(format!(
                "the lock file {} was removed while it was taken",
                path.display()
            )));
        }
        Ok(Box::new(HolderFile { file, path }))
    }

    /// Whether holder `id` is gone: its file lock is free (or its file was
    /// removed by whoever found it free before). A free one is removed here,
    /// under the lock: the holder never takes it again.
    pub(crate) fn is_dead(&self, id: &str) -> bool {
        let Some(path) = self.holder_path(id) else {
            return false;
        };
        match std::fs::OpenOptions::new().write(true).open(&path) {
            Ok(file) => match file.try_lock() {
                Ok(()) => {
                    remove_locked(&file, &path);
                    true
                }
                Err(_) => false,
            },
            Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        }
    }

    /// Removes the files of holders that went away without taking tasks
    /// with them (the probe removes the others'); on open.
    pub(crate) fn sweep(&self) {
        let Some(any) = self.holder_path("") else { return };
        let (Some(dir), Some(prefix)) = (any.parent(), any.file_name().and_then(|n| n.to_str())) else {
            return;
        };
        let prefix = prefix.trim_end_matches(".lock");
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with(prefix)
                && name.ends_with(".lock")
                && let Ok(file) = std::fs::OpenOptions::new().write(true).open(entry.path())
                && file.try_lock().is_ok()
            {
                remove_locked(&file, &entry.path());
            }
        }
    }
}

/// What a holder's lock file name carries before its id.
const HOLDER_FILE: &str = "holder-";

/// Whether `path` still names the file `file` has open.
fn still_named(file: &std::fs::File, path: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(open), Ok(named)) => open.dev() == named.dev() && open.ino() == named.ino(),
        _ => false,
    }
}

/// Removes a holder's lock file while holding its lock, if `path` still
/// names it. Everyone who removes one holds its lock, so nobody can remove
/// a file that a live holder took after this one was removed.
fn remove_locked(file: &std::fs::File, path: &std::path::Path) {
    if still_named(file, path) {
        let _ = std::fs::remove_file(path);
    }
}

/// A holder's liveness lock on SQLite; its file goes when it is released.
struct HolderFile {
    file: std::fs::File,
    path: PathBuf,
}

#[async_trait]
impl HeldLock for HolderFile {
    /// Nothing but this process can take a `flock` from it.
    async fn still_held(&mut self) -> bool {
        true
    }

    async fn release(self: Box<Self>) {
        remove_locked(&self.file, &self.path);
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
