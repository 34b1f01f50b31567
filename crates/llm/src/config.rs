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
    /// The prompt's character budget; prompt assembly stays within it.
    pub context_chars: usize,
    /// One HTTP request, connection and body included.
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
    /// Sent as `max_tokens`: local servers ignore `max_completion_tokens`.
    pub max_tokens: Option<u32>,
}

impl Default for LlmConfig {
    fn default() -> Self {
        Self {
            base_url: "https://api.openai.com/v1".into(),
            api_key: SecretString::from(""),
            model: "gpt-4o-mini".into(),
            max_tool_iterations: 8,
            context_chars: 120_000,
            request_timeout: Duration::from_secs(60),
            max_retries: 3,
            retry_base: Duration::from_secs(1),
            retry_max: Duration::from_secs(30),
            temperature: None,
            max_tokens: None,
        }
    }
}

impl LlmConfig {
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
        assert_eq!(config.context_chars, 120_000);
        assert_eq!(config.request_timeout, Duration::from_secs(60));
        assert_eq!(config.max_retries, 3);
        assert_eq!(config.retry_base, Duration::from_secs(1));
        assert_eq!(config.retry_max, Duration::from_secs(30));
        assert_eq!((config.temperature, config.max_tokens), (None, None));
    }

    #[test]
    fn reads_every_key() {
        let config: LlmConfig = serde_yaml::from_str(
            "base_url: http://127.0.0.1:11434/v1\napi_key: sk-secret\nmodel: llama3\nmax_tool_iterations: 4\n\
             context_chars: 8000\nrequest_timeout: 500ms\nmax_retries: 0\nretry_base: 2s\nretry_max: 1m\n\
             temperature: 0.2\nmax_tokens: 256\n",
        )
        .unwrap();
        assert_eq!(config.base_url, "http://127.0.0.1:11434/v1");
        assert_eq!(config.api_key.expose_secret(), "sk-secret");
        assert_eq!(config.request_timeout, Duration::from_millis(500));
        assert_eq!(config.retry_max, Duration::from_secs(60));
        assert_eq!(config.temperature, Some(0.2));
        assert_eq!(config.max_tokens, Some(256));
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
