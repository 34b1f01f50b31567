//! The local channel: a person at a terminal (or a script piping lines) talks
//! to Herald through `herald chat`. Messages go through the same queue and
//! agent loop as every other channel; replies are written to a stream.

use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use herald_core::{
    ActorId, ChannelError, ChannelName, ChannelOutbound, ConversationId, ConversationKind, ConversationRef,
    InboundMessage, OutboundMessage, Sender, SentMessage, Timestamp,
};
use serde::Serialize;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::Mutex;

pub const CHANNEL: &str = "local";

/// How replies are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyFormat {
    /// The reply text, then a newline.
    Plain,
    /// One JSON object per reply: `{"conversation":…,"text":…}`.
    Json,
}

/// The conversation of local user `user`: `local:user`, a direct chat.
pub fn conversation(user: &str) -> ConversationRef {
    ConversationRef {
        id: ConversationId::new(format!("{CHANNEL}:{user}")),
        channel: ChannelName::new(CHANNEL),
        kind: ConversationKind::Direct,
        chat: user.to_owned(),
        thread: None,
    }
}

/// A line typed by local user `user`, as a normalized message.
/// `message_id` must be unique per line; it is the dedup key.
pub fn inbound(user: &str, text: &str, message_id: String, at: Timestamp) -> InboundMessage {
    InboundMessage {
        conversation: conversation(user),
        sender: Sender {
            id: ActorId::new(format!("{CHANNEL}:{user}")),
            display_name: user.to_owned(),
        },
        text: text.to_owned(),
        platform_message_id: message_id,
        reply_to: None,
        mentions_bot: true,
        received_at: at,
        attachments: Vec::new(),
    }
}

/// Writes replies to a stream, one after another.
pub struct LocalOutbound {
    out: Mutex<Box<dyn AsyncWrite + Send + Unpin>>,
    format: ReplyFormat,
    sent: AtomicU64,
}

impl LocalOutbound {
    pub fn new(out: impl AsyncWrite + Send + Unpin + 'static, format: ReplyFormat) -> Self {
        Self {
            out: Mutex::new(Box::new(out)),
            format,
            sent: AtomicU64::new(0),
        }
    }

    pub fn stdout(format: ReplyFormat) -> Self {
        Self::new(tokio::io::stdout(), format)
    }
}

#[derive(Serialize)]
struct JsonReply<'a> {
    conversation: &'a str,
    text: &'a str,
}

/// How one reply looks on the stream.
pub fn render(format: ReplyFormat, message: &OutboundMessage) -> String {
    match format {
        ReplyFormat::Plain => format!("{}\n", message.text.trim_end_matches('\n')),
        ReplyFormat::Json => {
            let reply = JsonReply {
                conversation: message.conversation.id.as_str(),
                text: &message.text,
            };
            let mut line = serde_json::to_string(&reply).expect("a reply serialises");
            line.push('\n');
            line
        }
    }
}

#[async_trait]
impl ChannelOutbound for LocalOutbound {
    fn channel(&self) -> ChannelName {
        ChannelName::new(CHANNEL)
    }

    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, ChannelError> {
        let rendered = render(self.format, message);
        let mut out = self.out.lock().await;
        out.write_all(rendered.as_bytes())
            .await
            .map_err(|err| ChannelError::Fatal(format!("writing reply: {err}")))?;
        out.flush()
            .await
            .map_err(|err| ChannelError::Fatal(format!("writing reply: {err}")))?;
        let id = self.sent.fetch_add(1, Ordering::Relaxed) + 1;
        Ok(SentMessage {
            platform_message_ids: vec![id.to_string()],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_render_as_plain_lines_or_json_lines() {
        let message = OutboundMessage {
            conversation: conversation("ann"),
            text: "hi\nthere\n".into(),
            reply_to: None,
            idempotency_key: None,
            files: Vec::new(),
        };
        assert_eq!(render(ReplyFormat::Plain, &message), "hi\nthere\n");
        assert_eq!(
            render(ReplyFormat::Json, &message),
            "{\"conversation\":\"local:ann\",\"text\":\"hi\\nthere\\n\"}\n"
        );
    }

    #[tokio::test]
    async fn sends_are_written_whole_and_in_order() {
        let (writer, mut reader) = tokio::io::duplex(1 << 16);
        let outbound = LocalOutbound::new(writer, ReplyFormat::Json);
        for text in ["one", "two"] {
            let message = OutboundMessage {
                conversation: conversation("ann"),
                text: text.into(),
                reply_to: None,
                idempotency_key: None,
                files: Vec::new(),
            };
            outbound.send(&message).await.unwrap();
        }
        drop(outbound);
        let mut written = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut reader, &mut written)
            .await
            .unwrap();
        let texts: Vec<String> = written
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["text"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(texts, ["one", "two"]);
    }
}
