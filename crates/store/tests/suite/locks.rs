//! Exclusive locks: one holder across processes, freed by release or by the
//! holder going away.

use std::time::Duration;

use super::{Harness, queue_config};

const NAME: &str = "ingress:telegram";

pub async fn a_lock_has_one_holder_until_it_is_released(h: Harness) {
    let other = h.another_process(&queue_config()).await;
    let mut held = h
        .storage
        .locks()
        .try_acquire(NAME)
        .await
        .unwrap()
        .expect("a free lock is granted");
    assert!(held.still_held().await);
    assert!(
        other.locks().try_acquire(NAME).await.unwrap().is_none(),
        "a second process does not get a held lock"
    );
    assert!(
        other.locks().try_acquire("ingress:discord").await.unwrap().is_some(),
        "another name is another lock"
    );
    held.release().await;
    assert!(other.locks().try_acquire(NAME).await.unwrap().is_some());
}

pub async fn a_holder_that_goes_away_frees_its_lock(h: Harness) {
    let holder = h.another_process(&queue_config()).await;
    let held = holder.locks().try_acquire(NAME).await.unwrap().expect("granted");
    assert!(h.storage.locks().try_acquire(NAME).await.unwrap().is_none());
    // What a killed process leaves: the lock's connection or file handle
    // simply goes, nothing is released politely.
    drop(held);
    holder.close().await;
    // The server notices the closed connection on its own schedule.
    let taken = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Some(held) = h.storage.locks().try_acquire(NAME).await.unwrap() {
                return held;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(taken.is_ok(), "the lock was not freed when its holder went away");
}
