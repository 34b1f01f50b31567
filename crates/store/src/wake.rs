//! Waking idle workers: a task may have become claimable when one is
//! enqueued, given back, retried, or when a conversation's head finishes and
//! the next task of that conversation moves up.

use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use herald_core::ClaimFilter;
use tokio::sync::Notify;

#[derive(Debug, Default)]
pub(crate) struct Wakeup {
    notify: Notify,
    /// Workers registered as waiting right now.
    waiting: AtomicUsize,
    /// Wake-ups so far.
    generation: AtomicU64,
    /// What the last claim found idle, good until the next wake-up.
    idle: Mutex<Option<Idle>>,
}

/// A claim found nothing (more) to claim for `filter` and read when the next
/// task becomes due by itself (unix ms, `None`: no such task).
#[derive(Debug)]
struct Idle {
    /// The wake-ups at the start of that claim.
    generation: u64,
    filter: ClaimFilter,
    due: Option<i64>,
    /// When it was remembered: a store whose other processes cannot wake it
    /// (SQLite) must look again after its poll interval.
    at: Instant,
}

impl Wakeup {
    /// Wakes every waiting worker. With none waiting, the next one to start
    /// waiting wakes at once instead: a worker that found nothing to claim
    /// an instant before the wake-up must not sleep through it. A spare
    /// wake-up costs an empty claim and a read of the next due time, so
    /// none is left when a waiter took this one (it claims next anyway).
    pub(crate) fn wake(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.notify.notify_waiters();
        if self.waiting.load(Ordering::SeqCst) == 0 {
            self.notify.notify_one();
        }
    }

    /// The wake-ups so far, taken before a claim that may report the next
    /// due time ([`Wakeup::remember_idle`]).
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Keeps what a claim that started at `generation` found: nothing more
    /// claimable for `filter`, and the next due time.
    pub(crate) fn remember_idle(&self, generation: u64, filter: &ClaimFilter, due: Option<i64>) {
        *self.idle.lock().unwrap_or_else(PoisonError::into_inner) = Some(Idle {
            generation,
            filter: filter.clone(),
            due,
            at: Instant::now(),
        });
    }

    /// The next due time remembered, unless a wake-up came since the claim
    /// that read it (something may be due sooner) or it is older than
    /// `max_age`.
    pub(crate) fn remembered_due(&self, max_age: Duration) -> Option<Option<i64>> {
        self.with_idle(max_age, |idle| idle.due)
    }

    /// Whether a claim for `filter` at `now` would find nothing, as far as
    /// the last claim tells: same filter, no wake-up since, nothing due yet.
    pub(crate) fn known_idle(&self, filter: &ClaimFilter, now: i64, max_age: Duration) -> bool {
        self.with_idle(max_age, |idle| {
            idle.filter == *filter && idle.due.is_none_or(|due| now < due)
        })
        .unwrap_or(false)
    }

    fn with_idle<T>(&self, max_age: Duration, read: impl FnOnce(&Idle) -> T) -> Option<T> {
        let idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        idle.as_ref()
            .filter(|idle| idle.generation == self.generation() && idle.at.elapsed() < max_age)
            .map(read)
    }

    /// Sleeps until woken or for `cap`, shortened to `next_due` (the time
    /// until a task becomes due by itself). The wake-up is registered before
    /// `next_due` is asked, so a wake during that query is not missed.
    pub(crate) async fn wait(&self, cap: Duration, next_due: impl Future<Output = Option<Duration>>) {
        let notified = self.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        // Counted only once registered: a wake that sees the count is sure
        // to reach this waiter. Uncounted when the wait ends however it ends.
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(&self.waiting);
        let wait = match next_due.await {
            Some(due) => cap.min(due),
            None => cap,
        };
        tokio::select! {
            () = &mut notified => {}
            () = tokio::time::sleep(wait) => {}
        }
    }
}

struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_wake_before_waiting_is_not_lost() {
        let wakeup = Wakeup::default();
        wakeup.wake();
        let start = tokio::time::Instant::now();
        wakeup.wait(Duration::from_secs(3600), async { None }).await;
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn every_waiter_wakes() {
        let wakeup = Arc::new(Wakeup::default());
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let wakeup = wakeup.clone();
                tokio::spawn(async move { wakeup.wait(Duration::from_secs(3600), async { None }).await })
            })
            .collect();
        tokio::task::yield_now().await;
        let start = tokio::time::Instant::now();
        wakeup.wake();
        for waiter in waiters {
            waiter.await.unwrap();
        }
        assert!(start.elapsed() < Duration::from_secs(3600));
    }

    #[tokio::test(start_paused = true)]
    async fn a_wake_that_reached_a_waiter_leaves_nothing_for_the_next_wait() {
        let wakeup = Arc::new(Wakeup::default());
        let waiter = {
            let wakeup = wakeup.clone();
            tokio::spawn(async move { wakeup.wait(Duration::from_secs(3600), async { None }).await })
        };
        tokio::task::yield_now().await;
        wakeup.wake();
        waiter.await.unwrap();
        let start = tokio::time::Instant::now();
        wakeup.wait(Duration::from_secs(60), async { None }).await;
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(60),
            "the second wait sleeps: the wake-up was taken"
        );
    }

    #[test]
    fn what_a_claim_found_idle_holds_until_a_wake_up_its_due_time_or_its_age() {
        const AGE: Duration = Duration::from_secs(3600);
        let wakeup = Wakeup::default();
        let any = ClaimFilter::any();
        let telegram = ClaimFilter {
            channels: Some(vec![herald_core::ChannelName::new("telegram")]),
            ..ClaimFilter::default()
        };
        assert_eq!(wakeup.remembered_due(AGE), None, "nothing read yet");
        assert!(!wakeup.known_idle(&any, 0, AGE));

        let before = wakeup.generation();
        wakeup.remember_idle(before, &any, Some(5_000));
        assert_eq!(wakeup.remembered_due(AGE), Some(Some(5_000)));
        assert!(wakeup.known_idle(&any, 4_999, AGE));
        assert!(!wakeup.known_idle(&any, 5_000, AGE), "a task is due by now");
        assert!(!wakeup.known_idle(&telegram, 0, AGE), "found for another filter");
        assert!(!wakeup.known_idle(&any, 0, Duration::ZERO), "older than a poll");

        wakeup.remember_idle(before, &any, None);
        assert!(wakeup.known_idle(&any, i64::MAX, AGE), "nothing is due later");
        wakeup.wake();
        assert_eq!(wakeup.remembered_due(AGE), None, "a wake-up may bring work");
        assert!(!wakeup.known_idle(&any, 0, AGE));
        // A claim that started before a wake-up may have missed its work.
        wakeup.remember_idle(before, &any, None);
        assert!(!wakeup.known_idle(&any, 0, AGE));
    }

    #[tokio::test(start_paused = true)]
    async fn sleeps_until_the_next_due_task_or_the_cap() {
        let wakeup = Wakeup::default();
        for (cap, due, slept) in [(60, Some(5), 5), (60, None, 60), (2, Some(30), 2)] {
            let start = tokio::time::Instant::now();
            wakeup
                .wait(Duration::from_secs(cap), async move { due.map(Duration::from_secs) })
                .await;
            assert_eq!(start.elapsed(), Duration::from_secs(slept), "cap {cap} due {due:?}");
        }
    }
}
