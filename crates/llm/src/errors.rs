//! Classification of everything a model call can fail with into
//! [`LlmError`], whose `retry_class` the retry policy acts on.
//!
//! Rules: 429 is a rate limit (with the server's wait) unless the body says
//! the quota is spent, which no retry fixes; 5xx is a server error; any other
//! status is a refusal; a timeout is a timeout; anything that kept the request
//! from completing is a connection error naming `llm.base_url`, so the binary
//! can print one line that says which setting to check. Error texts never
//! carry a request or answer body: some servers echo the request in their
//! validation errors.

use std::time::Duration;

use async_openai::error::{OpenAIError, WrappedError};
use herald_core::LlmError;
use serde_json::Value;

use crate::transport::{TransportError, describe};

/// Where requests go, for error messages.
#[derive(Clone, Debug)]
pub(crate) struct Endpoint {
    pub base_url: String,
    pub timeout: Duration,
}

const MESSAGE_LIMIT: usize = 200;

fn truncate(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(MESSAGE_LIMIT) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// The human part of an error body: OpenAI's `error.message`, FastAPI's
/// `detail` (without the echoed `input`), or the start of the text.
pub(crate) fn error_message(body: &[u8]) -> String {
    if let Ok(wrapped) = serde_json::from_slice::<WrappedError>(body) {
        return truncate(&wrapped.error.message);
    }
    if let Ok(value) = serde_json::from_slice::<Value>(body) {
        match &value["detail"] {
            Value::String(detail) => return truncate(detail),
            Value::Array(items) => {
                let parts: Vec<String> = items
                    .iter()
                    .map(|item| {
                        let location: Vec<String> = item["loc"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(|part| part.as_str().map_or_else(|| part.to_string(), str::to_owned))
                            .collect();
                        format!("{}: {}", location.join("."), item["msg"].as_str().unwrap_or("invalid"))
                    })
                    .collect();
                return truncate(&parts.join("; "));
            }
            _ => {}
        }
        if let Some(message) = value["error"].as_str().or(value["message"].as_str()) {
            return truncate(message);
        }
    }
    let text = String::from_utf8_lossy(body);
    if text.trim().is_empty() {
        "(empty body)".to_owned()
    } else {
        truncate(&text)
    }
}

/// A spent quota is a 429 too, but waiting does not help.
fn quota_spent(body: &[u8]) -> bool {
    serde_json::from_slice::<WrappedError>(body)
        .is_ok_and(|wrapped| wrapped.error.code.as_deref() == Some("insufficient_quota"))
}

/// Whether a refusal says the prompt is longer than the context window:
/// OpenAI's and llama-cpp-python's `code: context_length_exceeded`,
/// llama.cpp's `type: exceed_context_size_error`, or vLLM's and others'
/// wording. `Some(window)` when it is, with the window when the body names it.
fn context_overflow(status: u16, body: &[u8]) -> Option<Option<u32>> {
    if !matches!(status, 400 | 413 | 422 | 500) {
        return None;
    }
    let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let error = if value["error"].is_object() {
        &value["error"]
    } else {
        &value
    };
    let tagged = [&error["code"], &error["type"]].iter().any(|tag| {
        matches!(
            tag.as_str(),
            Some("context_length_exceeded" | "exceed_context_size_error")
        )
    });
    let message = error["message"]
        .as_str()
        .or(value["detail"].as_str())
        .map_or_else(|| String::from_utf8_lossy(body).into_owned(), str::to_owned)
        .to_ascii_lowercase();
    const PHRASES: [&str; 6] = [
        "maximum context length",
        "context window",
        "context length",
        "exceeds the available context",
        "context size",
        "prompt is too long",
    ];
    if !tagged && !PHRASES.iter().any(|phrase| message.contains(phrase)) {
        return None;
    }
    let window = error["n_ctx"].as_u64().and_then(|n| u32::try_from(n).ok()).or_else(|| {
        number_after(
            &message,
            &[
                "maximum context length is",
                "context window of",
                "context size of",
                "n_ctx",
            ],
        )
    });
    Some(window)
}

/// The first whole number after one of `phrases` in `text`.
fn number_after(text: &str, phrases: &[&str]) -> Option<u32> {
    phrases.iter().find_map(|phrase| {
        let rest = &text[text.find(phrase)? + phrase.len()..];
        let digits: String = rest
            .trim_start_matches(|c: char| !c.is_ascii_digit())
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok().filter(|n| *n > 0)
    })
}

/// An HTTP status other than success.
pub(crate) fn from_status(status: u16, retry_after: Option<Duration>, body: &[u8]) -> LlmError {
    if let Some(limit_tokens) = context_overflow(status, body) {
        return LlmError::ContextOverflow {
            limit_tokens,
            message: error_message(body),
        };
    }
    match status {
        429 if !quota_spent(body) => LlmError::RateLimited { retry_after },
        500..=599 => LlmError::Server {
            status,
            message: error_message(body),
        },
        _ => LlmError::Rejected {
            status,
            message: error_message(body),
        },
    }
}

/// The innermost cause, e.g. `Connection refused (os error 111)`.
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut current = error;
    while let Some(source) = current.source() {
        current = source;
    }
    current.to_string()
}

pub(crate) fn from_reqwest(error: &reqwest::Error, endpoint: &Endpoint) -> LlmError {
    if error.is_timeout() {
        LlmError::Timeout(endpoint.timeout)
    } else if error.is_decode() {
        LlmError::BadResponse(root_cause(error))
    } else {
        LlmError::Connect(format!(
            "llm.base_url {}: {}",
            herald_core::redact::url(&endpoint.base_url),
            root_cause(error)
        ))
    }
}

pub(crate) fn from_openai(error: OpenAIError, endpoint: &Endpoint) -> LlmError {
    match error {
        OpenAIError::Boxed(boxed) => match boxed.downcast::<TransportError>() {
            Ok(transport) => match *transport {
                TransportError::Status {
                    status,
                    retry_after,
                    body,
                } => from_status(status, retry_after, &body),
                TransportError::Undecodable(reason) => LlmError::BadResponse(reason),
            },
            Err(other) => match other.downcast::<reqwest::Error>() {
                Ok(reqwest_error) => from_reqwest(&reqwest_error, endpoint),
                Err(other) => LlmError::BadResponse(other.to_string()),
            },
        },
        OpenAIError::Reqwest(reqwest_error) => from_reqwest(&reqwest_error, endpoint),
        OpenAIError::ApiError(api) => {
            let status = api.status_code.as_u16();
            let body = serde_json::to_vec(&WrappedError { error: api.api_error }).unwrap_or_default();
            from_status(status, None, &body)
        }
        OpenAIError::JSONDeserialize(err, _body) => LlmError::BadResponse(describe(&err)),
        OpenAIError::StreamError(err) => LlmError::BadResponse(format!("stream failed: {err}")),
        OpenAIError::InvalidArgument(message) => LlmError::BadResponse(format!("request not sent: {message}")),
        other => LlmError::BadResponse(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use herald_core::RetryClass;

    use super::*;

    #[test]
    fn statuses_map_to_what_a_retry_policy_needs() {
        let openai = |message: &str, code: &str| {
            format!(r#"{{"error":{{"message":"{message}","type":"x","param":null,"code":"{code}"}}}}"#)
        };
        let wait = Some(Duration::from_secs(3));
        for (status, retry_after, body, class, words) in [
            (
                429,
                wait,
                openai("slow down", "rate_limit_exceeded"),
                RetryClass::RetryAfter(Duration::from_secs(3)),
                "rate limited",
            ),
            (429, None, String::new(), RetryClass::Transient, "rate limited"),
            (
                429,
                wait,
                openai("You exceeded your current quota", "insufficient_quota"),
                RetryClass::Fatal,
                "exceeded your current quota",
            ),
            (
                500,
                None,
                "Internal Server Error".into(),
                RetryClass::Transient,
                "answered 500: Internal Server Error",
            ),
            (
                503,
                None,
                openai("overloaded", "x"),
                RetryClass::Transient,
                "answered 503: overloaded",
            ),
            (
                400,
                None,
                openai("bad messages", "x"),
                RetryClass::Fatal,
                "refused the request (400): bad messages",
            ),
            (
                401,
                None,
                openai("Incorrect API key provided", "invalid_api_key"),
                RetryClass::Fatal,
                "(401): Incorrect API key",
            ),
            (404, None, String::new(), RetryClass::Fatal, "(404): (empty body)"),
        ] {
            let error = from_status(status, retry_after, body.as_bytes());
            assert_eq!(error.retry_class(), class, "{status} {body}");
            assert!(error.to_string().contains(words), "{status}: {error}");
        }
    }

    #[test]
    fn a_prompt_too_long_is_recognised_on_every_server_shape() {
        for (status, body, window) in [
            // OpenAI, and llama-cpp-python's server, which copies its shape.
            (
                400,
                r#"{"error":{"message":"This model's maximum context length is 4096 tokens. However, you requested 5120 tokens (4096 in the messages, 1024 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
                Some(4096),
            ),
            // llama.cpp's own server.
            (
                400,
                r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":2048}}"#,
                Some(2048),
            ),
            // vLLM.
            (
                400,
                r#"{"object":"error","message":"This model's maximum context length is 8192 tokens. However, you requested 9000 tokens in the messages, Please reduce the length of the messages.","type":"BadRequestError","param":null,"code":400}"#,
                Some(8192),
            ),
            (413, r#"{"error":{"message":"prompt is too long","code":null}}"#, None),
        ] {
            match from_status(status, None, body.as_bytes()) {
                LlmError::ContextOverflow { limit_tokens, .. } => assert_eq!(limit_tokens, window, "{body}"),
                other => panic!("{body}: {other:?}"),
            }
        }
        for (status, body) in [
            (400, r#"{"error":{"message":"bad messages","code":null}}"#),
            (
                429,
                r#"{"error":{"message":"maximum context length is 4096","code":"rate_limit_exceeded"}}"#,
            ),
        ] {
            assert!(
                !matches!(
                    from_status(status, None, body.as_bytes()),
                    LlmError::ContextOverflow { .. }
                ),
                "{body}"
            );
        }
    }

    #[test]
    fn error_texts_do_not_echo_the_request() {
        for (body, expected) in [
            (
                r#"{"detail":[{"type":"missing","loc":["body","model"],"msg":"Field required","input":{"messages":"secret"}}]}"#,
                "body.model: Field required",
            ),
            (r#"{"detail":"Not Found"}"#, "Not Found"),
            (r#"{"error":"model 'x' not found"}"#, "model 'x' not found"),
            ("  ", "(empty body)"),
        ] {
            assert_eq!(error_message(body.as_bytes()), expected);
        }
        let long = "x".repeat(1000);
        assert_eq!(error_message(long.as_bytes()).chars().count(), MESSAGE_LIMIT + 1);
    }
}
