//! [`OpenAiModel`]: one chat completion over async-openai (or, with
//! `llm.stream`, as server-sent events read here), one HTTP attempt.
//!
//! The async-openai client is built from our own `reqwest::Client` (timeouts,
//! the trust `LlmConfig::tls` hands down) with [`SingleAttempt`] installed as its HTTP
//! service, which removes async-openai's built-in retry layer; retries belong
//! to [`crate::Retrying`] alone.

use std::time::Duration;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_trait::async_trait;
use herald_core::{ChatModel, ChatRequest, ChatResponse, LlmError};
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;
use tracing::debug;

use crate::config::LlmConfig;
use crate::errors::{self, Endpoint};
use crate::stream::Accumulator;
use crate::transport::SingleAttempt;
use crate::wire::{self, Sampling};

/// The longest a TCP connect may take, within the request timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// An OpenAI-compatible chat model. Does not retry: wrap it in
/// [`crate::Retrying`] (as [`crate::model_from_config`] does).
pub struct OpenAiModel {
    client: Client<OpenAIConfig>,
    /// Set with `llm.stream`: a client whose timeout is per read, not per request.
    streaming: Option<reqwest::Client>,
    api_key: SecretString,
    sampling: Sampling,
    endpoint: Endpoint,
}

impl std::fmt::Debug for OpenAiModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiModel")
            .field("base_url", &herald_core::redact::url(&self.endpoint.base_url))
            .field("model", &self.sampling.model)
            .finish_non_exhaustive()
    }
}

/// The configured base URL without a trailing `/` (async-openai appends
/// `/chat/completions` as it is), checked to be an http(s) URL.
pub(crate) fn base_url(config: &LlmConfig) -> Result<String, LlmError> {
    let trimmed = config.base_url.trim().trim_end_matches('/').to_owned();
    let shown = herald_core::redact::url(&trimmed);
    match reqwest::Url::parse(&trimmed) {
        Ok(url) if matches!(url.scheme(), "http" | "https") => Ok(trimmed),
        Ok(url) => Err(LlmError::Connect(format!(
            "llm.base_url `{shown}` must be an http:// or https:// URL, not {}://",
            url.scheme()
        ))),
        Err(err) => Err(LlmError::Connect(format!(
            "llm.base_url `{shown}` is not a URL ({err}); expected e.g. https://api.openai.com/v1"
        ))),
    }
}

/// The HTTP client for whole requests: the timeout covers the request.
pub(crate) fn http_client(config: &LlmConfig) -> Result<reqwest::Client, LlmError> {
    config
        .tls
        .http()
        .timeout(config.request_timeout)
        .connect_timeout(CONNECT_TIMEOUT.min(config.request_timeout))
        .build()
        .map_err(|err| LlmError::Connect(format!("cannot build the HTTP client for llm.base_url: {err}")))
}

/// The HTTP client for streamed answers: the timeout covers each read, so
/// an answer may take as long as it keeps coming.
fn streaming_client(config: &LlmConfig) -> Result<reqwest::Client, LlmError> {
    config
        .tls
        .http()
        .read_timeout(config.request_timeout)
        .connect_timeout(CONNECT_TIMEOUT.min(config.request_timeout))
        .build()
        .map_err(|err| LlmError::Connect(format!("cannot build the HTTP client for llm.base_url: {err}")))
}

pub(crate) fn check_api_key(config: &LlmConfig) -> Result<(), LlmError> {
    // async-openai unwraps the header it builds from the key; a key with a
    // line break (a copy-paste accident) would panic there.
    let header = format!("Bearer {}", config.api_key.expose_secret());
    reqwest::header::HeaderValue::from_str(&header)
        .map(|_| ())
        .map_err(|_| LlmError::Connect("llm.api_key contains characters an HTTP header cannot carry".into()))
}

impl OpenAiModel {
    pub fn new(config: &LlmConfig) -> Result<Self, LlmError> {
        let base_url = base_url(config)?;
        check_api_key(config)?;
        let http = http_client(config)?;
        let openai_config = OpenAIConfig::new()
            .with_api_base(base_url.clone())
            .with_api_key(config.api_key.expose_secret())
            // Never pick these up from OPENAI_ORG_ID / OPENAI_PROJECT_ID.
            .with_org_id("")
            .with_project_id("");
        let client = Client::build(http.clone(), openai_config).with_http_service(SingleAttempt::new(http));
        Ok(Self {
            client,
            streaming: config.stream.then(|| streaming_client(config)).transpose()?,
            api_key: config.api_key.clone(),
            sampling: Sampling {
                model: config.model.clone(),
                temperature: config.temperature,
                max_tokens: config.answer_tokens(),
                tool_results: config.tool_results,
            },
            endpoint: Endpoint {
                base_url,
                timeout: config.request_timeout,
            },
        })
    }

    /// One streamed completion, folded into one response; `None` when the
    /// stream ended before its first event.
    async fn complete_streamed(
        &self,
        http: &reqwest::Client,
        body: &async_openai::types::chat::CreateChatCompletionRequest,
        sink: &dyn herald_core::TextSink,
    ) -> Result<Option<ChatResponse>, LlmError> {
        let mut body =
            serde_json::to_value(body).map_err(|err| LlmError::BadResponse(format!("request not sent: {err}")))?;
        body["stream"] = Value::Bool(true);
        body["stream_options"] = serde_json::json!({ "include_usage": true });
        let mut request = http
            .post(format!("{}/chat/completions", self.endpoint.base_url))
            .json(&body);
        let key = self.api_key.expose_secret();
        if !key.is_empty() {
            request = request.bearer_auth(key);
        }
        let mut response = request
            .send()
            .await
            .map_err(|err| errors::from_reqwest(&err, &self.endpoint))?;
        let status = response.status();
        let event_stream = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !status.is_success() || !event_stream {
            let retry_after = crate::transport::retry_after(response.headers());
            let bytes = response
                .bytes()
                .await
                .map_err(|err| errors::from_reqwest(&err, &self.endpoint))?;
            if !status.is_success() {
                return Err(errors::from_status(status.as_u16(), retry_after, &bytes));
            }
            // A server that ignored `stream` answered one JSON completion.
            crate::transport::check_chat_completion(&bytes).map_err(LlmError::BadResponse)?;
            let completion = serde_json::from_slice(&bytes)
                .map_err(|err| LlmError::BadResponse(crate::transport::describe(&err)))?;
            return wire::response(completion).map(Some);
        }
        let mut accumulator = Accumulator::default();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|err| errors::from_reqwest(&err, &self.endpoint))?
        {
            let done = accumulator.feed(&chunk)?;
            if let Some(text) = accumulator.text() {
                sink.text(text);
            }
            if done {
                break;
            }
        }
        Ok((!accumulator.is_silent()).then(|| accumulator.finish()))
    }
}

#[async_trait]
impl ChatModel for OpenAiModel {
    async fn complete(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        self.complete_streaming(request, &herald_core::NoText).await
    }

    async fn complete_streaming(
        &self,
        request: ChatRequest,
        sink: &dyn herald_core::TextSink,
    ) -> Result<ChatResponse, LlmError> {
        let messages = request.messages.len();
        let tools = request.tools.len();
        let body = wire::request(&self.sampling, request);
        let streamed = match &self.streaming {
            Some(http) => self.complete_streamed(http, &body, sink).await?,
            None => None,
        };
        let response = match streamed {
            Some(response) => response,
            None => {
                if self.streaming.is_some() {
                    debug!("the stream ended before its first event; asking again without streaming");
                }
                let response = self
                    .client
                    .chat()
                    .create(body)
                    .await
                    .map_err(|err| errors::from_openai(err, &self.endpoint))?;
                wire::response(response)?
            }
        };
        debug!(
            model = %self.sampling.model,
            messages,
            tools,
            tool_calls = response.tool_calls.len(),
            finish_reason = response.finish_reason.as_deref().unwrap_or(""),
            "model answered"
        );
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_are_trimmed_and_checked() {
        for (given, expected) in [
            ("http://127.0.0.1:8089/v1/", Ok("http://127.0.0.1:8089/v1")),
            (" https://api.openai.com/v1 ", Ok("https://api.openai.com/v1")),
            ("localhost:11434/v1", Err("must be an http:// or https:// URL")),
            ("not a url", Err("is not a URL")),
        ] {
            let config = LlmConfig {
                base_url: given.into(),
                ..LlmConfig::default()
            };
            match (base_url(&config), expected) {
                (Ok(url), Ok(want)) => assert_eq!(url, want),
                (Err(err), Err(want)) => {
                    let text = err.to_string();
                    assert!(text.contains(want) && text.contains("llm.base_url"), "{text}");
                }
                (got, want) => panic!("{given}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn a_key_with_a_line_break_is_an_error_not_a_panic() {
        let config = LlmConfig {
            api_key: "sk-abc\n".into(),
            ..LlmConfig::default()
        };
        let err = OpenAiModel::new(&config).unwrap_err().to_string();
        assert!(err.contains("llm.api_key") && !err.contains("sk-abc"), "{err}");
    }
}
