//! Files the bot uploads, the way Slack takes them now (`files.upload` is
//! retired): `files.getUploadURLExternal` (`filename`, `length`) answers an
//! `upload_url` and a `file_id`; the bytes are POSTed to that URL (raw, no
//! token needed), which answers `OK - <length>` in plain text; and
//! `files.completeUploadExternal` (`files: [{id, title}]`, `channel_id`,
//! `thread_ts`, `initial_comment`) shares them. A file whose bytes did not
//! arrive, or arrived at another length than announced, is refused there.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Map, Value, json};

use super::Shared;
use crate::platform::Upload;

/// Slack takes files up to 1 GB; the fake reads at most this much.
const BODY_LIMIT: usize = 64 * 1024 * 1024;

/// A file announced by `files.getUploadURLExternal`.
#[derive(Clone, Debug)]
pub struct PendingUpload {
    pub name: String,
    pub length: usize,
    pub content_type: Option<String>,
    pub bytes: Option<Vec<u8>>,
}

pub(super) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/upload/v1/{file_id}", post(receive))
        .layer(axum::extract::DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(shared)
}

/// `files.getUploadURLExternal`.
pub(super) fn get_upload_url(shared: &Shared, headers: &HeaderMap, arguments: &Map<String, Value>) -> Response {
    let name = arguments
        .get("filename")
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty());
    let length = arguments.get("length").and_then(|length| match length {
        Value::String(text) => text.parse::<usize>().ok(),
        Value::Number(number) => number.as_u64().map(|n| n as usize),
        _ => None,
    });
    let (Some(name), Some(length)) = (name, length) else {
        return super::web::refuse("invalid_arguments");
    };
    if length == 0 {
        return super::web::refuse("invalid_arguments");
    }
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("127.0.0.1")
        .to_owned();
    let mut state = shared.lock();
    let file_id = format!("F{:09}", state.pending_uploads.len() + 1);
    state.pending_uploads.insert(
        file_id.clone(),
        PendingUpload {
            name: name.to_owned(),
            length,
            content_type: None,
            bytes: None,
        },
    );
    super::web::ok(json!({
        "upload_url": format!("http://{host}/upload/v1/{file_id}"),
        "file_id": file_id,
    }))
}

/// The upload URL: takes the bytes once.
async fn receive(
    State(shared): State<Arc<Shared>>,
    Path(file_id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut state = shared.lock();
    let Some(pending) = state.pending_uploads.get_mut(&file_id) else {
        return (StatusCode::NOT_FOUND, "Not Found").into_response();
    };
    pending.content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    pending.bytes = Some(body.to_vec());
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("OK - {}", body.len()),
    )
        .into_response()
}

/// `files.completeUploadExternal`.
pub(super) fn complete(shared: &Shared, arguments: &Map<String, Value>) -> Response {
    let files: Vec<Value> = match arguments.get("files") {
        Some(Value::Array(files)) => files.clone(),
        Some(Value::String(text)) => serde_json::from_str(text).unwrap_or_default(),
        _ => Vec::new(),
    };
    if files.is_empty() {
        return super::web::refuse("invalid_arguments");
    }
    let text = |key: &str| {
        arguments
            .get(key)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    let thread = text("thread_ts");
    let comment = text("initial_comment");
    let mut state = shared.lock();
    let channel = match text("channel_id").or_else(|| text("channels")) {
        Some(channel) => match state.resolve_channel(&channel) {
            Some(channel) => Some(channel),
            None => return super::web::refuse("channel_not_found"),
        },
        None => None,
    };
    let mut shared_files = Vec::new();
    for file in &files {
        let Some(id) = file.get("id").and_then(Value::as_str) else {
            return super::web::refuse("invalid_arguments");
        };
        let Some(pending) = state.pending_uploads.get(id).cloned() else {
            return super::web::refuse("file_not_found");
        };
        let Some(bytes) = pending.bytes.clone() else {
            return super::web::refuse("file_upload_not_complete");
        };
        if bytes.len() != pending.length {
            return super::web::refuse("file_size_mismatch");
        }
        shared_files.push((id.to_owned(), pending, bytes));
    }
    let mut answered = Vec::new();
    for (id, pending, bytes) in shared_files {
        state.pending_uploads.remove(&id);
        answered.push(json!({
            "id": id,
            "name": pending.name,
            "title": pending.name,
            "size": bytes.len(),
        }));
        if let Some(channel) = &channel {
            state.uploads.push(Upload {
                chat: channel.clone(),
                thread: thread.clone(),
                name: pending.name,
                content_type: pending.content_type,
                bytes,
                text: comment.clone(),
            });
        }
    }
    super::web::ok(json!({ "files": answered }))
}
