//! The conversation store: history, turns, receipts, state, refs, and what
//! survives a restart.

use std::time::Duration;

use herald_core::{ActorId, ClaimFilter, ConversationId, DeliveryReceipt, HistoryEntry, NewHistoryEntry, Role, TaskId};
use serde_json::json;

use super::{Harness, conversation, message, message_in, text};

pub fn user(text: &str) -> NewHistoryEntry {
    NewHistoryEntry {
        role: Role::User,
        actor: Some(ActorId::new("test:ann")),
        text: text.into(),
    }
}

pub fn assistant(text: &str) -> NewHistoryEntry {
    NewHistoryEntry {
        role: Role::Assistant,
        actor: None,
        text: text.into(),
    }
}

pub fn texts(entries: &[HistoryEntry]) -> Vec<&str> {
    entries.iter().map(|e| e.text.as_str()).collect()
}

/// Enqueues a message to `test:ann` and records a question and an answer for it.
/// A task of `test:ann`, queued and not recorded.
async fn queue_turn(h: &Harness, question: &str) -> TaskId {
    h.storage
        .queue()
        .enqueue(message("test:ann", question))
        .await
        .unwrap()
        .task_id()
}

async fn turn(h: &Harness, question: &str) -> TaskId {
    let queue = h.storage.queue();
    let id = queue.enqueue(message("test:ann", question)).await.unwrap().task_id();
    let lease = queue.claim(&ClaimFilter::any()).await.unwrap().unwrap();
    assert_eq!(lease.task.id, id);
    let conversation = ConversationId::new("test:ann");
    let recorded = h
        .storage
        .conversations()
        .record_turn(
            &conversation,
            id,
            &[user(question), assistant(&format!("re: {question}"))],
        )
        .await
        .unwrap();
    assert!(recorded);
    queue.complete(&lease).await.unwrap();
    id
}

pub async fn history_is_the_newest_entries_oldest_first(h: Harness) {
    for question in ["one", "two", "three"] {
        turn(&h, question).await;
        h.advance(Duration::from_secs(1));
    }
    let store = h.storage.conversations();
    let conversation = ConversationId::new("test:ann");
    let newest = store.history(&conversation, 3).await.unwrap();
    assert_eq!(texts(&newest), ["re: two", "three", "re: three"]);
    let all = store.history(&conversation, 100).await.unwrap();
    assert_eq!(all.len(), 6);
    assert_eq!(
        (all[0].role, all[0].actor.clone()),
        (Role::User, Some(ActorId::new("test:ann")))
    );
    assert_eq!((all[1].role, all[1].actor.clone()), (Role::Assistant, None));
    assert_eq!(all[0].at, super::start_time());
    assert!(all.windows(2).all(|pair| pair[0].id < pair[1].id));
    assert!(
        store
            .history(&ConversationId::new("test:nobody"), 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.history(&conversation, 0).await.unwrap().is_empty());
}

/// History and one state value of the conversation, read together: the
/// same history as alone, and the value of that scope and conversation only.
pub async fn history_comes_with_the_conversations_state(h: Harness) {
    for question in ["one", "two", "three"] {
        turn(&h, question).await;
    }
    let store = h.storage.conversations();
    let ann = ConversationId::new("test:ann");
    let (history, state) = store.history_and_state(&ann, 4, "active_skills").await.unwrap();
    assert_eq!(texts(&history), texts(&store.history(&ann, 4).await.unwrap()));
    assert_eq!(texts(&history), ["two", "re: two", "three", "re: three"]);
    assert_eq!(state, None, "nothing stored yet");

    store
        .put_state("active_skills", "test:ann", &json!(["notes"]))
        .await
        .unwrap();
    store
        .put_state("active_skills", "test:bob", &json!(["other"]))
        .await
        .unwrap();
    store.put_state("elsewhere", "test:ann", &json!("no")).await.unwrap();
    let (history, state) = store.history_and_state(&ann, 100, "active_skills").await.unwrap();
    assert_eq!(history.len(), 6);
    assert!(history.windows(2).all(|pair| pair[0].id < pair[1].id), "oldest first");
    assert_eq!(state, Some(json!(["notes"])));
    let (history, state) = store
        .history_and_state(&ConversationId::new("test:bob"), 10, "active_skills")
        .await
        .unwrap();
    assert!(history.is_empty());
    assert_eq!(state, Some(json!(["other"])), "a state without history");
}

/// Whatever people write comes back from the history read with its state
/// exactly as written: quotes, backslashes, line breaks, control
/// characters, text that is itself JSON, non-Latin scripts and emoji, with
/// and without an actor, and the entries' ids, tasks and times.
pub async fn history_with_state_reads_any_text_back_as_written(h: Harness) {
    let awkward = [
        "say \"hi\" \\ then\nleave\ttabbed\r\n",
        "{\"looks\": [\"like\", \"json\"]}",
        "[1, 2, null]",
        "\u{1}\u{1f} bell\u{7} and escape \u{1b}[31m",
        "Ελληνικά, 日本語, עברית, emoji 🦀👍🏽",
        "null",
        "",
    ];
    for question in awkward {
        turn(&h, question).await;
    }
    let store = h.storage.conversations();
    let ann = ConversationId::new("test:ann");
    let (history, state) = store.history_and_state(&ann, 100, "active_skills").await.unwrap();
    assert_eq!(state, None);
    let alone = store.history(&ann, 100).await.unwrap();
    assert_eq!(
        history, alone,
        "the same entries, ids, tasks, actors and times as the plain read"
    );
    let expected: Vec<String> = awkward
        .iter()
        .flat_map(|question| [question.to_string(), format!("re: {question}")])
        .collect();
    assert_eq!(texts(&history), expected);
    assert!(
        history
            .iter()
            .step_by(2)
            .all(|entry| entry.actor == Some(ActorId::new("test:ann")))
    );
    assert!(history.iter().skip(1).step_by(2).all(|entry| entry.actor.is_none()));
}

pub async fn a_turn_is_recorded_once(h: Harness) {
    let id = turn(&h, "question").await;
    let store = h.storage.conversations();
    let conversation = ConversationId::new("test:ann");
    let again = store
        .record_turn(&conversation, id, &[user("question"), assistant("another answer")])
        .await
        .unwrap();
    assert!(!again, "a task's turn is written once");
    let entries = store.task_entries(id).await.unwrap();
    assert_eq!(texts(&entries), ["question", "re: question"]);
    assert!(entries.iter().all(|e| e.task == Some(id)));
    assert_eq!(
        store.history(&conversation, 10).await.unwrap().len(),
        2,
        "nothing more was written"
    );
    assert!(store.task_entries(TaskId(id.0 + 1000)).await.unwrap().is_empty());
}

pub async fn deliveries_are_recorded_once_per_slot(h: Harness) {
    let id = turn(&h, "question").await;
    let store = h.storage.conversations();
    assert_eq!(store.delivery(id, "reply").await.unwrap(), None);
    let receipt = DeliveryReceipt {
        task: id,
        slot: "reply".into(),
        conversation: ConversationId::new("test:ann"),
        platform_message_ids: vec!["m1".into(), "m2".into()],
        delivered_at: super::start_time(),
    };
    store.record_delivery(&receipt).await.unwrap();
    let again = DeliveryReceipt {
        platform_message_ids: vec!["m3".into()],
        ..receipt.clone()
    };
    store.record_delivery(&again).await.unwrap();
    assert_eq!(
        store.delivery(id, "reply").await.unwrap(),
        Some(receipt),
        "the first receipt stands"
    );
    assert_eq!(store.delivery(id, "notice").await.unwrap(), None);
}

/// The reply's receipt goes with the completion: both are kept, and when
/// the lease was lost meanwhile the receipt still is (the message went out)
/// while the completion is refused.
pub async fn the_last_receipt_is_written_with_the_completion(h: Harness) {
    let queue = h.storage.queue();
    let store = h.storage.conversations();
    queue.enqueue(message("test:ann", "question")).await.unwrap();
    let lease = queue.claim(&ClaimFilter::any()).await.unwrap().unwrap();
    let receipt = |task: TaskId, id: &str| DeliveryReceipt {
        task,
        slot: "reply".into(),
        conversation: ConversationId::new("test:ann"),
        platform_message_ids: vec![id.into()],
        delivered_at: super::start_time(),
    };
    queue
        .complete_delivered(&lease, &receipt(lease.task.id, "m1"))
        .await
        .unwrap();
    assert_eq!(
        store.delivery(lease.task.id, "reply").await.unwrap(),
        Some(receipt(lease.task.id, "m1"))
    );
    assert_eq!(queue.stats().await.unwrap().leased, 0, "the task is done");
    assert!(queue.claim(&ClaimFilter::any()).await.unwrap().is_none());

    // A lease that expired and went to another worker.
    queue.enqueue(message("test:ann", "second")).await.unwrap();
    let stale = queue.claim(&ClaimFilter::any()).await.unwrap().unwrap();
    h.advance(Duration::from_secs(61));
    let current = queue.claim(&ClaimFilter::any()).await.unwrap().unwrap();
    assert_eq!(current.task.id, stale.task.id);
    let refused = queue.complete_delivered(&stale, &receipt(stale.task.id, "m2")).await;
    assert!(
        matches!(refused, Err(herald_core::StoreError::LeaseLost(_))),
        "{refused:?}"
    );
    assert_eq!(
        store.delivery(stale.task.id, "reply").await.unwrap(),
        Some(receipt(stale.task.id, "m2")),
        "the receipt of what was sent is kept"
    );
    assert_eq!(queue.stats().await.unwrap().leased, 1, "the new holder still has it");
    queue
        .complete_delivered(&current, &receipt(current.task.id, "m3"))
        .await
        .unwrap();
    assert_eq!(
        store.delivery(current.task.id, "reply").await.unwrap(),
        Some(receipt(stale.task.id, "m2")),
        "the first receipt of a slot stands"
    );
    // A receipt of another task completes nothing.
    queue.enqueue(message("test:bob", "third")).await.unwrap();
    let lease = queue.claim(&ClaimFilter::any()).await.unwrap().unwrap();
    assert!(
        queue
            .complete_delivered(&lease, &receipt(TaskId(lease.task.id.0 + 1), "m4"))
            .await
            .is_err()
    );
    assert_eq!(queue.stats().await.unwrap().leased, 1);
}

/// A turn and the prompt's accounting are written together; a second
/// recording of the task writes no entries but still the newer value.
pub async fn a_turn_is_recorded_with_a_state_value(h: Harness) {
    let id = queue_turn(&h, "question").await;
    let store = h.storage.conversations();
    let ann = ConversationId::new("test:ann");
    let write = |value: &'static serde_json::Value| herald_core::StateWrite {
        scope: "explain",
        key: "test:ann",
        value,
    };
    static FIRST: std::sync::LazyLock<serde_json::Value> = std::sync::LazyLock::new(|| json!({"tokens": 10}));
    static SECOND: std::sync::LazyLock<serde_json::Value> = std::sync::LazyLock::new(|| json!({"tokens": 20}));
    assert!(
        store
            .record_turn_with_state(&ann, id, &[user("question"), assistant("answer")], write(&FIRST))
            .await
            .unwrap(),
        "the first recording writes the turn"
    );
    assert_eq!(
        store.get_state("explain", "test:ann").await.unwrap(),
        Some(json!({"tokens": 10}))
    );
    assert!(
        !store
            .record_turn_with_state(&ann, id, &[user("question"), assistant("other")], write(&SECOND))
            .await
            .unwrap(),
        "a second recording of the task writes no turn"
    );
    assert_eq!(texts(&store.task_entries(id).await.unwrap()), ["question", "answer"]);
    assert_eq!(
        store.get_state("explain", "test:ann").await.unwrap(),
        Some(json!({"tokens": 20}))
    );
    // Longer than one statement takes: the same, in a transaction.
    let long = queue_turn(&h, "long").await;
    let entries: Vec<NewHistoryEntry> = (0..6).map(|i| user(&format!("entry {i}"))).collect();
    assert!(
        store
            .record_turn_with_state(&ann, long, &entries, write(&FIRST))
            .await
            .unwrap()
    );
    assert_eq!(store.task_entries(long).await.unwrap().len(), 6);
    assert_eq!(
        store.get_state("explain", "test:ann").await.unwrap(),
        Some(json!({"tokens": 10}))
    );
}

pub async fn state_is_kept_by_scope_and_key(h: Harness) {
    let store = h.storage.conversations();
    assert_eq!(store.get_state("skills", "weather").await.unwrap(), None);
    store
        .put_state("skills", "weather", &json!({"enabled": true}))
        .await
        .unwrap();
    store.put_state("skills", "alpha", &json!([1, "two"])).await.unwrap();
    store.put_state("other", "weather", &json!("elsewhere")).await.unwrap();
    store
        .put_state("skills", "weather", &json!({"enabled": false}))
        .await
        .unwrap();

    assert_eq!(
        store.get_state("skills", "weather").await.unwrap(),
        Some(json!({"enabled": false}))
    );
    assert_eq!(
        store.list_state("skills").await.unwrap(),
        [
            ("alpha".to_owned(), json!([1, "two"])),
            ("weather".to_owned(), json!({"enabled": false}))
        ]
    );
    store.delete_state("skills", "weather").await.unwrap();
    store.delete_state("skills", "never there").await.unwrap();
    assert_eq!(store.get_state("skills", "weather").await.unwrap(), None);
    assert_eq!(
        store.get_state("other", "weather").await.unwrap(),
        Some(json!("elsewhere"))
    );
    assert!(store.list_state("empty").await.unwrap().is_empty());
}

pub async fn the_conversation_ref_is_the_latest_enqueued(h: Harness) {
    let store = h.storage.conversations();
    let queue = h.storage.queue();
    let id = ConversationId::new("test:ann");
    assert_eq!(store.conversation(&id).await.unwrap(), None);
    queue.enqueue(message("test:ann", "one")).await.unwrap();
    assert_eq!(store.conversation(&id).await.unwrap(), Some(conversation("test:ann")));

    let mut moved = conversation("test:ann");
    moved.thread = Some("topic 7".into());
    moved.chat = "renamed".into();
    queue.enqueue(message_in(moved.clone(), "two")).await.unwrap();
    assert_eq!(store.conversation(&id).await.unwrap(), Some(moved));
}

pub async fn a_restart_keeps_history_and_queued_tasks(mut h: Harness) {
    turn(&h, "before the restart").await;
    let queue = h.storage.queue();
    queue.enqueue(message("test:ann", "still queued")).await.unwrap();
    queue.enqueue(message("test:bob", "in flight")).await.unwrap();
    let in_flight = queue
        .claim(&ClaimFilter::conversation(ConversationId::new("test:bob")))
        .await
        .unwrap()
        .unwrap();
    h.storage
        .conversations()
        .put_state("skills", "weather", &json!(true))
        .await
        .unwrap();
    drop(queue);

    h.restart().await;
    let queue = h.storage.queue();
    let store = h.storage.conversations();
    let history = store.history(&ConversationId::new("test:ann"), 10).await.unwrap();
    assert_eq!(texts(&history), ["before the restart", "re: before the restart"]);
    assert_eq!(store.get_state("skills", "weather").await.unwrap(), Some(json!(true)));
    assert_eq!(queue.pending(&ClaimFilter::any()).await.unwrap(), 2);
    let queued = queue.claim(&ClaimFilter::any()).await.unwrap().unwrap();
    assert_eq!(text(&queued), "still queued");
    queue.complete(&queued).await.unwrap();
    // The task that was in flight comes back: its holder (the store before
    // the restart) is gone, so it does without its lease running out.
    let back = super::liveness::claim_when_free(&h.storage).await;
    assert_eq!((back.task.id, back.task.attempt), (in_flight.task.id, 2));
    assert_eq!(h.clock_now(), super::start_time());
}

/// PostgreSQL text cannot hold U+0000; a message containing one must still be
/// queued, answered and recorded, so the store drops it from every text it
/// writes, on both engines alike.
pub async fn text_with_nul_is_stored_without_it(h: Harness) {
    let queue = h.storage.queue();
    let store = h.storage.conversations();
    let conversation = ConversationId::new("test:ann");
    queue.enqueue(message("test:ann", "hello\u{0} world")).await.unwrap();
    let lease = queue.claim(&ClaimFilter::any()).await.unwrap().unwrap();
    assert_eq!(text(&lease), "hello world", "the task payload");

    queue.fail(&lease, "model said \u{0}no").await.unwrap();
    h.advance(Duration::from_secs(60));
    let lease = queue.claim(&ClaimFilter::any()).await.unwrap().unwrap();
    assert_eq!(lease.task.last_error.as_deref(), Some("model said no"), "the error");

    let recorded = store
        .record_turn(
            &conversation,
            lease.task.id,
            &[user("a\u{0}b"), assistant("c\u{0}\u{0}d")],
        )
        .await
        .unwrap();
    assert!(recorded);
    queue.complete(&lease).await.unwrap();
    assert_eq!(
        texts(&store.history(&conversation, 10).await.unwrap()),
        ["ab", "cd"],
        "the history"
    );

    store
        .put_state("notes", "k\u{0}", &json!({"text": "x\u{0}y", "li\u{0}st": ["\u{0}"]}))
        .await
        .unwrap();
    assert_eq!(
        store.get_state("notes", "k").await.unwrap(),
        Some(json!({"text": "xy", "list": [""]})),
        "the state"
    );
}
