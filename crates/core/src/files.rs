//! Files that came with messages: the content-addressed store they are put
//! in, the reference the queue and history keep, the seam through which a
//! worker fetches what the gateway left for turn time, and the
//! transcription seam for voice notes.
//!
//! Architecture invariant: the queue and history hold a [`FileRef`] (a
//! SHA-256 of the bytes, their type and size) or the platform's reference
//! to a file not fetched yet, never the bytes; the bytes live once in a
//! [`FileStore`] however often they are sent.

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::store::StoreError;
use crate::time::Timestamp;

/// A stored file: its SHA-256 (lowercase hex), the type its bytes are, and
/// their length.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRef {
    pub sha256: String,
    pub content_type: String,
    pub size: u64,
}

/// A stored file of the message a turn answers, under the name its sender
/// gave it: what a skill's script is handed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageFile {
    pub name: String,
    pub file: FileRef,
}

impl MessageFile {
    /// The stored files among `attachments`, in order; those not fetched
    /// have nothing to hand over.
    pub fn of(attachments: &[crate::message::Attachment]) -> Vec<MessageFile> {
        attachments
            .iter()
            .filter_map(|attachment| {
                attachment.file.clone().map(|file| MessageFile {
                    name: attachment.name.clone(),
                    file,
                })
            })
            .collect()
    }
}

/// Bytes a channel already holds (a mail's MIME part). Debug prints only the
/// length: a file's content never reaches a log.
#[derive(Clone, PartialEq, Eq)]
pub struct InlineBytes(pub Arc<[u8]>);

impl std::fmt::Debug for InlineBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "InlineBytes({} bytes)", self.0.len())
    }
}

/// Where fetched files are kept, by content: the same bytes are stored
/// once. `herald-store` keeps them in a table of the database, so every
/// process sharing a queue finds the files its tasks name.
#[async_trait]
pub trait FileStore: Send + Sync {
    /// Stores `bytes` (once per content) and marks them used at `now`.
    async fn put(&self, content_type: &str, bytes: &[u8], now: Timestamp) -> Result<FileRef, StoreError>;

    /// The bytes of a stored file; `None` when it is not (or no longer) kept.
    async fn get(&self, sha256: &str) -> Result<Option<Vec<u8>>, StoreError>;

    /// Deletes files last stored before `before`; returns how many went.
    async fn prune_unused(&self, before: Timestamp) -> Result<u64, StoreError>;
}

/// Why a voice note or audio file has no transcript.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptionError {
    #[error("the transcription service timed out")]
    Timeout,
    #[error("cannot reach the transcription service: {0}")]
    Connect(String),
    #[error("the transcription service answered {status}: {message}")]
    Server { status: u16, message: String },
    #[error("the transcription service answered something Herald cannot read: {0}")]
    BadResponse(String),
}

/// Fetches the files a queued message names that are waiting
/// ([`crate::Attachment::is_waiting`]): the gateway checks them at the door
/// and leaves the download to the turn, so one sender's files never hold up
/// the channel's ingress (or a platform's acknowledgement).
#[async_trait]
pub trait AttachmentFetcher: Send + Sync {
    /// Fetches, checks and stores each waiting file of `message`; each ends
    /// with its `file` set or `not_fetched` saying why not, and without its
    /// `source`.
    async fn fetch_waiting(&self, message: &mut crate::InboundMessage);
}

/// Speech to text over an OpenAI-compatible `POST /audio/transcriptions`.
#[async_trait]
pub trait Transcriber: Send + Sync {
    async fn transcribe(&self, name: &str, content_type: &str, bytes: Vec<u8>) -> Result<String, TranscriptionError>;
}
