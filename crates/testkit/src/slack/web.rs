//! The fake Web API: `POST|GET /api/<method>` with the token as a Bearer
//! header (or a `token` form field), form or JSON bodies as Slack accepts
//! them, and Slack's answers: HTTP 200 with `{"ok": false, "error": …}` for
//! every refusal except rate limits, which are HTTP 429 with `Retry-After`.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::state::PostVerdict;
use super::wire::{self, Author, MessageFields};
use super::{APP_ID, APP_TOKEN, BOT_ID, BOT_NAME, BOT_TOKEN, BOT_USER_ID, Shared, TEAM_ID, TEAM_NAME};
use crate::platform::{SentMessage, Stamped};

/// Slack refuses longer texts outright; it truncates display far earlier.
pub(super) const MAX_TEXT_CHARS: usize = 40_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TokenKind {
    Bot,
    App,
}

pub fn router(shared: Arc<Shared>) -> Router {
    Router::new().route("/api/{method}", any(api)).with_state(shared)
}

fn json_response(status: StatusCode, body: Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        body.to_string(),
    )
        .into_response()
}

pub(super) fn ok(mut body: Value) -> Response {
    body["ok"] = Value::Bool(true);
    json_response(StatusCode::OK, body)
}

pub(super) fn refuse(error: &str) -> Response {
    json_response(StatusCode::OK, json!({"ok": false, "error": error}))
}

pub(super) fn rate_limited(retry_after_secs: u64) -> Response {
    let mut response = json_response(
        StatusCode::TOO_MANY_REQUESTS,
        json!({"ok": false, "error": "ratelimited"}),
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
    response
}

/// Query string and body merged into one object of arguments.
fn arguments(query: Option<&str>, headers: &HeaderMap, body: &Bytes) -> Result<Map<String, Value>, &'static str> {
    let mut arguments = Map::new();
    let mut add_pairs = |text: &[u8]| -> Result<(), &'static str> {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(text).map_err(|_| "invalid_form_data")?;
        for (key, value) in pairs {
            arguments.insert(key, Value::String(value));
        }
        Ok(())
    };
    if let Some(query) = query {
        add_pairs(query.as_bytes())?;
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if body.is_empty() {
        return Ok(arguments);
    }
    if content_type.starts_with("application/json") {
        let Ok(Value::Object(object)) = serde_json::from_slice::<Value>(body) else {
            return Err("invalid_json");
        };
        arguments.extend(object);
    } else if content_type.starts_with("application/x-www-form-urlencoded") || content_type.is_empty() {
        add_pairs(body)?;
    } else {
        return Err("invalid_arguments");
    }
    Ok(arguments)
}

fn token_kind(headers: &HeaderMap, arguments: &Map<String, Value>) -> Result<TokenKind, &'static str> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    let token = bearer.or_else(|| arguments.get("token").and_then(Value::as_str).map(str::to_owned));
    match token.as_deref() {
        None | Some("") => Err("not_authed"),
        Some(BOT_TOKEN) => Ok(TokenKind::Bot),
        Some(APP_TOKEN) => Ok(TokenKind::App),
        Some(_) => Err("invalid_auth"),
    }
}

/// The bot token scope a Web API method needs (its reference page's
/// "Required scopes"); `None` for methods any token may call.
fn needed_scope(method: &str) -> Option<&'static str> {
    match method {
        "chat.postMessage" | "chat.update" | "chat.delete" => Some("chat:write"),
        "users.info" => Some("users:read"),
        "files.getUploadURLExternal" | "files.completeUploadExternal" => Some("files:write"),
        "conversations.info" => Some("channels:read"),
        _ => None,
    }
}

pub(super) fn text_argument<'a>(arguments: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    arguments.get(key).and_then(Value::as_str).filter(|v| !v.is_empty())
}

async fn api(
    State(shared): State<Arc<Shared>>,
    Path(method): Path<String>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Response {
    let arrived = std::time::Instant::now();
    let fault = {
        let mut state = shared.lock();
        state.calls.push(method.clone());
        state.faults.take(&method)
    };
    if let Some(fault) = fault {
        return fault.response();
    }
    let arguments = match arguments(query.as_deref(), &headers, &body) {
        Ok(arguments) => arguments,
        Err(error) => return refuse(error),
    };
    let kind = match token_kind(&headers, &arguments) {
        Ok(kind) => kind,
        Err(error) => return refuse(error),
    };
    if kind == TokenKind::Bot
        && let Some(needed) = needed_scope(&method)
        && let Some(scopes) = &shared.lock().options.scopes
        && !scopes.iter().any(|scope| scope == needed)
    {
        return json_response(
            StatusCode::OK,
            json!({"ok": false, "error": "missing_scope", "needed": needed, "provided": scopes.join(",")}),
        );
    }
    match (method.as_str(), kind) {
        ("auth.test", TokenKind::Bot) => ok(json!({
            "url": "https://herald-fake.slack.com/",
            "team": TEAM_NAME,
            "user": BOT_NAME,
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
            "is_enterprise_install": false
        })),
        ("apps.connections.open", TokenKind::App) => {
            let ticket = {
                let mut state = shared.lock();
                let ticket = state.next_uuid();
                state.tickets.push(ticket.clone());
                ticket
            };
            ok(json!({"url": format!("ws://{}/link/?ticket={ticket}&app_id={APP_ID}", shared.socket_addr)}))
        }
        ("chat.postMessage", TokenKind::Bot) => post_message(&shared, &arguments, arrived),
        ("chat.update", TokenKind::Bot) => super::edits::update_message(&shared, &arguments, arrived),
        ("files.getUploadURLExternal", TokenKind::Bot) => super::uploads::get_upload_url(&shared, &headers, &arguments),
        ("files.completeUploadExternal", TokenKind::Bot) => super::uploads::complete(&shared, &arguments),
        ("users.info", TokenKind::Bot) => {
            let delay = shared.lock().users_info_delay;
            tokio::time::sleep(delay).await;
            let state = shared.lock();
            match text_argument(&arguments, "user").and_then(|id| state.users.get(id)) {
                Some(user) => ok(json!({"user": wire::user_object(&user.id, &user.name)})),
                None => refuse("user_not_found"),
            }
        }
        (
            "auth.test"
            | "apps.connections.open"
            | "chat.postMessage"
            | "chat.update"
            | "users.info"
            | "files.getUploadURLExternal"
            | "files.completeUploadExternal",
            _,
        ) => refuse("not_allowed_token_type"),
        _ => refuse("unknown_method"),
    }
}

fn post_message(shared: &Shared, arguments: &Map<String, Value>, arrived: std::time::Instant) -> Response {
    let text = text_argument(arguments, "text").unwrap_or_default().to_owned();
    let has_blocks = arguments.get("blocks").is_some_and(|b| !b.is_null());
    let thread_ts = text_argument(arguments, "thread_ts").map(str::to_owned);
    let mut state = shared.lock();
    let Some(channel) = text_argument(arguments, "channel").and_then(|c| state.resolve_channel(c)) else {
        return refuse("channel_not_found");
    };
    if text.is_empty() && !has_blocks {
        return refuse("no_text");
    }
    if text.chars().count() > MAX_TEXT_CHARS {
        return refuse("msg_too_long");
    }
    if let PostVerdict::RateLimited { retry_after_secs } = state.judge_post(&channel, Instant::now()) {
        return rate_limited(retry_after_secs);
    }
    let ts = state.next_ts();
    state.sent_stamps.push(Stamped {
        at: arrived,
        chat: channel.clone(),
        text: text.clone(),
    });
    state.sent.push(SentMessage {
        chat: channel.clone(),
        thread: thread_ts.clone(),
        text: text.clone(),
        reply_to: None,
        parse_mode: None,
        entities: Vec::new(),
        raw: text.clone(),
    });
    let sent = state.sent.len();
    state.check_format("chat.postMessage", &channel, &ts, &text);
    state.remember(&channel, &ts, thread_ts.as_deref(), &text, true);
    if state.options.echo_own_messages {
        let channel_type = if channel.starts_with('D') { "im" } else { "channel" };
        let event = wire::message_event(
            &MessageFields {
                channel: &channel,
                channel_type,
                ts: &ts,
                thread_ts: thread_ts.as_deref(),
                parent_user_id: None,
                text: &text,
                author: Author::OwnBot,
            },
            "",
        );
        shared.deliver_locked(&mut state, event);
    }
    drop(state);
    shared.sent_count.send_replace(sent);
    shared.changed();
    ok(json!({
        "channel": channel,
        "ts": ts,
        "message": wire::posted_message(&text, &ts, thread_ts.as_deref()),
    }))
}
