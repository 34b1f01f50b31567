//! What a model server says about itself: the models it serves and its
//! context window, asked at start-up, and the check `herald doctor` runs —
//! one tiny completion with the real tool list, because a server that lists
//! a model can still refuse Herald's tools (or crash on them).
//!
//! Every error names `llm.base_url`, and `llm.api_key` when the key was
//! refused; none prints the key or a password in the URL.

use std::time::Duration;

use herald_core::{ChatMessage, ChatModel, ChatRequest, LlmError, ToolSpec};
use secrecy::ExposeSecret;
use serde_json::{Value, json};

use crate::client::{OpenAiModel, base_url, check_api_key, http_client};
use crate::config::{DEFAULT_CONTEXT_TOKENS, LlmConfig};
use crate::errors::{self, Endpoint};

/// How long start-up waits for each question about the context window.
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(3);

/// Ollama's context when a model sets no `num_ctx` (its OpenAI endpoint
/// silently cuts longer prompts to this).
const OLLAMA_DEFAULT_CONTEXT: u32 = 4096;

/// A model's context window in tokens, and who said so.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContextWindow {
    pub tokens: u32,
    pub source: String,
}

/// The context window: `llm.context_tokens` when set, else what the server
/// says (llama.cpp's `/props`, Ollama's `/api/show`, vLLM's `max_model_len`
/// in `/models`), else [`DEFAULT_CONTEXT_TOKENS`]. Never fails: a server
/// that is down or says nothing gets the default, and a prompt it later
/// refuses as too long corrects it.
pub async fn context_window(config: &LlmConfig) -> ContextWindow {
    if let Some(tokens) = config.context_tokens {
        return ContextWindow {
            tokens,
            source: "llm.context_tokens".into(),
        };
    }
    if let Some(found) = discover(config).await {
        return found;
    }
    ContextWindow {
        tokens: DEFAULT_CONTEXT_TOKENS,
        source: "default (the server did not say; set llm.context_tokens)".into(),
    }
}

async fn discover(config: &LlmConfig) -> Option<ContextWindow> {
    let base = base_url(config).ok()?;
    let root = base.strip_suffix("/v1").unwrap_or(&base).to_owned();
    let quick = LlmConfig {
        request_timeout: DISCOVERY_TIMEOUT,
        ..config.clone()
    };
    let http = http_client(&quick).ok()?;
    let key = config.api_key.expose_secret().to_owned();
    let authed = |request: reqwest::RequestBuilder| {
        if key.is_empty() {
            request
        } else {
            request.bearer_auth(&key)
        }
    };
    let json_of = |response: reqwest::Response| async move {
        if response.status().is_success() {
            response.json::<Value>().await.ok()
        } else {
            None
        }
    };
    // vLLM lists each model's window.
    if let Ok(response) = authed(http.get(format!("{base}/models"))).send().await
        && let Some(list) = json_of(response).await
        && let Some(tokens) = list["data"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| m["id"].as_str() == Some(&config.model))
            .and_then(|m| m["max_model_len"].as_u64())
    {
        return window(tokens, "the server's /models (max_model_len)");
    }
    // llama.cpp's server.
    if let Ok(response) = authed(http.get(format!("{root}/props"))).send().await
        && let Some(props) = json_of(response).await
        && let Some(tokens) = props["default_generation_settings"]["n_ctx"]
            .as_u64()
            .or(props["n_ctx"].as_u64())
    {
        return window(tokens, "llama.cpp's /props (n_ctx)");
    }
    // Ollama: the model's `num_ctx` when it sets one, else Ollama's default.
    if let Ok(response) = authed(http.post(format!("{root}/api/show")))
        .json(&json!({ "model": config.model }))
        .send()
        .await
        && let Some(show) = json_of(response).await
        && show.get("model_info").is_some()
    {
        let num_ctx = show["parameters"].as_str().and_then(|parameters| {
            parameters.lines().find_map(|line| {
                let mut words = line.split_whitespace();
                (words.next() == Some("num_ctx"))
                    .then(|| words.next()?.parse::<u64>().ok())
                    .flatten()
            })
        });
        let trained = show["model_info"]
            .as_object()
            .and_then(|info| info.iter().find(|(key, _)| key.ends_with(".context_length")))
            .and_then(|(_, value)| value.as_u64());
        return match num_ctx {
            Some(tokens) => window(tokens, "Ollama's /api/show (num_ctx)"),
            None => window(
                trained.map_or(u64::from(OLLAMA_DEFAULT_CONTEXT), |t| {
                    t.min(u64::from(OLLAMA_DEFAULT_CONTEXT))
                }),
                "Ollama's default num_ctx (the model sets none)",
            ),
        };
    }
    None
}

fn window(tokens: u64, source: &str) -> Option<ContextWindow> {
    let tokens = u32::try_from(tokens).ok().filter(|t| *t > 0)?;
    Some(ContextWindow {
        tokens,
        source: source.to_owned(),
    })
}

/// The models `GET {base_url}/models` lists.
pub async fn list_models(config: &LlmConfig) -> Result<Vec<String>, LlmError> {
    let base_url = base_url(config)?;
    let shown = herald_core::redact::url(&base_url);
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
            &shown,
            key.is_empty(),
        ));
    }
    Ok(serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|value| value["data"].as_array().cloned())
        .ok_or_else(|| {
            LlmError::BadResponse(format!(
                "llm.base_url {shown}: GET /models did not answer an OpenAI model list"
            ))
        })?
        .iter()
        .filter_map(|model| model["id"].as_str().map(str::to_owned))
        .collect())
}

/// Whether `listed` serves `model`: by its id, or Ollama's `name:latest`
/// for a `name` without a tag.
pub fn serves(listed: &[String], model: &str) -> bool {
    listed
        .iter()
        .any(|id| id == model || (!model.contains(':') && id.strip_suffix(":latest") == Some(model)))
}

/// `herald doctor`'s check of the model: the server lists the model (when
/// it lists any), and answers one tiny completion offered `tools`. `Ok`
/// says what was found, the context window included.
pub async fn check(config: &LlmConfig, tools: Vec<ToolSpec>) -> Result<String, LlmError> {
    let base = herald_core::redact::url(&base_url(config)?);
    let listed = list_models(config).await?;
    if !listed.is_empty() && !serves(&listed, &config.model) {
        let mut shown: Vec<&str> = listed.iter().map(String::as_str).take(8).collect();
        if listed.len() > shown.len() {
            shown.push("…");
        }
        return Err(LlmError::Rejected {
            status: 404,
            message: format!(
                "llm.model `{}` is not served by {base}; it lists: {}",
                config.model,
                shown.join(", ")
            ),
        });
    }
    let offered = tools.len();
    let tiny = LlmConfig {
        max_tokens: 16,
        stream: false,
        ..config.clone()
    };
    let model = OpenAiModel::new(&tiny)?;
    model
        .complete(ChatRequest::new(
            vec![
                ChatMessage::system("This is a connection check. Answer with the word OK."),
                ChatMessage::user("ping"),
            ],
            tools,
        ))
        .await
        .map_err(|err| name_the_setting(err, &base, config.api_key.expose_secret().is_empty()))?;
    let window = context_window(config).await;
    Ok(format!(
        "{base} answers as `{}` with {offered} tools offered; context window {} tokens ({})",
        config.model, window.tokens, window.source
    ))
}

/// Adds which setting to check to an error.
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
    fn a_model_is_served_by_its_id_or_as_ollama_latest() {
        let listed = vec![
            "llama3.2:latest".to_owned(),
            "qwen2.5:7b".to_owned(),
            "gpt-4o-mini".to_owned(),
        ];
        for (model, served) in [
            ("gpt-4o-mini", true),
            ("llama3.2", true),
            ("llama3.2:latest", true),
            ("qwen2.5", false),
            ("qwen2.5:7b", true),
            ("gpt-4o", false),
        ] {
            assert_eq!(serves(&listed, model), served, "{model}");
        }
    }
}
