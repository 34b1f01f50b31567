//! Liveness: a process that is gone leaves its tasks to the others in
//! seconds, long before their leases expire; a live one keeps them.
//!
//! No case moves the clock: the leases (60 s) never expire here, so a task
//! that changes hands does so only because its holder was found gone.

use std::time::Duration;

use herald_core::{ClaimFilter, Lease, StoreError};
use herald_store::{QueueConfig, Storage};

use super::{Harness, message, queue_config, text};

/// Short liveness timeouts, so a takeover comes within a second or two.
pub fn fast_liveness() -> QueueConfig {
    QueueConfig {
        liveness_timeout: Duration::from_millis(500),
        ..queue_config()
    }
}

/// Claims from `storage` until a task comes: idle waits end when the store
/// takes over a dead holder's tasks (it looks every 250 ms here). Fails
/// after a minute, when nothing ever came.
pub async fn claim_when_free(storage: &Storage) -> Lease {
    let queue = storage.queue();
    tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            if let Some(lease) = queue.claim(&ClaimFilter::any()).await.unwrap() {
                return lease;
            }
            queue.wait_for_work(Duration::from_millis(500)).await;
        }
    })
    .await
    .expect("the task was never taken over")
}

pub async fn a_live_holders_task_is_never_taken_over(h: Harness) {
    let holder = h.another_process(&fast_liveness()).await;
    let other = h.another_process(&fast_liveness()).await;
    holder.queue().enqueue(message("test:ann", "mine")).await.unwrap();
    let mut lease = holder.queue().claim(&ClaimFilter::any()).await.unwrap().unwrap();

    assert_eq!(other.take_over_dead_holders().await.unwrap(), 0);
    assert!(other.queue().claim(&ClaimFilter::any()).await.unwrap().is_none());
    holder.queue().extend(&mut lease).await.unwrap();
    holder.queue().complete(&lease).await.unwrap();
    assert_eq!(h.clock_now(), super::start_time(), "the clock never moved");
    holder.close().await;
    other.close().await;
}

pub async fn a_dead_holders_task_is_taken_over_before_its_lease_expires(h: Harness) {
    let victim = h.another_process(&fast_liveness()).await;
    let survivor = h.another_process(&fast_liveness()).await;
    let queue = survivor.queue();
    let held = queue.enqueue(message("test:ann", "held")).await.unwrap().task_id();
    queue.enqueue(message("test:ann", "behind it")).await.unwrap();
    let lease = victim.queue().claim(&ClaimFilter::any()).await.unwrap().unwrap();
    assert_eq!(lease.task.id, held);
    assert!(queue.claim(&ClaimFilter::any()).await.unwrap().is_none());

    // What SIGKILL leaves: connections and file handles simply go; nothing
    // is released or closed politely.
    drop(victim);

    let taken = claim_when_free(&survivor).await;
    assert_eq!(taken.task.id, held, "the dead holder's task, first in its conversation");
    assert_eq!(taken.task.attempt, 2);
    assert_ne!(taken.token, lease.token);
    assert_eq!(h.clock_now(), super::start_time(), "the lease never expired");
    queue.complete(&taken).await.unwrap();
    let next = queue.claim(&ClaimFilter::any()).await.unwrap().unwrap();
    assert_eq!(text(&next), "behind it", "the conversation goes on in order");
    survivor.close().await;
}

/// A store closed in good order gives its liveness lock back; a lease it
/// still held changes nothing afterwards.
pub async fn a_closed_store_vouches_for_nothing(h: Harness) {
    let closing = h.another_process(&fast_liveness()).await;
    closing.queue().enqueue(message("test:ann", "left")).await.unwrap();
    let mut lease = closing.queue().claim(&ClaimFilter::any()).await.unwrap().unwrap();
    let queue = closing.queue();
    closing.close().await;
    assert!(matches!(queue.extend(&mut lease).await, Err(StoreError::LeaseLost(_))));
    let taken = claim_when_free(&h.storage).await;
    assert_eq!(taken.task.id, lease.task.id);
}
