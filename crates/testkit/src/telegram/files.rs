//! Files on the fake Bot API, served as Telegram serves them: a message
//! carries a `file_id` (with `file_unique_id` and `file_size`); `getFile`
//! answers a `File` with a relative `file_path` (or refuses a file over
//! 20 MB, "file is too big"); the bytes are at
//! `/file/bot<token>/<file_path>`.
//!
//! For hostile tests a file can be served without end whatever its claimed
//! size, a byte at a time, or under a `file_path` that points outside the
//! file endpoint.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::state::unix_now;
use super::wire::MessageFields;
use super::{FakeTelegram, Shared, person, wire};
use crate::platform::FakeUser;

/// The most a bot may fetch through `getFile`.
pub const BOT_DOWNLOAD_LIMIT: u64 = 20 * 1024 * 1024;

/// How the file endpoint serves a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Serve {
    /// Its bytes, with their length.
    Whole,
    /// 64 KiB chunks without end and without a length, whatever was claimed.
    Endless,
    /// Its bytes one a second.
    Trickle,
    /// Its bytes at this many per second, with their length, as a slow but
    /// honest link serves them.
    Rate(u64),
}

/// A file to send in a message.
#[derive(Clone, Debug)]
pub struct FakeFile {
    /// `photo`, `voice`, `audio`, `document` or `video`.
    pub field: &'static str,
    pub name: Option<String>,
    pub mime: Option<String>,
    pub bytes: Vec<u8>,
    /// The `file_size` Telegram states; the bytes' length when `None`.
    pub claimed_size: Option<u64>,
    pub serve: Serve,
    /// The `file_path` `getFile` answers; Telegram's shape when `None`.
    pub path: Option<String>,
    /// Leave `file_size` out of the message and of `getFile`'s answer, as
    /// the Bot API may (the field is optional).
    pub hide_size: bool,
}

impl FakeFile {
    pub fn new(field: &'static str, bytes: Vec<u8>) -> Self {
        Self {
            field,
            name: None,
            mime: None,
            bytes,
            claimed_size: None,
            serve: Serve::Whole,
            path: None,
            hide_size: false,
        }
    }
}

#[derive(Default)]
pub(crate) struct Shelf {
    files: HashMap<String, Stored>,
    next: u64,
    /// The paths fetched from the file endpoint, in order.
    pub downloads: Vec<String>,
}

struct Stored {
    unique_id: String,
    path: String,
    bytes: Arc<Vec<u8>>,
    size: u64,
    serve: Serve,
    hide_size: bool,
}

impl FakeTelegram {
    /// `user` sends `files` as one album (messages that share a
    /// `media_group_id`, the caption on the first), as Telegram delivers a
    /// group of photos; returns the message ids.
    pub fn send_album(&self, user: &FakeUser, files: Vec<FakeFile>, caption: Option<&str>) -> Vec<String> {
        let group = {
            let mut shelf = self.shared.shelf();
            shelf.next += 1;
            format!("1399{:012}", shelf.next)
        };
        let ids = files
            .into_iter()
            .enumerate()
            .map(|(n, file)| self.file_message(user, file, if n == 0 { caption } else { None }, Some(&group)))
            .collect();
        self.shared.poke.send_modify(|n| *n += 1);
        ids
    }

    /// `user` sends `file` in a private chat with `caption`; returns the
    /// message id.
    pub fn send_file(&self, user: &FakeUser, file: FakeFile, caption: Option<&str>) -> String {
        let id = self.file_message(user, file, caption, None);
        self.shared.poke.send_modify(|n| *n += 1);
        id
    }

    /// Queues the update of one message with `file`, in `media_group` if given.
    fn file_message(
        &self,
        user: &FakeUser,
        file: FakeFile,
        caption: Option<&str>,
        media_group: Option<&str>,
    ) -> String {
        let (file_id, unique_id, size) = self.shelve(&file);
        let mut object = Map::new();
        object.insert("file_id".into(), json!(file_id));
        object.insert("file_unique_id".into(), json!(unique_id));
        if !file.hide_size {
            object.insert("file_size".into(), json!(size));
        }
        if let Some(name) = &file.name {
            object.insert("file_name".into(), json!(name));
        }
        // Telegram always names the type of voice, audio and video files.
        let default_mime = match file.field {
            "voice" => Some("audio/ogg"),
            "audio" => Some("audio/mpeg"),
            "video" => Some("video/mp4"),
            _ => None,
        };
        if let Some(mime) = file.mime.as_deref().or(default_mime) {
            object.insert("mime_type".into(), json!(mime));
        }
        let media = match file.field {
            "photo" => {
                object.insert("width".into(), json!(1280));
                object.insert("height".into(), json!(960));
                // Telegram sends a thumbnail and the full size; the thumbnail
                // is a different file.
                let mut thumbnail = json!({
                    "file_id": format!("{file_id}-thumb"), "file_unique_id": format!("{unique_id}-t"),
                    "file_size": 1200, "width": 90, "height": 67
                });
                if file.hide_size {
                    thumbnail.as_object_mut().expect("an object").remove("file_size");
                }
                json!([thumbnail, Value::Object(object)])
            }
            "voice" | "audio" | "video" => {
                object.insert("duration".into(), json!(3));
                if file.field == "video" {
                    object.insert("width".into(), json!(1920));
                    object.insert("height".into(), json!(1080));
                }
                Value::Object(object)
            }
            _ => Value::Object(object),
        };
        let chat = self.ensure_private_chat(user);
        let from = person(user);
        let mut state = self.shared.lock();
        let chat_info = state.chats.get(&chat).cloned().expect("known chat");
        let message_id = state.next_message_id(chat);
        let mut message = MessageFields {
            message_id,
            from: &from,
            chat: &chat_info,
            date: unix_now(),
            text: "",
            entities: Vec::new(),
            thread: None,
            reply_to: None,
        }
        .json();
        let fields = message.as_object_mut().expect("a message is an object");
        fields.remove("text");
        fields.insert(file.field.into(), media);
        if let Some(caption) = caption {
            fields.insert("caption".into(), json!(caption));
        }
        if let Some(group) = media_group {
            fields.insert("media_group_id".into(), json!(group));
        }
        state.remember(chat, message_id, &message);
        state.push_update("message", message);
        drop(state);
        message_id.to_string()
    }

    /// The file paths Herald fetched from the file endpoint, in order.
    pub fn file_downloads(&self) -> Vec<String> {
        self.shared.shelf().downloads.clone()
    }

    fn shelve(&self, file: &FakeFile) -> (String, String, u64) {
        let mut shelf = self.shared.shelf();
        shelf.next += 1;
        let n = shelf.next;
        let file_id = format!("AgACAgIAAxkBAAI{n:04}fake{}", file.field);
        let unique_id = format!("AQAD{n:04}");
        let folder = match file.field {
            "photo" => "photos",
            "voice" => "voice",
            "audio" => "music",
            "video" => "videos",
            _ => "documents",
        };
        let path = file.path.clone().unwrap_or_else(|| format!("{folder}/file_{n}"));
        let size = file.claimed_size.unwrap_or(file.bytes.len() as u64);
        shelf.files.insert(
            file_id.clone(),
            Stored {
                unique_id: unique_id.clone(),
                path,
                bytes: Arc::new(file.bytes.clone()),
                size,
                serve: file.serve,
                hide_size: file.hide_size,
            },
        );
        (file_id, unique_id, size)
    }
}

impl Shared {
    pub(crate) fn shelf(&self) -> std::sync::MutexGuard<'_, Shelf> {
        self.files.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// `getFile`.
pub(crate) fn get_file(shared: &Shared, params: &Map<String, Value>) -> Result<Value, (u16, Value)> {
    let bad = |text: &str| (400, wire::error(400, text));
    let file_id = params
        .get("file_id")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("Bad Request: file_id is empty"))?;
    let shelf = shared.shelf();
    let stored = shelf
        .files
        .get(file_id)
        .ok_or_else(|| bad("Bad Request: invalid file_id"))?;
    if stored.size > BOT_DOWNLOAD_LIMIT {
        return Err(bad("Bad Request: file is too big"));
    }
    let mut file = json!({
        "file_id": file_id,
        "file_unique_id": stored.unique_id,
        "file_size": stored.size,
        "file_path": stored.path,
    });
    if stored.hide_size {
        file.as_object_mut().expect("an object").remove("file_size");
    }
    Ok(file)
}

/// `GET /file/bot<token>/<file_path>`.
pub(crate) fn serve(shared: &Shared, path: &str) -> Response {
    let mut shelf = shared.shelf();
    shelf.downloads.push(path.to_owned());
    let Some(stored) = shelf.files.values().find(|stored| stored.path == path) else {
        return (StatusCode::NOT_FOUND, "Not Found").into_response();
    };
    let bytes = stored.bytes.clone();
    match stored.serve {
        Serve::Whole => (
            [(header::CONTENT_TYPE, "application/octet-stream")],
            Bytes::from(bytes.as_ref().clone()),
        )
            .into_response(),
        Serve::Endless => {
            let chunk = Bytes::from(vec![0x42u8; 64 * 1024]);
            let stream = futures::stream::unfold(0u64, move |sent| {
                let chunk = chunk.clone();
                async move {
                    // A gigabyte, then it stops (a client that kept reading
                    // would have read it all).
                    (sent < 1 << 30).then(|| (Ok::<_, std::io::Error>(chunk.clone()), sent + chunk.len() as u64))
                }
            });
            Body::from_stream(stream).into_response()
        }
        Serve::Rate(per_second) => {
            const CHUNK: usize = 64 * 1024;
            let length = bytes.len();
            let pause = Duration::from_secs_f64(CHUNK as f64 / per_second.max(1) as f64);
            let stream = futures::stream::unfold(0usize, move |at| {
                let bytes = bytes.clone();
                async move {
                    if at >= bytes.len() {
                        return None;
                    }
                    if at > 0 {
                        tokio::time::sleep(pause).await;
                    }
                    let end = (at + CHUNK).min(bytes.len());
                    Some((Ok::<_, std::io::Error>(Bytes::copy_from_slice(&bytes[at..end])), end))
                }
            });
            (
                [(header::CONTENT_LENGTH, length.to_string())],
                Body::from_stream(stream),
            )
                .into_response()
        }
        Serve::Trickle => {
            let stream = futures::stream::unfold(0usize, move |index| {
                let bytes = bytes.clone();
                async move {
                    if index > 0 {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                    let byte = *bytes.get(index % bytes.len().max(1)).unwrap_or(&0);
                    Some((Ok::<_, std::io::Error>(Bytes::from(vec![byte])), index + 1))
                }
            });
            Body::from_stream(stream).into_response()
        }
    }
}
