//! Tasks: the unit of work on Herald's durable queue. Every channel message,
//! scheduled run and heartbeat becomes one, and the agent loop serves them.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::ids::{ActorId, ChannelName, ConversationId, TaskId};
use crate::message::{ConversationRef, InboundMessage};
use crate::time::Timestamp;

/// What a task asks the agent to do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TaskPayload {
    /// A person wrote to Herald.
    Message(InboundMessage),
    /// Herald acts on an instruction nobody typed just now: a scheduled task or
    /// a heartbeat. It runs with the permissions of `actor` in `conversation`.
    Instruction {
        conversation: ConversationRef,
        instruction: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        actor: Option<ActorId>,
        origin: InstructionOrigin,
    },
}

/// Where an [`TaskPayload::Instruction`] came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum InstructionOrigin {
    Schedule { schedule_id: i64 },
    Heartbeat,
}

impl TaskPayload {
    pub fn conversation(&self) -> &ConversationRef {
        match self {
            TaskPayload::Message(message) => &message.conversation,
            TaskPayload::Instruction { conversation, .. } => conversation,
        }
    }
}

/// A task to put on the queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewTask {
    pub payload: TaskPayload,
    /// A key that makes enqueueing idempotent: a second task with the same key
    /// is not stored. Channels use [`InboundMessage::dedup_key`].
    pub dedup_key: Option<String>,
    /// Lower runs first among conversations that have work. Users' messages
    /// are 0; background work is higher.
    pub priority: i32,
    /// Not before this time; `None` means now.
    pub not_before: Option<Timestamp>,
}

impl NewTask {
    pub fn message(message: InboundMessage) -> Self {
        Self {
            dedup_key: Some(message.dedup_key()),
            payload: TaskPayload::Message(message),
            priority: 0,
            not_before: None,
        }
    }

    pub fn conversation(&self) -> &ConversationId {
        &self.payload.conversation().id
    }
}

/// The lifecycle of a task in the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    Queued,
    Leased,
    Done,
    Dead,
}

impl TaskState {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Queued => "queued",
            TaskState::Leased => "leased",
            TaskState::Done => "done",
            TaskState::Dead => "dead",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "queued" => TaskState::Queued,
            "leased" => TaskState::Leased,
            "done" => TaskState::Done,
            "dead" => TaskState::Dead,
            _ => return None,
        })
    }
}

/// A stored task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Task {
    pub id: TaskId,
    pub conversation: ConversationId,
    pub channel: ChannelName,
    pub payload: TaskPayload,
    /// How many times the task has been claimed, this claim included.
    pub attempt: u32,
    /// Attempts the queue allows; a claim with `attempt > max_attempts` is a
    /// task whose worker kept dying, and is to be given up.
    pub max_attempts: u32,
    pub enqueued_at: Timestamp,
    pub last_error: Option<String>,
}

/// A claimed task. Whoever holds the lease serves the task until it completes,
/// fails, or the lease expires; the token proves who holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub task: Task,
    pub token: String,
    pub expires_at: Timestamp,
}

/// What `enqueue` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enqueued {
    New(TaskId),
    /// A task with the same dedup key was stored before; nothing was added.
    Duplicate(TaskId),
}

impl Enqueued {
    pub fn task_id(self) -> TaskId {
        match self {
            Enqueued::New(id) | Enqueued::Duplicate(id) => id,
        }
    }
}

/// What `fail` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailOutcome {
    /// The task will be offered again at this time.
    Retry { at: Timestamp, after: Duration },
    /// The task ran out of attempts and will not run again.
    Dead,
}

/// Which tasks a worker may claim: only those it can answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimFilter {
    /// Only tasks of these channels; `None` means any.
    pub channels: Option<Vec<ChannelName>>,
    /// Only tasks of these conversations; `None` means any.
    pub conversations: Option<Vec<ConversationId>>,
}

impl ClaimFilter {
    pub fn any() -> Self {
        Self::default()
    }

    pub fn channels(channels: impl IntoIterator<Item = ChannelName>) -> Self {
        Self {
            channels: Some(channels.into_iter().collect()),
            conversations: None,
        }
    }

    pub fn conversation(conversation: ConversationId) -> Self {
        Self {
            channels: None,
            conversations: Some(vec![conversation]),
        }
    }
}
