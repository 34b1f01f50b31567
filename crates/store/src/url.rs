//! Which engine a storage URL names. A URL in a message is always shown
//! through `herald_core::redact::url`: a PostgreSQL URL can carry a password,
//! which never reaches a message or log.

use herald_core::{StoreError, redact};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Engine {
    Sqlite,
    Postgres,
}

pub(crate) fn engine(url: &str) -> Result<Engine, StoreError> {
    if url.starts_with("sqlite:") {
        Ok(Engine::Sqlite)
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Engine::Postgres)
    } else {
        Err(StoreError::Unavailable(format!(
            "unsupported storage url `{}`: expected sqlite://PATH, sqlite::memory: or postgres://USER@HOST/DB",
            redact::url(url)
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_by_scheme() {
        for (url, expected) in [
            ("sqlite://herald.db", Some(Engine::Sqlite)),
            ("sqlite:herald.db", Some(Engine::Sqlite)),
            ("sqlite::memory:", Some(Engine::Sqlite)),
            ("postgres://herald@db/herald", Some(Engine::Postgres)),
            ("postgresql://herald@db/herald", Some(Engine::Postgres)),
            ("mysql://root:pw@db/herald", None),
            ("herald.db", None),
        ] {
            assert_eq!(engine(url).ok(), expected, "{url}");
        }
    }

    #[test]
    fn a_bad_scheme_names_the_url_but_not_the_password() {
        let message = engine("mysql://root:hunter2@db/herald").unwrap_err().to_string();
        assert!(message.contains("mysql://root:***@db/herald"), "{message}");
        assert!(!message.contains("hunter2"), "{message}");
    }
}
