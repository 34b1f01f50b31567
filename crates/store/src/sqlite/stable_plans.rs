//! Every SQLite connection plans each statement once.
//!
//! SQLite may let a bound value choose a statement's plan (a `LIMIT $n`, a
//! `LIKE` pattern): it then marks the statement, and prepares it again the
//! first time it runs with new values. sqlx binds values anew on every run,
//! so the history read (its `LIMIT`) and the claim (`LIMIT $7`) were parsed
//! and planned on every call, about a fifth of the reading connections'
//! time in a profile under load. Herald's statements are written for one
//! plan each (the claim names its index; `plans.rs` checks the scrapes'),
//! so each connection turns on SQLite's query planner stability guarantee
//! (`SQLITE_DBCONFIG_ENABLE_QPSG`): a statement keeps the plan it was
//! prepared with, whatever values it is run with.
//!
//! sqlx has no setting for it, hence the one call into SQLite's C interface
//! on the connection's own handle.

use std::ffi::c_int;

use libsqlite3_sys::{SQLITE_DBCONFIG_ENABLE_QPSG, SQLITE_OK, sqlite3_db_config};
use sqlx::sqlite::SqliteConnection;

/// Turns on the planner stability guarantee for `connection`; run on every
/// new connection (`SqlitePoolOptions::after_connect`).
pub(super) async fn plan_once(connection: &mut SqliteConnection) -> Result<(), sqlx::Error> {
    let on = qpsg(connection, 1).await?;
    if on == 1 {
        Ok(())
    } else {
        Err(sqlx::Error::Configuration(
            "SQLite did not turn on its query planner stability guarantee".into(),
        ))
    }
}

/// Sets the guarantee (`1` on, `0` off, `-1` leaves it) and returns whether
/// it is on afterwards.
async fn qpsg(connection: &mut SqliteConnection, set: c_int) -> Result<c_int, sqlx::Error> {
    let mut handle = connection.lock_handle().await?;
    let db = handle.as_raw_handle().as_ptr();
    let mut now: c_int = -1;
    // SAFETY: `db` is the open connection's handle, held locked (no other
    // thread uses it) for the call; SQLITE_DBCONFIG_ENABLE_QPSG takes exactly
    // an int and a pointer to an int, which outlives the call.
    #[allow(unsafe_code)]
    let code = unsafe { sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_QPSG, set, &mut now as *mut c_int) };
    if code == SQLITE_OK {
        Ok(now)
    } else {
        Err(sqlx::Error::Configuration(
            format!("SQLite refused its query planner stability guarantee (code {code})").into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::ops::DerefMut;

    use super::*;
    use crate::engine::Engine;
    use crate::sqlite::SqliteEngine;

    /// The writer and every reader plan once, the readers opened after the
    /// first as well as the first.
    #[tokio::test]
    async fn every_connection_plans_its_statements_once() {
        let dir = tempfile::tempdir().unwrap();
        let engine = SqliteEngine::on_file_in(dir.path()).await;
        let mut writer = engine.write.acquire().await.unwrap();
        assert_eq!(qpsg(writer.deref_mut(), -1).await.unwrap(), 1, "the writer");
        let mut readers = Vec::new();
        for _ in 0..2 {
            readers.push(engine.reads().acquire().await.unwrap());
        }
        for reader in &mut readers {
            assert_eq!(qpsg(reader.deref_mut(), -1).await.unwrap(), 1, "a reader");
        }
        drop((writer, readers));
        engine.close().await;
    }
}
