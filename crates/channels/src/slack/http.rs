//! slack-morphism's Web API calls on Herald's own HTTP client.
//!
//! Herald makes every HTTP request with one client library, reqwest, on one
//! TLS set-up, [`herald_net::ClientTls`] (the platform roots and
//! `tls.extra_ca_file`). slack-morphism sends its calls through a
//! [`SlackClientHttpConnector`]; the one it ships (its `hyper` feature) is a
//! second HTTP client stack, hyper-util's legacy client on hyper-rustls with
//! a TLS configuration of its own making. slack-morphism 2.31 has no reqwest
//! connector, so this is one: [`SlackHttp`] implements the trait on a
//! `reqwest::Client` built from the `ClientTls` handed in, and
//! slack-morphism is used for its types and API methods only.
//!
//! It answers as slack-morphism's hyper connector does, so
//! [`super::client::classify`] sees the same errors ([`answer`], pure):
//!
//! - HTTP 200 with JSON: Slack's envelope; an `error` in it is
//!   [`SlackClientError::ApiError`] with that code, else the body decoded
//!   (a body that does not decode is [`SlackClientError::ProtocolError`]).
//! - HTTP 200 without JSON, and 204: an empty object decoded.
//! - HTTP 429: [`SlackClientError::RateLimitError`] with `Retry-After`'s
//!   seconds (and the envelope's code when the body is JSON).
//! - Any other status: [`SlackClientError::HttpError`] with it.
//! - No answer (connection, TLS, timeout):
//!   [`SlackClientError::HttpProtocolError`], without the URL.
//!
//! It keeps the hyper connector's base-URL override (`channels.slack.api_url`,
//! a local stand-in in tests), sends no retries of its own (a 429 goes back
//! to Herald's outbound path, which waits `Retry-After`), and follows no
//! redirects (the bearer token goes only where the call was addressed).

use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use herald_net::ClientTls;
use reqwest::header::{self, HeaderMap};
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use slack_morphism::errors::{
    SlackClientApiError, SlackClientError, SlackClientHttpError, SlackClientHttpProtocolError, SlackClientSystemError,
    SlackRateLimitError, map_serde_error,
};
use slack_morphism::multipart_form::FileMultipartData;
use slack_morphism::{
    ClientResult, SlackApiToken, SlackClientApiCallContext, SlackClientHttpConnector, SlackClientId, SlackClientSecret,
    SlackEnvelopeMessage,
};
use tracing::debug;
use url::Url;

/// How long a connection to Slack may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long one Web API call may take, answer included.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// slack-morphism's connector on Herald's reqwest client.
#[derive(Clone, Debug)]
pub struct SlackHttp {
    client: reqwest::Client,
    /// `https://slack.com/api`, or `channels.slack.api_url`; no trailing `/`.
    api_url: String,
}

impl SlackHttp {
    /// Calls to `api_url` (the methods' base, `https://slack.com/api` for
    /// Slack itself), trusting what `tls` trusts.
    pub fn new(api_url: &str, tls: &ClientTls) -> Result<Self, reqwest::Error> {
        let client = tls
            .http()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(CALL_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self::with_client(client, api_url))
    }

    /// Calls to `api_url` with a client made elsewhere.
    pub fn with_client(client: reqwest::Client, api_url: &str) -> Self {
        Self {
            client,
            api_url: api_url.trim_end_matches('/').to_owned(),
        }
    }

    /// A request to `url` with the headers every call carries: the charset,
    /// and the call's token when it has one.
    fn request(&self, method: Method, url: &Url, token: Option<&SlackApiToken>) -> reqwest::RequestBuilder {
        let request = self
            .client
            .request(method, url.as_str())
            .header(header::ACCEPT_CHARSET, "utf-8");
        match token {
            Some(token) => {
                let request = request.bearer_auth(&token.token_value.0);
                match &token.cookie {
                    Some(cookie) => match header::HeaderValue::from_str(&cookie.0) {
                        Ok(mut value) => {
                            value.set_sensitive(true);
                            request.header(header::COOKIE, value)
                        }
                        // Fails the request, as it does in the hyper connector.
                        Err(_) => request.header(header::COOKIE, cookie.0.as_str()),
                    },
                    None => request,
                }
            }
            None => request,
        }
    }

    /// Sends `request` and reads Slack's answer as [`answer`] does.
    async fn send<RS>(
        &self,
        request: reqwest::RequestBuilder,
        url: &Url,
        context: &SlackClientApiCallContext<'_>,
    ) -> ClientResult<RS>
    where
        RS: DeserializeOwned,
    {
        let shown = shown_url(url, context.is_sensitive_url);
        context
            .tracing_span
            .in_scope(|| debug!(slack_uri = shown.as_str(), "Sending HTTP request to {shown}"));
        let response = request.send().await.map_err(no_answer)?;
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.bytes().await.map_err(no_answer)?;
        let body = String::from_utf8(body.into()).map_err(|err| {
            SlackClientError::SystemError(SlackClientSystemError::new().with_cause(Box::new(err.utf8_error())))
        })?;
        context.tracing_span.in_scope(|| {
            debug!(
                slack_uri = shown.as_str(),
                slack_http_status = status.as_u16(),
                "Received HTTP response {status}"
            )
        });
        answer(status, &headers, body)
    }
}

/// A request that got no answer, as the hyper connector reports one (its
/// URL, which may carry query parameters, dropped).
fn no_answer(err: reqwest::Error) -> SlackClientError {
    SlackClientError::HttpProtocolError(SlackClientHttpProtocolError::new().with_cause(Box::new(err.without_url())))
}

/// The URL as logged: scheme, host and path (no query parameters), or only
/// scheme and host for a sensitive one (a webhook, an upload URL).
fn shown_url(url: &Url, sensitive: bool) -> String {
    let host = url.host_str().unwrap_or("unknown-host");
    if sensitive {
        format!("{}://{host}/-redacted-", url.scheme())
    } else {
        format!("{}://{host}{}", url.scheme(), url.path())
    }
}

/// Whether a response with these headers carries JSON. As for slack-morphism,
/// a response without a readable `Content-Type` is taken to.
fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE) else {
        return true;
    };
    let Ok(value) = value.to_str() else {
        return true;
    };
    let essence = value.split(';').next().unwrap_or_default().trim();
    match essence.split_once('/') {
        Some((kind, subtype)) if !kind.is_empty() && !subtype.is_empty() && !subtype.contains('/') => {
            kind.eq_ignore_ascii_case("application") && subtype.eq_ignore_ascii_case("json")
        }
        _ => true,
    }
}

/// `Retry-After` in whole seconds, when it is that.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get(header::RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

/// Slack's answer (status, headers, body) as the call's result, the way
/// slack-morphism's hyper connector reads it.
pub(super) fn answer<RS>(status: StatusCode, headers: &HeaderMap, body: String) -> ClientResult<RS>
where
    RS: DeserializeOwned,
{
    let json = is_json(headers);
    let envelope = |body: &str| -> ClientResult<SlackEnvelopeMessage> {
        serde_json::from_str(body).map_err(|err| map_serde_error(err, Some(body)))
    };
    match status {
        StatusCode::OK if json => {
            let message = envelope(&body)?;
            let errors = message.errors_as_strings();
            match message.error {
                None => serde_json::from_str(&body).map_err(|err| map_serde_error(err, Some(&body))),
                Some(code) => Err(SlackClientError::ApiError(
                    SlackClientApiError::new(code)
                        .opt_errors(errors)
                        .opt_warnings(message.warnings)
                        .with_http_response_body(body),
                )),
            }
        }
        StatusCode::OK | StatusCode::NO_CONTENT => {
            serde_json::from_str("{}").map_err(|err| map_serde_error(err, Some("{}")))
        }
        StatusCode::TOO_MANY_REQUESTS if json => {
            let message = envelope(&body)?;
            Err(SlackClientError::RateLimitError(
                SlackRateLimitError::new()
                    .opt_retry_after(retry_after(headers))
                    .opt_code(message.error)
                    .opt_warnings(message.warnings)
                    .with_http_response_body(body),
            ))
        }
        StatusCode::TOO_MANY_REQUESTS => Err(SlackClientError::RateLimitError(
            SlackRateLimitError::new()
                .opt_retry_after(retry_after(headers))
                .with_http_response_body(body),
        )),
        _ => Err(SlackClientError::HttpError(
            SlackClientHttpError::new(status).with_http_response_body(body),
        )),
    }
}

/// A `multipart/form-data` body: the file (as the `file` field) and then
/// each field that has a value.
fn multipart_body<'p, PT, TS>(boundary: &str, file: Option<FileMultipartData<'_>>, fields: &'p PT) -> Vec<u8>
where
    PT: IntoIterator<Item = (&'p str, Option<TS>)> + Clone,
    TS: AsRef<str> + 'p,
{
    let mut body = Vec::with_capacity(file.as_ref().map_or(0, |file| file.data.len()) + 1024);
    if let Some(file) = file {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{}\"\r\n\
                 Content-Type: {}\r\n\r\n",
                quoted(&file.name),
                file.content_type.replace(['\r', '\n'], ""),
            )
            .as_bytes(),
        );
        body.extend_from_slice(file.data);
        body.extend_from_slice(b"\r\n");
    }
    for (name, value) in fields.clone() {
        if let Some(value) = value {
            body.extend_from_slice(
                format!(
                    "--{boundary}\r\nContent-Disposition: form-data; name=\"{}\"\r\n\r\n",
                    quoted(name)
                )
                .as_bytes(),
            );
            body.extend_from_slice(value.as_ref().as_bytes());
            body.extend_from_slice(b"\r\n");
        }
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    body
}

/// A name inside a `Content-Disposition` quoted string, escaped the way
/// browsers do.
fn quoted(name: &str) -> String {
    name.replace('"', "%22").replace('\r', "%0D").replace('\n', "%0A")
}

impl SlackClientHttpConnector for SlackHttp {
    fn create_method_uri_path(&self, method_relative_uri: &str) -> ClientResult<Url> {
        Ok(format!("{}/{method_relative_uri}", self.api_url).parse()?)
    }

    fn http_get_uri<'a, RS>(
        &'a self,
        full_uri: Url,
        context: SlackClientApiCallContext<'a>,
    ) -> BoxFuture<'a, ClientResult<RS>>
    where
        RS: for<'de> serde::de::Deserialize<'de> + Send + 'a,
    {
        async move {
            let request = self.request(Method::GET, &full_uri, context.token);
            self.send(request, &full_uri, &context).await
        }
        .boxed()
    }

    fn http_get_with_client_secret<'a, RS>(
        &'a self,
        full_uri: Url,
        client_id: &'a SlackClientId,
        client_secret: &'a SlackClientSecret,
    ) -> BoxFuture<'a, ClientResult<RS>>
    where
        RS: for<'de> serde::de::Deserialize<'de> + Send + 'a,
    {
        async move {
            let span = tracing::debug_span!("Slack OAuth Get");
            let context = SlackClientApiCallContext {
                rate_control_params: None,
                token: None,
                tracing_span: &span,
                is_sensitive_url: false,
            };
            let request = self
                .request(Method::GET, &full_uri, None)
                .basic_auth(&client_id.0, Some(&client_secret.0));
            self.send(request, &full_uri, &context).await
        }
        .boxed()
    }

    fn http_post_uri<'a, RQ, RS>(
        &'a self,
        full_uri: Url,
        request_body: &'a RQ,
        context: SlackClientApiCallContext<'a>,
    ) -> BoxFuture<'a, ClientResult<RS>>
    where
        RQ: serde::ser::Serialize + Send + Sync,
        RS: for<'de> serde::de::Deserialize<'de> + Send + 'a,
    {
        async move {
            let json = serde_json::to_string(request_body).map_err(|err| map_serde_error(err, None))?;
            let request = self
                .request(Method::POST, &full_uri, context.token)
                .header(header::CONTENT_TYPE, "application/json; charset=utf-8")
                .body(json);
            self.send(request, &full_uri, &context).await
        }
        .boxed()
    }

    fn http_post_uri_multipart_form<'a, 'p, RS, PT, TS>(
        &'a self,
        full_uri: Url,
        file: Option<FileMultipartData<'p>>,
        params: &'p PT,
        context: SlackClientApiCallContext<'a>,
    ) -> BoxFuture<'a, ClientResult<RS>>
    where
        RS: for<'de> serde::de::Deserialize<'de> + Send + 'a,
        PT: std::iter::IntoIterator<Item = (&'p str, Option<TS>)> + Clone,
        TS: AsRef<str> + 'p + Send,
    {
        let boundary = format!("herald-{:032x}", rand::random::<u128>());
        let body = multipart_body(&boundary, file, params);
        async move {
            let request = self
                .request(Method::POST, &full_uri, context.token)
                .header(
                    header::CONTENT_TYPE,
                    format!("multipart/form-data; boundary={boundary}"),
                )
                .body(body);
            self.send(request, &full_uri, &context).await
        }
        .boxed()
    }

    fn http_post_uri_binary<'a, 'p, RS>(
        &'a self,
        full_uri: Url,
        content_type: String,
        data: &'a [u8],
        context: SlackClientApiCallContext<'a>,
    ) -> BoxFuture<'a, ClientResult<RS>>
    where
        RS: for<'de> serde::de::Deserialize<'de> + Send + 'a,
    {
        async move {
            let request = self
                .request(Method::POST, &full_uri, context.token)
                .header(header::CONTENT_TYPE, content_type)
                .body(data.to_vec());
            self.send(request, &full_uri, &context).await
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use slack_morphism::SlackClientHttpApiUri;

    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(name, value)| {
                (
                    header::HeaderName::from_static(name),
                    header::HeaderValue::from_static(value),
                )
            })
            .collect()
    }

    const JSON: (&str, &str) = ("content-type", "application/json; charset=utf-8");

    fn read(status: u16, headers: &HeaderMap, body: &str) -> ClientResult<serde_json::Value> {
        answer(StatusCode::from_u16(status).unwrap(), headers, body.to_owned())
    }

    #[test]
    fn ok_true_is_the_decoded_body() {
        let body = r#"{"ok":true,"channel":"C1","ts":"1.2"}"#;
        let got = read(200, &headers(&[JSON]), body).unwrap();
        assert_eq!(got["ts"], "1.2");
    }

    #[test]
    fn ok_false_is_an_api_error_with_the_code() {
        let body = r#"{"ok":false,"error":"channel_not_found","warnings":["superfluous_charset"]}"#;
        match read(200, &headers(&[JSON]), body) {
            Err(SlackClientError::ApiError(err)) => {
                assert_eq!(err.code, "channel_not_found");
                assert_eq!(err.warnings, Some(vec!["superfluous_charset".to_owned()]));
                assert_eq!(err.http_response_body.as_deref(), Some(body));
            }
            other => panic!("expected an API error, got {other:?}"),
        }
    }

    #[test]
    fn structured_errors_are_kept_as_strings() {
        let body = r#"{"ok":false,"error":"invalid_blocks","errors":["one",{"path":"/0"}]}"#;
        match read(200, &headers(&[JSON]), body) {
            Err(SlackClientError::ApiError(err)) => {
                assert_eq!(err.code, "invalid_blocks");
                assert_eq!(err.errors, Some(vec!["one".to_owned(), r#"{"path":"/0"}"#.to_owned()]));
            }
            other => panic!("expected an API error, got {other:?}"),
        }
    }

    #[test]
    fn a_429_is_a_rate_limit_error_with_retry_after() {
        let body = r#"{"ok":false,"error":"ratelimited"}"#;
        match read(429, &headers(&[JSON, ("retry-after", "7")]), body) {
            Err(SlackClientError::RateLimitError(err)) => {
                assert_eq!(err.retry_after, Some(Duration::from_secs(7)));
                assert_eq!(err.code.as_deref(), Some("ratelimited"));
            }
            other => panic!("expected a rate limit error, got {other:?}"),
        }
        // Not JSON, and a Retry-After that is not seconds.
        match read(
            429,
            &headers(&[("content-type", "text/plain"), ("retry-after", "soon")]),
            "slow down",
        ) {
            Err(SlackClientError::RateLimitError(err)) => {
                assert_eq!(err.retry_after, None);
                assert_eq!(err.code, None);
                assert_eq!(err.http_response_body.as_deref(), Some("slow down"));
            }
            other => panic!("expected a rate limit error, got {other:?}"),
        }
        match read(429, &headers(&[("retry-after", "3")]), "") {
            Err(SlackClientError::ProtocolError(_)) => {}
            other => panic!("a JSON 429 with no JSON body does not decode, got {other:?}"),
        }
    }

    #[test]
    fn other_statuses_are_http_errors() {
        for status in [500, 502, 404, 302] {
            match read(status, &headers(&[("content-type", "text/html")]), "<html>") {
                Err(SlackClientError::HttpError(err)) => {
                    assert_eq!(err.status_code.as_u16(), status);
                    assert_eq!(err.http_response_body.as_deref(), Some("<html>"));
                }
                other => panic!("expected an HTTP error for {status}, got {other:?}"),
            }
        }
    }

    #[test]
    fn a_body_that_does_not_decode_is_a_protocol_error() {
        match read(200, &headers(&[JSON]), "{not json") {
            Err(SlackClientError::ProtocolError(err)) => assert_eq!(err.json_body.as_deref(), Some("{not json")),
            other => panic!("expected a protocol error, got {other:?}"),
        }
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Posted {
            ts: String,
        }
        match answer::<Posted>(StatusCode::OK, &headers(&[JSON]), r#"{"ok":true}"#.into()) {
            Err(SlackClientError::ProtocolError(_)) => {}
            other => panic!("expected a protocol error, got {other:?}"),
        }
    }

    #[test]
    fn without_json_a_200_or_204_is_an_empty_object() {
        assert_eq!(
            read(200, &headers(&[("content-type", "text/plain")]), "OK - 12").unwrap(),
            serde_json::json!({})
        );
        assert_eq!(read(204, &headers(&[JSON]), "").unwrap(), serde_json::json!({}));
    }

    #[test]
    fn the_content_type_decides_json() {
        assert!(is_json(&headers(&[])));
        assert!(is_json(&headers(&[("content-type", "application/json")])));
        assert!(is_json(&headers(&[(
            "content-type",
            "Application/JSON ; charset=utf-8"
        )])));
        // Unreadable counts as JSON, as for slack-morphism.
        assert!(is_json(&headers(&[("content-type", "not a mime")])));
        assert!(!is_json(&headers(&[("content-type", "text/html; charset=utf-8")])));
        assert!(!is_json(&headers(&[("content-type", "application/octet-stream")])));
    }

    #[test]
    fn the_api_url_is_the_methods_base() {
        let tls = ClientTls::default();
        let local = SlackHttp::new("http://127.0.0.1:9/api/", &tls).unwrap();
        assert_eq!(
            local.create_method_uri_path("chat.postMessage").unwrap().as_str(),
            "http://127.0.0.1:9/api/chat.postMessage"
        );
        let slack = SlackHttp::new(SlackClientHttpApiUri::SLACK_API_URI_STR, &tls).unwrap();
        assert_eq!(
            slack.create_method_uri_path("auth.test").unwrap().as_str(),
            "https://slack.com/api/auth.test"
        );
    }

    #[test]
    fn logged_urls_carry_no_query() {
        let url = Url::parse("https://slack.com/api/users.info?user=U1").unwrap();
        assert_eq!(shown_url(&url, false), "https://slack.com/api/users.info");
        assert_eq!(shown_url(&url, true), "https://slack.com/-redacted-");
    }

    #[test]
    fn a_multipart_body_has_the_file_then_the_fields() {
        let fields = vec![
            ("channels", Some("C1")),
            ("title", None),
            ("initial_comment", Some("hi")),
        ];
        let file = FileMultipartData {
            name: "a\"b.txt".into(),
            content_type: "text/plain".into(),
            data: b"bytes",
        };
        let body = String::from_utf8(multipart_body("XX", Some(file), &fields)).unwrap();
        assert_eq!(
            body,
            "--XX\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a%22b.txt\"\r\n\
             Content-Type: text/plain\r\n\r\nbytes\r\n\
             --XX\r\nContent-Disposition: form-data; name=\"channels\"\r\n\r\nC1\r\n\
             --XX\r\nContent-Disposition: form-data; name=\"initial_comment\"\r\n\r\nhi\r\n\
             --XX--\r\n"
        );
    }
}
