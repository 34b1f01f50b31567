//! The queue and store suite on SQLite, a fresh file per test.

mod suite;

use std::sync::Arc;

use herald_core::{ClaimFilter, ManualClock, StoreError};
use herald_store::{QueueConfig, Storage, StorageConfig};
use suite::{Harness, backend_suite, message};

async fn harness() -> Option<Harness> {
    let dir = tempfile::tempdir().expect("temporary directory");
    let url = format!("sqlite://{}", dir.path().join("herald.db").display());
    Some(
        Harness::new(
            StorageConfig {
                url: url.into(),
                ..StorageConfig::default()
            },
            Box::new(dir),
        )
        .await,
    )
}

backend_suite!(harness);

async fn open(url: &str) -> Result<Storage, StoreError> {
    let clock = Arc::new(ManualClock::new(suite::start_time()));
    Storage::connect(
        &StorageConfig {
            url: url.into(),
            ..StorageConfig::default()
        },
        &QueueConfig::default(),
        clock,
    )
    .await
}

#[tokio::test]
async fn every_sqlite_url_form_opens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("short.db");
    for url in [
        "sqlite::memory:".to_owned(),
        format!("sqlite:{}", path.display()),
        format!("sqlite://{}", dir.path().join("long.db").display()),
    ] {
        let storage = open(&url).await.unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_eq!(storage.backend(), "sqlite");
        storage.migrate().await.unwrap();
        storage.migrate().await.expect("migrating twice is a no-op");
        storage.queue().enqueue(message("test:ann", "hi")).await.unwrap();
        assert_eq!(storage.queue().pending(&ClaimFilter::any()).await.unwrap(), 1, "{url}");
        storage.ping().await.unwrap();
        storage.close().await;
    }
    assert!(path.exists(), "the file is created when missing");
}

#[tokio::test]
async fn an_unknown_scheme_is_refused_without_showing_the_password() {
    let err = open("mysql://root:hunter2@db/herald").await.unwrap_err().to_string();
    assert!(err.contains("mysql://root:***@db/herald"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
}

#[tokio::test]
async fn a_closed_storage_is_unavailable() {
    let storage = open("sqlite::memory:").await.unwrap();
    storage.migrate().await.unwrap();
    storage.close().await;
    let err = storage.queue().claim(&ClaimFilter::any()).await.unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
}

fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

/// The database, its write-ahead log and its shared-memory index, named as
/// SQLite names them.
fn database_files(database: &std::path::Path) -> [std::path::PathBuf; 3] {
    ["", "-wal", "-shm"].map(|suffix| {
        let mut name = database.as_os_str().to_owned();
        name.push(suffix);
        name.into()
    })
}

/// History and queued messages are nobody else's business: a fresh
/// database, its `-wal` and `-shm` files and the lock files beside it (a
/// process's liveness lock, a named lock such as the scheduler's) are
/// readable by their owner only, whatever the umask lets others read.
#[tokio::test]
async fn a_new_database_is_private_to_its_owner() {
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o022));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("herald.db");
    let storage = open(&format!("sqlite://{}", path.display())).await.unwrap();
    storage.migrate().await.unwrap();
    storage.queue().enqueue(message("test:ann", "private")).await.unwrap();
    let _lock = storage.locks().try_acquire("scheduler").await.unwrap().unwrap();
    for file in database_files(&path) {
        assert_eq!(mode(&file), 0o600, "{}", file.display());
    }
    let locks: Vec<std::path::PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|file| file.extension().is_some_and(|e| e == "lock"))
        .collect();
    assert!(locks.len() >= 2, "a liveness lock and the named one: {locks:?}");
    for file in locks {
        assert_eq!(mode(&file), 0o600, "{}", file.display());
    }
    storage.close().await;
}

/// A database an older Herald left readable by others is made private when
/// opened.
#[tokio::test]
async fn an_existing_readable_database_is_made_private() {
    use sqlx::{ConnectOptions, Executor};
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o022));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("herald.db");
    // Opened by plain SQLite in WAL mode and left open: all three files exist.
    let mut other = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true)
        .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
        .connect()
        .await
        .unwrap();
    other.execute("CREATE TABLE scratch (x)").await.unwrap();
    for file in database_files(&path) {
        assert_eq!(mode(&file), 0o644, "{} before", file.display());
    }

    let storage = open(&format!("sqlite://{}", path.display())).await.unwrap();
    for file in database_files(&path) {
        assert_eq!(mode(&file), 0o600, "{}", file.display());
    }
    storage.close().await;
    drop(other);
}
