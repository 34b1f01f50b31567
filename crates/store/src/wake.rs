//! Waking idle workers: a task may have become claimable when one is
//! enqueued, given back, retried, or when a conversation's head finishes and
//! the next task of that conversation moves up.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

#[derive(Debug, Default)]
pub(crate) struct Wakeup {
    notify: Notify,
    /// Workers registered as waiting right now.
    waiting: AtomicUsize,
}

impl Wakeup {
    /// Wakes every waiting worker. With none waiting, the next one to start
    /// waiting wakes at once instead: a worker that found nothing to claim
    /// an instant before the wake-up must not sleep through it. A spare
    /// wake-up costs an empty claim and a read of the next due time, so
    /// none is left when a waiter took this one (it claims next anyway).
    pub(crate) fn wake(&self) {
        self.notify.notify_waiters();
        if self.waiting.load(Ordering::SeqCst) == 0 {
            self.notify.notify_one();
        }
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
