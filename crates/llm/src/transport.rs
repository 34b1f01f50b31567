//! The HTTP service under async-openai's client: sends each request once and
//! turns every answer that is not a readable success into a [`TransportError`]
//! that keeps what async-openai would drop.
//!
//! Why it exists: async-openai's default executor wraps `ReqwestService` in
//! its own retry layer (three tries on 429, 5xx and connection errors), which
//! would multiply with Herald's [`crate::Retrying`]; and its `ApiError` loses
//! the response headers, so a 429's `retry-after` would be gone. Installing
//! this service with `Client::with_http_service` replaces the retrying
//! executor, so exactly one policy retries and it sees the server's wait.
//!
//! It also decodes a successful chat completion once before async-openai
//! does: async-openai logs an undecodable body in full at error level, and a
//! model's answer may quote the user, so a body Herald cannot read is turned
//! into an error here, without logging it.
//!
//! Invariant: this service never retries and never sleeps.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use async_openai::error::OpenAIError;
use async_openai::middleware::HttpRequestFactory;
use async_openai::types::chat::CreateChatCompletionResponse;
use reqwest::header::{CONTENT_TYPE, HeaderMap};

/// An answer the client must not read as a success.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TransportError {
    #[error("model endpoint answered {status}")]
    Status {
        status: u16,
        retry_after: Option<Duration>,
        body: Vec<u8>,
    },
    #[error("{0}")]
    Undecodable(String),
}

/// `retry-after-ms` (OpenAI sends it beside `retry-after`) or `retry-after`
/// in seconds, whole or decimal. An HTTP date is not read: the caller then
/// falls back to its own backoff.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| -> Option<f64> {
        let value: f64 = headers.get(name)?.to_str().ok()?.trim().parse().ok()?;
        (value.is_finite() && value >= 0.0).then_some(value)
    };
    if let Some(millis) = number("retry-after-ms") {
        return Some(Duration::from_secs_f64(millis / 1000.0));
    }
    number("retry-after").map(Duration::from_secs_f64)
}

/// Whether a successful answer is a chat completion this client must be able
/// to read: a JSON body of `POST …/chat/completions` (not an SSE stream).
fn is_chat_completion(method: &reqwest::Method, path: &str, headers: &HeaderMap) -> bool {
    let json = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_none_or(|v| !v.starts_with("text/event-stream"));
    method == reqwest::Method::POST && path.ends_with("/chat/completions") && json
}

/// Checks a chat completion body decodes, naming the first problem and the
/// size, never the content.
pub(crate) fn check_chat_completion(body: &[u8]) -> Result<(), String> {
    serde_json::from_slice::<CreateChatCompletionResponse>(body)
        .map(|_| ())
        .map_err(|err| format!("{} (a chat completion body of {} bytes)", describe(&err), body.len()))
}

/// A decoding error without the value it choked on: serde quotes string
/// values (`invalid type: string "…"`), and those may be the user's words.
pub(crate) fn describe(err: &serde_json::Error) -> String {
    let text = err.to_string();
    match text.split_once('"') {
        None => text,
        Some((before_value, _)) => format!(
            "{} (value hidden) at line {} column {}",
            before_value.trim_end(),
            err.line(),
            err.column()
        ),
    }
}

/// A `tower::Service` over one `reqwest::Client`, for
/// `async_openai::Client::with_http_service`.
#[derive(Clone, Debug)]
pub(crate) struct SingleAttempt {
    http: reqwest::Client,
}

impl SingleAttempt {
    pub(crate) fn new(http: reqwest::Client) -> Self {
        Self { http }
    }
}

type ResponseFuture = Pin<Box<dyn Future<Output = Result<reqwest::Response, OpenAIError>> + Send + 'static>>;

impl tower_service::Service<HttpRequestFactory> for SingleAttempt {
    type Response = reqwest::Response;
    type Error = OpenAIError;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, factory: HttpRequestFactory) -> Self::Future {
        let http = self.http.clone();
        Box::pin(async move {
            let request = factory.build().await?;
            let method = request.method().clone();
            let path = request.url().path().to_owned();
            let response = http.execute(request).await?;
            let status = response.status();
            if status.is_success() && !is_chat_completion(&method, &path, response.headers()) {
                return Ok(response);
            }
            let headers = response.headers().clone();
            let version = response.version();
            let body = response.bytes().await?;
            if !status.is_success() {
                return Err(boxed(TransportError::Status {
                    status: status.as_u16(),
                    retry_after: retry_after(&headers),
                    body: body.to_vec(),
                }));
            }
            check_chat_completion(&body).map_err(|reason| boxed(TransportError::Undecodable(reason)))?;
            let mut rebuilt = http::Response::new(body);
            *rebuilt.status_mut() = status;
            *rebuilt.version_mut() = version;
            *rebuilt.headers_mut() = headers;
            Ok(reqwest::Response::from(rebuilt))
        })
    }
}

fn boxed(error: TransportError) -> OpenAIError {
    OpenAIError::Boxed(Box::new(error))
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    #[test]
    fn reads_the_wait_the_server_asked_for() {
        for (headers, expected) in [
            (vec![("retry-after", "7")], Some(Duration::from_secs(7))),
            (vec![("retry-after", " 1.5 ")], Some(Duration::from_millis(1500))),
            (
                vec![("retry-after-ms", "250"), ("retry-after", "1")],
                Some(Duration::from_millis(250)),
            ),
            (vec![("retry-after", "0")], Some(Duration::ZERO)),
            (vec![("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")], None),
            (vec![("retry-after", "-3")], None),
            (vec![], None),
        ] {
            let mut map = HeaderMap::new();
            for (name, value) in &headers {
                map.insert(*name, HeaderValue::from_static(value));
            }
            assert_eq!(retry_after(&map), expected, "{headers:?}");
        }
    }

    #[test]
    fn only_json_chat_completions_are_checked() {
        let json = HeaderMap::new();
        let mut sse = HeaderMap::new();
        sse.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream; charset=utf-8"),
        );
        let post = reqwest::Method::POST;
        assert!(is_chat_completion(&post, "/v1/chat/completions", &json));
        assert!(!is_chat_completion(&post, "/v1/chat/completions", &sse));
        assert!(!is_chat_completion(&reqwest::Method::GET, "/v1/models", &json));
    }

    #[test]
    fn an_undecodable_body_is_described_without_its_content() {
        for (body, words) in [
            (
                &br#"{"id":"x","choices":[{"message":{"content":"the user's secret"}}]}"#[..],
                "missing field",
            ),
            (
                br#"{"id":"x","object":"chat.completion","created":"the user's secret","model":"m","choices":[]}"#,
                "invalid type: string (value hidden)",
            ),
            (b"<html>the user's secret</html>", "expected value"),
        ] {
            let reason = check_chat_completion(body).unwrap_err();
            assert!(reason.contains(words), "{reason}");
            assert!(!reason.contains("secret"), "{reason}");
        }
    }
}
