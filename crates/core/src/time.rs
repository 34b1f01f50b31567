//! Time as Herald sees it: a [`Clock`] that the store, the queue and the
//! scheduler ask, so tests move time forward instead of sleeping through it.

use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};

pub type Timestamp = DateTime<Utc>;

pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> Timestamp;
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Utc::now()
    }
}

/// A clock that only moves when told to. For tests.
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<Timestamp>,
}

impl ManualClock {
    pub fn new(start: Timestamp) -> Self {
        Self { now: Mutex::new(start) }
    }

    pub fn advance(&self, by: Duration) {
        let mut now = self.now.lock().expect("clock lock");
        *now += chrono::Duration::from_std(by).expect("duration in range");
    }

    pub fn set(&self, to: Timestamp) {
        *self.now.lock().expect("clock lock") = to;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self.now.lock().expect("clock lock")
    }
}

/// Milliseconds since the Unix epoch: how both databases store time.
pub fn to_millis(at: Timestamp) -> i64 {
    at.timestamp_millis()
}

pub fn from_millis(millis: i64) -> Timestamp {
    DateTime::from_timestamp_millis(millis).unwrap_or_default()
}
