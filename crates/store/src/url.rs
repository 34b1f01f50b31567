//! Which engine a storage URL names, and the URL as it may be shown: a
//! PostgreSQL URL can carry a password, which never reaches a message or log.

use herald_core::StoreError;

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
            redact(url)
        )))
    }
}

/// The URL with any password replaced by `***`.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((user_info, host)) => match user_info.split_once(':') {
            Some((user, _)) => format!("{user}:***@{host}"),
            None => format!("{user_info}@{host}"),
        },
        None => authority.to_owned(),
    };
    // A password may also come as a query parameter.
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => tail.to_owned(),
    };
    format!("{scheme}://{authority}{tail}")
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

    #[test]
    fn passwords_are_redacted() {
        for (url, expected) in [
            (
                "postgres://herald:s3cret@db:5432/herald",
                "postgres://herald:***@db:5432/herald",
            ),
            ("postgres://herald@db/herald", "postgres://herald@db/herald"),
            ("postgres://u:p@h", "postgres://u:***@h"),
            (
                "postgres://db/herald?user=u&password=p&sslmode=require",
                "postgres://db/herald?user=u&password=***&sslmode=require",
            ),
            ("sqlite://herald.db", "sqlite://herald.db"),
            ("sqlite::memory:", "sqlite::memory:"),
        ] {
            assert_eq!(redact(url), expected);
        }
    }
}
