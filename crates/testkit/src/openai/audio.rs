//! `POST /v1/audio/transcriptions`, as OpenAI takes it: a
//! `multipart/form-data` body with `file` (a filename and bytes) and
//! `model` (both required), an optional `response_format`; the answer is
//! `{"text": "..."}`, or an OpenAI error object. Tests script the answers
//! and read what was uploaded.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::{Multipart, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// One scripted answer: the transcript, or an error with this status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TranscriptionReply {
    Text(String),
    Error { status: u16, message: String },
}

/// What one transcription request carried.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TranscriptionRequest {
    pub model: String,
    pub filename: String,
    pub content_type: Option<String>,
    pub bytes: Vec<u8>,
    pub authorization: Option<String>,
}

#[derive(Default)]
pub(crate) struct Transcriptions {
    script: VecDeque<TranscriptionReply>,
    requests: Vec<TranscriptionRequest>,
}

pub(crate) type SharedTranscriptions = Arc<Mutex<Transcriptions>>;

impl Transcriptions {
    pub(crate) fn push(shared: &SharedTranscriptions, reply: TranscriptionReply) {
        shared
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .script
            .push_back(reply);
    }

    pub(crate) fn requests(shared: &SharedTranscriptions) -> Vec<TranscriptionRequest> {
        shared.lock().unwrap_or_else(PoisonError::into_inner).requests.clone()
    }
}

fn error(status: u16, message: &str, param: Option<&str>) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = json!({"error": {"message": message, "type": "invalid_request_error", "param": param, "code": null}});
    (status, axum::Json(body)).into_response()
}

pub(crate) async fn transcribe(
    State(shared): State<SharedTranscriptions>,
    headers: axum::http::HeaderMap,
    multipart: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Response {
    let Ok(mut multipart) = multipart else {
        return error(400, "Could not parse multipart form", None);
    };
    let (mut model, mut file) = (None, None);
    loop {
        match multipart.next_field().await {
            Ok(Some(field)) => {
                let name = field.name().unwrap_or_default().to_owned();
                let filename = field.file_name().map(str::to_owned);
                let content_type = field.content_type().map(str::to_owned);
                let Ok(bytes) = field.bytes().await else {
                    return error(400, "Could not parse multipart form", None);
                };
                match name.as_str() {
                    "model" => model = Some(String::from_utf8_lossy(&bytes).into_owned()),
                    "file" => file = Some((filename.unwrap_or_default(), content_type, bytes.to_vec())),
                    _ => {}
                }
            }
            Ok(None) => break,
            Err(_) => return error(400, "Could not parse multipart form", None),
        }
    }
    let Some(model) = model else {
        return error(400, "you must provide a model parameter", Some("model"));
    };
    let Some((filename, content_type, bytes)) = file else {
        return error(400, "you must provide a file parameter", Some("file"));
    };
    if filename.is_empty() {
        return error(400, "Unrecognized file format: the file has no name", Some("file"));
    }
    let mut state = shared.lock().unwrap_or_else(PoisonError::into_inner);
    state.requests.push(TranscriptionRequest {
        model,
        filename,
        content_type,
        bytes,
        authorization: headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    });
    match state.script.pop_front() {
        Some(TranscriptionReply::Text(text)) => axum::Json(json!({ "text": text })).into_response(),
        Some(TranscriptionReply::Error { status, message }) => error(status, &message, None),
        None => error(500, "no transcription scripted", None),
    }
}
