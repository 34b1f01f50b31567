//! The `storage:` and `queue:` sections of herald.yaml. The store owns them so
//! the binary only composes them.

use std::fmt;
use std::time::Duration;

use herald_core::{Backoff, StoreError};
use serde::Deserialize;

use herald_core::redact::SecretUrl;

/// Where Herald keeps its data.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StorageConfig {
    /// `sqlite://PATH`, `sqlite:PATH`, `sqlite::memory:`, `postgres://…` or
    /// `postgresql://…`.
    pub url: SecretUrl,
    /// Connections for reads (SQLite) or for everything (PostgreSQL); unset,
    /// [`StorageConfig::sqlite_readers`] and
    /// [`StorageConfig::postgres_connections`] decide.
    pub max_connections: Option<u32>,
    /// How long SQLite waits for another connection's write lock.
    #[serde(with = "herald_core::duration::serde")]
    pub busy_timeout: Duration,
}

impl Default for StorageConfig {
    fn default() -> Self {
        Self {
            url: "sqlite://herald.db".into(),
            max_connections: None,
            busy_timeout: Duration::from_secs(5),
        }
    }
}

impl StorageConfig {
    /// SQLite's reading connections: as configured, else one per core (at
    /// least two, at most eight). Each is a thread of its own with its own
    /// page cache; a message makes one read, and on two cores eight readers
    /// measured 821 msg/s and 30 MiB after the load where two measured 909
    /// and 24 MiB (`docs/benchmarks.md`).
    pub fn sqlite_readers(&self) -> u32 {
        self.max_connections.unwrap_or_else(|| {
            let cores = std::thread::available_parallelism().map_or(2, |cores| cores.get());
            u32::try_from(cores.clamp(2, 8)).unwrap_or(8)
        })
    }

    /// PostgreSQL's connections, for reads and writes alike: as configured,
    /// else eight.
    pub fn postgres_connections(&self) -> u32 {
        self.max_connections.unwrap_or(8)
    }
}

/// The URL may carry a password: Debug shows it redacted.
impl fmt::Debug for StorageConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StorageConfig")
            .field("url", &self.url)
            .field("max_connections", &self.max_connections)
            .field("busy_timeout", &self.busy_timeout)
            .finish()
    }
}

/// How the task queue leases and retries.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QueueConfig {
    /// How long a claim holds a task before another worker may take it over.
    #[serde(with = "herald_core::duration::serde")]
    pub lease: Duration,
    /// The wait after the first failed attempt; it doubles after each one.
    #[serde(with = "herald_core::duration::serde")]
    pub retry_base: Duration,
    /// The longest wait between attempts.
    #[serde(with = "herald_core::duration::serde")]
    pub retry_max: Duration,
    /// Attempts in all before a task is dead.
    pub max_attempts: u32,
    /// SQLite only: how often an idle worker looks for tasks that another
    /// process put into the same file (PostgreSQL is told by LISTEN/NOTIFY).
    #[serde(with = "herald_core::duration::serde")]
    pub poll_interval: Duration,
    /// How long finished (done or dead) tasks are kept before they are
    /// pruned, with their delivery receipts; their history stays. `0` keeps
    /// them forever. A platform message's dedup key is kept at least this
    /// long and never less than the platforms' redelivery window.
    #[serde(with = "herald_core::duration::serde")]
    pub retention: Duration,
    /// PostgreSQL: how long a process may go without confirming its hold on
    /// the database (its liveness lock's connection) before it abandons its
    /// turns; other processes take over the tasks of a process whose lock
    /// they find free after 1.5 times this, well before `lease` expires.
    /// On SQLite a dead process's tasks are taken over at once.
    #[serde(with = "herald_core::duration::serde")]
    pub liveness_timeout: Duration,
}

impl Default for QueueConfig {
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(60),
            retry_base: Duration::from_secs(2),
            retry_max: Duration::from_secs(300),
            max_attempts: 5,
            poll_interval: Duration::from_secs(2),
            retention: Duration::from_secs(7 * 24 * 3600),
            liveness_timeout: Duration::from_secs(2),
        }
    }
}

impl QueueConfig {
    /// A zero lease (or liveness timeout) would hand a task to a second
    /// worker at once, and a task needs at least one attempt.
    pub(crate) fn validate(&self) -> Result<(), StoreError> {
        if self.lease.is_zero() {
            return Err(StoreError::Unavailable("queue.lease must be longer than 0".into()));
        }
        if self.liveness_timeout.is_zero() {
            return Err(StoreError::Unavailable(
                "queue.liveness_timeout must be longer than 0".into(),
            ));
        }
        if self.max_attempts == 0 {
            return Err(StoreError::Unavailable("queue.max_attempts must be at least 1".into()));
        }
        Ok(())
    }

    /// The backoff for a task allowed `max_attempts` attempts.
    pub(crate) fn backoff(&self, max_attempts: u32) -> Backoff {
        Backoff {
            base: self.retry_base,
            max_delay: self.retry_max,
            max_attempts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_what_is_left_out() {
        let queue: QueueConfig = serde_json::from_str(r#"{"lease": "90s", "max_attempts": 3}"#).unwrap();
        assert_eq!(queue.lease, Duration::from_secs(90));
        assert_eq!(queue.max_attempts, 3);
        assert_eq!(queue.retry_max, Duration::from_secs(300));
        assert_eq!(queue.retention, Duration::from_secs(7 * 86_400));
        let forever: QueueConfig = serde_json::from_str(r#"{"retention": "0"}"#).unwrap();
        assert_eq!(forever.retention, Duration::ZERO);
        let storage: StorageConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(storage.url.expose(), "sqlite://herald.db");
        assert_eq!(storage.busy_timeout, Duration::from_secs(5));
        assert_eq!(storage.postgres_connections(), 8);
        assert!((2..=8).contains(&storage.sqlite_readers()));
        let four: StorageConfig = serde_json::from_str(r#"{"max_connections": 4}"#).unwrap();
        assert_eq!((four.sqlite_readers(), four.postgres_connections()), (4, 4));
    }

    #[test]
    fn a_zero_lease_or_no_attempts_is_refused() {
        assert!(QueueConfig::default().validate().is_ok());
        for (config, key) in [
            (
                QueueConfig {
                    lease: Duration::ZERO,
                    ..Default::default()
                },
                "queue.lease",
            ),
            (
                QueueConfig {
                    liveness_timeout: Duration::ZERO,
                    ..Default::default()
                },
                "queue.liveness_timeout",
            ),
            (
                QueueConfig {
                    max_attempts: 0,
                    ..Default::default()
                },
                "queue.max_attempts",
            ),
        ] {
            let err = config.validate().unwrap_err().to_string();
            assert!(err.contains(key), "{err}");
        }
    }

    #[test]
    fn unknown_keys_are_refused() {
        let err = serde_json::from_str::<QueueConfig>(r#"{"leese": "90s"}"#).unwrap_err();
        assert!(err.to_string().contains("leese"), "{err}");
    }

    #[test]
    fn debug_hides_the_password() {
        let config = StorageConfig {
            url: "postgres://herald:s3cret@db/herald".into(),
            ..Default::default()
        };
        let shown = format!("{config:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
    }
}
