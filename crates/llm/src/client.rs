//! [`OpenAiModel`]: one chat completion over async-openai, one HTTP attempt,
//! and [`probe`] for `herald doctor`.
//!
//! The async-openai client is built from our own `reqwest::Client` (timeouts,
//! the process's rustls provider) with [`SingleAttempt`] installed as its HTTP
//! service, which removes async-openai's built-in retry layer; retries belong
//! to [`crate::Retrying`] alone.

use std::time::Duration;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_trait::async_trait;
use herald_core::{ChatModel, ChatRequest, ChatResponse, LlmError};
use secrecy::ExposeSecret;
use serde_json::Value;
use tracing::debug;

use crate::config::LlmConfig;
use crate::errors::{self, Endpoint};
use crate::transport::SingleAttempt;
use crate::wire::{self, Sampling};

/// The longest a TCP connect may take, within the request timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// An OpenAI-compatible chat model. Does not retry: wrap it in
/// [`crate::Retrying`] (as [`crate::model_from_config`] does).
pub struct OpenAiModel {
    client: Client<OpenAIConfig>,
    sampling: Sampling,
    endpoint: Endpoint,
}

impl std::fmt::Debug for OpenAiModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiModel")
            .field("base_url", &self.endpoint.base_url)
            .field("model", &self.sampling.model)
            .finish_non_exhaustive()
    }
}

/// The configured base URL without a trailing `/` (async-openai appends
/// `/chat/completions` as it is), checked to be an http(s) URL.
fn base_url(config: &LlmConfig) -> Result<String, LlmError> {
    let trimmed = config.base_url.trim().trim_end_matches('/').to_owned();
    match reqwest::Url::parse(&trimmed) {
        Ok(url) if matches!(url.scheme(), "http" | "https") => Ok(trimmed),
        Ok(url) => Err(LlmError::Connect(format!(
            "llm.base_url `{trimmed}` must be an http:// or https:// URL, not {}://",
            url.scheme()
        ))),
        Err(err) => Err(LlmError::Connect(format!(
            "llm.base_url `{trimmed}` is not a URL ({err}); expected e.g. https://api.openai.com/v1"
        ))),
    }
}

/// The HTTP client both the model and the probe use.
fn http_client(config: &LlmConfig) -> Result<reqwest::Client, LlmError> {
    // reqwest is built without a bundled crypto provider and panics without
    // one; the binary installs ring at start, this covers tests and tools.
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    reqwest::Client::builder()
        .timeout(config.request_timeout)
        .connect_timeout(CONNECT_TIMEOUT.min(config.request_timeout))
        .build()
        .map_err(|err| LlmError::Connect(format!("cannot build the HTTP client for llm.base_url: {err}")))
}

fn check_api_key(config: &LlmConfig) -> Result<(), LlmError> {
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
            sampling: Sampling {
                model: config.model.clone(),
                temperature: config.temperature,
                max_tokens: config.max_tokens,
            },
            endpoint: Endpoint {
                base_url,
                timeout: config.request_timeout,
            },
        })
    }
}

#[async_trait]
impl ChatModel for OpenAiModel {
    async fn complete(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        let messages = request.messages.len();
        let tools = request.tools.len();
        let body = wire::request(&self.sampling, request);
        let response = self
            .client
            .chat()
            .create(body)
            .await
            .map_err(|err| errors::from_openai(err, &self.endpoint))?;
        let response = wire::response(response)?;
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

/// Checks the endpoint answers `GET {base_url}/models` with this key, for
/// `herald doctor`. `Ok` describes what was found; every error names
/// `llm.base_url` (and `llm.api_key` when the key was refused).
pub async fn probe(config: &LlmConfig) -> Result<String, LlmError> {
    let base_url = base_url(config)?;
    check_api_key(config)?;
    let endpoint = Endpoint {
        base_url: base_url.clone(),
        timeout: config.request_timeout,
    };
    let key = config.api_key.expose_secret();
    let mut request = http_client(config)?.get(format!("{base_url}/models"));
    if !key.is_empty() {
        request = request.bearer_auth(key);
    }
    let response = request
        .send()
        .await
        .map_err(|err| errors::from_reqwest(&err, &endpoint))?;
    let status = response.status();
    let retry_after = crate::transport::retry_after(response.headers());
    let body = response
        .bytes()
        .await
        .map_err(|err| errors::from_reqwest(&err, &endpoint))?;
    if !status.is_success() {
        return Err(name_the_setting(
            errors::from_status(status.as_u16(), retry_after, &body),
            &base_url,
            key.is_empty(),
        ));
    }
    let listed: Vec<String> = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|value| value["data"].as_array().cloned())
        .ok_or_else(|| {
            LlmError::BadResponse(format!(
                "llm.base_url {base_url}: GET /models did not answer an OpenAI model list"
            ))
        })?
        .iter()
        .filter_map(|model| model["id"].as_str().map(str::to_owned))
        .collect();
    let verdict = if listed.iter().any(|id| id == &config.model) {
        format!("model `{}` is available", config.model)
    } else {
        format!(
            "model `{}` is not among the {} listed (the server may still accept it)",
            config.model,
            listed.len()
        )
    };
    Ok(format!("{base_url} answers; {verdict}"))
}

/// Adds which setting to check to a probe's error.
fn name_the_setting(error: LlmError, base_url: &str, key_is_empty: bool) -> LlmError {
    match error {
        LlmError::Rejected { status, message } => {
            let hint = match status {
                401 | 403 if key_is_empty => " (llm.api_key is empty)".to_owned(),
                401 | 403 => " (check llm.api_key)".to_owned(),
                404 => " (does llm.base_url need to end in /v1?)".to_owned(),
                _ => String::new(),
            };
            LlmError::Rejected {
                status,
                message: format!("llm.base_url {base_url}: {message}{hint}"),
            }
        }
        LlmError::Server { status, message } => LlmError::Server {
            status,
            message: format!("llm.base_url {base_url}: {message}"),
        },
        other => other,
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
