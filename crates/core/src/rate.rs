//! Platform send limits as the sliding windows the platforms count in, and
//! the seam ([`SendLimiter`]) that the channels' delivery path asks before
//! every send.
//!
//! A platform limit such as Telegram's "20 messages per minute in a group"
//! is a window: at most `count` sends within any span of `per`. A burst up
//! to `count` is allowed at once, and the next send may go exactly when the
//! oldest of the last `count` sends leaves the window. [`SendLog`] keeps
//! that log for one key, purely, over unix milliseconds from the injected
//! [`Clock`].
//!
//! Why not a token bucket (GCRA, as the `governor` crate implements): a
//! bucket with a burst of `count` refills one cell every `per / count`, so
//! after a burst of 20 at `t` it admits a 21st at `t + 3 s`: 21 sends within
//! one minute, which is exactly the violation a platform answers with 429.
//! A bucket without a burst never violates, but spaces a group's replies
//! 3 s apart. Only the log expresses "N per window, N at once".
//!
//! A send counts from when it *finished* ([`SendLimiter::sent`]), not when
//! it was taken: the platform stamps its arrival somewhere between the two,
//! so measuring the window from the finish is the only stamp that never
//! lets the next send arrive within `per` of this one. While it is in
//! flight it counts with its start time, so concurrent senders cannot take
//! its place.
//!
//! [`LocalLimiter`] keeps the logs in this process (the default, and all a
//! single process needs); herald-store keeps them in PostgreSQL when
//! several processes deliver for one bot.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;

use crate::store::StoreError;
use crate::time::{Clock, Timestamp, to_millis};

/// At most `count` sends within any span of `per`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Window {
    pub count: u32,
    pub per: Duration,
}

impl Window {
    fn span_ms(self) -> i64 {
        i64::try_from(self.per.as_millis()).unwrap_or(i64::MAX)
    }
}

/// One window a send must fit in, under the key of what the platform counts
/// (`telegram:chat:42`, `telegram:bot`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SendLimit {
    pub key: String,
    pub window: Window,
}

/// The answer to asking for a send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendSlot {
    /// The send may go now; it was counted at this time (unix ms). Report
    /// when it finished with [`SendLimiter::sent`].
    Taken { at_ms: i64 },
    /// No room in at least one window: ask again after this long.
    Wait(Duration),
}

/// Where the send logs live: this process, or a database several processes share.
#[async_trait]
pub trait SendLimiter: Send + Sync {
    /// Takes a send in every window of `limits` at once, or in none of them.
    async fn take(&self, limits: &[SendLimit]) -> Result<SendSlot, StoreError>;

    /// The send taken at `taken_ms` finished (delivered, refused or lost):
    /// from now on it counts from this moment.
    async fn sent(&self, limits: &[SendLimit], taken_ms: i64) -> Result<(), StoreError>;
}

/// The recent sends of one key, oldest first, in unix milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SendLog {
    sends: VecDeque<i64>,
}

impl SendLog {
    /// The earliest moment at or after `now_ms` with room for one more send:
    /// `now_ms` when there is room already, else the moment the oldest of the
    /// last `count` sends leaves the window.
    pub fn next_free(&self, window: Window, now_ms: i64) -> i64 {
        let count = window.count.max(1) as usize;
        if self.sends.len() < count {
            return now_ms;
        }
        let oldest_counted = self.sends[self.sends.len() - count];
        oldest_counted.saturating_add(window.span_ms()).max(now_ms)
    }

    /// Records a send at `at_ms`, keeping the log in order.
    pub fn record(&mut self, at_ms: i64) {
        let position = self.sends.partition_point(|&sent| sent <= at_ms);
        self.sends.insert(position, at_ms);
    }

    /// Moves one send recorded at `taken_ms` to `finished_ms` (a send whose
    /// record is gone is recorded anew: counting it again is the safe side).
    pub fn restamp(&mut self, taken_ms: i64, finished_ms: i64) {
        if let Some(position) = self.sends.iter().position(|&sent| sent == taken_ms) {
            self.sends.remove(position);
        }
        self.record(finished_ms.max(taken_ms));
    }

    /// Forgets what no longer matters at `now_ms`: sends that left the
    /// window, and all but the last `count`.
    pub fn forget(&mut self, window: Window, now_ms: i64) {
        let span = window.span_ms();
        while self
            .sends
            .front()
            .is_some_and(|&sent| sent.saturating_add(span) <= now_ms)
        {
            self.sends.pop_front();
        }
        while self.sends.len() > window.count.max(1) as usize {
            self.sends.pop_front();
        }
    }

    pub fn is_empty(&self) -> bool {
        self.sends.is_empty()
    }

    pub fn len(&self) -> usize {
        self.sends.len()
    }
}

/// Takes a send in every log at once, or returns how long to wait. Pure:
/// the in-process limiter and the database's shared one decide alike.
pub fn take_all<'a>(logs: impl IntoIterator<Item = (&'a mut SendLog, Window)>, now_ms: i64) -> SendSlot {
    let mut logs: Vec<(&mut SendLog, Window)> = logs.into_iter().collect();
    let mut free_at = now_ms;
    for (log, window) in &mut logs {
        log.forget(*window, now_ms);
        free_at = free_at.max(log.next_free(*window, now_ms));
    }
    if free_at > now_ms {
        return SendSlot::Wait(Duration::from_millis(
            u64::try_from(free_at - now_ms).unwrap_or(u64::MAX),
        ));
    }
    for (log, _) in logs {
        log.record(now_ms);
    }
    SendSlot::Taken { at_ms: now_ms }
}

/// The moment a send finished, in unix milliseconds rounded up, so that a
/// finish is never stamped before it happened.
pub fn finished_now(clock: &dyn Clock) -> i64 {
    let now = clock.now();
    let millis = to_millis(now);
    if now.timestamp_subsec_nanos().is_multiple_of(1_000_000) {
        millis
    } else {
        millis + 1
    }
}

/// Wall time read once, then moved by the monotonic clock: the local
/// limiter measures its windows with it, so a window lasts what the
/// platform measures, whatever adjusts the wall clock meanwhile.
#[derive(Debug)]
pub struct SteadyClock {
    start: Timestamp,
    origin: std::time::Instant,
}

impl SteadyClock {
    pub fn new() -> Self {
        Self {
            start: chrono::Utc::now(),
            origin: std::time::Instant::now(),
        }
    }
}

impl Default for SteadyClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SteadyClock {
    fn now(&self) -> Timestamp {
        self.start + chrono::Duration::from_std(self.origin.elapsed()).unwrap_or(chrono::Duration::MAX)
    }
}

/// The send logs of this process. Enough whenever one process delivers for
/// the bot; several processes on one database share theirs through the store.
#[derive(Debug)]
pub struct LocalLimiter {
    clock: Arc<dyn Clock>,
    logs: Mutex<Logs>,
}

#[derive(Debug, Default)]
struct Logs {
    /// Each key's log and the window it was last used with.
    by_key: HashMap<String, (SendLog, Window)>,
    /// Takes since keys whose sends all left their windows were last dropped.
    since_sweep: u32,
}

/// How many takes pass between sweeps of keys whose logs are empty, so a
/// chat that went quiet costs nothing after its window passed.
const SWEEP_EVERY: u32 = 4096;

impl LocalLimiter {
    /// Send logs measured with `clock` (a [`SteadyClock`] outside tests).
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            logs: Mutex::new(Logs::default()),
        }
    }

    /// Takes without waiting on anything: the in-process decision.
    pub fn take_now(&self, limits: &[SendLimit]) -> SendSlot {
        let now_ms = to_millis(self.clock.now());
        let mut logs = self.logs.lock().unwrap_or_else(PoisonError::into_inner);
        logs.since_sweep += 1;
        if logs.since_sweep >= SWEEP_EVERY {
            logs.since_sweep = 0;
            logs.by_key.retain(|_, (log, window)| {
                log.forget(*window, now_ms);
                !log.is_empty()
            });
        }
        // Each key once (a key named twice is one log), taken out of the map
        // while it is decided on and put back after.
        let mut taken_out: Vec<(String, SendLog, Window)> = Vec::with_capacity(limits.len());
        for limit in limits {
            if taken_out.iter().all(|(key, _, _)| *key != limit.key) {
                let log = logs.by_key.remove(&limit.key).map(|(log, _)| log).unwrap_or_default();
                taken_out.push((limit.key.clone(), log, limit.window));
            }
        }
        let slot = take_all(taken_out.iter_mut().map(|(_, log, window)| (log, *window)), now_ms);
        for (key, log, window) in taken_out {
            logs.by_key.insert(key, (log, window));
        }
        slot
    }

    /// Records that the send taken at `taken_ms` finished now.
    pub fn sent_now(&self, limits: &[SendLimit], taken_ms: i64) {
        let finished = finished_now(self.clock.as_ref());
        let mut logs = self.logs.lock().unwrap_or_else(PoisonError::into_inner);
        let mut seen = HashSet::new();
        for limit in limits {
            if seen.insert(limit.key.as_str()) {
                logs.by_key
                    .entry(limit.key.clone())
                    .or_insert_with(|| (SendLog::default(), limit.window))
                    .0
                    .restamp(taken_ms, finished);
            }
        }
    }

    /// How many keys have a log: for tests of the sweep.
    #[cfg(test)]
    fn keys(&self) -> usize {
        self.logs.lock().unwrap_or_else(PoisonError::into_inner).by_key.len()
    }
}

#[async_trait]
impl SendLimiter for LocalLimiter {
    async fn take(&self, limits: &[SendLimit]) -> Result<SendSlot, StoreError> {
        Ok(self.take_now(limits))
    }

    async fn sent(&self, limits: &[SendLimit], taken_ms: i64) -> Result<(), StoreError> {
        self.sent_now(limits, taken_ms);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
