//! A PostgreSQL database of its own for an end-to-end test, on the server
//! `HERALD_TEST_POSTGRES_URL` names, dropped when the test ends (passed or
//! failed). Without the variable the test says loudly that it was skipped.

#![allow(dead_code)]

use std::io::Write;

use sqlx::{AssertSqlSafe, Connection, Executor, PgConnection};

const URL_VARIABLE: &str = "HERALD_TEST_POSTGRES_URL";

pub struct TestDatabase {
    server: String,
    name: String,
    pub url: String,
}

impl TestDatabase {
    /// `None` (after saying so on stderr) when no server is configured.
    pub async fn create() -> Option<Self> {
        let Ok(server) = std::env::var(URL_VARIABLE) else {
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: PostgreSQL tests need {URL_VARIABLE} (e.g. postgres://postgres@127.0.0.1:5432/test)"
            );
            return None;
        };
        let name = format!("herald_e2e_{}", uuid::Uuid::new_v4().simple());
        let mut admin = PgConnection::connect(&server)
            .await
            .expect("connecting to HERALD_TEST_POSTGRES_URL");
        admin
            .execute(AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .await
            .expect("creating a test database");
        admin.close().await.ok();
        let url = with_database(&server, &name);
        Some(Self { server, name, url })
    }
}

/// `postgres://user@host:port/db?params` with another database name.
fn with_database(url: &str, database: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a postgres:// url");
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
        // Drop cannot await: a thread with its own runtime does the work.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async {
                if let Ok(mut admin) = PgConnection::connect(&server).await {
                    let _ = admin
                        .execute(AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
                        .await;
                    let _ = admin.close().await;
                }
            });
        })
        .join();
    }
}
