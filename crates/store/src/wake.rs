//! Waking idle workers: a task may have become claimable when one is
//! enqueued, given back, retried, or when a conversation's head finishes and
//! the next task of that conversation moves up.

use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

#[derive(Debug, Default)]
pub(crate) struct Wakeup {
    notify: Notify,
    /// Workers registered as waiting right now.
    waiting: AtomicUsize,
    /// Wake-ups so far.
    generation: AtomicU64,
    /// When the next task becomes due by itself (unix ms, `None`: no such
    /// task), as an empty claim found it, and the wake-ups at that claim's
    /// start: good until the next wake-up.
    due: Mutex<Option<(u64, Option<i64>)>>,
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
    /// due time ([`Wakeup::remember_due`]).
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Keeps the next due time an empty claim read, as of `generation`
    /// (taken before that claim): the wait after it needs no read of its own.
    pub(crate) fn remember_due(&self, generation: u64, due: Option<i64>) {
        *self.due.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some((generation, due));
    }

    /// The next due time remembered, unless a wake-up came since the claim
    /// that read it (something may have become due sooner).
    pub(crate) fn remembered_due(&self) -> Option<Option<i64>> {
        let remembered = *self.due.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        remembered
            .filter(|(generation, _)| *generation == self.generation())
            .map(|(_, due)| due)
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
    fn a_remembered_due_time_holds_until_the_next_wake_up() {
        let wakeup = Wakeup::default();
        assert_eq!(wakeup.remembered_due(), None, "nothing read yet");
        let before = wakeup.generation();
        wakeup.remember_due(before, Some(5_000));
        assert_eq!(wakeup.remembered_due(), Some(Some(5_000)));
        wakeup.remember_due(before, None);
        assert_eq!(wakeup.remembered_due(), Some(None), "no task is due later");
        wakeup.wake();
        assert_eq!(wakeup.remembered_due(), None, "a wake-up may bring something sooner");
        // A claim that started before a wake-up read a time that may be stale.
        let stale = before;
        wakeup.remember_due(stale, Some(9_000));
        assert_eq!(wakeup.remembered_due(), None);
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
