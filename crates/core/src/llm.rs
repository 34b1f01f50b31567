//! The model seam: one chat completion with native tool calling. The agent
//! loop talks to this trait; `herald-llm` implements it over async-openai.

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::retry::RetryClass;

/// A tool the model may call, described by a JSON schema.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// A tool call the model asked for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments exactly as the model wrote them: a JSON text that may be
    /// invalid, which the tool layer reports back to the model.
    pub arguments: String,
}

/// An image for the model: a `data:` URL (base64 of the encoded image).
/// Debug prints only its type and length, so a prompt in a log carries no
/// picture.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImagePart {
    pub data_url: String,
}

impl std::fmt::Debug for ImagePart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = self.data_url.split(';').next().unwrap_or_default();
        write!(f, "ImagePart({kind}, {} chars)", self.data_url.len())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum ChatMessage {
    System {
        content: String,
    },
    User {
        content: String,
        /// Images that go with the text, as `image_url` content parts; empty
        /// for a plain text message (sent as a string, as every server takes).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<ImagePart>,
    },
    Assistant {
        content: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    Tool {
        tool_call_id: String,
        content: String,
    },
}

impl ChatMessage {
    pub fn system(content: impl Into<String>) -> Self {
        ChatMessage::System {
            content: content.into(),
        }
    }

    pub fn user(content: impl Into<String>) -> Self {
        ChatMessage::User {
            content: content.into(),
            images: Vec::new(),
        }
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        ChatMessage::Assistant {
            content: Some(content.into()),
            tool_calls: Vec::new(),
        }
    }

    /// The estimated tokens this message takes in the prompt, with the
    /// per-message framing every chat template adds.
    pub fn tokens(&self) -> usize {
        use crate::tokens::{IMAGE_TOKENS, MESSAGE_OVERHEAD, estimate};
        MESSAGE_OVERHEAD
            + match self {
                ChatMessage::System { content } => estimate(content),
                ChatMessage::User { content, images } => estimate(content) + images.len() * IMAGE_TOKENS,
                ChatMessage::Assistant { content, tool_calls } => {
                    content.as_deref().map_or(0, estimate)
                        + tool_calls
                            .iter()
                            .map(|c| estimate(&c.name) + estimate(&c.arguments) + MESSAGE_OVERHEAD)
                            .sum::<usize>()
                }
                ChatMessage::Tool { content, .. } => estimate(content),
            }
    }

    /// Characters this message takes in the prompt, for budget accounting.
    pub fn chars(&self) -> usize {
        match self {
            ChatMessage::System { content } | ChatMessage::User { content, .. } => content.chars().count(),
            ChatMessage::Assistant { content, tool_calls } => {
                content.as_deref().map_or(0, |c| c.chars().count())
                    + tool_calls
                        .iter()
                        .map(|c| c.name.len() + c.arguments.chars().count())
                        .sum::<usize>()
            }
            ChatMessage::Tool { content, .. } => content.chars().count(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolSpec>,
    /// Whether the model may call the tools offered. Ignored without tools.
    #[serde(default)]
    pub tool_choice: ToolChoice,
}

impl ChatRequest {
    /// A request offering `tools`, which the model may call.
    pub fn new(messages: Vec<ChatMessage>, tools: Vec<ToolSpec>) -> Self {
        Self {
            messages,
            tools,
            tool_choice: ToolChoice::Auto,
        }
    }
}

/// `tool_choice`: `Auto` lets the model call a tool or answer; `None` shows
/// the tools but asks for a text answer (some servers, offered tools, will
/// answer only with a call or nothing at all).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    #[default]
    Auto,
    None,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatResponse {
    pub content: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
}

#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("model endpoint rate limited the request")]
    RateLimited { retry_after: Option<Duration> },
    #[error("model endpoint answered {status}: {message}")]
    Server { status: u16, message: String },
    #[error("model endpoint refused the request ({status}): {message}")]
    Rejected { status: u16, message: String },
    /// The prompt (with the room asked for the answer) is larger than the
    /// model's context window. Retrying the same request cannot help; a
    /// shorter prompt can. `limit_tokens` is the window when the server said.
    #[error("the prompt does not fit the model's context window: {message}")]
    ContextOverflow { limit_tokens: Option<u32>, message: String },
    #[error("model request timed out after {0:?}")]
    Timeout(Duration),
    #[error("cannot reach the model endpoint: {0}")]
    Connect(String),
    #[error("model answered something Herald cannot read: {0}")]
    BadResponse(String),
}

impl LlmError {
    pub fn retry_class(&self) -> RetryClass {
        match self {
            LlmError::RateLimited {
                retry_after: Some(after),
            } => RetryClass::RetryAfter(*after),
            LlmError::RateLimited { retry_after: None }
            | LlmError::Server { .. }
            | LlmError::Timeout(_)
            | LlmError::Connect(_) => RetryClass::Transient,
            LlmError::Rejected { .. } | LlmError::ContextOverflow { .. } | LlmError::BadResponse(_) => {
                RetryClass::Fatal
            }
        }
    }
}

/// An OpenAI-compatible chat model.
#[async_trait]
pub trait ChatModel: Send + Sync {
    async fn complete(&self, request: ChatRequest) -> Result<ChatResponse, LlmError>;

    /// As [`ChatModel::complete`], telling `sink` the answer's text as the
    /// model writes it, where the model streams (`llm.stream`); a model
    /// that does not answers at once and tells the sink nothing.
    async fn complete_streaming(&self, request: ChatRequest, sink: &dyn TextSink) -> Result<ChatResponse, LlmError> {
        let _ = sink;
        self.complete(request).await
    }
}

/// Receives an answer's text while the model writes it.
pub trait TextSink: Send + Sync {
    /// The answer's text so far: the whole of it, each time longer (or
    /// shorter, when a failed call is asked again).
    fn text(&self, text: &str);

    /// The text so far was a tool round's, not the answer: the model goes
    /// on after its tools ran.
    fn tool_round(&self) {}
}

/// A sink that listens to nothing.
pub struct NoText;

impl TextSink for NoText {
    fn text(&self, _: &str) {}
}
