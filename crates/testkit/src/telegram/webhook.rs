//! Webhook delivery, as Telegram does it once `setWebhook` is called: each
//! update is POSTed as JSON with `X-Telegram-Bot-Api-Secret-Token`, one at a
//! time and in order; an update is confirmed by a 2xx answer and sent again
//! (after a pause) otherwise.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::Shared;
use super::state::{Webhook, WebhookAttempt, unix_now};

/// How long the fake waits for a webhook to answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

pub async fn pusher(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let mut poked = shared.poke.subscribe();
    let mut pause = Duration::from_millis(50);
    loop {
        let next = {
            let mut state = shared.lock();
            match state.webhook.clone() {
                Some(hook) => state.next_for_webhook().map(|update| (hook, update)),
                None => None,
            }
        };
        let Some((hook, update)) = next else {
            tokio::select! {
                changed = poked.changed() => if changed.is_err() { return },
                _ = stop.changed() => return,
            }
            continue;
        };
        let status = post(&hook, &update.body).await;
        let accepted = matches!(status, Some(200..=299));
        {
            let mut state = shared.lock();
            state.webhook_log.push(WebhookAttempt {
                update_id: update.id,
                status,
            });
            if accepted {
                state.confirm(update.id);
            } else {
                let message = match status {
                    Some(code) => format!("Wrong response from the webhook: {code}"),
                    None => "Connection refused".to_owned(),
                };
                state.webhook_last_error = Some((unix_now(), message));
            }
        }
        shared.webhook_attempts.send_modify(|n| *n += 1);
        if accepted {
            pause = Duration::from_millis(50);
            continue;
        }
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = stop.changed() => return,
        }
        pause = (pause * 2).min(Duration::from_secs(2));
    }
}

/// One POST over plain HTTP/1.1; the status code, or `None` when the
/// webhook could not be reached or did not answer in time.
pub async fn post(hook: &Webhook, body: &Value) -> Option<u16> {
    let rest = hook.url.strip_prefix("http://")?;
    let (authority, path) = match rest.find('/') {
        Some(index) => (&rest[..index], &rest[index..]),
        None => (rest, "/"),
    };
    let body = body.to_string();
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if let Some(secret) = &hook.secret {
        request.push_str(&format!("X-Telegram-Bot-Api-Secret-Token: {secret}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    let exchange = async {
        let mut stream = TcpStream::connect(authority).await.ok()?;
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut head = Vec::new();
        let mut buffer = [0u8; 1024];
        while !head.windows(2).any(|w| w == b"\r\n") {
            let read = stream.read(&mut buffer).await.ok()?;
            if read == 0 {
                return None;
            }
            head.extend_from_slice(&buffer[..read]);
        }
        let line = String::from_utf8_lossy(&head);
        line.split_whitespace().nth(1)?.parse().ok()
    };
    tokio::time::timeout(ANSWER_TIMEOUT, exchange).await.ok().flatten()
}
