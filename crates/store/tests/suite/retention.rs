//! Pruning finished tasks: what goes after `queue.retention`, and what a
//! user or a platform still relies on and stays.

use std::time::Duration;

use herald_core::{ClaimFilter, ConversationId, DeliveryReceipt, Enqueued, QueueStats, TaskId};
use herald_store::{Pruned, QueueConfig};

use super::conversations::{assistant, texts, user};
use super::{Harness, RETENTION, message, queue_config};

const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(24 * 3600);
const MINUTE: Duration = Duration::from_secs(60);

fn receipt(task: TaskId) -> DeliveryReceipt {
    DeliveryReceipt {
        task,
        slot: "reply".into(),
        conversation: ConversationId::new("test:ann"),
        platform_message_ids: vec!["m1".into()],
        delivered_at: super::start_time(),
    }
}

pub async fn old_finished_tasks_go_and_history_stays(h: Harness) {
    let queue = h.storage.queue();
    let store = h.storage.conversations();
    let ann = ConversationId::new("test:ann");
    let any = ClaimFilter::any();

    // Day 0: a question answered and delivered, and a task that died.
    let old = queue
        .enqueue(message("test:ann", "old question"))
        .await
        .unwrap()
        .task_id();
    let lease = queue.claim(&any).await.unwrap().unwrap();
    store
        .record_turn(&ann, old, &[user("old question"), assistant("old answer")])
        .await
        .unwrap();
    store.record_delivery(&receipt(old)).await.unwrap();
    queue.complete(&lease).await.unwrap();
    queue.enqueue(message("test:bob", "doomed")).await.unwrap();
    let lease = queue.claim(&any).await.unwrap().unwrap();
    queue.kill(&lease, "hopeless").await.unwrap();

    // Day 2: a newer finished task, one waiting and one in flight.
    h.advance(2 * DAY);
    let recent = queue.enqueue(message("test:ann", "recent")).await.unwrap().task_id();
    let lease = queue.claim(&any).await.unwrap().unwrap();
    queue.complete(&lease).await.unwrap();
    queue.enqueue(message("test:carl", "waiting")).await.unwrap();
    queue.enqueue(message("test:dave", "in flight")).await.unwrap();
    let in_flight = queue
        .claim(&ClaimFilter::conversation(ConversationId::new("test:dave")))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        queue.enqueue(message("test:ann", "old question")).await.unwrap(),
        Enqueued::Duplicate(old),
        "inside the retention a redelivered event is recognised"
    );

    // Day 7, a minute past the retention of the day-0 tasks.
    h.advance(RETENTION - 2 * DAY + Duration::from_secs(60));
    let pruned = h.storage.prune().await.unwrap();
    assert_eq!(pruned, Pruned { tasks: 2 });

    let history = store.history(&ann, 10).await.unwrap();
    assert_eq!(texts(&history), ["old question", "old answer"], "history stays");
    assert!(
        history.iter().all(|entry| entry.task.is_none()),
        "it only loses the task link"
    );
    assert!(store.task_entries(old).await.unwrap().is_empty());
    assert_eq!(
        store.delivery(old, "reply").await.unwrap(),
        None,
        "receipts go with their task"
    );

    assert_eq!(
        queue.enqueue(message("test:ann", "recent")).await.unwrap(),
        Enqueued::Duplicate(recent),
        "a task finished inside the retention stays, and its dedup key"
    );
    assert_eq!(
        queue.stats().await.unwrap(),
        QueueStats {
            queued: 1,
            leased: 1,
            dead: 0,
            oldest_queued_at: Some(super::start_time() + chrono::Duration::days(2)),
        },
        "unfinished tasks are never pruned, however old"
    );
    let waiting = queue
        .claim(&any)
        .await
        .unwrap()
        .expect("the waiting task is still there");
    queue.complete(&waiting).await.unwrap();
    queue.complete(&in_flight).await.unwrap();
    assert_eq!(
        h.storage.prune().await.unwrap(),
        Pruned::default(),
        "a second pass finds nothing"
    );

    // Past every redelivery window, the same event is a new message.
    assert!(matches!(
        queue.enqueue(message("test:ann", "old question")).await.unwrap(),
        Enqueued::New(id) if id != old
    ));
}

/// A short retention does not shorten the life of a dedup key below the
/// platforms' redelivery window: the task it names stays with it.
pub async fn a_dedup_key_outlives_a_short_retention(h: Harness) {
    let storage = h
        .another_process(&QueueConfig {
            retention: HOUR,
            ..queue_config()
        })
        .await;
    let queue = storage.queue();
    let first = queue.enqueue(message("test:ann", "hello")).await.unwrap().task_id();
    let lease = queue.claim(&ClaimFilter::any()).await.unwrap().unwrap();
    queue.complete(&lease).await.unwrap();

    // A minute short of the two days docs/security.md promises: kept.
    h.advance(2 * DAY - MINUTE);
    assert_eq!(storage.prune().await.unwrap(), Pruned::default());
    assert_eq!(
        queue.enqueue(message("test:ann", "hello")).await.unwrap(),
        Enqueued::Duplicate(first),
        "an update redelivered within two days is still recognised"
    );

    // A minute past them: the task and its key go.
    h.advance(2 * MINUTE);
    assert_eq!(storage.prune().await.unwrap(), Pruned { tasks: 1 });
    storage.close().await;
}
