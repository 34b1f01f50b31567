//! The fake's REST API under `/api/v10`: the few routes a bot needs, each
//! checking the token, counting against its rate-limit bucket and answering
//! with Discord's objects, headers and error bodies.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use super::buckets::{RateHeaders, Verdict};
use super::wire::{self, MessageRecord};
use super::{Shared, State as FakeState};
use crate::faults::Fault;
use crate::platform::{SentMessage, Stamped, Upload};

const MAX_CONTENT: usize = 2000;

pub(super) fn serve(listener: TcpListener, shared: Arc<Shared>) -> oneshot::Sender<()> {
    let router = Router::new()
        .route("/api/v10/gateway", get(gateway))
        .route("/api/v10/gateway/bot", get(gateway_bot))
        .route("/api/v10/users/@me", get(current_user))
        .route("/api/v10/users/@me/channels", post(create_dm))
        .route("/api/v10/channels/{channel_id}", get(get_channel))
        .route("/api/v10/channels/{channel_id}/messages", post(create_message))
        .route(
            "/api/v10/channels/{channel_id}/messages/{message_id}",
            patch(super::edits::edit_message),
        )
        .route("/api/v10/channels/{channel_id}/typing", post(trigger_typing))
        .route("/attachments/{channel_id}/{attachment_id}/{name}", get(cdn_file))
        .fallback(not_found)
        .layer(axum::extract::DefaultBodyLimit::max(super::uploads::BODY_LIMIT))
        .with_state(shared);
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        let _ = axum::serve(crate::no_delay(listener), router)
            .with_graceful_shutdown(shutdown)
            .await;
    });
    stop
}

/// The CDN: an attachment's bytes at the `url` its message named (signed
/// query parameters ignored, as the fake signs nothing).
async fn cdn_file(
    State(shared): State<Arc<Shared>>,
    Path((_channel, attachment_id, _name)): Path<(String, String, String)>,
) -> Response {
    let mut state = shared.lock();
    state.cdn_downloads.push(attachment_id.clone());
    match state.cdn.get(&attachment_id) {
        Some(bytes) => (
            [(header::CONTENT_TYPE, "application/octet-stream")],
            axum::body::Bytes::from(bytes.clone()),
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "Not Found").into_response(),
    }
}

pub(super) fn json(status: StatusCode, body: &Value) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

fn seconds(duration: Duration) -> String {
    format!("{:.3}", duration.as_secs_f64())
}

fn with_rate_headers(mut response: Response, headers: &RateHeaders) -> Response {
    let reset = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default() + headers.reset_after;
    let map = response.headers_mut();
    let mut put = |name: &'static str, value: String| {
        if let Ok(value) = HeaderValue::from_str(&value) {
            map.insert(name, value);
        }
    };
    put("x-ratelimit-limit", headers.limit.to_string());
    put("x-ratelimit-remaining", headers.remaining.to_string());
    put("x-ratelimit-reset", seconds(reset));
    put("x-ratelimit-reset-after", seconds(headers.reset_after));
    put("x-ratelimit-bucket", headers.bucket.clone());
    response
}

pub(super) fn record(state: &mut FakeState, method: &Method, path: &str, status: StatusCode) {
    state.requests.push(super::RestRequest {
        method: method.to_string(),
        path: path.to_owned(),
        status: status.as_u16(),
    });
}

/// Which bucket a request counts against.
pub(super) enum Route {
    Messages,
    /// Editing a message: its own route, per channel.
    Edits,
    Typing,
    Other,
}

/// Whether a request may proceed.
pub(super) enum Admission {
    Proceed(RateHeaders),
    /// The answer to send instead (401 or 429).
    Refused(Response),
}

/// Checks the token and the bucket.
pub(super) fn admit(
    state: &mut FakeState,
    headers: &HeaderMap,
    method: &Method,
    path: &str,
    route: Route,
    resource: &str,
) -> Admission {
    let expected = format!("Bot {}", state.token);
    let given = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    if given != Some(expected.as_str()) {
        record(state, method, path, StatusCode::UNAUTHORIZED);
        return Admission::Refused(json(StatusCode::UNAUTHORIZED, &wire::error(0, "401: Unauthorized")));
    }
    let (rule, template, forceable) = match route {
        Route::Messages => (state.message_rule.clone(), "/channels/{id}/messages", true),
        Route::Edits => (state.edit_rule.clone(), "/channels/{id}/messages/{message_id}", false),
        Route::Typing => (state.typing_rule.clone(), "/channels/{id}/typing", false),
        Route::Other => (state.other_rule.clone(), path, false),
    };
    let key = format!("{method} {}", template.replace("{id}", resource));
    match state.buckets.check(&key, &rule, forceable, tokio::time::Instant::now()) {
        Verdict::Allow(rate) => Admission::Proceed(rate),
        Verdict::Limited {
            retry_after,
            global,
            scope,
            headers: rate,
        } => {
            record(state, method, path, StatusCode::TOO_MANY_REQUESTS);
            let body = wire::rate_limited((retry_after.as_millis() as f64) / 1000.0, global);
            let mut response = with_rate_headers(json(StatusCode::TOO_MANY_REQUESTS, &body), &rate);
            let map = response.headers_mut();
            map.insert(
                header::RETRY_AFTER,
                HeaderValue::from(retry_after.as_secs_f64().ceil() as u64),
            );
            map.insert("x-ratelimit-scope", HeaderValue::from_static(scope));
            if global {
                map.insert("x-ratelimit-global", HeaderValue::from_static("true"));
            }
            Admission::Refused(response)
        }
    }
}

pub(super) fn answer(
    state: &mut FakeState,
    method: &Method,
    path: &str,
    rate: &RateHeaders,
    status: StatusCode,
    body: &Value,
) -> Response {
    record(state, method, path, status);
    with_rate_headers(json(status, body), rate)
}

async fn gateway(State(shared): State<Arc<Shared>>) -> Response {
    let mut state = shared.lock();
    let url = state.gateway_url.clone();
    record(&mut state, &Method::GET, "/api/v10/gateway", StatusCode::OK);
    json(StatusCode::OK, &serde_json::json!({ "url": url }))
}

async fn gateway_bot(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let path = "/api/v10/gateway/bot";
    let mut state = shared.lock();
    let rate = match admit(&mut state, &headers, &Method::GET, path, Route::Other, "") {
        Admission::Proceed(rate) => rate,
        Admission::Refused(refusal) => return refusal,
    };
    let now = std::time::Instant::now();
    state.session_start.refresh(now);
    let start = &state.session_start;
    let body = serde_json::json!({
        "url": state.gateway_url,
        "shards": state.recommended_shards,
        "session_start_limit": {
            "total": start.total,
            "remaining": start.remaining,
            "reset_after": start.resets_at.saturating_duration_since(now).as_millis() as u64,
            "max_concurrency": start.max_concurrency,
        },
    });
    answer(&mut state, &Method::GET, path, &rate, StatusCode::OK, &body)
}

async fn current_user(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let path = "/api/v10/users/@me";
    let mut state = shared.lock();
    let rate = match admit(&mut state, &headers, &Method::GET, path, Route::Other, "") {
        Admission::Proceed(rate) => rate,
        Admission::Refused(refusal) => return refusal,
    };
    let body = wire::current_user(&state.bot);
    answer(&mut state, &Method::GET, path, &rate, StatusCode::OK, &body)
}

async fn create_dm(State(shared): State<Arc<Shared>>, headers: HeaderMap, raw: Bytes) -> Response {
    let path = "/api/v10/users/@me/channels";
    let mut state = shared.lock();
    let rate = match admit(&mut state, &headers, &Method::POST, path, Route::Other, "") {
        Admission::Proceed(rate) => rate,
        Admission::Refused(refusal) => return refusal,
    };
    let recipient = serde_json::from_slice::<Value>(&raw)
        .ok()
        .and_then(|body| snowflake(&body["recipient_id"]));
    let Some(recipient) = recipient else {
        let body = wire::invalid_form_body("recipient_id", "BASE_TYPE_REQUIRED", "This field is required");
        return answer(&mut state, &Method::POST, path, &rate, StatusCode::BAD_REQUEST, &body);
    };
    let Some(user) = state.person(&recipient).cloned() else {
        let body = wire::error(10013, "Unknown User");
        return answer(&mut state, &Method::POST, path, &rate, StatusCode::NOT_FOUND, &body);
    };
    let id = state.dm_channel(&user);
    let channel = state.channels[&id].clone();
    let body = wire::channel(&channel, state.last_message_in(&id));
    answer(&mut state, &Method::POST, path, &rate, StatusCode::OK, &body)
}

async fn get_channel(
    State(shared): State<Arc<Shared>>,
    Path(channel_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let path = format!("/api/v10/channels/{channel_id}");
    let mut state = shared.lock();
    let rate = match admit(&mut state, &headers, &Method::GET, &path, Route::Other, &channel_id) {
        Admission::Proceed(rate) => rate,
        Admission::Refused(refusal) => return refusal,
    };
    let Some(channel) = state.channels.get(&channel_id).cloned() else {
        let body = wire::error(10003, "Unknown Channel");
        return answer(&mut state, &Method::GET, &path, &rate, StatusCode::NOT_FOUND, &body);
    };
    let body = wire::channel(&channel, state.last_message_in(&channel_id));
    answer(&mut state, &Method::GET, &path, &rate, StatusCode::OK, &body)
}

/// A snowflake written as a JSON string or number.
fn snowflake(value: &Value) -> Option<String> {
    match value {
        Value::String(text) if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) => Some(text.clone()),
        Value::Number(number) => number.as_u64().map(|n| n.to_string()),
        _ => None,
    }
}

/// What `message_reference` resolved to.
enum Reference {
    None,
    To(String),
    Refused(Value),
}

fn resolve_reference(state: &FakeState, channel_id: &str, body: &Value) -> Reference {
    let Some(reference) = body.get("message_reference").filter(|r| !r.is_null()) else {
        return Reference::None;
    };
    let Some(message_id) = snowflake(&reference["message_id"]) else {
        return Reference::Refused(wire::invalid_form_body(
            "message_reference",
            "MESSAGE_REFERENCE_UNKNOWN_MESSAGE",
            "Unknown message",
        ));
    };
    let fail_if_not_exists = reference["fail_if_not_exists"].as_bool().unwrap_or(true);
    let same_channel = snowflake(&reference["channel_id"]).is_none_or(|id| id == channel_id);
    let exists = state.message(&message_id).is_some_and(|m| m.channel_id == channel_id);
    match (exists && same_channel, fail_if_not_exists) {
        (true, _) => Reference::To(message_id),
        (false, false) => Reference::None,
        (false, true) => Reference::Refused(wire::invalid_form_body(
            "message_reference",
            "MESSAGE_REFERENCE_UNKNOWN_MESSAGE",
            "Unknown message",
        )),
    }
}

async fn create_message(
    State(shared): State<Arc<Shared>>,
    Path(channel_id): Path<String>,
    headers: HeaderMap,
    request: axum::extract::Request,
) -> Response {
    let arrived = std::time::Instant::now();
    let path = format!("/api/v10/channels/{channel_id}/messages");
    let method = Method::POST;
    let read = super::uploads::read(request).await;
    let mut state = shared.lock();
    let rate = match admit(&mut state, &headers, &method, &path, Route::Messages, &channel_id) {
        Admission::Proceed(rate) => rate,
        Admission::Refused(refusal) => return refusal,
    };
    let fault = state.faults.take("create_message");
    if let Some(fault @ (Fault::Status(..) | Fault::Drop)) = &fault {
        return fault.response();
    }
    let Some(channel) = state.channels.get(&channel_id).cloned() else {
        let body = wire::error(10003, "Unknown Channel");
        return answer(&mut state, &method, &path, &rate, StatusCode::NOT_FOUND, &body);
    };
    let (body, files) = match read {
        Ok(read) => read,
        Err((status, body)) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
            return answer(&mut state, &method, &path, &rate, status, &body);
        }
    };
    let content = body["content"].as_str().unwrap_or_default().to_owned();
    let has_embeds = body["embeds"].as_array().is_some_and(|e| !e.is_empty());
    if content.is_empty() && !has_embeds && files.is_empty() {
        state.buckets.record_violation(format!("{path}: an empty message"));
        let body = wire::error(50006, "Cannot send an empty message");
        return answer(&mut state, &method, &path, &rate, StatusCode::BAD_REQUEST, &body);
    }
    let length = content.chars().count();
    if length > MAX_CONTENT {
        state
            .buckets
            .record_violation(format!("{path}: content of {length} characters (limit {MAX_CONTENT})"));
        let body = wire::invalid_form_body("content", "BASE_TYPE_MAX_LENGTH", "Must be 2000 or fewer in length.");
        return answer(&mut state, &method, &path, &rate, StatusCode::BAD_REQUEST, &body);
    }
    // `nonce`: up to 25 characters; with `enforce_nonce`, a nonce the bot
    // used in the last few minutes returns that message and creates none.
    let nonce = match &body["nonce"] {
        Value::String(nonce) => Some(nonce.clone()),
        Value::Number(nonce) => Some(nonce.to_string()),
        _ => None,
    };
    if nonce.as_ref().is_some_and(|nonce| nonce.chars().count() > 25) {
        let body = wire::invalid_form_body("nonce", "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.");
        return answer(&mut state, &method, &path, &rate, StatusCode::BAD_REQUEST, &body);
    }
    let enforced = nonce.filter(|_| body["enforce_nonce"] == Value::Bool(true));
    if let Some(nonce) = &enforced
        && let Some((existing, at)) = state.nonces.get(nonce).cloned()
        && at.elapsed() < NONCE_WINDOW
    {
        let referenced = existing.reference.as_ref().and_then(|id| state.message(id)).cloned();
        let reply = wire::message(&existing, referenced.as_ref());
        return answer(&mut state, &method, &path, &rate, StatusCode::OK, &reply);
    }
    let allowed = match super::mentions::AllowedMentions::from_request(body.get("allowed_mentions")) {
        Ok(allowed) => allowed,
        Err(refusal) => {
            let body = wire::invalid_form_body("allowed_mentions", refusal.code, &refusal.message);
            return answer(&mut state, &method, &path, &rate, StatusCode::BAD_REQUEST, &body);
        }
    };
    let reference = match resolve_reference(&state, &channel_id, &body) {
        Reference::None => None,
        Reference::To(id) => Some(id),
        Reference::Refused(refusal) => {
            return answer(&mut state, &method, &path, &rate, StatusCode::BAD_REQUEST, &refusal);
        }
    };
    let id = state.snowflake();
    let attachments = files
        .iter()
        .map(|file| {
            let attachment_id = state.snowflake();
            let url = format!(
                "https://cdn.discordapp.com/attachments/{channel_id}/{attachment_id}/{}",
                file.name
            );
            super::uploads::attachment_object(&attachment_id, &url, file)
        })
        .collect();
    let record = MessageRecord {
        id,
        channel_id: channel_id.clone(),
        guild_id: channel.guild_id.clone(),
        author: state.bot.clone(),
        content: content.clone(),
        mentions: Vec::new(),
        reference: reference.clone(),
        timestamp: super::now_iso8601(),
        attachments,
        edited_timestamp: None,
    };
    let referenced = reference.as_ref().and_then(|id| state.message(id)).cloned();
    let reply = wire::message(&record, referenced.as_ref());
    state.record_pings(&record, &allowed);
    // A thread's messages belong to its parent channel's conversation.
    let (chat, thread) = match &channel.parent_id {
        Some(parent) if channel.kind == wire::PUBLIC_THREAD => (parent.clone(), Some(channel_id.clone())),
        _ => (channel_id.clone(), None),
    };
    state.sent_stamps.push(Stamped {
        at: arrived,
        chat: chat.clone(),
        text: content.clone(),
    });
    for file in files {
        state.uploads.push(Upload {
            chat: chat.clone(),
            thread: thread.clone(),
            name: file.name,
            content_type: file.content_type,
            bytes: file.bytes,
            text: (!content.is_empty()).then(|| content.clone()),
        });
    }
    if !content.is_empty() {
        state.sent.push(SentMessage {
            chat,
            thread,
            raw: content.clone(),
            text: content,
            reply_to: reference,
            parse_mode: None,
            entities: Vec::new(),
        });
    }
    state.sent_ids.push(record.id.clone());
    if let Some(nonce) = enforced {
        state.nonces.insert(nonce, (record.clone(), std::time::Instant::now()));
    }
    state.add_message(record.clone());
    let count = state.sent.len();
    // The bot's own message comes back over the gateway, as on Discord.
    state.dispatch_message(&record, "MESSAGE_CREATE");
    let mut response = answer(&mut state, &method, &path, &rate, StatusCode::OK, &reply);
    if fault == Some(Fault::LoseAnswer) {
        response = Fault::Drop.response();
    }
    drop(state);
    shared.sent_count.send_replace(count);
    response
}

/// How long Discord remembers an enforced nonce ("the past few minutes").
const NONCE_WINDOW: std::time::Duration = std::time::Duration::from_secs(5 * 60);

async fn trigger_typing(
    State(shared): State<Arc<Shared>>,
    Path(channel_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let path = format!("/api/v10/channels/{channel_id}/typing");
    let method = Method::POST;
    let mut state = shared.lock();
    let rate = match admit(&mut state, &headers, &method, &path, Route::Typing, &channel_id) {
        Admission::Proceed(rate) => rate,
        Admission::Refused(refusal) => return refusal,
    };
    if !state.channels.contains_key(&channel_id) {
        let body = wire::error(10003, "Unknown Channel");
        return answer(&mut state, &method, &path, &rate, StatusCode::NOT_FOUND, &body);
    }
    state.typing.push(channel_id);
    record(&mut state, &method, &path, StatusCode::NO_CONTENT);
    with_rate_headers(StatusCode::NO_CONTENT.into_response(), &rate)
}

async fn not_found(State(shared): State<Arc<Shared>>, method: Method, uri: Uri) -> Response {
    let mut state = shared.lock();
    record(&mut state, &method, uri.path(), StatusCode::NOT_FOUND);
    json(StatusCode::NOT_FOUND, &wire::error(0, "404: Not Found"))
}
