//! The queue's promises one claim at a time: order, leases, retries, filters.

use std::time::Duration;

use herald_core::{ChannelName, ClaimFilter, ConversationId, Enqueued, FailOutcome, StoreError, TaskQueue};

use super::{Harness, conversation, message, message_in, text};

fn any() -> ClaimFilter {
    ClaimFilter::any()
}

async fn claim_text(queue: &dyn TaskQueue) -> Option<String> {
    queue.claim(&any()).await.unwrap().map(|lease| text(&lease).to_owned())
}

pub async fn a_conversation_is_served_in_arrival_order(h: Harness) {
    let queue = h.storage.queue();
    queue.enqueue(message("test:ann", "first")).await.unwrap();
    queue.enqueue(message("test:ann", "second")).await.unwrap();

    let first = queue
        .claim(&any())
        .await
        .unwrap()
        .expect("the first message is claimable");
    assert_eq!(text(&first), "first");
    assert_eq!(first.task.attempt, 1);
    assert_eq!(first.task.max_attempts, 4);
    assert_eq!(first.expires_at, h.clock_now() + chrono::Duration::seconds(60));
    assert!(
        queue.claim(&any()).await.unwrap().is_none(),
        "the second waits while the first is leased"
    );

    queue.complete(&first).await.unwrap();
    let second = queue.claim(&any()).await.unwrap().expect("the second is next");
    assert_eq!(text(&second), "second");
    queue.complete(&second).await.unwrap();
    assert_eq!(queue.pending(&any()).await.unwrap(), 0);
}

pub async fn different_conversations_are_served_in_parallel(h: Harness) {
    let queue = h.storage.queue();
    queue.enqueue(message("test:ann", "ann 1")).await.unwrap();
    queue.enqueue(message("test:ann", "ann 2")).await.unwrap();
    queue.enqueue(message("test:bob", "bob 1")).await.unwrap();

    let ann = queue.claim(&any()).await.unwrap().unwrap();
    let bob = queue.claim(&any()).await.unwrap().unwrap();
    assert_eq!((text(&ann), text(&bob)), ("ann 1", "bob 1"));
    assert!(queue.claim(&any()).await.unwrap().is_none());
    assert_eq!(queue.pending(&any()).await.unwrap(), 3);
    let stats = queue.stats().await.unwrap();
    assert_eq!((stats.queued, stats.leased, stats.dead), (1, 2, 0));
    assert_eq!(stats.oldest_queued_at, Some(h.clock_now()));
}

pub async fn a_redelivered_event_is_stored_once(h: Harness) {
    let queue = h.storage.queue();
    let first = queue.enqueue(message("test:ann", "hello")).await.unwrap();
    let Enqueued::New(id) = first else {
        panic!("first enqueue is new: {first:?}")
    };

    // The platform sends the same event again, now from a renamed thread.
    let mut moved = conversation("test:ann");
    moved.thread = Some("elsewhere".into());
    assert_eq!(
        queue.enqueue(message_in(moved, "hello")).await.unwrap(),
        Enqueued::Duplicate(id)
    );
    assert_eq!(queue.pending(&any()).await.unwrap(), 1);
    let stored = h
        .storage
        .conversations()
        .conversation(&ConversationId::new("test:ann"))
        .await
        .unwrap();
    assert_eq!(stored, Some(conversation("test:ann")), "a duplicate changes nothing");

    // Without a dedup key every enqueue is a new task.
    let mut task = message("test:ann", "tick");
    task.dedup_key = None;
    assert!(matches!(queue.enqueue(task.clone()).await.unwrap(), Enqueued::New(_)));
    assert!(matches!(queue.enqueue(task).await.unwrap(), Enqueued::New(_)));
    assert_eq!(queue.pending(&any()).await.unwrap(), 3);
}

pub async fn an_expired_lease_is_redelivered_and_the_old_token_is_dead(h: Harness) {
    let queue = h.storage.queue();
    queue.enqueue(message("test:ann", "first")).await.unwrap();
    queue.enqueue(message("test:ann", "second")).await.unwrap();
    let dead_worker = queue.claim(&any()).await.unwrap().unwrap();

    h.advance(Duration::from_millis(59_999));
    assert!(queue.claim(&any()).await.unwrap().is_none(), "the lease still holds");
    h.advance(Duration::from_millis(1));
    let again = queue
        .claim(&any())
        .await
        .unwrap()
        .expect("an expired lease is claimable");
    assert_eq!(
        again.task.id, dead_worker.task.id,
        "the head is redelivered, not the second message"
    );
    assert_eq!(again.task.attempt, 2);
    assert_ne!(again.token, dead_worker.token);

    for outcome in [
        queue.complete(&dead_worker).await,
        queue.release(&dead_worker).await,
        queue.kill(&dead_worker, "late").await,
        queue.fail(&dead_worker, "late").await.map(|_| ()),
        queue.extend(&mut dead_worker.clone()).await,
    ] {
        assert!(
            matches!(outcome, Err(StoreError::LeaseLost(id)) if id == dead_worker.task.id),
            "{outcome:?}"
        );
    }
    queue.complete(&again).await.unwrap();
    assert_eq!(claim_text(&*queue).await.as_deref(), Some("second"));
}

pub async fn extending_keeps_the_task(h: Harness) {
    let queue = h.storage.queue();
    queue.enqueue(message("test:ann", "long turn")).await.unwrap();
    let mut lease = queue.claim(&any()).await.unwrap().unwrap();
    h.advance(Duration::from_secs(50));
    queue.extend(&mut lease).await.unwrap();
    assert_eq!(lease.expires_at, h.clock_now() + chrono::Duration::seconds(60));

    h.advance(Duration::from_secs(20));
    assert!(
        queue.claim(&any()).await.unwrap().is_none(),
        "70s after the claim, the extended lease holds"
    );
    h.advance(Duration::from_secs(40));
    let taken_over = queue
        .claim(&any())
        .await
        .unwrap()
        .expect("the extended lease expired too");
    assert!(matches!(queue.extend(&mut lease).await, Err(StoreError::LeaseLost(_))));
    queue.complete(&taken_over).await.unwrap();
}

pub async fn release_gives_the_task_back_without_counting_the_attempt(h: Harness) {
    let queue = h.storage.queue();
    queue.enqueue(message("test:ann", "shutdown")).await.unwrap();
    let lease = queue.claim(&any()).await.unwrap().unwrap();
    queue.release(&lease).await.unwrap();
    assert!(
        matches!(queue.release(&lease).await, Err(StoreError::LeaseLost(_))),
        "a released lease is gone"
    );

    let again = queue
        .claim(&any())
        .await
        .unwrap()
        .expect("released tasks are claimable at once");
    assert_eq!(again.task.id, lease.task.id);
    assert_eq!(again.task.attempt, 1, "a graceful shutdown does not count");
}

pub async fn failures_back_off_exponentially_then_the_task_is_dead(h: Harness) {
    let queue = h.storage.queue();
    queue.enqueue(message("test:ann", "flaky")).await.unwrap();
    queue.enqueue(message("test:ann", "after")).await.unwrap();

    // retry_base 2s, retry_max 5s, max_attempts 4: waits of 2s, 4s, 5s, then dead.
    for (attempt, wait) in [(1, 2_000), (2, 4_000), (3, 5_000)] {
        let lease = queue.claim(&any()).await.unwrap().expect("due");
        assert_eq!((text(&lease), lease.task.attempt), ("flaky", attempt));
        if attempt > 1 {
            assert_eq!(
                lease.task.last_error.as_deref(),
                Some(format!("boom {}", attempt - 1).as_str())
            );
        }
        let outcome = queue.fail(&lease, &format!("boom {attempt}")).await.unwrap();
        let after = Duration::from_millis(wait);
        assert_eq!(
            outcome,
            FailOutcome::Retry {
                at: h.clock_now() + chrono::Duration::milliseconds(wait as i64),
                after
            }
        );

        h.advance(after - Duration::from_millis(1));
        assert!(
            queue.claim(&any()).await.unwrap().is_none(),
            "attempt {attempt}: not due yet, and `after` waits"
        );
        h.advance(Duration::from_millis(1));
    }
    let last = queue.claim(&any()).await.unwrap().unwrap();
    assert_eq!(last.task.attempt, 4);
    assert_eq!(queue.fail(&last, "boom 4").await.unwrap(), FailOutcome::Dead);
    assert_eq!(queue.stats().await.unwrap().dead, 1);

    let next = queue
        .claim(&any())
        .await
        .unwrap()
        .expect("a dead task no longer holds up its conversation");
    assert_eq!(text(&next), "after");
}

pub async fn a_killed_task_is_dead_at_once_and_does_not_block_its_conversation(h: Harness) {
    let queue = h.storage.queue();
    queue.enqueue(message("test:ann", "poison")).await.unwrap();
    queue.enqueue(message("test:ann", "fine")).await.unwrap();
    let lease = queue.claim(&any()).await.unwrap().unwrap();
    queue.kill(&lease, "cannot be handled").await.unwrap();
    let stats = queue.stats().await.unwrap();
    assert_eq!((stats.queued, stats.leased, stats.dead), (1, 0, 1));
    assert_eq!(claim_text(&*queue).await.as_deref(), Some("fine"));
}

pub async fn lower_priority_values_go_first_then_arrival(h: Harness) {
    let queue = h.storage.queue();
    let mut background = message("test:cron", "background");
    background.priority = 10;
    queue.enqueue(background).await.unwrap();
    queue.enqueue(message("test:ann", "ann")).await.unwrap();
    queue.enqueue(message("test:bob", "bob")).await.unwrap();

    let mut order = Vec::new();
    while let Some(lease) = queue.claim(&any()).await.unwrap() {
        order.push(text(&lease).to_owned());
    }
    assert_eq!(order, ["ann", "bob", "background"]);
}

pub async fn claim_filters_limit_what_a_worker_takes(h: Harness) {
    let queue = h.storage.queue();
    queue.enqueue(message("local:owner", "local")).await.unwrap();
    queue.enqueue(message("telegram:1", "telegram 1")).await.unwrap();
    queue.enqueue(message("telegram:2", "telegram 2")).await.unwrap();

    let local = ClaimFilter::channels([ChannelName::new("local")]);
    let nothing = ClaimFilter::channels([ChannelName::new("slack")]);
    let telegram_two = ClaimFilter::conversation(ConversationId::new("telegram:2"));
    assert_eq!(queue.pending(&local).await.unwrap(), 1);
    assert_eq!(queue.pending(&nothing).await.unwrap(), 0);
    assert_eq!(
        queue.pending(&ClaimFilter::channels([])).await.unwrap(),
        0,
        "an empty list allows nothing"
    );
    assert!(queue.claim(&nothing).await.unwrap().is_none());

    assert_eq!(text(&queue.claim(&telegram_two).await.unwrap().unwrap()), "telegram 2");
    assert_eq!(text(&queue.claim(&local).await.unwrap().unwrap()), "local");
    assert!(queue.claim(&local).await.unwrap().is_none());
    assert_eq!(claim_text(&*queue).await.as_deref(), Some("telegram 1"));
}

pub async fn not_before_delays_a_task(h: Harness) {
    let queue = h.storage.queue();
    let mut later = message("test:ann", "later");
    later.not_before = Some(h.clock_now() + chrono::Duration::minutes(5));
    queue.enqueue(later).await.unwrap();
    queue.enqueue(message("test:bob", "now")).await.unwrap();

    assert_eq!(claim_text(&*queue).await.as_deref(), Some("now"));
    assert!(queue.claim(&any()).await.unwrap().is_none());
    h.advance(Duration::from_secs(300));
    assert_eq!(claim_text(&*queue).await.as_deref(), Some("later"));
}

pub async fn a_batch_claim_takes_conversation_heads_in_order(h: Harness) {
    let queue = h.storage.queue();
    let mut background = message("test:cron", "background");
    background.priority = 10;
    queue.enqueue(background).await.unwrap();
    for (conversation, text) in [("test:ann", "ann 1"), ("test:ann", "ann 2"), ("test:bob", "bob 1")] {
        queue.enqueue(message(conversation, text)).await.unwrap();
    }
    queue.enqueue(message("test:cat", "cat 1")).await.unwrap();

    let texts = |leases: &[herald_core::Lease]| leases.iter().map(|l| text(l).to_owned()).collect::<Vec<_>>();
    let first = queue.claim_up_to(&any(), 2).await.unwrap();
    assert_eq!(
        texts(&first),
        ["ann 1", "bob 1"],
        "at most two, the first by priority then arrival"
    );
    let rest = queue.claim_up_to(&any(), 10).await.unwrap();
    assert_eq!(
        texts(&rest),
        ["cat 1", "background"],
        "one task per conversation: ann 2 waits behind ann 1"
    );
    assert!(queue.claim_up_to(&any(), 10).await.unwrap().is_empty());

    // Each lease stands on its own: completing one frees only its conversation.
    queue.complete(&first[0]).await.unwrap();
    let next = queue.claim_up_to(&any(), 10).await.unwrap();
    assert_eq!(texts(&next), ["ann 2"]);
    assert_eq!(next[0].task.attempt, 1);
    queue.fail(&first[1], "model down").await.unwrap();
    assert!(matches!(queue.complete(&first[1]).await, Err(StoreError::LeaseLost(_))));
}

pub async fn a_batch_is_enqueued_in_order_and_duplicates_are_told(h: Harness) {
    let queue = h.storage.queue();
    let Enqueued::New(earlier) = queue.enqueue(message("test:bob", "seen before")).await.unwrap() else {
        panic!("a new event is stored");
    };
    let batch = vec![
        message("test:ann", "ann 1"),
        message("test:bob", "seen before"),
        message("test:ann", "ann 2"),
        message("test:cat", "cat 1"),
        message("test:ann", "ann 1"),
    ];
    let stored = queue.enqueue_all(batch).await.unwrap();
    assert_eq!(stored.len(), 5);
    let ids: Vec<_> = stored.iter().map(|e| e.task_id()).collect();
    assert!(matches!(stored[0], Enqueued::New(_)));
    assert_eq!(stored[1], Enqueued::Duplicate(earlier), "stored before the batch");
    assert!(matches!(stored[2], Enqueued::New(_)));
    assert!(matches!(stored[3], Enqueued::New(_)));
    assert_eq!(
        stored[4],
        Enqueued::Duplicate(ids[0]),
        "the same event twice in one batch"
    );
    assert!(
        ids[0] < ids[2] && ids[2] < ids[3],
        "ids follow the batch's order: {ids:?}"
    );
    assert_eq!(queue.pending(&any()).await.unwrap(), 4);

    // Ann's messages are served in the batch's order.
    let mut ann = Vec::new();
    let filter = ClaimFilter::conversation(ConversationId::new("test:ann"));
    while let Some(lease) = queue.claim(&filter).await.unwrap() {
        ann.push(text(&lease).to_owned());
        queue.complete(&lease).await.unwrap();
    }
    assert_eq!(ann, ["ann 1", "ann 2"]);

    // A batch offered again (an adapter retrying after an error) stores nothing twice.
    let again = queue
        .enqueue_all(vec![message("test:ann", "ann 2"), message("test:cat", "cat 1")])
        .await
        .unwrap();
    assert_eq!(again, [Enqueued::Duplicate(ids[2]), Enqueued::Duplicate(ids[3])]);
}
