//! Herald's agent: one turn is prompt assembly, model calls, tool calls and a
//! reply; workers take tasks from the queue and serve them.
//!
//! Architecture invariant: the agent never decides who may run a tool. It
//! hands every call the model makes to the [`Toolbox`](herald_core::Toolbox),
//! which enforces policy at execution.

pub mod attachments;
pub mod config;
pub mod prompt;
pub mod turn;
pub mod worker;

pub use attachments::{AttachmentPromptConfig, AttachmentReader, PreparedInput, file_reader_entry};
pub use config::{AgentConfig, ContextWindow, TurnLimits};
pub use prompt::{PromptAccounting, TurnAttachments, assemble_prompt};
pub use turn::{TurnError, TurnOutcome, TurnRequest, run_turn};
pub use worker::{Agent, AgentParts, Finish, TaskFinished, WorkerPool};
