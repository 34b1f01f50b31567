//! The tool seam between the agent loop and the skill registry.
//!
//! The agent asks a [`Toolbox`] what this turn offers (prompt sections and
//! tools, already filtered for the sender) and hands it every tool call. The
//! toolbox enforces its policy inside `invoke`: the agent never decides who
//! may run what.

use async_trait::async_trait;

use crate::files::MessageFile;
use crate::ids::{ActorId, TaskId};
use crate::llm::{ToolCall, ToolSpec};
use crate::message::ConversationRef;

/// What set a turn in motion. Chat commands (`/approve`, `/skills enable`,
/// `/schedule`, …) are obeyed only in a turn a person started: a scheduled
/// instruction or a heartbeat was written by someone earlier (perhaps by the
/// model itself, through `schedule_task`) and must not act as a person now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TurnOrigin {
    /// A person's inbound message, authenticated by its platform.
    Person,
    /// A scheduled instruction, run as the actor who created the schedule.
    Schedule,
    /// A heartbeat checklist. Everything such a turn sends passes the
    /// `HEARTBEAT_OK` rule ([`crate::heartbeat::strip_ok_token`]), allowing
    /// `ack_max_chars` characters of commentary beside the token.
    Heartbeat { ack_max_chars: usize },
}

impl TurnOrigin {
    /// Whether the turn's input was typed by a person just now, so chat
    /// commands in it may be obeyed.
    pub fn is_person(self) -> bool {
        self == TurnOrigin::Person
    }

    /// The `HEARTBEAT_OK` allowance when this is a heartbeat turn.
    pub fn quiet_limit(self) -> Option<usize> {
        match self {
            TurnOrigin::Heartbeat { ack_max_chars } => Some(ack_max_chars),
            TurnOrigin::Person | TurnOrigin::Schedule => None,
        }
    }
}

/// Who a turn runs for, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnScope {
    pub task: TaskId,
    pub conversation: ConversationRef,
    /// The sender, or the actor a scheduled task runs as.
    pub actor: Option<ActorId>,
    /// Decided from configuration, never from message content.
    pub is_admin: bool,
    /// The platform message being answered, if any.
    pub reply_to: Option<String>,
    /// Whether a person or an earlier instruction started this turn.
    pub origin: TurnOrigin,
    /// The stored files of the message being answered (none for an
    /// instruction): a skill's script finds them in its temporary folder.
    pub files: Vec<MessageFile>,
}

/// A labelled part of the system prompt, for prompt accounting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromptSection {
    pub label: String,
    pub text: String,
}

/// What a toolbox contributes to one turn.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TurnPreparation {
    /// Added to the system prompt in order.
    pub sections: Vec<PromptSection>,
    pub tools: Vec<ToolSpec>,
    /// The user's text as the model should see it, when the toolbox rewrote
    /// it (history keeps what the user typed).
    pub model_input: Option<String>,
    /// Short notes for the user, sent before the reply.
    pub notices: Vec<String>,
    /// An answer that replaces the model call altogether (a chat command).
    pub direct_reply: Option<String>,
}

/// The result of one tool call, fed back to the model.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolOutput {
    pub content: String,
    pub is_error: bool,
    /// Text this call already delivered to the current conversation, so the
    /// same final text is not sent again.
    pub delivered_to_conversation: Option<String>,
}

impl ToolOutput {
    pub fn ok(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            ..Self::default()
        }
    }

    pub fn error(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: true,
            ..Self::default()
        }
    }
}

#[async_trait]
pub trait Toolbox: Send + Sync {
    /// Prepares a turn: prompt sections, tools for this sender, rewritten
    /// input. `user_text` is what the turn answers: the person's message or
    /// the scheduled instruction. Chat commands in it are answered only when
    /// `scope.origin` is a person.
    async fn prepare(&self, scope: &TurnScope, user_text: Option<&str>) -> TurnPreparation;

    /// The state scope, keyed by conversation id, that [`Toolbox::prepare`]
    /// reads for every turn (the skills active in the conversation). The
    /// agent then reads it with the conversation's history, in one round
    /// trip, and calls [`Toolbox::prepare_with`] instead.
    fn conversation_state_scope(&self) -> Option<&'static str> {
        None
    }

    /// [`Toolbox::prepare`] with the conversation's value of
    /// [`Toolbox::conversation_state_scope`] read already (`None`: none is
    /// stored).
    async fn prepare_with(
        &self,
        scope: &TurnScope,
        user_text: Option<&str>,
        state: Option<serde_json::Value>,
    ) -> TurnPreparation {
        let _ = state;
        self.prepare(scope, user_text).await
    }

    /// Runs one tool call. `occurrence` counts the calls of this turn with
    /// the same tool and the same (canonical) arguments, this one included:
    /// with the task, the tool and the arguments it names a call whatever
    /// order the model makes its calls in, so a task retried after a crash
    /// recognises a call it made before.
    async fn invoke(&self, scope: &TurnScope, call: &ToolCall, occurrence: u32) -> ToolOutput;

    /// Whether several calls of one model step may run at once.
    fn parallel_safe(&self, _tool: &str) -> bool {
        false
    }

    /// How often one identical call of `tool` may run in a turn before the
    /// loop guard refuses it. Research tools (reading, looking up) get more.
    fn repeat_budget(&self, _tool: &str, default: u32) -> u32 {
        default
    }

    /// The tools for the rest of a turn after a round of calls named
    /// `called`, when those calls changed what this sender is offered (a
    /// skill activated mid-turn offers its tools from the next step);
    /// `None` keeps the tools as they are.
    async fn tools_after_round(&self, _scope: &TurnScope, _called: &[String]) -> Option<Vec<ToolSpec>> {
        None
    }
}

/// A toolbox with no tools: the agent is a plain chat model.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoTools;

#[async_trait]
impl Toolbox for NoTools {
    async fn prepare(&self, _scope: &TurnScope, _user_text: Option<&str>) -> TurnPreparation {
        TurnPreparation::default()
    }

    async fn invoke(&self, _scope: &TurnScope, call: &ToolCall, _occurrence: u32) -> ToolOutput {
        ToolOutput::error(format!("no tool named `{}` exists", call.name))
    }
}
