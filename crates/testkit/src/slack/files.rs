//! Files on the fake Slack, as Slack serves them: a message with files has
//! `subtype: file_share` and a `files` array of file objects (`id`, `name`,
//! `mimetype`, `size`, `url_private`, `url_private_download`); the bytes
//! are at `url_private` only with `Authorization: Bearer <bot token>` —
//! without it Slack answers its sign-in page (HTML, 200), which the fake
//! does too.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

use super::wire::{self, Author, MessageFields};
use super::{BOT_TOKEN, FakeSlack, Shared, TEAM_ID};
use crate::platform::FakeUser;

pub(super) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/files-pri/{file}/{name}", get(url_private))
        .with_state(shared)
}

async fn url_private(
    State(shared): State<Arc<Shared>>,
    Path((file, _name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let authorized = headers.get(header::AUTHORIZATION).and_then(|value| value.to_str().ok())
        == Some(&format!("Bearer {BOT_TOKEN}"));
    let id = file.rsplit('-').next().unwrap_or_default().to_owned();
    let mut state = shared.lock();
    state.file_downloads.push((id.clone(), authorized));
    if !authorized {
        return (
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            "<!DOCTYPE html><html><title>Slack</title><body>Sign in to your workspace</body></html>",
        )
            .into_response();
    }
    match state.files.get(&id) {
        Some(bytes) => (
            [(header::CONTENT_TYPE, "application/octet-stream")],
            axum::body::Bytes::from(bytes.clone()),
        )
            .into_response(),
        None => (axum::http::StatusCode::NOT_FOUND, "file_not_found").into_response(),
    }
}

impl FakeSlack {
    /// `user` shares a file in their DM with Herald, with `text`.
    /// `url` replaces the file's `url_private` (a forged or off-platform
    /// one); returns the message `ts`.
    pub fn send_dm_with_file(
        &self,
        user: &FakeUser,
        text: &str,
        name: &str,
        mimetype: &str,
        bytes: Vec<u8>,
        url: Option<&str>,
    ) -> String {
        use crate::platform::FakePlatform;
        let channel = self.dm_chat(user);
        let mut state = self.shared.lock();
        state.add_user(user);
        let ts = state.next_ts();
        let client_msg_id = state.next_uuid();
        let id = format!("F0{}", ts.replace('.', ""));
        let private = format!("http://{}/files-pri/{TEAM_ID}-{id}/{name}", self.http_addr);
        let size = bytes.len();
        state.files.insert(id.clone(), bytes);
        let fields = MessageFields {
            channel: &channel,
            channel_type: "im",
            ts: &ts,
            thread_ts: None,
            parent_user_id: None,
            text,
            author: Author::User(user.id.clone()),
        };
        let mut event = wire::message_event(&fields, &client_msg_id);
        event["subtype"] = json!("file_share");
        event["upload"] = json!(false);
        event["files"] = json!([{
            "id": id, "created": 1_767_225_600, "timestamp": 1_767_225_600, "name": name, "title": name,
            "mimetype": mimetype, "filetype": name.rsplit('.').next().unwrap_or("binary"),
            "pretty_type": mimetype, "user": user.id, "user_team": TEAM_ID, "editable": false,
            "size": size, "mode": "hosted", "is_external": false, "external_type": "", "is_public": false,
            "public_url_shared": false, "display_as_bot": false, "username": "",
            "url_private": url.map_or_else(|| private.clone(), str::to_owned),
            "url_private_download": url.map_or_else(|| format!("{private}?download=1"), str::to_owned),
            "permalink": format!("https://herald-test.slack.com/files/{}/{id}/{name}", user.id),
            "has_rich_preview": false, "file_access": "visible",
        }]);
        self.shared.deliver_locked(&mut state, event);
        ts
    }

    /// Each `url_private` fetch: the file id and whether it had the bot token.
    pub fn file_downloads(&self) -> Vec<(String, bool)> {
        self.shared.lock().file_downloads.clone()
    }
}
