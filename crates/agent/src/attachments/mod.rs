//! What a message's files become in the prompt. The gateway fetched and
//! stored them before the task was queued; here, at turn time, each stored
//! file is read back and turned into something the model can take:
//! - an image becomes an `image_url` part (downscaled JPEG) when the model
//!   sees images (`llm.vision`), else a line describing it;
//! - a voice note or audio file is transcribed (`llm.transcription`), and
//!   the transcript, marked as one, is what the person said;
//! - text, Markdown, CSV and JSON are read as text, and a PDF's text layer
//!   is extracted ([`pdf`], bounded against decompression bombs), within
//!   `agent.attachments.max_document_chars`; other documents are
//!   described;
//! - a file that was not fetched is described with the reason.
//!
//! History keeps only the text (what the person wrote, one reference line
//! per file, transcripts); images and document text go to this turn's model
//! call alone. Pure but for reading the store and the transcriber.

mod image;
mod pdf;
mod sandbox;

pub use sandbox::file_reader_entry;

use std::sync::Arc;

use herald_core::{Attachment, AttachmentKind, FileStore, ImagePart, InboundMessage, Transcriber};
use serde::{Deserialize, Serialize};
use tracing::warn;

/// `agent.attachments` in herald.yaml.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AttachmentPromptConfig {
    /// The longest side of an image sent to the model, in pixels.
    pub image_max_side: u32,
    /// Characters of a text document's content put in the prompt.
    pub max_document_chars: usize,
    /// Images per message sent as image parts; the rest are described.
    pub max_images: usize,
}

impl Default for AttachmentPromptConfig {
    fn default() -> Self {
        Self {
            image_max_side: 1024,
            max_document_chars: 20_000,
            max_images: 4,
        }
    }
}

/// Everything the agent needs to put files in a prompt.
pub struct AttachmentReader {
    pub files: Arc<dyn FileStore>,
    /// Whether the model is sent images.
    pub vision: bool,
    /// Speech to text; `None` when `llm.transcription` is not set.
    pub transcriber: Option<Arc<dyn Transcriber>>,
    pub config: AttachmentPromptConfig,
}

/// A message with its files read, for one turn.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PreparedInput {
    /// What the person said, with a line per file (and transcripts): the
    /// turn's input and what history keeps.
    pub text: String,
    /// The text of documents, for this turn's model call only.
    pub documents: String,
    pub images: Vec<ImagePart>,
    /// Told to the person before the reply (a transcription that failed).
    pub notices: Vec<String>,
    pub transcripts: usize,
}

/// The model sees `[attachment …]` lines: a reference, never the bytes.
fn reference(attachment: &Attachment, what: &str) -> String {
    let kind = match attachment.kind {
        Some(AttachmentKind::Voice) => "voice note",
        Some(AttachmentKind::Photo) => "photo",
        Some(AttachmentKind::Video) => "video",
        Some(AttachmentKind::Audio) => "audio",
        Some(AttachmentKind::Sticker) => "sticker",
        Some(AttachmentKind::Document) | None => "file",
    };
    let (content_type, size) = match &attachment.file {
        Some(file) => (file.content_type.as_str(), file.size),
        None => (attachment.content_type.as_str(), attachment.size),
    };
    let size = if size > 0 {
        format!(", {}", herald_core::human_size(size))
    } else {
        String::new()
    };
    format!("[{kind} \"{}\" ({content_type}{size}): {what}]", attachment.name)
}

fn is_text(content_type: &str) -> bool {
    content_type.starts_with("text/")
        || matches!(
            content_type,
            "application/json" | "application/x-ndjson" | "application/xml" | "application/yaml"
        )
}

const ROOM_USED_UP: &str = "text not included: the documents of this message used up the room";

/// Puts `text` in this turn's documents, within the room left, and answers
/// the reference line; `note` is added to what the line says.
fn include_document(
    attachment: &Attachment,
    text: &str,
    note: &str,
    prepared: &mut PreparedInput,
    document_room: &mut usize,
) -> String {
    if *document_room == 0 {
        return reference(attachment, ROOM_USED_UP);
    }
    let total = text.chars().count();
    let taken: String = text.chars().take(*document_room).collect();
    let shown = taken.chars().count();
    *document_room -= shown;
    let what = if shown < total {
        format!("its first {shown} of {total} characters follow{note}")
    } else {
        format!("its text follows{note}")
    };
    prepared.documents.push_str(&format!(
        "\n\n--- {} ---\n{taken}\n--- end of {} ---",
        attachment.name, attachment.name
    ));
    reference(attachment, &what)
}

impl AttachmentReader {
    /// `message`'s text and files, ready for the prompt.
    pub async fn prepare(&self, message: &InboundMessage) -> PreparedInput {
        let mut prepared = PreparedInput::default();
        let mut lines: Vec<String> = Vec::new();
        let mut transcripts: Vec<String> = Vec::new();
        let mut document_room = self.config.max_document_chars;
        for attachment in &message.attachments {
            let line = self
                .read_one(attachment, &mut prepared, &mut transcripts, &mut document_room)
                .await;
            lines.push(line);
        }
        let mut text = message.text.trim().to_owned();
        for transcript in transcripts {
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(&transcript);
        }
        for line in lines {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&line);
        }
        prepared.text = text;
        prepared
    }

    async fn read_one(
        &self,
        attachment: &Attachment,
        prepared: &mut PreparedInput,
        transcripts: &mut Vec<String>,
        document_room: &mut usize,
    ) -> String {
        let Some(file) = &attachment.file else {
            let why = attachment
                .not_fetched
                .clone()
                .unwrap_or_else(|| "it was not downloaded".into());
            return reference(attachment, &format!("not available to you: {why}"));
        };
        let content_type = file.content_type.as_str();
        // What needs no bytes is decided first; a file for a reader process
        // waits for a reader before its bytes are read from the store, so
        // files queued for readers do not pile up in memory.
        let reader = if content_type.starts_with("image/") {
            if !self.vision {
                return reference(attachment, "an image; this model is not sent images (llm.vision)");
            }
            if prepared.images.len() >= self.config.max_images {
                return reference(attachment, "an image beyond the images sent per message");
            }
            Some(sandbox::slot().await)
        } else if content_type == "application/pdf" {
            if *document_room == 0 {
                return reference(attachment, ROOM_USED_UP);
            }
            Some(sandbox::slot().await)
        } else {
            None
        };
        let bytes = match self.files.get(&file.sha256).await {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return reference(attachment, "no longer stored (past attachments.retention)"),
            Err(err) => {
                warn!(error = %err, "could not read a stored attachment");
                return reference(attachment, "could not be read from storage just now");
            }
        };
        if let Some(slot) = reader {
            return if content_type == "application/pdf" {
                self.read_pdf(attachment, slot, bytes, prepared, document_room).await
            } else {
                match image::read_part(slot, bytes, self.config.image_max_side).await {
                    Ok(part) => {
                        prepared.images.push(part);
                        reference(attachment, "shown to you as an image")
                    }
                    Err(why) => reference(attachment, &format!("an image Herald refused: {why}")),
                }
            };
        }
        if content_type.starts_with("audio/") {
            return self
                .transcribe(attachment, content_type, bytes, prepared, transcripts)
                .await;
        }
        if is_text(content_type) {
            let text = String::from_utf8_lossy(&bytes);
            return include_document(attachment, &text, "", prepared, document_room);
        }
        reference(attachment, "a file Herald cannot read")
    }

    async fn read_pdf(
        &self,
        attachment: &Attachment,
        slot: sandbox::Slot,
        bytes: Vec<u8>,
        prepared: &mut PreparedInput,
        document_room: &mut usize,
    ) -> String {
        match pdf::read_text(slot, bytes, *document_room).await {
            Ok(read) if read.text.trim().is_empty() => {
                reference(attachment, "a PDF without a text layer (scanned, or images only)")
            }
            Ok(read) => {
                let pages = if read.pages_read < read.pages {
                    format!(
                        " (of its {} pages, the first {} were read)",
                        read.pages, read.pages_read
                    )
                } else {
                    String::new()
                };
                include_document(attachment, read.text.trim(), &pages, prepared, document_room)
            }
            Err(why) => reference(attachment, &format!("a PDF Herald did not read: {why}")),
        }
    }

    async fn transcribe(
        &self,
        attachment: &Attachment,
        content_type: &str,
        bytes: Vec<u8>,
        prepared: &mut PreparedInput,
        transcripts: &mut Vec<String>,
    ) -> String {
        let what = if attachment.kind == Some(AttachmentKind::Voice) {
            "voice note"
        } else {
            "audio file"
        };
        let Some(transcriber) = &self.transcriber else {
            return reference(attachment, "audio; transcription is not set up (llm.transcription)");
        };
        match transcriber.transcribe(&attachment.name, content_type, bytes).await {
            Ok(transcript) => {
                prepared.transcripts += 1;
                transcripts.push(format!("[Transcript of the {what}]: {}", transcript.trim()));
                reference(attachment, "transcribed above")
            }
            Err(err) => {
                warn!(error = %err, "transcription failed");
                prepared
                    .notices
                    .push(format!("I could not transcribe your {what}: {err}."));
                reference(attachment, &format!("not transcribed: {err}"))
            }
        }
    }
}
