//! `sendDocument`: a file the bot uploads, as the Bot API takes it — the
//! file in a `multipart/form-data` field named `document` (or named by an
//! `attach://<field>` value), the chat, topic, reply and caption (with its
//! `parse_mode`) beside it,
//! at most 50 MB — recorded so tests can read its name, type and bytes.

use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::messages::formatted;
use super::state::{Refusal, State, bad_request, unix_now};
use super::wire::{self, MessageFields};
use crate::platform::Upload;

/// The Bot API's limit for files bots upload.
pub const MAX_UPLOAD_BYTES: usize = 50 * 1024 * 1024;
/// Characters of a caption.
const MAX_CAPTION: usize = 1024;

/// A file part of a multipart request.
#[derive(Clone, Debug)]
pub struct FormFile {
    pub field: String,
    pub file_name: Option<String>,
    pub content_type: Option<String>,
    pub bytes: Vec<u8>,
}

impl State {
    /// `sendDocument`: validates like the Bot API, enforces the send rules,
    /// records the upload and returns the message.
    pub fn send_document(
        &mut self,
        params: &Map<String, Value>,
        files: &[FormFile],
        now: Instant,
    ) -> Result<Value, Refusal> {
        let chat = self.chat(params)?;
        let field = match params.get("document") {
            Some(Value::String(value)) => match value.strip_prefix("attach://") {
                Some(field) => field.to_owned(),
                None => return Err(bad_request("wrong file identifier/HTTP URL specified")),
            },
            _ => "document".to_owned(),
        };
        let Some(file) = files.iter().find(|file| file.field == field) else {
            return Err(bad_request("there is no document in the request"));
        };
        if file.bytes.is_empty() {
            return Err(bad_request("file must be non-empty"));
        }
        if file.bytes.len() > MAX_UPLOAD_BYTES {
            return Err((413, wire::error(413, "Request Entity Too Large")));
        }
        let parse_mode = params.get("parse_mode").and_then(Value::as_str);
        let caption = match params.get("caption").and_then(Value::as_str) {
            Some(raw) if !raw.is_empty() => Some(formatted(raw, parse_mode)?).filter(|parsed| !parsed.text.is_empty()),
            _ => None,
        };
        if caption
            .as_ref()
            .is_some_and(|caption| wire::utf16_len(&caption.text) > MAX_CAPTION)
        {
            return Err(bad_request("message caption is too long"));
        }
        let thread = self.thread(&chat, params)?;
        let reply = self.reply_target(&chat, params)?;
        self.admit_send(&chat, now)?;
        let message_id = self.next_message_id(chat.id);
        let bot = self.bot.clone();
        let mut message = MessageFields {
            message_id,
            from: &bot,
            chat: &chat,
            date: unix_now(),
            text: "",
            entities: Vec::new(),
            thread,
            reply_to: reply.clone(),
        }
        .json();
        let name = file.file_name.clone().unwrap_or_else(|| "document".to_owned());
        let n = self.uploads.len() + 1;
        let mut document = json!({
            "file_id": format!("BQACAgIAAxkBAAI{n:04}upload"),
            "file_unique_id": format!("AgAD{n:04}"),
            "file_name": name,
            "file_size": file.bytes.len(),
        });
        if let Some(content_type) = &file.content_type {
            document["mime_type"] = json!(content_type);
        }
        let fields = message.as_object_mut().expect("a message is an object");
        fields.remove("text");
        fields.insert("document".into(), document);
        if let Some(caption) = &caption {
            fields.insert("caption".into(), json!(caption.text));
            if !caption.entities.is_empty() {
                fields.insert("caption_entities".into(), Value::Array(caption.entities.clone()));
            }
        }
        self.remember(chat.id, message_id, &message);
        self.uploads.push(Upload {
            chat: chat.id.to_string(),
            thread: thread.map(|t| t.to_string()),
            name,
            content_type: file.content_type.clone(),
            bytes: file.bytes.clone(),
            text: caption.map(|caption| caption.text),
        });
        Ok(message)
    }
}
