//! Fetching a message's files the Bot API way: `getFile` with the
//! `file_id` names a path (and the size), and the file is served at
//! `{api_url}/file/bot<token>/<file_path>`.
//!
//! A path is taken only as a relative path inside that endpoint: one that
//! climbs (`..`), is absolute, or names another host is refused, so a forged
//! answer cannot point the bot's token anywhere else.

use std::sync::Arc;

use async_trait::async_trait;
use herald_core::Attachment;

use super::client::TelegramApi;
use crate::attachments::{FetchAttachment, FetchError, download};

pub struct TelegramFiles {
    pub api: Arc<TelegramApi>,
}

/// Whether `path` is a plain relative path (Telegram's look like
/// `photos/file_0.jpg`).
fn plain_path(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && !path.contains("://")
        && !path.contains(['?', '#', '\\', '%'])
        && path
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

#[async_trait]
impl FetchAttachment for TelegramFiles {
    async fn fetch(&self, attachment: &Attachment, cap: u64) -> Result<Vec<u8>, FetchError> {
        let file_id = attachment
            .source
            .as_deref()
            .ok_or_else(|| FetchError::Refused("Telegram named no file id".into()))?;
        let file = self
            .api
            .file(file_id)
            .await
            .map_err(|err| FetchError::Failed(self.api.redact(&err.to_string())))?;
        // `getFile` may leave the size out too; the cap then holds on the bytes.
        if super::payload::claimed_size(file.file_size) > cap {
            return Err(FetchError::TooLarge { cap });
        }
        let path = file.file_path.unwrap_or_default();
        if !plain_path(&path) {
            return Err(FetchError::Refused(
                "Telegram named a file path outside its file endpoint".into(),
            ));
        }
        download::capped(self.api.download(&path), cap)
            .await
            .map_err(|err| match err {
                FetchError::Failed(text) => FetchError::Failed(self.api.redact(&text)),
                other => other,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_relative_paths_are_fetched() {
        for (path, fetched) in [
            ("photos/file_0.jpg", true),
            ("voice/file_12.oga", true),
            ("../bot123/getMe", false),
            ("photos/../../x", false),
            ("/etc/passwd", false),
            ("https://evil.example/x", false),
            ("photos/a.jpg?x=1", false),
            ("photos/%2e%2e/x", false),
            ("", false),
        ] {
            assert_eq!(plain_path(path), fetched, "{path}");
        }
    }
}
