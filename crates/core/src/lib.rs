//! Herald's core: the domain types every other crate speaks, and the traits at
//! the seams where a second implementation exists or a test needs one.
//!
//! Architecture invariant: this crate does no I/O. It knows nothing of SQL,
//! HTTP, YAML or any chat platform; those live in the crates that depend on it.
//! A type belongs here when two or more crates must agree on it.

pub mod access;
pub mod channel;
pub mod command;
pub mod duration;
pub mod files;
pub mod heartbeat;
pub mod history;
pub mod ids;
pub mod json;
pub mod llm;
pub mod lock;
pub mod mcp;
pub mod message;
pub mod rate;
pub mod redact;
pub mod retry;
pub mod schedule;
pub mod store;
pub mod task;
pub mod text;
pub mod time;
pub mod tokens;
pub mod tools;

pub use access::Admins;
pub use channel::{
    Admission, ChannelError, ChannelIngress, ChannelOutbound, ChannelStatus, InboundSink, Outbound, Partial,
    SentMessage, Taken,
};
pub use files::{AttachmentFetcher, FileRef, FileStore, InlineBytes, MessageFile, Transcriber, TranscriptionError};
pub use history::{HistoryEntry, NewHistoryEntry, Role};
pub use ids::{ActorId, ChannelName, ConversationId, TaskId};
pub use llm::{
    ChatMessage, ChatModel, ChatRequest, ChatResponse, ImagePart, LlmError, NoText, TextSink, ToolCall, ToolChoice,
    ToolSpec, Usage,
};
pub use lock::{ExclusiveLocks, HeldLock};
pub use mcp::{McpError, McpServerInfo, McpServers, McpTool, McpToolFlags};
pub use message::{
    Attachment, AttachmentKind, ConversationKind, ConversationRef, InboundMessage, OutboundFile, OutboundMessage,
    Sender, human_size,
};
pub use rate::{LocalLimiter, SendLimit, SendLimiter, SendSlot, SteadyClock, Window};
pub use retry::{Backoff, RetryClass};
pub use schedule::{NewSchedule, Schedule, ScheduleId, ScheduleStore};
pub use store::{ConversationStore, DeliveryReceipt, QueueStats, StateWrite, StoreError, TaskQueue};
pub use task::{ClaimFilter, Enqueued, FailOutcome, InstructionOrigin, Lease, NewTask, Task, TaskPayload, TaskState};
pub use time::{Clock, ManualClock, SystemClock, Timestamp};
pub use tools::{NoTools, PromptSection, ToolOutput, Toolbox, TurnOrigin, TurnPreparation, TurnScope};
