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

/// An HTTP status other than success.
pub(crate) fn from_status(status: u16, retry_after: Option<Duration>, body: &[u8]) -> LlmError {
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
        LlmError::Connect(format!("llm.base_url {}: {}", endpoint.base_url, root_cause(error)))
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
