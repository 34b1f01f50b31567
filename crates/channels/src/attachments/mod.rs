//! Files that come with messages: fetched through each platform's API after
//! access control and before the message is queued, checked, and stored
//! content-addressed, so the task on the queue names stored bytes (or says
//! why there are none) and a crash after enqueue loses nothing.
//!
//! - [`config`]: `channels.attachments` (caps, the type allow-list, the
//!   timeout, the retention).
//! - [`download`]: one capped download, and the host rule for file URLs.
//! - [`sniff`]: what the bytes are, whatever was claimed.
//!
//! Architecture invariants: a file is fetched only for a sender access
//! control let in; nothing larger than the caps is read past the cap; what
//! is not fetched is described to the model (`Attachment::not_fetched`),
//! never silently dropped; bytes that are not what they claim are refused.

pub mod config;
pub mod download;
pub mod sniff;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use herald_core::{Attachment, ChannelName, Clock, FileRef, FileStore, InboundMessage};
use tracing::{debug, warn};

pub use self::config::{AttachmentsConfig, human_size};

/// Why a file was not fetched, in words the model passes on.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("it is larger than the {} limit", human_size(*cap))]
    TooLarge { cap: u64 },
    #[error("the download took longer than {0:?}")]
    Timeout(std::time::Duration),
    #[error("it was refused: {0}")]
    Refused(String),
    #[error("the download failed: {0}")]
    Failed(String),
}

/// A channel's way of fetching the files its messages name.
#[async_trait]
pub trait FetchAttachment: Send + Sync {
    /// The bytes of `attachment` (from its `source`), at most `cap` of them.
    async fn fetch(&self, attachment: &Attachment, cap: u64) -> Result<Vec<u8>, FetchError>;
}

/// What the gateway runs on an admitted message's files.
pub struct AttachmentIntake {
    pub config: AttachmentsConfig,
    pub files: Arc<dyn FileStore>,
    /// Each channel's fetcher; a channel without one has its files described.
    pub fetchers: BTreeMap<ChannelName, Arc<dyn FetchAttachment>>,
    pub clock: Arc<dyn Clock>,
}

impl AttachmentIntake {
    /// Fetches, checks and stores every file of `message` within the caps;
    /// each one ends with `file` set or `not_fetched` saying why not, and
    /// without its `source` or bytes.
    pub async fn take_in(&self, message: &mut InboundMessage) {
        let channel = message.conversation.channel.clone();
        let fetcher = self.fetchers.get(&channel);
        let mut left = self.config.max_message_bytes;
        for attachment in &mut message.attachments {
            let outcome = self.take_one(attachment, fetcher, left).await;
            let label = match &outcome {
                Ok(file) => {
                    left = left.saturating_sub(file.size);
                    attachment.file = Some(file.clone());
                    "stored"
                }
                Err(reason) => {
                    debug!(name = %attachment.name, reason = %reason, "attachment not fetched");
                    attachment.not_fetched = Some(reason.clone());
                    "described"
                }
            };
            metrics::counter!("herald_attachments_total", "channel" => channel.to_string(), "outcome" => label)
                .increment(1);
            attachment.source = None;
            attachment.inline = None;
        }
    }

    async fn take_one(
        &self,
        attachment: &Attachment,
        fetcher: Option<&Arc<dyn FetchAttachment>>,
        left: u64,
    ) -> Result<FileRef, String> {
        if !self.config.enabled {
            return Err("files are not fetched here (channels.attachments.enabled is off)".into());
        }
        let cap = self.config.max_file_bytes.min(left);
        if attachment.size > cap {
            let what = if cap < self.config.max_file_bytes {
                "what is left of the limit for one message"
            } else {
                "the limit"
            };
            return Err(format!(
                "it is {}, over {what} ({}), so it was not downloaded",
                human_size(attachment.size),
                human_size(cap)
            ));
        }
        let claimed = config::essence(&attachment.content_type);
        if !self.config.allows(&claimed) {
            return Err(format!("{claimed} files are not accepted"));
        }
        let bytes = match (&attachment.inline, fetcher) {
            (Some(inline), _) if inline.0.len() as u64 > cap => {
                return Err(FetchError::TooLarge { cap }.to_string());
            }
            (Some(inline), _) => inline.0.to_vec(),
            (None, None) => return Err("this channel cannot fetch files".into()),
            (None, Some(fetcher)) => {
                let timeout = self.config.download_timeout;
                match tokio::time::timeout(timeout, fetcher.fetch(attachment, cap)).await {
                    Ok(Ok(bytes)) => bytes,
                    Ok(Err(err)) => return Err(err.to_string()),
                    Err(_) => return Err(FetchError::Timeout(timeout).to_string()),
                }
            }
        };
        let content_type = sniff::confirm(&claimed, &bytes).map_err(|why| format!("it was refused: {why}"))?;
        if !self.config.allows(&content_type) {
            return Err(format!("{content_type} files are not accepted"));
        }
        self.files
            .put(&content_type, &bytes, self.clock.now())
            .await
            .map_err(|err| {
                warn!(error = %err, "could not store an attachment");
                "it could not be stored".to_owned()
            })
    }
}
