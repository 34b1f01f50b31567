//! Files that come with messages, in two steps:
//! - at the door ([`AttachmentIntake::screen`], in the gateway, for a sender
//!   access control let in): what needs no download is decided (the caps
//!   on what the platform claims, the type allow-list, the number of files),
//!   and bytes the channel already has (a mail's parts) are checked and
//!   stored; a file to download is left waiting, with the platform's
//!   reference, on the durable task;
//! - at turn time ([`AttachmentIntake::fetch_waiting`], through the
//!   [`AttachmentFetcher`] seam, in the worker): each waiting file is
//!   fetched through its platform's API within the caps and one timeout, a
//!   few downloads at once for the whole process, checked, and stored
//!   content-addressed.
//!
//! So a sender's large files cost their own turn, never the channel's
//! ingress (the next poll, another person's message, a platform's three
//! seconds to an acknowledgement), and a crash between the two steps loses
//! nothing: the task names what to fetch.
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
use herald_core::{Attachment, AttachmentFetcher, ChannelName, Clock, FileRef, FileStore, InboundMessage};
use tokio::sync::Semaphore;
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

/// What the gateway runs on an admitted message's files, and the worker on
/// what it left waiting.
pub struct AttachmentIntake {
    config: AttachmentsConfig,
    files: Arc<dyn FileStore>,
    /// Each channel's fetcher; a channel without one has its files described.
    fetchers: BTreeMap<ChannelName, Arc<dyn FetchAttachment>>,
    clock: Arc<dyn Clock>,
    /// Downloads running now, in the whole process.
    downloads: Semaphore,
}

impl AttachmentIntake {
    pub fn new(
        config: AttachmentsConfig,
        files: Arc<dyn FileStore>,
        fetchers: BTreeMap<ChannelName, Arc<dyn FetchAttachment>>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let downloads = Semaphore::new(config.downloads_at_once.max(1));
        Self {
            config,
            files,
            fetchers,
            clock,
            downloads,
        }
    }

    /// At the door: decides what needs no download, stores the bytes the
    /// channel already has, and leaves each file to fetch waiting. Each
    /// file ends stored, described (`not_fetched`), or waiting with its
    /// `source`; none keeps its bytes.
    pub async fn screen(&self, message: &mut InboundMessage) {
        let channel = message.conversation.channel.clone();
        let can_fetch = self.fetchers.contains_key(&channel);
        let mut left = self.config.max_message_bytes;
        let max_files = self.config.max_files_per_message;
        for (index, attachment) in message.attachments.iter_mut().enumerate() {
            // The channel may have said why already (a mail's parts past
            // what it reads).
            if attachment.not_fetched.is_some() {
                attachment.inline = None;
                count(&channel, "described");
                continue;
            }
            let checked = if index >= max_files {
                Err(format!(
                    "it came after the first {max_files} files of the message, which are all Herald takes"
                ))
            } else {
                self.check_claims(attachment, left)
            };
            let label = match checked {
                Err(reason) => describe(attachment, reason),
                Ok(()) => match attachment.inline.take() {
                    Some(inline) => {
                        let outcome = self.keep(attachment, inline.0.to_vec(), left).await;
                        self.settle(attachment, outcome, &mut left)
                    }
                    None if !can_fetch || attachment.source.is_none() => {
                        describe(attachment, "this channel cannot fetch files".into())
                    }
                    // Claimed sizes count against the message's room now;
                    // the bytes are counted again when they are fetched.
                    None => {
                        left = left.saturating_sub(attachment.size);
                        "waiting"
                    }
                },
            };
            count(&channel, label);
            attachment.inline = None;
        }
    }

    /// At turn time: fetches every waiting file of `message` (see
    /// [`AttachmentFetcher`]).
    pub async fn fetch_waiting(&self, message: &mut InboundMessage) {
        let channel = message.conversation.channel.clone();
        let fetcher = self.fetchers.get(&channel);
        let stored: u64 = message
            .attachments
            .iter()
            .filter_map(|a| a.file.as_ref().map(|f| f.size))
            .sum();
        let mut left = self.config.max_message_bytes.saturating_sub(stored);
        for attachment in message.attachments.iter_mut().filter(|a| a.is_waiting()) {
            let outcome = match fetcher {
                None => Err("this channel cannot fetch files".to_owned()),
                Some(fetcher) => self.fetch_one(attachment, fetcher.as_ref(), left).await,
            };
            let label = self.settle(attachment, outcome, &mut left);
            count(&channel, label);
        }
    }

    /// The caps and the allow-list, on what the platform claims.
    fn check_claims(&self, attachment: &Attachment, left: u64) -> Result<(), String> {
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
        Ok(())
    }

    /// Downloads one waiting file within the caps and the timeout, once a
    /// download slot is free, and keeps it.
    async fn fetch_one(
        &self,
        attachment: &Attachment,
        fetcher: &dyn FetchAttachment,
        left: u64,
    ) -> Result<FileRef, String> {
        self.check_claims(attachment, left)?;
        let cap = self.config.max_file_bytes.min(left);
        let bytes = {
            let _slot = self
                .downloads
                .acquire()
                .await
                .map_err(|_| "Herald is stopping".to_owned())?;
            let timeout = self.config.download_timeout;
            match tokio::time::timeout(timeout, fetcher.fetch(attachment, cap)).await {
                Ok(Ok(bytes)) => bytes,
                Ok(Err(err)) => return Err(err.to_string()),
                Err(_) => return Err(FetchError::Timeout(timeout).to_string()),
            }
        };
        self.keep(attachment, bytes, left).await
    }

    /// Checks `bytes` against the caps and what they claim to be, and
    /// stores them.
    async fn keep(&self, attachment: &Attachment, bytes: Vec<u8>, left: u64) -> Result<FileRef, String> {
        let cap = self.config.max_file_bytes.min(left);
        if bytes.len() as u64 > cap {
            return Err(FetchError::TooLarge { cap }.to_string());
        }
        let claimed = config::essence(&attachment.content_type);
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

    /// Records what became of a file; returns the metrics label.
    fn settle(&self, attachment: &mut Attachment, outcome: Result<FileRef, String>, left: &mut u64) -> &'static str {
        match outcome {
            Ok(file) => {
                *left = left.saturating_sub(file.size);
                attachment.file = Some(file);
                attachment.source = None;
                "stored"
            }
            Err(reason) => describe(attachment, reason),
        }
    }
}

/// Marks `attachment` as not fetched, for `reason`.
fn describe(attachment: &mut Attachment, reason: String) -> &'static str {
    debug!(name = %attachment.name, reason = %reason, "attachment not fetched");
    attachment.not_fetched = Some(reason);
    attachment.source = None;
    attachment.inline = None;
    "described"
}

fn count(channel: &ChannelName, outcome: &'static str) {
    metrics::counter!("herald_attachments_total", "channel" => channel.to_string(), "outcome" => outcome).increment(1);
}

#[async_trait]
impl AttachmentFetcher for AttachmentIntake {
    async fn fetch_waiting(&self, message: &mut InboundMessage) {
        AttachmentIntake::fetch_waiting(self, message).await;
    }
}
