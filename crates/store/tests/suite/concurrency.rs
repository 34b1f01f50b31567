//! The queue under real concurrency: many claimers in several "processes"
//! (each its own `Storage` with its own connections), and idle workers
//! woken when work arrives.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use herald_core::{ClaimFilter, ConversationId, DeliveryReceipt, Enqueued, TaskId};
use herald_store::{QueueConfig, Storage};
use tokio::time::timeout;

use super::{Harness, message, queue_config, text};

const PROCESSES: usize = 3;
const WORKERS_PER_PROCESS: usize = 3;
const CONVERSATIONS: usize = 6;
const MESSAGES_EACH: usize = 6;
/// Messages to one conversation that every process enqueues at once.
const SHARED_EACH: usize = 4;

#[derive(Default)]
struct Observed {
    in_flight: Mutex<HashSet<ConversationId>>,
    /// Per conversation: the task ids and texts in the order they were served.
    served: Mutex<HashMap<ConversationId, Vec<(TaskId, String)>>>,
    violations: Mutex<Vec<String>>,
    done: AtomicUsize,
    most_at_once: AtomicUsize,
}

pub async fn concurrent_claimers_never_share_a_conversation(h: Harness) {
    claimers_never_share_a_conversation(h, 1).await;
}

/// The same with batches: each round of an enqueuer is one `enqueue_all`,
/// and each claim takes up to three tasks.
pub async fn concurrent_batch_claimers_never_share_a_conversation(h: Harness) {
    claimers_never_share_a_conversation(h, 3).await;
}

/// Enqueuers and claimers in several processes; with `batch` above one,
/// enqueuers store each round in one batch and claims take up to `batch`.
async fn claimers_never_share_a_conversation(h: Harness, batch: usize) {
    let mut processes = vec![h.storage.clone()];
    for _ in 1..PROCESSES {
        processes.push(h.another_process(&queue_config()).await);
    }
    let total = CONVERSATIONS * MESSAGES_EACH + PROCESSES * SHARED_EACH;
    let observed = Arc::new(Observed::default());

    let mut handles = Vec::new();
    for (index, storage) in processes.iter().enumerate() {
        // Each process enqueues its own conversations in order, plus its share
        // of one conversation that all processes write to at once.
        let queue = storage.queue();
        handles.push(tokio::spawn(async move {
            for n in 0..MESSAGES_EACH {
                let mut round: Vec<_> = (0..CONVERSATIONS)
                    .filter(|c| c % PROCESSES == index)
                    .map(|c| message(&format!("test:c{c}"), &format!("c{c} m{n}")))
                    .collect();
                if n < SHARED_EACH {
                    round.push(message("test:shared", &format!("shared p{index} m{n}")));
                }
                if batch > 1 {
                    let stored = queue.enqueue_all(round).await.unwrap();
                    assert!(stored.iter().all(|e| matches!(e, Enqueued::New(_))), "{stored:?}");
                } else {
                    for task in round {
                        queue.enqueue(task).await.unwrap();
                    }
                }
            }
        }));
        for _ in 0..WORKERS_PER_PROCESS {
            handles.push(tokio::spawn(worker(storage.clone(), observed.clone(), total, batch)));
        }
    }
    timeout(Duration::from_secs(120), async {
        for handle in handles {
            handle.await.unwrap();
        }
    })
    .await
    .expect("every task is served within two minutes");

    let violations = observed.violations.lock().unwrap().clone();
    assert!(violations.is_empty(), "{violations:?}");
    let served = observed.served.lock().unwrap().clone();
    assert_eq!(
        served.values().map(Vec::len).sum::<usize>(),
        total,
        "each task served exactly once"
    );
    for c in 0..CONVERSATIONS {
        let texts: Vec<&str> = served[&ConversationId::new(format!("test:c{c}"))]
            .iter()
            .map(|s| s.1.as_str())
            .collect();
        let expected: Vec<String> = (0..MESSAGES_EACH).map(|n| format!("c{c} m{n}")).collect();
        assert_eq!(texts, expected, "conversation c{c} in arrival order");
    }
    let shared = &served[&ConversationId::new("test:shared")];
    assert!(
        shared.windows(2).all(|pair| pair[0].0 < pair[1].0),
        "shared conversation in id order: {shared:?}"
    );
    for p in 0..PROCESSES {
        let mine: Vec<&str> = shared
            .iter()
            .map(|s| s.1.as_str())
            .filter(|t| t.starts_with(&format!("shared p{p} ")))
            .collect();
        let expected: Vec<String> = (0..SHARED_EACH).map(|n| format!("shared p{p} m{n}")).collect();
        assert_eq!(mine, expected, "one enqueuer's messages keep their order");
    }
    assert!(observed.most_at_once.load(Ordering::Relaxed) >= 1);
    let stats = h.storage.queue().stats().await.unwrap();
    assert_eq!((stats.queued, stats.leased, stats.dead), (0, 0, 0));
    for storage in &processes[1..] {
        storage.close().await;
    }
}

async fn worker(storage: Storage, observed: Arc<Observed>, total: usize, batch: usize) {
    let queue = storage.queue();
    let conversations = storage.conversations();
    while observed.done.load(Ordering::SeqCst) < total {
        let leases = queue.claim_up_to(&ClaimFilter::any(), batch).await.unwrap();
        if leases.is_empty() {
            queue.wait_for_work(Duration::from_millis(20)).await;
            continue;
        }
        if leases.len() > batch {
            observed
                .violations
                .lock()
                .unwrap()
                .push(format!("{} tasks for a claim of at most {batch}", leases.len()));
        }
        {
            let mut in_flight = observed.in_flight.lock().unwrap();
            for lease in &leases {
                let conversation = &lease.task.conversation;
                if !in_flight.insert(conversation.clone()) {
                    observed
                        .violations
                        .lock()
                        .unwrap()
                        .push(format!("{conversation} leased twice at once"));
                }
            }
            observed.most_at_once.fetch_max(in_flight.len(), Ordering::Relaxed);
        }
        for lease in leases {
            let conversation = lease.task.conversation.clone();
            // Some work that takes a round trip, so leases overlap.
            conversations.history(&conversation, 5).await.unwrap();
            observed
                .served
                .lock()
                .unwrap()
                .entry(conversation.clone())
                .or_default()
                .push((lease.task.id, text(&lease).into()));
            // Leaves the in-flight set before completing: once completed, the
            // next task of the conversation may be claimed at once.
            observed.in_flight.lock().unwrap().remove(&conversation);
            queue.complete(&lease).await.unwrap();
            observed.done.fetch_add(1, Ordering::SeqCst);
        }
    }
}

pub async fn concurrent_duplicates_store_one_task(h: Harness) {
    let other = h.another_process(&queue_config()).await;
    let (here, there) = (h.storage.queue(), other.queue());
    for round in 0..10 {
        let key = format!("event {round}");
        let (a, b) = tokio::join!(
            here.enqueue(message("test:ann", &key)),
            there.enqueue(message("test:ann", &key)),
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!(a.task_id(), b.task_id(), "round {round}: {a:?} {b:?}");
        let new = [a, b].iter().filter(|e| matches!(e, Enqueued::New(_))).count();
        assert_eq!(new, 1, "round {round}: {a:?} {b:?}");
    }
    assert_eq!(h.storage.queue().pending(&ClaimFilter::any()).await.unwrap(), 10);
    other.close().await;
}

/// Consumes the wake-ups earlier changes left: the first, and any that come
/// after it (on PostgreSQL each change's notification arrives on its own,
/// later under load), until none came for a while.
async fn settle(queue: &std::sync::Arc<dyn herald_core::TaskQueue>) {
    let _ = timeout(Duration::from_secs(5), queue.wait_for_work(Duration::from_secs(3600))).await;
    for _ in 0..10 {
        let quiet = timeout(
            Duration::from_millis(300),
            queue.wait_for_work(Duration::from_secs(3600)),
        )
        .await;
        if quiet.is_err() {
            break;
        }
    }
}

/// A waiter that nothing wakes stays asleep (so the cases below are not
/// passing for nothing); then `wake` wakes it.
async fn assert_wakes(storage: &Storage, wake: impl std::future::Future<Output = ()>) {
    let queue = storage.queue();
    assert!(
        timeout(
            Duration::from_millis(200),
            queue.wait_for_work(Duration::from_secs(3600))
        )
        .await
        .is_err(),
        "nothing should wake an idle worker yet"
    );
    let waiter = tokio::spawn(async move { queue.wait_for_work(Duration::from_secs(3600)).await });
    tokio::task::yield_now().await;
    wake.await;
    timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the waiter wakes promptly")
        .unwrap();
}

pub async fn an_idle_worker_wakes_on_enqueue(h: Harness) {
    let queue = h.storage.queue();
    assert_wakes(&h.storage, async {
        queue.enqueue(message("test:ann", "wake up")).await.unwrap();
    })
    .await;
}

pub async fn an_idle_worker_wakes_when_a_head_finishes(h: Harness) {
    let queue = h.storage.queue();
    queue.enqueue(message("test:ann", "first")).await.unwrap();
    queue.enqueue(message("test:ann", "second")).await.unwrap();
    let first = queue.claim(&ClaimFilter::any()).await.unwrap().unwrap();
    // Consume the wake-up the enqueues left for the next waiter.
    settle(&queue).await;
    assert_wakes(&h.storage, async {
        queue.complete(&first).await.unwrap();
    })
    .await;
    let second = queue.claim(&ClaimFilter::any()).await.unwrap().unwrap();
    assert_eq!(text(&second), "second");

    // Completing with the reply's receipt wakes the same way.
    queue.enqueue(message("test:ann", "third")).await.unwrap();
    settle(&queue).await;
    let receipt = DeliveryReceipt {
        task: second.task.id,
        slot: "reply".into(),
        conversation: ConversationId::new("test:ann"),
        platform_message_ids: vec!["m2".into()],
        delivered_at: super::start_time(),
    };
    assert_wakes(&h.storage, async {
        queue.complete_delivered(&second, &receipt).await.unwrap();
    })
    .await;
    assert_eq!(text(&queue.claim(&ClaimFilter::any()).await.unwrap().unwrap()), "third");
}

pub async fn an_idle_worker_wakes_when_a_retry_is_due(h: Harness) {
    let queue = h.storage.queue();
    queue.enqueue(message("test:ann", "retry me")).await.unwrap();
    let lease = queue.claim(&ClaimFilter::any()).await.unwrap().unwrap();
    queue.fail(&lease, "model down").await.unwrap();
    // Consume the wake-ups enqueue and fail left, then move the clock to
    // 100ms before the retry: the waiter's next due time is that close.
    settle(&queue).await;
    h.advance(Duration::from_millis(1_900));
    timeout(Duration::from_secs(10), queue.wait_for_work(Duration::from_secs(3600)))
        .await
        .expect("wakes at the due time, not after an hour");
}

pub async fn an_idle_worker_sees_work_from_another_process(h: Harness) {
    let other = h.another_process(&queue_config()).await;
    if h.storage.backend() == "postgres" {
        // LISTEN/NOTIFY carries the wake-up across processes.
        let queue = other.queue();
        assert_wakes(&h.storage, async {
            queue.enqueue(message("test:ann", "from afar")).await.unwrap();
        })
        .await;
    } else {
        // SQLite cannot notify another process: the waiter polls.
        let polling = h
            .another_process(&QueueConfig {
                poll_interval: Duration::from_millis(50),
                ..queue_config()
            })
            .await;
        other.queue().enqueue(message("test:ann", "from afar")).await.unwrap();
        timeout(
            Duration::from_secs(10),
            polling.queue().wait_for_work(Duration::from_secs(3600)),
        )
        .await
        .expect("the poll interval bounds the wait");
        assert_eq!(
            text(&polling.queue().claim(&ClaimFilter::any()).await.unwrap().unwrap()),
            "from afar"
        );
        polling.close().await;
    }
    other.close().await;
}
