//! The fake Events API push: each event callback is POSTed to the Request URL
//! Herald listens on, signed the way Slack signs (`v0=` + hex HMAC-SHA256 of
//! `v0:{timestamp}:{body}` with the signing secret), and retried with
//! `X-Slack-Retry-Num` when Herald answers non-2xx or too late.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use hmac::{Hmac, Mac};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use sha2::Sha256;
use tokio::sync::{mpsc, watch};

use super::state::{PushAttempt, unix_seconds};
use super::{SIGNING_SECRET, Shared};

/// The Events API as a test drives it by hand: a URL verification, and
/// pushes of bodies it chose (forged, stale or retried).
impl super::FakeSlack {
    /// Sends `url_verification` to the Request URL, signed; returns Herald's
    /// status and body.
    pub async fn verify_url(&self, challenge: &str) -> Option<(u16, String)> {
        let body = super::wire::url_verification(challenge).to_string();
        let timestamp = unix_seconds();
        self.push_raw(&body, timestamp, &signature(SIGNING_SECRET, timestamp, &body))
            .await
    }

    /// POSTs `body` to the Request URL with the given timestamp and signature
    /// headers, for tests of forged and stale requests.
    pub async fn push_raw(&self, body: &str, timestamp: u64, signature: &str) -> Option<(u16, String)> {
        let (url, timeout) = {
            let state = self.shared.lock();
            (state.events_url.clone()?, state.options.push_timeout)
        };
        post_signed(&http_client(), &url, body, timestamp, signature, None, timeout).await
    }

    /// POSTs `body` again, freshly signed, as Slack's retry number `retry_num`.
    pub async fn push_again(&self, body: &str, retry_num: u32) -> Option<(u16, String)> {
        let (url, timeout) = {
            let state = self.shared.lock();
            (state.events_url.clone()?, state.options.push_timeout)
        };
        let timestamp = unix_seconds();
        let signature = signature(SIGNING_SECRET, timestamp, body);
        let retry = Some((retry_num, "http_timeout"));
        post_signed(&http_client(), &url, body, timestamp, &signature, retry, timeout).await
    }

    /// An `event_callback` body for `event`, as a push would carry it.
    pub fn event_callback_body(&self, event: Value) -> String {
        let event_id = self.shared.lock().next_event_id();
        super::wire::event_callback(event, &event_id, unix_seconds()).to_string()
    }
}

/// The `X-Slack-Signature` value for a request body sent at `timestamp`:
/// `v0=` + hex(HMAC-SHA256(secret, `v0:{timestamp}:{body}`)).
pub fn signature(secret: &str, timestamp: u64, body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(format!("v0:{timestamp}:{body}").as_bytes());
    format!("v0={}", hex::encode(mac.finalize().into_bytes()))
}

/// Why a push is being retried, as `X-Slack-Retry-Reason` says it.
fn retry_reason(status: Option<u16>) -> &'static str {
    match status {
        None => "http_timeout",
        Some(_) => "http_error",
    }
}

/// A plain-HTTP client: Request URLs in tests are on 127.0.0.1.
pub type HttpClient = Client<HttpConnector, Body>;

pub fn http_client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

/// One signed POST; returns the status and body Herald answered, if it
/// answered within `timeout`.
pub async fn post_signed(
    client: &HttpClient,
    url: &str,
    body: &str,
    timestamp: u64,
    signature: &str,
    retry: Option<(u32, &str)>,
    timeout: Duration,
) -> Option<(u16, String)> {
    let mut request = Request::post(url)
        .header("content-type", "application/json")
        .header("x-slack-request-timestamp", timestamp.to_string())
        .header("x-slack-signature", signature);
    if let Some((number, reason)) = retry {
        request = request
            .header("x-slack-retry-num", number.to_string())
            .header("x-slack-retry-reason", reason);
    }
    let request = request.body(Body::from(body.to_owned())).ok()?;
    let exchange = async {
        let response = client.request(request).await.ok()?;
        let status = response.status().as_u16();
        let bytes = axum::body::to_bytes(Body::new(response.into_body()), 1 << 20)
            .await
            .ok()?;
        Some((status, String::from_utf8_lossy(&bytes).into_owned()))
    };
    tokio::time::timeout(timeout, exchange).await.ok().flatten()
}

async fn attempt(shared: &Shared, client: &HttpClient, payload: &Value, retry: Option<(u32, &str)>) -> Option<u16> {
    let (url, timeout) = {
        let state = shared.lock();
        (state.events_url.clone()?, state.options.push_timeout)
    };
    let body = payload.to_string();
    let timestamp = unix_seconds();
    let signature = signature(SIGNING_SECRET, timestamp, &body);
    let status = post_signed(client, &url, &body, timestamp, &signature, retry, timeout)
        .await
        .map(|(status, _)| status);
    shared.lock().push_log.push(PushAttempt {
        event_id: payload["event_id"].as_str().unwrap_or_default().to_owned(),
        retry_num: retry.map_or(0, |(n, _)| n),
        status,
    });
    shared.changed();
    status
}

fn succeeded(status: Option<u16>) -> bool {
    status.is_some_and(|s| (200..300).contains(&s))
}

/// Pushes events in the order they happened; a failed one is retried on its
/// own schedule so it does not hold back the ones after it.
pub async fn worker(shared: Arc<Shared>, mut events: mpsc::UnboundedReceiver<Value>, mut stop: watch::Receiver<bool>) {
    let client = http_client();
    loop {
        let payload = tokio::select! {
            payload = events.recv() => match payload {
                Some(payload) => payload,
                None => return,
            },
            _ = stop.wait_for(|stopped| *stopped) => return,
        };
        let status = attempt(&shared, &client, &payload, None).await;
        if succeeded(status) {
            continue;
        }
        let (shared, client, mut stop) = (shared.clone(), client.clone(), stop.clone());
        tokio::spawn(async move {
            let delays = shared.lock().options.push_retry_delays.clone();
            let mut last = status;
            for (index, delay) in delays.into_iter().enumerate() {
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    _ = stop.wait_for(|stopped| *stopped) => return,
                }
                let number = index as u32 + 1;
                last = attempt(&shared, &client, &payload, Some((number, retry_reason(last)))).await;
                if succeeded(last) {
                    return;
                }
            }
            shared.lock().dropped.push(payload);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_slacks_documented_example() {
        // The example request from Slack's "Verifying requests from Slack" guide.
        let body = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        assert_eq!(
            signature("8f742231b10e8888abcd99yyyzzz85a5", 1_531_420_618, body),
            "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
        );
    }

    #[test]
    fn retries_say_why() {
        assert_eq!(retry_reason(None), "http_timeout");
        assert_eq!(retry_reason(Some(500)), "http_error");
    }
}
