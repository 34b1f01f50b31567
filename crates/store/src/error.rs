//! sqlx errors as core's [`StoreError`], sorted by what a caller can do about
//! them: wait for the database to come back, or not.

use herald_core::StoreError;

pub(crate) fn db(err: sqlx::Error) -> StoreError {
    match err {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::WorkerCrashed => StoreError::Unavailable(err.to_string()),
        sqlx::Error::ColumnDecode { .. }
        | sqlx::Error::Decode(_)
        | sqlx::Error::ColumnNotFound(_)
        | sqlx::Error::TypeNotFound { .. } => StoreError::Corrupt(err.to_string()),
        other => StoreError::Database(other.to_string()),
    }
}

pub(crate) fn migrate(err: sqlx::migrate::MigrateError) -> StoreError {
    StoreError::Database(format!("applying migrations failed: {err}"))
}

pub(crate) fn json(what: &str, err: serde_json::Error) -> StoreError {
    StoreError::Corrupt(format!("{what}: {err}"))
}
