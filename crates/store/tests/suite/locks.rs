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

pub async fn a_standby_waiting_on_a_lock_takes_it_when_the_holder_goes(h: Harness) {
    let holder = h.another_process(&queue_config()).await;
    let held = holder.locks().try_acquire(NAME).await.unwrap().expect("granted");
    assert!(
        h.storage
            .locks()
            .acquire_within(NAME, Duration::from_millis(300))
            .await
            .unwrap()
            .is_none(),
        "a held lock is not granted within a short wait"
    );
    let storage = h.storage.clone();
    let standby = tokio::spawn(async move { storage.locks().acquire_within(NAME, Duration::from_secs(20)).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!standby.is_finished(), "the standby waits while the lock is held");
    // The holder goes the way a killed process does.
    drop(held);
    holder.close().await;
    let taken = tokio::time::timeout(Duration::from_secs(10), standby)
        .await
        .expect("the standby took the lock well before its patience ran out")
        .unwrap()
        .unwrap();
    assert!(taken.is_some(), "the waiting standby holds the freed lock");
}
