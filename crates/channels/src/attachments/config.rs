//! `channels.attachments` in herald.yaml: what the gateway fetches and keeps.

use std::time::Duration;

use serde::Deserialize;

/// Caps, types and timing for the files that come with messages.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AttachmentsConfig {
    /// Whether files are fetched at all; off, they are described only.
    pub enabled: bool,
    /// The largest file fetched, in bytes (Telegram's bots cannot fetch
    /// more than 20 MB anyway).
    pub max_file_bytes: u64,
    /// All files of one message together, in bytes.
    pub max_message_bytes: u64,
    /// Types fetched, as `type/subtype` or `type/*`; others are described.
    pub allowed_types: Vec<String>,
    /// How long one file's download may take in all (a slow server is cut
    /// off, however steadily it trickles).
    #[serde(with = "herald_core::duration::serde")]
    pub download_timeout: Duration,
    /// How long a file is kept after it last came in.
    #[serde(with = "herald_core::duration::serde")]
    pub retention: Duration,
    /// Files of one message taken at most; the others are described.
    pub max_files_per_message: usize,
    /// Downloads one Herald process runs at once, for all turns together.
    pub downloads_at_once: usize,
}

impl Default for AttachmentsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_file_bytes: 20 * 1024 * 1024,
            max_message_bytes: 40 * 1024 * 1024,
            allowed_types: [
                "image/png",
                "image/jpeg",
                "image/gif",
                "image/webp",
                "audio/*",
                "text/*",
                "application/json",
                "application/pdf",
            ]
            .map(String::from)
            .to_vec(),
            download_timeout: Duration::from_secs(30),
            retention: Duration::from_secs(30 * 24 * 3600),
            max_files_per_message: 10,
            downloads_at_once: 4,
        }
    }
}

impl AttachmentsConfig {
    /// Whether `content_type` (parameters ignored) is on the allow-list.
    pub fn allows(&self, content_type: &str) -> bool {
        let essence = essence(content_type);
        let major = essence.split('/').next().unwrap_or_default();
        self.allowed_types.iter().any(|pattern| {
            let pattern = pattern.trim().to_ascii_lowercase();
            match pattern.strip_suffix("/*") {
                Some(kind) => kind == major,
                None => pattern == essence,
            }
        })
    }

    /// Rules the types do not express, as `(key, message)`.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if self.max_message_bytes < self.max_file_bytes {
            return Err((
                "channels.attachments.max_message_bytes",
                "must be at least max_file_bytes".into(),
            ));
        }
        if self.max_files_per_message == 0 {
            return Err((
                "channels.attachments.max_files_per_message",
                "must be at least 1".into(),
            ));
        }
        if self.downloads_at_once == 0 {
            return Err(("channels.attachments.downloads_at_once", "must be at least 1".into()));
        }
        if self.download_timeout.is_zero() {
            return Err(("channels.attachments.download_timeout", "must be more than zero".into()));
        }
        Ok(())
    }
}

/// `type/subtype` in lowercase, without parameters.
pub fn essence(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

pub use herald_core::human_size;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allow_list_matches_types_and_families_without_parameters() {
        let config = AttachmentsConfig::default();
        for (content_type, allowed) in [
            ("image/png", true),
            ("IMAGE/JPEG; charset=x", true),
            ("image/svg+xml", false),
            ("audio/ogg", true),
            ("text/plain; charset=utf-8", true),
            ("video/mp4", false),
            ("application/zip", false),
            ("application/pdf", true),
            ("", false),
        ] {
            assert_eq!(config.allows(content_type), allowed, "{content_type}");
        }
    }

    #[test]
    fn sizes_read_as_people_say_them() {
        assert_eq!(human_size(40 * 1024 * 1024), "40 MB");
        assert_eq!(human_size(1536 * 1024), "1.5 MB");
        assert_eq!(human_size(1500), "2 KB");
        assert_eq!(human_size(1000), "1000 bytes");
        assert_eq!(human_size(12), "12 bytes");
    }
}
