//! Which engine a storage URL names. The URL is a
//! [`SecretUrl`](herald_core::redact::SecretUrl) from the configuration on:
//! a PostgreSQL URL can carry a password, and the type shows itself only
//! redacted, so no message or log can carry it.

use herald_core::StoreError;
use herald_core::redact::SecretUrl;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Engine {
    Sqlite,
    Postgres,
}

pub(crate) fn engine(url: &SecretUrl) -> Result<Engine, StoreError> {
    if url.starts_with("sqlite:") {
        Ok(Engine::Sqlite)
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Engine::Postgres)
    } else {
        Err(StoreError::Unavailable(format!(
            "unsupported storage url `{url}`: expected sqlite://PATH, sqlite::memory: or postgres://USER@HOST/DB"
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
            assert_eq!(engine(&url.into()).ok(), expected, "{url}");
        }
    }

    #[test]
    fn a_bad_scheme_names_the_url_but_not_the_password() {
        let message = engine(&"mysql://root:hunter2@db/herald".into())
            .unwrap_err()
            .to_string();
        assert!(message.contains("mysql://root:***@db/herald"), "{message}");
        assert!(!message.contains("hunter2"), "{message}");
    }
}
