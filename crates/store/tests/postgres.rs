//! The queue and store suite on PostgreSQL: each test creates its own
//! database on the server `HERALD_TEST_POSTGRES_URL` names and drops it after.
//! Without the variable every test says loudly that it was skipped.

mod suite;

use std::io::Write;
use std::time::Duration;

use herald_core::ClaimFilter;
use herald_store::StorageConfig;
use sqlx::{AssertSqlSafe, Connection, Executor, PgConnection};
use suite::{Harness, backend_suite, message, text};

const URL_VARIABLE: &str = "HERALD_TEST_POSTGRES_URL";

async fn harness() -> Option<Harness> {
    let Ok(server) = std::env::var(URL_VARIABLE) else {
        // Straight to the process's stderr: the test harness captures `eprintln!`.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: PostgreSQL tests need {URL_VARIABLE} (e.g. postgres://postgres@127.0.0.1:5432/test)"
        );
        return None;
    };
    let name = format!("herald_t_{}", uuid::Uuid::new_v4().simple());
    let mut admin = PgConnection::connect(&server)
        .await
        .expect("connecting to HERALD_TEST_POSTGRES_URL");
    admin
        .execute(AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .await
        .expect("creating a test database");
    admin.close().await.ok();
    let url = with_database(&server, &name);
    let cleanup = DropDatabase { server, name };
    Some(
        Harness::new(
            StorageConfig {
                url,
                ..StorageConfig::default()
            },
            Box::new(cleanup),
        )
        .await,
    )
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

/// Drops the test database, also when the test failed: on its own thread and
/// runtime, since `Drop` cannot await.
struct DropDatabase {
    server: String,
    name: String,
}

impl Drop for DropDatabase {
    fn drop(&mut self) {
        let (server, name) = (self.server.clone(), self.name.clone());
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
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
            eprintln!("could not drop test database {}: {dropped:?}", self.name);
        }
    }
}

backend_suite!(harness);

#[test]
fn test_urls_name_their_own_database() {
    for (url, expected) in [
        (
            "postgres://postgres@127.0.0.1:5432/test",
            "postgres://postgres@127.0.0.1:5432/t1",
        ),
        (
            "postgres://u:p@h/test?sslmode=disable",
            "postgres://u:p@h/t1?sslmode=disable",
        ),
        ("postgresql://h", "postgresql://h/t1"),
    ] {
        assert_eq!(with_database(url, "t1"), expected);
    }
}

/// A head that another worker holds a row lock on (mid-claim) neither blocks
/// this claim nor lets it take that conversation's next task.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_locked_head_does_not_block_other_conversations() {
    let Some(h) = harness().await else { return };
    let queue = h.storage.queue();
    let ann = queue.enqueue(message("test:ann", "ann 1")).await.unwrap().task_id();
    queue.enqueue(message("test:ann", "ann 2")).await.unwrap();
    queue.enqueue(message("test:bob", "bob 1")).await.unwrap();

    let mut other_worker = PgConnection::connect(&h.storage_config.url).await.unwrap();
    let mut tx = other_worker.begin().await.unwrap();
    sqlx::query("SELECT id FROM tasks WHERE id = $1 FOR UPDATE")
        .bind(ann.0)
        .fetch_one(&mut *tx)
        .await
        .unwrap();

    let lease = tokio::time::timeout(Duration::from_secs(10), queue.claim(&ClaimFilter::any()))
        .await
        .expect("the claim does not wait for the locked row")
        .unwrap()
        .expect("bob's head is claimable");
    assert_eq!(text(&lease), "bob 1");
    assert!(
        queue.claim(&ClaimFilter::any()).await.unwrap().is_none(),
        "ann 2 stays behind its locked head"
    );

    tx.rollback().await.unwrap();
    assert_eq!(text(&queue.claim(&ClaimFilter::any()).await.unwrap().unwrap()), "ann 1");
}

#[tokio::test]
async fn the_postgresql_scheme_works_too() {
    let Some(h) = harness().await else { return };
    let url = h.storage_config.url.replacen("postgres://", "postgresql://", 1);
    let config = StorageConfig {
        url,
        ..StorageConfig::default()
    };
    let storage = herald_store::Storage::connect(&config, &suite::queue_config(), h.clock.clone())
        .await
        .unwrap();
    assert_eq!(storage.backend(), "postgres");
    storage.ping().await.unwrap();
    storage.close().await;
}
