//! The database's files are private: conversations, history and queued
//! messages are readable only by the user Herald runs as.
//!
//! SQLite creates a database with the process's umask (often world-readable)
//! and creates its `-wal` and `-shm` files with the database file's mode. So
//! the database file is created here, before SQLite opens it, with mode 0600;
//! a file that exists already loses any group and other bits. After SQLite
//! opened it, the `-wal` and `-shm` files get the same treatment, for those
//! an older version left behind. Modes are only ever narrowed: a stricter
//! mode stays as it is.

use std::fs::{self, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use herald_core::StoreError;
use tracing::{info, warn};

/// Owner read and write.
const PRIVATE: u32 = 0o600;

/// Creates `database` with mode 0600 when missing, or makes it private.
pub(super) fn prepare(database: &Path) -> Result<(), StoreError> {
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(PRIVATE)
        .open(database)
    {
        // SQLite opens an empty file as a new database.
        Ok(_) => Ok(()),
        Err(err) if err.kind() == ErrorKind::AlreadyExists => {
            make_private(database);
            Ok(())
        }
        Err(err) => Err(StoreError::Unavailable(format!(
            "cannot create the database file {}: {err}",
            database.display()
        ))),
    }
}

/// Makes the `-wal` and `-shm` files beside `database` private, if present.
pub(super) fn make_companions_private(database: &Path) {
    for suffix in ["-wal", "-shm"] {
        let mut name = database.as_os_str().to_owned();
        name.push(suffix);
        make_private(&PathBuf::from(name));
    }
}

/// Drops the group and other bits of `path`'s mode. A file that is gone, or
/// whose mode cannot be changed (it belongs to someone else), is left as it is:
/// Herald still opens a database it may use, and says so.
fn make_private(path: &Path) {
    let Ok(metadata) = fs::metadata(path) else { return };
    let mode = metadata.permissions().mode();
    let Some(private) = narrowed(mode) else { return };
    match fs::set_permissions(path, fs::Permissions::from_mode(private)) {
        Ok(()) => info!(file = %path.display(), from = format!("{:o}", mode & 0o777), "made the database file private"),
        Err(err) => warn!(file = %path.display(), error = %err, "cannot make the database file private"),
    }
}

/// `mode` without group and other bits, if it had any.
fn narrowed(mode: u32) -> Option<u32> {
    let private = mode & !0o077;
    (private != mode).then_some(private)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_only_narrow_to_the_owner() {
        for (mode, narrowed_to) in [
            (0o644, Some(0o600)),
            (0o666, Some(0o600)),
            (0o640, Some(0o600)),
            (0o604, Some(0o600)),
            (0o100_644, Some(0o100_600)),
            (0o600, None),
            (0o400, None),
            (0o200, None),
            (0o700, None),
        ] {
            assert_eq!(narrowed(mode), narrowed_to, "{mode:o}");
        }
    }
}
