//! The `llm:` section of Herald's configuration. This crate owns it; the
//! binary only nests it under its key.

use std::time::Duration;

use secrecy::SecretString;
use serde::Deserialize;

/// How to reach the model and how hard to try.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LlmConfig {
    /// Any OpenAI-compatible endpoint, including `/v1` (OpenAI, Ollama,
    /// vLLM, llama.cpp, OpenRouter).
    pub base_url: String,
    /// Sent as `Authorization: Bearer`; may be empty for local servers.
    /// Never printed: its `Debug` is redacted.
    pub api_key: SecretString,
    pub model: String,
    /// Model calls one turn may make while the model keeps calling tools.
    pub max_tool_iterations: u32,
    /// The model's context window in tokens. Unset: asked from the server at
    /// start (llama.cpp `/props`, Ollama `/api/show`, vLLM's `/models`), else
    /// [`DEFAULT_CONTEXT_TOKENS`]; a server that refuses a prompt as too long
    /// corrects it either way.
    pub context_tokens: Option<u32>,
    /// An upper bound on the prompt in characters, on top of the token
    /// budget. Unset: the token budget alone.
    pub context_chars: Option<usize>,
    /// One HTTP request, connection and body included; with `stream`, the
    /// longest silence between two parts of the answer.
    #[serde(with = "herald_core::duration::serde")]
    pub request_timeout: Duration,
    /// Retries after the first attempt, for rate limits, 5xx, timeouts and
    /// connection errors.
    pub max_retries: u32,
    /// First backoff delay; doubles each retry.
    #[serde(with = "herald_core::duration::serde")]
    pub retry_base: Duration,
    /// Longest wait between attempts, also the cap on a server's
    /// `retry-after`.
    #[serde(with = "herald_core::duration::serde")]
    pub retry_max: Duration,
    pub temperature: Option<f32>,
    /// The most tokens an answer may take, sent as `max_tokens` (local
    /// servers ignore `max_completion_tokens`); `0` sends none and leaves
    /// it to the server, which for a local one means "until the context is
    /// full". Also the room kept free for the answer in the context window.
    pub max_tokens: u32,
    /// How tool results are sent back to the model.
    pub tool_results: ToolResults,
    /// Ask for the answer as a stream of parts (`stream: true`): a slow
    /// local model then times out only when it stops producing, not when a
    /// long answer takes longer than `request_timeout`.
    pub stream: bool,
    /// Requests the endpoint is sent at once; more wait their turn in
    /// Herald (`herald_model_wait_seconds`). A hosted API takes dozens; a
    /// local server with one slot serves one at a time either way.
    pub max_concurrency: usize,
    /// Whether images go to the model as image parts: `auto` (for model
    /// names known to accept them), `true` or `false`.
    pub vision: crate::media::Vision,
    /// Speech to text for voice notes and audio files; off when unset.
    pub transcription: Option<crate::media::TranscriptionConfig>,
    /// The roots the model and transcription endpoints are trusted by: the
    /// binary hands down `tls.extra_ca_file`'s trust; the system's roots
    /// when nobody does. Not read from the `llm` section.
    #[serde(skip)]
    pub tls: herald_net::ClientTls,
}

/// The context window assumed when neither the configuration nor the server
/// says: small enough for most local models, and corrected by the first
/// server that refuses a prompt as too long.
pub const DEFAULT_CONTEXT_TOKENS: u32 = 32_768;

/// How the result of a tool call reaches the model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolResults {
    /// A `tool` message answering the call: the OpenAI way, right for OpenAI,
    /// vLLM, Ollama and llama.cpp's own server.
    #[default]
    Native,
    /// A `user` message that names the call, for servers whose chat template
    /// drops the `tool` role (llama-cpp-python's `chatml-function-calling`).
    User,
}

impl Default for LlmConfig {
    fn default() -> Self {
        Self {
            base_url: "https://api.openai.com/v1".into(),
            api_key: SecretString::from(""),
            model: "gpt-4o-mini".into(),
            max_tool_iterations: 8,
            context_tokens: None,
            context_chars: None,
            request_timeout: Duration::from_secs(60),
            max_retries: 3,
            retry_base: Duration::from_secs(1),
            retry_max: Duration::from_secs(30),
            temperature: None,
            max_tokens: 1024,
            tool_results: ToolResults::Native,
            stream: false,
            max_concurrency: 32,
            vision: Default::default(),
            transcription: None,
            tls: Default::default(),
        }
    }
}

impl LlmConfig {
    /// `max_tokens` as sent: `None` for `0`.
    pub fn answer_tokens(&self) -> Option<u32> {
        (self.max_tokens > 0).then_some(self.max_tokens)
    }

    /// The retry policy this configuration asks for.
    pub fn backoff(&self) -> herald_core::Backoff {
        herald_core::Backoff {
            base: self.retry_base,
            max_delay: self.retry_max,
            max_attempts: self.max_retries.saturating_add(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use secrecy::ExposeSecret;

    use super::*;

    #[test]
    fn an_empty_section_takes_the_documented_defaults() {
        let config: LlmConfig = serde_yaml::from_str("{}").unwrap();
        assert_eq!(config.base_url, "https://api.openai.com/v1");
        assert_eq!(config.api_key.expose_secret(), "");
        assert_eq!(config.model, "gpt-4o-mini");
        assert_eq!(config.max_tool_iterations, 8);
        assert_eq!((config.context_tokens, config.context_chars), (None, None));
        assert_eq!(config.max_tokens, 1024);
        assert_eq!(config.tool_results, ToolResults::Native);
        assert!(!config.stream);
        assert_eq!(config.max_concurrency, 32);
        assert_eq!(config.request_timeout, Duration::from_secs(60));
        assert_eq!(config.max_retries, 3);
        assert_eq!(config.retry_base, Duration::from_secs(1));
        assert_eq!(config.retry_max, Duration::from_secs(30));
        assert_eq!(config.temperature, None);
    }

    #[test]
    fn reads_every_key() {
        let config: LlmConfig = serde_yaml::from_str(
            "base_url: http://127.0.0.1:11434/v1\napi_key: sk-secret\nmodel: llama3\nmax_tool_iterations: 4\n\
             context_tokens: 4096\ncontext_chars: 8000\nrequest_timeout: 500ms\nmax_retries: 0\nretry_base: 2s\n\
             retry_max: 1m\ntemperature: 0.2\nmax_tokens: 256\ntool_results: user\nstream: true\n\
             max_concurrency: 4\n",
        )
        .unwrap();
        assert_eq!(config.base_url, "http://127.0.0.1:11434/v1");
        assert_eq!(config.api_key.expose_secret(), "sk-secret");
        assert_eq!(config.request_timeout, Duration::from_millis(500));
        assert_eq!(config.retry_max, Duration::from_secs(60));
        assert_eq!(config.temperature, Some(0.2));
        assert_eq!(config.answer_tokens(), Some(256));
        assert_eq!((config.context_tokens, config.context_chars), (Some(4096), Some(8000)));
        assert_eq!(config.tool_results, ToolResults::User);
        assert!(config.stream);
        assert_eq!(config.max_concurrency, 4);
        let unset: LlmConfig = serde_yaml::from_str("max_tokens: 0").unwrap();
        assert_eq!(unset.answer_tokens(), None);
        assert_eq!(config.backoff().max_attempts, 1);
    }

    #[test]
    fn typos_and_bad_durations_are_named() {
        for (yaml, words) in [
            ("modle: x", "unknown field `modle`"),
            ("request_timeout: 60", "missing unit"),
            ("retry_base: soon", "invalid duration `soon`"),
        ] {
            let err = serde_yaml::from_str::<LlmConfig>(yaml).unwrap_err().to_string();
            assert!(err.contains(words), "{yaml}: {err}");
        }
    }

    #[test]
    fn the_api_key_is_never_printed() {
        let config: LlmConfig = serde_yaml::from_str("api_key: sk-very-secret").unwrap();
        assert!(!format!("{config:?}").contains("sk-very-secret"));
    }
}
