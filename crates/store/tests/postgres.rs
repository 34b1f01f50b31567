//! The queue and store suite on PostgreSQL: each test creates its own
//! database on the server `HERALD_TEST_POSTGRES_URL` names and drops it after.
//! Without the variable every test says loudly that it was skipped.

mod suite;

use std::time::Duration;

use herald_core::{ClaimFilter, StoreError};
use herald_store::{QueueConfig, Storage, StorageConfig};
use herald_testkit::postgres::TestDatabase;
use sqlx::{Connection, PgConnection};
use suite::liveness::{claim_when_free, fast_liveness};
use suite::{Harness, backend_suite, message, text};

async fn harness() -> Option<Harness> {
    let database = TestDatabase::from_env("herald_t").await?;
    Some(
        Harness::new(
            StorageConfig {
                url: database.url.clone().into(),
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

    let mut other_worker = PgConnection::connect(h.storage_config.url.expose()).await.unwrap();
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
    let url = h
        .storage_config
        .url
        .expose()
        .replacen("postgres://", "postgresql://", 1);
    let config = StorageConfig {
        url: url.into(),
        ..StorageConfig::default()
    };
    let storage = herald_store::Storage::connect(&config, &suite::queue_config(), h.clock.clone())
        .await
        .unwrap();
    assert_eq!(storage.backend(), "postgres");
    storage.ping().await.unwrap();
    storage.close().await;
}

/// A holder cut off from the database while its process lives on: the
/// network between them stops carrying anything (a partition, here a proxy
/// that stops forwarding), and the server ends its liveness session (as a
/// failover or an admin would), which frees its lock. The holder cannot
/// even learn that its lock is gone; it must stop on its own, before the
/// other process takes its task over (without the lease expiring). Then it
/// can neither extend nor complete the task, and once the network is back
/// it serves again under a new liveness lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_holder_cut_off_from_the_database_stops_before_another_takes_over() {
    let Some(h) = harness().await else { return };
    let proxy = Proxy::start(h.storage_config.url.expose()).await;
    let victim = Storage::connect(
        &StorageConfig {
            url: proxy.url.clone().into(),
            ..StorageConfig::default()
        },
        &fast_liveness(),
        h.clock.clone(),
    )
    .await
    .unwrap();
    let survivor = h.another_process(&fast_liveness()).await;
    let queue = survivor.queue();
    let held = queue.enqueue(message("test:ann", "held")).await.unwrap().task_id();
    let mut lease = victim.queue().claim(&ClaimFilter::any()).await.unwrap().unwrap();
    assert_eq!(lease.task.id, held);

    proxy.freeze();
    let mut admin = PgConnection::connect(h.storage_config.url.expose()).await.unwrap();
    let cut: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity
         WHERE application_name = 'herald holder ' || (SELECT lease_holder FROM tasks WHERE id = $1)",
    )
    .bind(held.0)
    .fetch_all(&mut admin)
    .await
    .unwrap();
    assert_eq!(cut, [true], "the holder's liveness connection, named after it");

    let taken = claim_when_free(&survivor).await;
    assert_eq!(taken.task.id, held);
    assert_eq!(h.clock_now(), suite::start_time(), "the lease never expired");
    // The order that keeps two live workers off one task: the victim's turn
    // was told to stop before the survivor got the task.
    let stopped = tokio::time::timeout(Duration::ZERO, victim.queue().forfeited(&lease)).await;
    assert!(
        stopped.is_ok(),
        "the survivor took the task while the victim still vouched for it"
    );
    assert!(matches!(
        victim.queue().extend(&mut lease).await,
        Err(StoreError::LeaseLost(_))
    ));
    assert!(matches!(
        victim.queue().complete(&lease).await,
        Err(StoreError::LeaseLost(_))
    ));
    queue.complete(&taken).await.unwrap();

    // The network is back: the victim takes a new liveness lock and claims again.
    proxy.thaw();
    queue.enqueue(message("test:bob", "later")).await.unwrap();
    let again = claim_when_free(&victim).await;
    assert_eq!(text(&again), "later");
    victim.queue().complete(&again).await.unwrap();
}

/// A TCP proxy to the PostgreSQL server that can stop forwarding without
/// closing anything, as a network partition does.
struct Proxy {
    url: String,
    frozen: tokio::sync::watch::Sender<bool>,
}

impl Proxy {
    async fn start(url: &str) -> Self {
        let (before, rest) = url.split_once('@').expect("a URL with a user");
        let (server, database) = rest.split_once('/').expect("a URL with a database");
        let server = server.to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (frozen, watch) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(upstream) = tokio::net::TcpStream::connect(&server).await else {
                    continue;
                };
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = upstream.into_split();
                tokio::spawn(forward(client_read, server_write, watch.clone()));
                tokio::spawn(forward(server_read, client_write, watch.clone()));
            }
        });
        Self {
            url: format!("{before}@{address}/{database}"),
            frozen,
        }
    }

    fn freeze(&self) {
        self.frozen.send_replace(true);
    }

    fn thaw(&self) {
        self.frozen.send_replace(false);
    }
}

/// Copies one direction; what is read while frozen waits for the thaw.
async fn forward(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut frozen: tokio::sync::watch::Receiver<bool>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buffer = vec![0; 16 * 1024];
    loop {
        let Ok(read) = from.read(&mut buffer).await else { return };
        if read == 0 || frozen.wait_for(|frozen| !*frozen).await.is_err() {
            return;
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}

/// A cut-off holder notices at its next extension even before its own
/// confirmation loop does: the extension asks its liveness connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_extension_confirms_the_liveness_lock() {
    let Some(h) = harness().await else { return };
    // A long timeout: only the extension's own confirmation can notice.
    let victim = h
        .another_process(&QueueConfig {
            liveness_timeout: Duration::from_secs(3600),
            ..suite::queue_config()
        })
        .await;
    victim.queue().enqueue(message("test:ann", "held")).await.unwrap();
    let mut lease = victim.queue().claim(&ClaimFilter::any()).await.unwrap().unwrap();
    let mut admin = PgConnection::connect(h.storage_config.url.expose()).await.unwrap();
    sqlx::query(
        "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity
         WHERE application_name = 'herald holder ' || (SELECT lease_holder FROM tasks WHERE id = $1)",
    )
    .bind(lease.task.id.0)
    .execute(&mut admin)
    .await
    .unwrap();
    assert!(matches!(
        victim.queue().extend(&mut lease).await,
        Err(StoreError::LeaseLost(_))
    ));
    let stopped = tokio::time::timeout(Duration::ZERO, victim.queue().forfeited(&lease)).await;
    assert!(stopped.is_ok(), "the turn is told to stop");
    assert!(matches!(
        victim.queue().complete(&lease).await,
        Err(StoreError::LeaseLost(_))
    ));
}
