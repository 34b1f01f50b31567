//! The storage seams: the durable task queue and the conversation store.
//! `herald-store` implements both on SQLite and PostgreSQL; the agent loop and
//! the channels only see these traits.

use std::time::Duration;

use async_trait::async_trait;

use crate::history::{HistoryEntry, NewHistoryEntry};
use crate::ids::{ConversationId, TaskId};
use crate::message::ConversationRef;
use crate::retry::RetryClass;
use crate::task::{ClaimFilter, Enqueued, FailOutcome, Lease, NewTask};
use crate::time::Timestamp;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    #[error("lease on task {0} was lost (it expired and the task may be served elsewhere)")]
    LeaseLost(TaskId),
    #[error("stored data is unreadable: {0}")]
    Corrupt(String),
    #[error("storage error: {0}")]
    Database(String),
}

impl StoreError {
    pub fn retry_class(&self) -> RetryClass {
        match self {
            StoreError::Unavailable(_) | StoreError::Database(_) => RetryClass::Transient,
            StoreError::LeaseLost(_) | StoreError::Corrupt(_) => RetryClass::Fatal,
        }
    }
}

/// Counts for `doctor`, metrics and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    pub queued: u64,
    pub leased: u64,
    pub dead: u64,
    pub oldest_queued_at: Option<Timestamp>,
}

/// The durable queue between channels and the agent.
///
/// Invariants every implementation keeps:
/// - `enqueue` with a dedup key seen before stores nothing.
/// - `claim` never hands out a task while an earlier task of the same
///   conversation is unfinished, so each conversation is served in arrival
///   order; different conversations are served in parallel.
/// - a lease that expires makes its task claimable again, and so does a
///   lease whose holder is known dead (its process lost the hold that
///   [`TaskQueue::forfeited`] watches) — but only after that holder stopped
///   its turns, so two live workers never serve one task.
#[async_trait]
pub trait TaskQueue: Send + Sync {
    async fn enqueue(&self, task: NewTask) -> Result<Enqueued, StoreError>;

    /// Stores `tasks` in order, as [`TaskQueue::enqueue`] does each, in one
    /// round trip where the store can; returns what became of each, in
    /// order. After an error some may be stored: offering them again stores
    /// nothing twice that has a dedup key.
    async fn enqueue_all(&self, tasks: Vec<NewTask>) -> Result<Vec<Enqueued>, StoreError> {
        let mut enqueued = Vec::with_capacity(tasks.len());
        for task in tasks {
            enqueued.push(self.enqueue(task).await?);
        }
        Ok(enqueued)
    }

    /// Leases the next task that `filter` allows, if any is due.
    async fn claim(&self, filter: &ClaimFilter) -> Result<Option<Lease>, StoreError> {
        Ok(self.claim_up_to(filter, 1).await?.pop())
    }

    /// Leases up to `max` (at least one) of the tasks `filter` allows that
    /// are due, each the next of a different conversation, in the order they
    /// should be served: one round trip for a claimer with room for several
    /// turns, however many it gets.
    async fn claim_up_to(&self, filter: &ClaimFilter, max: usize) -> Result<Vec<Lease>, StoreError>;

    /// Extends a lease that is still held, for turns that take long.
    async fn extend(&self, lease: &mut Lease) -> Result<(), StoreError>;

    /// Returns once this process can no longer vouch for `lease`: it lost
    /// the hold on the queue that tells other processes it is alive, so they
    /// may take the task over before the lease expires. The turn must stop
    /// at once; every later change under the lease fails as lost. Never
    /// returns while the hold lasts.
    async fn forfeited(&self, lease: &Lease) {
        let _ = lease;
        std::future::pending::<()>().await;
    }

    async fn complete(&self, lease: &Lease) -> Result<(), StoreError>;

    /// Writes the receipt of the task's last message and completes the task,
    /// in one round trip where the store can. The receipt is kept even when
    /// the lease was lost (the message went out either way); the completion
    /// then fails as [`StoreError::LeaseLost`].
    async fn complete_delivered(&self, lease: &Lease, receipt: &DeliveryReceipt) -> Result<(), StoreError>;

    /// Records a failed attempt: the task is retried after a backoff, or
    /// marked dead when it has no attempts left.
    async fn fail(&self, lease: &Lease, error: &str) -> Result<FailOutcome, StoreError>;

    /// Marks the task dead at once, whatever attempts it has left.
    async fn kill(&self, lease: &Lease, error: &str) -> Result<(), StoreError>;

    /// Gives a task back without counting the attempt (graceful shutdown).
    async fn release(&self, lease: &Lease) -> Result<(), StoreError>;

    /// Returns when a task may have become claimable, or after `at_most`.
    async fn wait_for_work(&self, at_most: Duration);

    /// Unfinished (queued or leased) tasks that `filter` allows.
    async fn pending(&self, filter: &ClaimFilter) -> Result<u64, StoreError>;

    async fn stats(&self) -> Result<QueueStats, StoreError>;
}

/// A record that a reply reached its platform.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeliveryReceipt {
    pub task: TaskId,
    /// Which of the task's messages this is (`reply`, `notice`, a tool call's
    /// key): a task delivers each slot at most once.
    pub slot: String,
    pub conversation: ConversationId,
    pub platform_message_ids: Vec<String>,
    pub delivered_at: Timestamp,
}

/// A state value to write along with something else.
#[derive(Clone, Copy, Debug)]
pub struct StateWrite<'a> {
    pub scope: &'a str,
    pub key: &'a str,
    pub value: &'a serde_json::Value,
}

/// Conversations, their history, delivery receipts and small persistent state.
#[async_trait]
pub trait ConversationStore: Send + Sync {
    /// The newest `limit` entries of a conversation, oldest first.
    async fn history(&self, conversation: &ConversationId, limit: usize) -> Result<Vec<HistoryEntry>, StoreError>;

    /// [`ConversationStore::history`] and the conversation's value in a
    /// state scope (keyed by the conversation id), in one round trip where
    /// the store can.
    async fn history_and_state(
        &self,
        conversation: &ConversationId,
        limit: usize,
        scope: &str,
    ) -> Result<(Vec<HistoryEntry>, Option<serde_json::Value>), StoreError> {
        let history = self.history(conversation, limit).await?;
        Ok((history, self.get_state(scope, conversation.as_str()).await?))
    }

    /// Where a conversation lives, as its latest queued task described it.
    async fn conversation(&self, id: &ConversationId) -> Result<Option<ConversationRef>, StoreError>;

    /// The entries a task recorded, if it recorded its turn already.
    async fn task_entries(&self, task: TaskId) -> Result<Vec<HistoryEntry>, StoreError>;

    /// Appends a task's turn to the conversation once: if the task recorded
    /// its turn before, nothing is written and `false` is returned.
    async fn record_turn(
        &self,
        conversation: &ConversationId,
        task: TaskId,
        entries: &[NewHistoryEntry],
    ) -> Result<bool, StoreError>;

    /// [`ConversationStore::record_turn`], and a state value written with
    /// it (a prompt's accounting): in one round trip where the store can.
    /// The value is written whether or not the turn was recorded before.
    async fn record_turn_with_state(
        &self,
        conversation: &ConversationId,
        task: TaskId,
        entries: &[NewHistoryEntry],
        state: StateWrite<'_>,
    ) -> Result<bool, StoreError> {
        let first = self.record_turn(conversation, task, entries).await?;
        self.put_state(state.scope, state.key, state.value).await?;
        Ok(first)
    }

    async fn delivery(&self, task: TaskId, slot: &str) -> Result<Option<DeliveryReceipt>, StoreError>;

    async fn record_delivery(&self, receipt: &DeliveryReceipt) -> Result<(), StoreError>;

    /// Small JSON values kept across restarts, by scope and key: skill
    /// switches, a conversation's active skills, the last prompt's accounting.
    async fn get_state(&self, scope: &str, key: &str) -> Result<Option<serde_json::Value>, StoreError>;

    async fn put_state(&self, scope: &str, key: &str, value: &serde_json::Value) -> Result<(), StoreError>;

    async fn delete_state(&self, scope: &str, key: &str) -> Result<(), StoreError>;

    /// All keys and values of a scope.
    async fn list_state(&self, scope: &str) -> Result<Vec<(String, serde_json::Value)>, StoreError>;
}
