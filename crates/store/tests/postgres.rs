//! The queue and store suite on PostgreSQL: each test creates its own
//! database on the server `HERALD_TEST_POSTGRES_URL` names and drops it after.
//! Without the variable every test says loudly that it was skipped.

mod suite;

use std::time::Duration;

use herald_core::ClaimFilter;
use herald_store::StorageConfig;
use herald_testkit::postgres::TestDatabase;
use sqlx::{Connection, PgConnection};
use suite::{Harness, backend_suite, message, text};

async fn harness() -> Option<Harness> {
    let database = TestDatabase::from_env("herald_t").await?;
    Some(
        Harness::new(
            StorageConfig {
                url: database.url.clone(),
                ..StorageConfig::default()
            },
            Box::new(database),
        )
        .await,
    )
}

backend_suite!(harness);

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
