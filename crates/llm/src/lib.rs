//! Herald's model client: [`herald_core::ChatModel`] over any
//! OpenAI-compatible chat completions endpoint, through async-openai.
//!
//! What it owns: the `llm:` configuration ([`LlmConfig`]), the translation of
//! Herald's messages and tools into the wire format every server accepts, the
//! classification of failures into [`herald_core::LlmError`], and the one
//! retry policy ([`Retrying`]).
//!
//! Architecture invariant: exactly one layer retries a model call. async-openai
//! ships a retry layer in its default HTTP executor; [`OpenAiModel`] replaces
//! that executor with a single-attempt tower service of its own (see the
//! `transport` module), chosen over calling reqwest directly so requests and
//! responses still go through async-openai's client and types. The same
//! service keeps the response headers async-openai's `ApiError` drops, so a
//! 429's `retry-after` reaches [`Retrying`].
//!
//! It never logs prompts, answers or the API key.

mod bounded;
mod client;
mod config;
mod errors;
mod media;
pub mod portable;
mod retrying;
mod server;
mod stream;
mod transport;
mod wire;

use std::sync::Arc;

pub use bounded::Bounded;
pub use client::OpenAiModel;
pub use config::{DEFAULT_CONTEXT_TOKENS, LlmConfig, ToolResults};
pub use herald_core::{ChatModel, LlmError};
pub use media::{OpenAiTranscriber, TranscriptionConfig, Vision};
pub use retrying::Retrying;
pub use server::{ContextWindow, check, context_window, list_models, serves};

/// The model Herald runs with: [`OpenAiModel`], at most
/// `llm.max_concurrency` requests at once ([`Bounded`]), under [`Retrying`]
/// with the configured backoff.
pub fn model_from_config(config: &LlmConfig) -> Result<Arc<dyn ChatModel>, LlmError> {
    let model = OpenAiModel::new(config)?;
    Ok(Arc::new(
        Retrying::new(Bounded::new(model, config.max_concurrency), config.backoff())
            .with_wait_after_timeout(config.request_timeout),
    ))
}
