//! The HTTP side of the fake: `/bot<TOKEN>/<method>` with the method name
//! matched case-insensitively (as the Bot API does; teloxide writes
//! `GetUpdates`), parameters read from the query string, JSON,
//! `application/x-www-form-urlencoded` or `multipart/form-data` bodies, and
//! every answer in the Bot API's envelope.

use std::sync::Arc;

use axum::body::{Body, to_bytes};
use axum::extract::{FromRequest, Multipart, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::Shared;
use super::state::{boolean, integer};
use super::uploads::FormFile;
use super::wire;
use crate::platform::Stamped;

/// Largest request body the fake reads.
const BODY_LIMIT: usize = 8 * 1024 * 1024;

fn answer(status: u16, body: Value) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

fn refuse(code: u16, description: &str) -> Response {
    answer(code, wire::error(code, description))
}

pub async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let arrived = std::time::Instant::now();
    let path = request.uri().path().to_owned();
    if let Some(rest) = path.strip_prefix("/file/bot") {
        return match rest.split_once('/') {
            Some((token, file_path)) if token == shared.token => super::files::serve(&shared, file_path),
            _ => refuse(404, "Not Found"),
        };
    }
    let Some((token, method)) = path
        .strip_prefix("/bot")
        .and_then(|rest| rest.split_once('/'))
        .map(|(token, method)| (token.to_owned(), method.to_ascii_lowercase()))
    else {
        return refuse(404, "Not Found");
    };
    if token != shared.token {
        return refuse(401, "Unauthorized");
    }
    let (params, files) = match read_params(request).await {
        Ok(read) => read,
        Err(description) => return refuse(400, &description),
    };
    let fault = {
        let mut state = shared.lock();
        state.calls.push(method.clone());
        state.faults.take(&method)
    };
    if let Some(fault) = fault {
        return fault.response();
    }
    match method.as_str() {
        "getme" => answer(200, wire::ok(shared.lock().me())),
        "logout" | "close" => answer(200, wire::ok(json!(true))),
        "getwebhookinfo" => answer(200, wire::ok(shared.lock().webhook_info())),
        "deletewebhook" => {
            let mut state = shared.lock();
            let existed = state.webhook.take().is_some();
            if params.get("drop_pending_updates").and_then(boolean) == Some(true) {
                state.clear_updates();
            }
            let description = if existed {
                "Webhook was deleted"
            } else {
                "Webhook is already deleted"
            };
            answer(200, json!({ "ok": true, "result": true, "description": description }))
        }
        "setwebhook" => set_webhook(&shared, &params),
        "getupdates" => get_updates(&shared, &params).await,
        "sendmessage" => {
            let result = {
                let mut state = shared.lock();
                let result = state.send_message(&params, Instant::now());
                if result.is_ok()
                    && let Some(sent) = state.sent.last()
                {
                    let stamp = Stamped {
                        at: arrived,
                        chat: sent.chat.clone(),
                        text: sent.text.clone(),
                    };
                    state.sent_stamps.push(stamp);
                }
                result
            };
            match result {
                Ok(message) => {
                    shared.sent_count.send_modify(|count| *count += 1);
                    answer(200, wire::ok(message))
                }
                Err((status, body)) => answer(status, body),
            }
        }
        "editmessagetext" => {
            let result = shared.lock().edit_message_text(&params, Instant::now(), arrived);
            match result {
                Ok(message) => {
                    shared.edit_count.send_modify(|count| *count += 1);
                    answer(200, wire::ok(message))
                }
                Err((status, body)) => answer(status, body),
            }
        }
        "senddocument" => {
            let result = shared.lock().send_document(&params, &files, Instant::now());
            match result {
                Ok(message) => answer(200, wire::ok(message)),
                Err((status, body)) => answer(status, body),
            }
        }
        "getfile" => match super::files::get_file(&shared, &params) {
            Ok(file) => answer(200, wire::ok(file)),
            Err((status, body)) => answer(status, body),
        },
        "sendchataction" => match shared.lock().send_chat_action(&params) {
            Ok(result) => answer(200, wire::ok(result)),
            Err((status, body)) => answer(status, body),
        },
        _ => refuse(404, "Not Found"),
    }
}

/// The request's parameters, wherever the client put them, and the files
/// of a multipart body.
async fn read_params(request: Request) -> Result<(Map<String, Value>, Vec<FormFile>), String> {
    let mut params = Map::new();
    let mut files = Vec::new();
    if let Some(query) = request.uri().query() {
        let pairs: Vec<(String, String)> =
            serde_urlencoded::from_str(query).map_err(|_| "can't parse query string".to_owned())?;
        for (key, value) in pairs {
            params.insert(key, Value::String(value));
        }
    }
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    if content_type.starts_with("multipart/form-data") {
        let mut multipart = Multipart::from_request(request, &())
            .await
            .map_err(|_| "can't parse multipart body".to_owned())?;
        while let Some(field) = multipart
            .next_field()
            .await
            .map_err(|_| "can't parse multipart body".to_owned())?
        {
            let Some(name) = field.name().map(str::to_owned) else {
                continue;
            };
            if let Some(file_name) = field.file_name().map(str::to_owned) {
                let content_type = field.content_type().map(str::to_owned);
                let bytes = field
                    .bytes()
                    .await
                    .map_err(|_| "can't parse multipart body".to_owned())?;
                files.push(FormFile {
                    field: name,
                    file_name: Some(file_name),
                    content_type,
                    bytes: bytes.to_vec(),
                });
                continue;
            }
            let text = field
                .text()
                .await
                .map_err(|_| "can't parse multipart body".to_owned())?;
            params.insert(name, Value::String(text));
        }
        return Ok((params, files));
    }
    let body = to_bytes(Body::new(request.into_body()), BODY_LIMIT)
        .await
        .map_err(|_| "request body too large".to_owned())?;
    if body.is_empty() {
        return Ok((params, files));
    }
    if content_type.starts_with("application/json") {
        match serde_json::from_slice::<Value>(&body) {
            Ok(Value::Object(map)) => params.extend(map),
            _ => return Err("can't parse JSON object".into()),
        }
    } else if content_type.starts_with("application/x-www-form-urlencoded") {
        let pairs: Vec<(String, String)> =
            serde_urlencoded::from_bytes(&body).map_err(|_| "can't parse form body".to_owned())?;
        for (key, value) in pairs {
            params.insert(key, Value::String(value));
        }
    }
    Ok((params, files))
}

/// `allowed_updates` as a list of names: a JSON array or JSON text.
fn allowed_updates(value: &Value) -> Option<Vec<String>> {
    let list = match value {
        Value::Array(items) => items.clone(),
        Value::String(text) => serde_json::from_str::<Vec<Value>>(text).ok()?,
        _ => return None,
    };
    Some(list.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
}

fn set_webhook(shared: &Shared, params: &Map<String, Value>) -> Response {
    let url = params.get("url").and_then(Value::as_str).unwrap_or_default().to_owned();
    let secret = params
        .get("secret_token")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    if let Some(secret) = &secret
        && (secret.len() > 256
            || !secret
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'))
    {
        return refuse(400, "Bad Request: secret token contains unallowed characters");
    }
    let mut state = shared.lock();
    if let Some(allowed) = params.get("allowed_updates").and_then(allowed_updates) {
        state.allowed_updates = Some(allowed);
    }
    if params.get("drop_pending_updates").and_then(boolean) == Some(true) {
        state.clear_updates();
    }
    if url.is_empty() {
        state.webhook = None;
        return answer(
            200,
            json!({ "ok": true, "result": true, "description": "Webhook was deleted" }),
        );
    }
    // Like a local Bot API server (`--local`), the fake accepts plain HTTP
    // on the loopback interface; anything else must be HTTPS, as on Telegram.
    let loopback = url.starts_with("http://127.0.0.1") || url.starts_with("http://localhost");
    if !url.starts_with("https://") && !loopback {
        return refuse(400, "Bad Request: bad webhook: HTTPS url must be provided for webhook");
    }
    state.webhook = Some(super::state::Webhook { url, secret });
    drop(state);
    shared.poke.send_modify(|n| *n += 1);
    answer(
        200,
        json!({ "ok": true, "result": true, "description": "Webhook was set" }),
    )
}

/// Long polling: confirms by `offset`, then answers at once when updates
/// wait, else when one arrives or `timeout` seconds pass. A newer
/// `getUpdates` ends an older one with 409, as Telegram does.
async fn get_updates(shared: &Shared, params: &Map<String, Value>) -> Response {
    let offset = params.get("offset").and_then(integer);
    let limit = params.get("limit").and_then(integer).unwrap_or(100).clamp(1, 100) as usize;
    let timeout = params.get("timeout").and_then(integer).unwrap_or(0).max(0) as u64;
    let generation = {
        let mut state = shared.lock();
        if state.webhook.is_some() {
            return refuse(
                409,
                "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first",
            );
        }
        if let Some(allowed) = params.get("allowed_updates").and_then(allowed_updates) {
            state.allowed_updates = Some(allowed);
        }
        state.poll_generation += 1;
        state.poll_generation
    };
    shared.poke.send_modify(|n| *n += 1);
    let mut poked = shared.poke.subscribe();
    let max_poll = shared.lock().options.max_poll;
    let deadline = Instant::now() + std::time::Duration::from_secs(timeout).min(max_poll);
    loop {
        {
            let mut state = shared.lock();
            if state.poll_generation != generation {
                return refuse(
                    409,
                    "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
                );
            }
            let batch = state.take_updates(offset, limit);
            if !batch.is_empty() || Instant::now() >= deadline {
                return answer(200, wire::ok(Value::Array(batch)));
            }
        }
        tokio::select! {
            changed = poked.changed() => if changed.is_err() { return refuse(500, "Internal Server Error") },
            _ = tokio::time::sleep_until(deadline) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_updates_come_as_json_or_json_text() {
        for (value, expected) in [
            (
                json!(["message", "edited_message"]),
                Some(vec!["message", "edited_message"]),
            ),
            (json!("[\"message\"]"), Some(vec!["message"])),
            (json!("[]"), Some(vec![])),
            (json!(5), None),
        ] {
            assert_eq!(
                allowed_updates(&value),
                expected.map(|v| v.into_iter().map(str::to_owned).collect::<Vec<_>>())
            );
        }
    }
}
