//! Edit Message (`PATCH /channels/{channel.id}/messages/{message.id}`) as
//! Discord answers it, the record of every edit and of whom the bot's
//! messages ping, and the accessors a test of streamed answers reads.
//!
//! Architecture invariant: the edit route counts against its own per-channel
//! bucket, separate from Create Message's, as Discord's buckets are per
//! route; its default shape (5 per 5 s) is what Discord announces for it in
//! practice, and a client must go by the headers, not by that number.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::Response;
use serde_json::Value;

use super::mentions::{AllowedMentions, pings};
use super::rest::{Admission, Route, admit, answer};
use super::wire::{self, MessageRecord};
use super::{FakeDiscord, Shared, State as FakeState};
use crate::faults::Fault;

const MAX_CONTENT: usize = 2000;

/// One accepted edit of a bot message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edit {
    pub channel: String,
    pub message_id: String,
    /// The content after the edit.
    pub content: String,
    /// When the request arrived, on the process's monotonic clock.
    pub at: std::time::Instant,
}

/// One of the bot's messages as it reads now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BotMessage {
    /// The channel (or thread) it is in.
    pub channel: String,
    pub message_id: String,
    pub content: String,
    /// How many edits changed it.
    pub edits: usize,
}

impl FakeState {
    /// Records whom `record` pings under `allowed`.
    pub(super) fn record_pings(&mut self, record: &MessageRecord, allowed: &AllowedMentions) {
        let replied_author = record
            .reference
            .as_ref()
            .and_then(|id| self.message(id))
            .map(|m| m.author.id.clone());
        let found = pings(&record.content, allowed, replied_author.as_deref());
        self.pings.extend(found);
    }
}

pub(super) async fn edit_message(
    State(shared): State<Arc<Shared>>,
    Path((channel_id, message_id)): Path<(String, String)>,
    headers: HeaderMap,
    request: axum::extract::Request,
) -> Response {
    let arrived = std::time::Instant::now();
    let path = format!("/api/v10/channels/{channel_id}/messages/{message_id}");
    let method = Method::PATCH;
    let read = super::uploads::read(request).await;
    let mut state = shared.lock();
    let rate = match admit(&mut state, &headers, &method, &path, Route::Edits, &channel_id) {
        Admission::Proceed(rate) => rate,
        Admission::Refused(refusal) => return refusal,
    };
    if let Some(fault) = state.faults.take("edit_message") {
        return fault.response();
    }
    let refuse =
        |state: &mut FakeState, status: StatusCode, body: Value| answer(state, &method, &path, &rate, status, &body);
    if !state.channels.contains_key(&channel_id) {
        return refuse(&mut state, StatusCode::NOT_FOUND, wire::error(10003, "Unknown Channel"));
    }
    let Some(existing) = state
        .message(&message_id)
        .filter(|m| m.channel_id == channel_id)
        .cloned()
    else {
        return refuse(&mut state, StatusCode::NOT_FOUND, wire::error(10008, "Unknown Message"));
    };
    if existing.author.id != state.bot.id {
        let body = wire::error(50005, "Cannot edit a message authored by another user");
        return refuse(&mut state, StatusCode::FORBIDDEN, body);
    }
    let body = match read {
        Ok((body, _files)) => body,
        Err((status, body)) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
            return refuse(&mut state, status, body);
        }
    };
    let allowed = match AllowedMentions::from_request(body.get("allowed_mentions")) {
        Ok(allowed) => allowed,
        Err(refusal) => {
            let body = wire::invalid_form_body("allowed_mentions", refusal.code, &refusal.message);
            return refuse(&mut state, StatusCode::BAD_REQUEST, body);
        }
    };
    // Fields left out stay as they were; `null` clears.
    let content = match body.get("content") {
        None => existing.content.clone(),
        Some(value) => value.as_str().unwrap_or_default().to_owned(),
    };
    let attachments = match body.get("attachments") {
        Some(Value::Array(kept)) => existing
            .attachments
            .iter()
            .filter(|a| kept.iter().any(|k| k["id"] == a["id"]))
            .cloned()
            .collect(),
        Some(_) => Vec::new(),
        None => existing.attachments.clone(),
    };
    let has_embeds = body["embeds"].as_array().is_some_and(|e| !e.is_empty());
    let length = content.chars().count();
    if length > MAX_CONTENT {
        state
            .buckets
            .record_violation(format!("{path}: content of {length} characters (limit {MAX_CONTENT})"));
        let body = wire::invalid_form_body("content", "BASE_TYPE_MAX_LENGTH", "Must be 2000 or fewer in length.");
        return refuse(&mut state, StatusCode::BAD_REQUEST, body);
    }
    if content.is_empty() && !has_embeds && attachments.is_empty() {
        state
            .buckets
            .record_violation(format!("{path}: edited to an empty message"));
        let body = wire::error(50006, "Cannot send an empty message");
        return refuse(&mut state, StatusCode::BAD_REQUEST, body);
    }
    let record = MessageRecord {
        content: content.clone(),
        attachments,
        edited_timestamp: Some(super::now_iso8601()),
        ..existing
    };
    if let Some(&index) = state.message_index.get(&message_id) {
        state.messages[index] = record.clone();
    }
    state.record_pings(&record, &allowed);
    state.edits.push(Edit {
        channel: channel_id.clone(),
        message_id: message_id.clone(),
        content,
        at: arrived,
    });
    state.dispatch_message(&record, "MESSAGE_UPDATE");
    let referenced = record.reference.as_ref().and_then(|id| state.message(id)).cloned();
    let reply = wire::message(&record, referenced.as_ref());
    answer(&mut state, &method, &path, &rate, StatusCode::OK, &reply)
}

impl FakeDiscord {
    /// The bot's messages as they read now, in the order they were created
    /// (through the REST API, or [`crate::FakePlatform::send_own_message`]).
    /// [`crate::FakePlatform::sent`] keeps what was created; this has the
    /// content of each message's last edit.
    pub fn bot_messages(&self) -> Vec<BotMessage> {
        let state = self.shared.lock();
        state
            .messages
            .iter()
            .filter(|m| m.author.id == state.bot.id)
            .map(|m| BotMessage {
                channel: m.channel_id.clone(),
                message_id: m.id.clone(),
                content: m.content.clone(),
                edits: state.edits.iter().filter(|e| e.message_id == m.id).count(),
            })
            .collect()
    }

    /// Every accepted edit, in order.
    pub fn edits(&self) -> Vec<Edit> {
        self.shared.lock().edits.clone()
    }

    /// Whom the bot's created and edited messages pinged, in order:
    /// `everyone`, `here`, `role:ID`, `user:ID` (see [`super::mentions`]).
    pub fn pings(&self) -> Vec<String> {
        self.shared.lock().pings.clone()
    }

    /// The limit and window of every channel's edit-message bucket.
    pub fn set_edit_bucket(&self, limit: u32, window: Duration) {
        let mut state = self.shared.lock();
        state.edit_rule.limit = limit;
        state.edit_rule.window = window;
    }

    /// The next edit-message requests meet these faults, one each
    /// ([`Fault::LoseAnswer`] acts as [`Fault::Drop`] here: no edit is made).
    pub fn inject_edit_faults(&self, faults: impl IntoIterator<Item = Fault>) {
        self.shared.lock().faults.add("edit_message", faults);
    }
}
