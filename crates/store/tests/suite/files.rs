//! The file store: files that came with messages, kept once per content,
//! found after a restart and by another process, pruned by last use.

use std::time::Duration;

use herald_core::{Attachment, FileRef, TaskPayload};

use super::{Harness, message, queue_config};

const DAY: Duration = Duration::from_secs(24 * 3600);

pub async fn a_file_is_stored_once_and_found_after_a_restart_by_its_queued_task(mut h: Harness) {
    let files = h.storage.files();
    let bytes: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let first = files
        .put("image/png", &bytes, herald_core::Clock::now(h.clock.as_ref()))
        .await
        .unwrap();
    let again = files
        .put("image/png", &bytes, herald_core::Clock::now(h.clock.as_ref()))
        .await
        .unwrap();
    assert_eq!(first, again, "the same bytes are one file");
    assert_eq!(first.size, 200_000);
    assert_eq!(first.sha256, herald_store::sha256_hex(&bytes));

    // The queue keeps the reference, never the bytes; after a crash (a
    // restart) the task still names a file the store has.
    let mut task = message("test:ann", "");
    if let TaskPayload::Message(inbound) = &mut task.payload {
        inbound.attachments.push(Attachment {
            name: "photo.png".into(),
            content_type: "image/png".into(),
            size: 200_000,
            file: Some(first.clone()),
            ..Attachment::default()
        });
    }
    h.storage.queue().enqueue(task).await.unwrap();
    h.restart().await;
    let lease = h
        .storage
        .queue()
        .claim(&herald_core::ClaimFilter::any())
        .await
        .unwrap()
        .unwrap();
    let TaskPayload::Message(inbound) = &lease.task.payload else {
        panic!("a message task")
    };
    let stored: &FileRef = inbound.attachments[0].file.as_ref().unwrap();
    let found = h.storage.files().get(&stored.sha256).await.unwrap();
    assert_eq!(found.as_deref(), Some(&bytes[..]));
    let other = h.another_process(&queue_config()).await;
    assert_eq!(
        other.files().get(&stored.sha256).await.unwrap().as_deref(),
        Some(&bytes[..])
    );
    assert_eq!(h.storage.files().get("0000").await.unwrap(), None);
}

pub async fn files_not_stored_again_within_the_retention_are_pruned(h: Harness) {
    let files = h.storage.files();
    let old = files
        .put("text/plain", b"old", herald_core::Clock::now(h.clock.as_ref()))
        .await
        .unwrap();
    let kept = files
        .put("text/plain", b"kept", herald_core::Clock::now(h.clock.as_ref()))
        .await
        .unwrap();
    h.advance(3 * DAY);
    // Sent again: its retention starts over.
    files
        .put("text/plain", b"kept", herald_core::Clock::now(h.clock.as_ref()))
        .await
        .unwrap();
    h.advance(3 * DAY);
    let pruned = files
        .prune_unused(herald_core::Clock::now(h.clock.as_ref()) - chrono::Duration::days(5))
        .await
        .unwrap();
    assert_eq!(pruned, 1);
    assert_eq!(files.get(&old.sha256).await.unwrap(), None);
    assert_eq!(files.get(&kept.sha256).await.unwrap().as_deref(), Some(&b"kept"[..]));
}
