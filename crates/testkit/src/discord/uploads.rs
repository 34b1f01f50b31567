//! Message bodies with files, as Discord takes them: `multipart/form-data`
//! with the message as `payload_json` and each file as `files[n]`, named in
//! the message's `attachments` by id `n`; every file at most the upload
//! limit (8 MiB for a bot in a server without boosts).

use axum::body::to_bytes;
use axum::extract::{FromRequest, Multipart, Request};
use axum::http::header;
use serde_json::{Value, json};

use super::wire;
use crate::platform::{FakePlatform, FakeUser};

/// Files people send: what a test injects and what the fake's CDN served.
impl super::FakeDiscord {
    /// `user` sends a DM with a file, as Discord's client uploads one: the
    /// message's attachment object names the file, its type and size, and a
    /// CDN `url` (signed query parameters included) where its bytes are.
    /// `claimed_size` is the `size` stated (the bytes' length when `None`).
    pub async fn send_dm_with_file(
        &self,
        user: &FakeUser,
        text: &str,
        name: &str,
        content_type: &str,
        bytes: Vec<u8>,
        claimed_size: Option<u64>,
    ) -> String {
        let channel = self.dm_chat(user);
        let attachment = {
            let mut state = self.shared.lock();
            let id = state.snowflake();
            let size = claimed_size.unwrap_or(bytes.len() as u64);
            state.cdn.insert(id.clone(), bytes);
            json!({
                "id": id, "filename": name, "size": size, "content_type": content_type,
                "url": format!("http://{}/attachments/{channel}/{id}/{name}?ex=6a1b2c3d&is=6a1a0000&hm=feedface", self.rest_addr),
                "proxy_url": format!("http://{}/attachments/{channel}/{id}/{name}", self.rest_addr),
            })
        };
        self.inject_with(&user.id, &channel, text.to_owned(), Vec::new(), None, vec![attachment])
            .await
    }

    /// Attachment ids fetched from the CDN, in order.
    pub fn cdn_downloads(&self) -> Vec<String> {
        self.shared.lock().cdn_downloads.clone()
    }
}

/// What a bot may upload per file.
pub const MAX_UPLOAD_BYTES: usize = 8 * 1024 * 1024;
/// Files in one message.
const MAX_FILES: usize = 10;
/// Largest request body the fake reads.
pub const BODY_LIMIT: usize = MAX_FILES * MAX_UPLOAD_BYTES + 1024 * 1024;

/// A file of a message, as uploaded.
#[derive(Clone, Debug)]
pub struct UploadedFile {
    pub index: usize,
    pub name: String,
    pub content_type: Option<String>,
    pub bytes: Vec<u8>,
}

/// Why a body was refused: the HTTP status and Discord's error body.
pub type Refused = (u16, Value);

/// The message JSON and its files, from a JSON or multipart body.
pub async fn read(request: Request) -> Result<(Value, Vec<UploadedFile>), Refused> {
    let invalid_json = || (400, wire::error(50109, "The request body contains invalid JSON."));
    let multipart = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().starts_with("multipart/form-data"));
    if !multipart {
        let raw = to_bytes(request.into_body(), BODY_LIMIT)
            .await
            .map_err(|_| too_large())?;
        return serde_json::from_slice(&raw)
            .map(|body| (body, Vec::new()))
            .map_err(|_| invalid_json());
    }
    let mut form = Multipart::from_request(request, &())
        .await
        .map_err(|_| invalid_json())?;
    let mut body = None;
    let mut files = Vec::new();
    while let Some(field) = form.next_field().await.map_err(|_| too_large())? {
        let name = field.name().unwrap_or_default().to_owned();
        if name == "payload_json" {
            let text = field.text().await.map_err(|_| invalid_json())?;
            body = Some(serde_json::from_str::<Value>(&text).map_err(|_| invalid_json())?);
            continue;
        }
        let Some(index) = name
            .strip_prefix("files[")
            .and_then(|rest| rest.strip_suffix(']'))
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        let file_name = field.file_name().unwrap_or("unknown").to_owned();
        let content_type = field.content_type().map(str::to_owned);
        let bytes = field.bytes().await.map_err(|_| too_large())?;
        if bytes.len() > MAX_UPLOAD_BYTES {
            return Err(too_large());
        }
        files.push(UploadedFile {
            index,
            name: file_name,
            content_type,
            bytes: bytes.to_vec(),
        });
    }
    if files.len() > MAX_FILES {
        return Err((
            400,
            wire::invalid_form_body("files", "BASE_TYPE_MAX_LENGTH", "Must be 10 or fewer in length."),
        ));
    }
    let mut body = body.unwrap_or_else(|| json!({}));
    // A file's name in `attachments` (by its id) wins over the form's.
    for attachment in body["attachments"].as_array().cloned().unwrap_or_default() {
        let id = attachment["id"]
            .as_u64()
            .or_else(|| attachment["id"].as_str().and_then(|id| id.parse().ok()));
        if let (Some(id), Some(name)) = (id, attachment["filename"].as_str())
            && let Some(file) = files.iter_mut().find(|file| file.index as u64 == id)
        {
            file.name = name.to_owned();
        }
    }
    body["attachments"] = Value::Null;
    Ok((body, files))
}

fn too_large() -> Refused {
    (413, wire::error(40005, "Request entity too large"))
}

/// The attachment object Discord answers for an uploaded file.
pub fn attachment_object(id: &str, url: &str, file: &UploadedFile) -> Value {
    let mut object = json!({
        "id": id,
        "filename": file.name,
        "size": file.bytes.len(),
        "url": url,
        "proxy_url": url,
    });
    if let Some(content_type) = &file.content_type {
        object["content_type"] = json!(content_type);
    }
    object
}
