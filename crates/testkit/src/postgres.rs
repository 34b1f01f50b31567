//! A PostgreSQL database of its own for one test or benchmark run, on the
//! server `HERALD_TEST_POSTGRES_URL` names, dropped when it goes out of
//! scope (passed, failed or panicked).
//!
//! Every PostgreSQL test of the workspace runs on a real server; a database
//! per test keeps them independent when nextest runs them side by side.

use std::io::Write;

use sqlx::{AssertSqlSafe, Connection, Executor, PgConnection};

/// The variable naming the server tests create their databases on.
pub const URL_VARIABLE: &str = "HERALD_TEST_POSTGRES_URL";

/// Set to `1` to skip the PostgreSQL tests on a machine without a server.
pub const SKIP_VARIABLE: &str = "HERALD_TEST_SKIP_POSTGRES";

/// A database created for one run; dropped with `DROP DATABASE … WITH (FORCE)`.
#[derive(Debug)]
pub struct TestDatabase {
    server: String,
    name: String,
    /// The connection URL of the new database.
    pub url: String,
}

impl TestDatabase {
    /// A database on the server `HERALD_TEST_POSTGRES_URL` names. Without
    /// the variable the test fails, saying what to set, unless
    /// `HERALD_TEST_SKIP_POSTGRES=1` asks for the PostgreSQL tests to be
    /// skipped: then `None`, after saying so on stderr. A skip is a choice
    /// someone made, never what a missing variable quietly does. Panics when
    /// the server refuses: a configured server that fails is a test failure.
    pub async fn from_env(prefix: &str) -> Option<Self> {
        let Ok(server) = std::env::var(URL_VARIABLE) else {
            if std::env::var(SKIP_VARIABLE).is_ok_and(|skip| skip == "1") {
                let _ = writeln!(std::io::stderr(), "SKIPPED: {SKIP_VARIABLE}=1, no PostgreSQL test runs");
                return None;
            }
            panic!(
                "PostgreSQL tests need {URL_VARIABLE} (e.g. postgres://postgres@127.0.0.1:5432/test, \
                 which `bash .ci/test` sets); set {SKIP_VARIABLE}=1 to skip them"
            );
        };
        match Self::create(&server, prefix).await {
            Ok(database) => Some(database),
            Err(err) => panic!("creating a test database on {URL_VARIABLE}: {err}"),
        }
    }

    /// A database named `{prefix}_{random}` on the server at `server`.
    pub async fn create(server: &str, prefix: &str) -> Result<Self, sqlx::Error> {
        let name = format!("{prefix}_{}", uuid::Uuid::new_v4().simple());
        let mut admin = PgConnection::connect(server).await?;
        admin.execute(AssertSqlSafe(format!("CREATE DATABASE {name}"))).await?;
        admin.close().await.ok();
        Ok(Self {
            url: with_database(server, &name),
            server: server.to_owned(),
            name,
        })
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// `postgres://user@host:port/db?params` with another database name.
pub fn with_database(url: &str, database: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("postgres", url));
    let (rest, query) = rest.split_once('?').map_or((rest, None), |(r, q)| (r, Some(q)));
    let authority = rest.split('/').next().unwrap_or(rest);
    match query {
        Some(query) => format!("{scheme}://{authority}/{database}?{query}"),
        None => format!("{scheme}://{authority}/{database}"),
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let (server, name) = (self.server.clone(), self.name.clone());
        // `Drop` cannot await, and may run inside a runtime: a thread with
        // a runtime of its own does the work.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(sqlx::Error::Io)?;
            runtime.block_on(async {
                let mut admin = PgConnection::connect(&server).await?;
                admin
                    .execute(AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
                    .await?;
                admin.close().await
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            let _ = writeln!(
                std::io::stderr(),
                "could not drop test database {}: {dropped:?}",
                self.name
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn a_test_url_names_its_own_database_and_keeps_the_rest() {
        for (url, expected) in [
            (
                "postgres://postgres@127.0.0.1:5432/test",
                "postgres://postgres@127.0.0.1:5432/t1",
            ),
            (
                "postgres://u:p@h/test?sslmode=disable",
                "postgres://u:p@h/t1?sslmode=disable",
            ),
            ("postgres://h", "postgres://h/t1"),
            ("postgres://h?sslmode=disable", "postgres://h/t1?sslmode=disable"),
        ] {
            assert_eq!(with_database(url, "t1"), expected, "{url}");
        }
    }
}
