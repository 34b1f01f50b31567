//! Conversation history as the agent sees it: what people said and what
//! Herald answered, in order.

use serde::{Deserialize, Serialize};

use crate::ids::{ActorId, TaskId};
use crate::time::Timestamp;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "user" => Some(Role::User),
            "assistant" => Some(Role::Assistant),
            _ => None,
        }
    }
}

/// One stored line of a conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryEntry {
    pub id: i64,
    pub task: Option<TaskId>,
    pub role: Role,
    pub actor: Option<ActorId>,
    pub text: String,
    pub at: Timestamp,
}

/// A line to append to a conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewHistoryEntry {
    pub role: Role,
    pub actor: Option<ActorId>,
    pub text: String,
}
