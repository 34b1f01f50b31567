//! The one outbound path every platform shares: render and chunk the reply
//! as the platform shows it ([`PlatformSender::chunks`]), take a place in
//! the platform's send windows (per chat, per group, per bot), send each
//! chunk in order in the conversation's thread, and wait out a 429 for
//! exactly as long as the platform asked before the next try. An answer
//! streamed into place is shown and edited through the same windows
//! ([`ChannelOutbound::show_partial`], which never waits for one, and
//! [`ChannelOutbound::finish`]).
//!
//! A platform adapter implements [`PlatformSender`] (one chunk, one request)
//! and gets a [`ChannelOutbound`] from [`Delivery`].
//!
//! The limits are sliding windows ([`herald_core::rate`]): `20/m` lets 20
//! sends go at once and the 21st when the first leaves the minute; a send
//! counts from when its request came back. Where the windows live is the
//! [`SendLimiter`] given to [`Delivery::with_limiter`]: this process's own
//! ([`LocalLimiter`], the default) or one shared through the database when
//! several processes deliver for the same bot.
//!
//! Architecture invariant: every chunk takes its place in every window that
//! applies before its request starts, and reports when it finished; no
//! send goes around the limiter, and a chunk refused with a 429 is tried
//! again only after the platform's `retry_after`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use herald_core::rate::{SendLimit, SendLimiter, SendSlot, Window};
use herald_core::{
    ChannelError, ChannelName, ChannelOutbound, ConversationKind, ConversationRef, OutboundFile, OutboundMessage,
    Partial, SentMessage,
};
use serde::Deserialize;
use tracing::{debug, warn};

use crate::chunk::{Limit, chunk};
use crate::retry::{Retry, SEND};

/// One message's worth of a reply, as the platform takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// The text, in the platform's markup when the channel renders Markdown.
    pub text: String,
    /// The same message as plain text, for a platform that may refuse the
    /// markup (Telegram's "can't parse entities"): sent instead, so a reply
    /// is never lost to formatting.
    pub plain: Option<String>,
}

impl Chunk {
    /// `text` cut to `limit` as it is, without markup to fall back from.
    pub fn verbatim(text: &str, limit: Limit) -> Vec<Chunk> {
        chunk(text, limit)
            .into_iter()
            .map(|text| Chunk { text, plain: None })
            .collect()
    }
}

/// One chunk, one platform request.
#[async_trait]
pub trait PlatformSender: Send + Sync {
    fn channel(&self) -> ChannelName;

    /// A reply's text as the messages the platform takes, in order: rendered
    /// in its markup (or not, as the channel's `format` says) and cut to its
    /// limit after rendering. Pure and the same for the same text, so a
    /// retried reply has the same chunks as the first try.
    fn chunks(&self, text: &str) -> Vec<Chunk>;

    /// Sends one chunk to the conversation (in its thread), replying to
    /// `reply_to` when given. Returns the platform's id of the new message.
    /// `key` is the same for every try of this chunk; a platform that can
    /// make sends idempotent uses it, the others ignore it.
    async fn send_chunk(
        &self,
        conversation: &ConversationRef,
        chunk: &Chunk,
        reply_to: Option<&str>,
        key: Option<&str>,
    ) -> Result<String, ChannelError>;

    /// Shows the typing indicator; returns how long the platform shows it
    /// ([`ChannelOutbound::typing`]).
    async fn typing(&self, _conversation: &ConversationRef) -> Result<Option<Duration>, ChannelError> {
        Ok(None)
    }

    /// Whether this adapter edits its messages ([`PlatformSender::edit_chunk`])
    /// and its channel streams answers into place.
    fn edits(&self) -> bool {
        false
    }

    /// A window every edit of the bot takes a place in, beside the
    /// conversation's: a platform that limits its edit method on its own
    /// (Slack's `chat.update`, Tier 3: about 50 a minute per workspace).
    fn edit_window(&self) -> Option<Window> {
        None
    }

    /// Replaces the text of the bot's message `message_id` with `chunk`. An
    /// edit to the text the message already shows succeeds.
    async fn edit_chunk(
        &self,
        _conversation: &ConversationRef,
        _message_id: &str,
        _chunk: &Chunk,
    ) -> Result<(), ChannelError> {
        Err(ChannelError::Fatal(format!(
            "{} does not edit messages",
            self.channel()
        )))
    }

    /// What the platform takes in files from a bot; `None` when this
    /// adapter uploads none.
    fn uploads(&self) -> Option<FileUploads> {
        None
    }

    /// Uploads `files` (at most [`FileUploads::max_files_per_send`]) as one
    /// message in the conversation, with `text` when the platform carries
    /// a reply's text with its files ([`FileUploads::with_text`]). Returns
    /// the platform's id of the new message.
    async fn send_files(
        &self,
        _conversation: &ConversationRef,
        _text: Option<&str>,
        _files: &[OutboundFile],
        _reply_to: Option<&str>,
        _key: Option<&str>,
    ) -> Result<String, ChannelError> {
        Err(ChannelError::Fatal(format!("{} does not send files", self.channel())))
    }
}

/// How a platform takes files from a bot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileUploads {
    /// The largest file, in bytes.
    pub max_file_bytes: u64,
    /// Files in one upload request.
    pub max_files_per_send: usize,
    /// The reply's (last chunk of) text goes in the same request as its
    /// files (a mail with attachments) rather than before them.
    pub with_text: bool,
}

/// One request of a reply: a chunk of text, or files (with text).
#[derive(Clone, Copy)]
enum Part<'a> {
    Text(&'a Chunk),
    /// The bot's message with this id, edited to the chunk.
    Edit(&'a str, &'a Chunk),
    Files(Option<&'a str>, &'a [OutboundFile]),
}

/// `channels.<name>.streaming`: `edit` (the default) shows an answer while
/// the model writes it, editing the message as it grows (with `llm.stream`
/// on); `off` sends it once it is complete.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Streaming {
    #[default]
    Edit,
    Off,
}

/// Send rates as windows: `N/s`, `N/m`, `N/h` (`30/s`, `20/m`), or `N/` a
/// duration (`3/3s`: up to three at once, three within any three seconds);
/// `off` or absent means no limit.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RateLimits {
    /// Per conversation, direct or group: each chat on its own.
    pub per_chat: Option<Rate>,
    /// Per group, channel or room, on top of `per_chat`.
    pub per_group: Option<Rate>,
    /// For the whole bot.
    pub per_bot: Option<Rate>,
}

/// At most `count` messages within any span of `per`, and up to `count` at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    pub count: u32,
    pub per: Duration,
}

impl Rate {
    pub fn parse(text: &str) -> Result<Option<Rate>, String> {
        let text = text.trim();
        if text == "0" || text == "off" {
            return Ok(None);
        }
        let (count, unit) = text
            .split_once('/')
            .ok_or_else(|| format!("invalid rate `{text}`: expected N/s, N/m, N/h, N/<duration> or off"))?;
        let count: u32 = count
            .trim()
            .parse()
            .map_err(|_| format!("invalid rate `{text}`: `{count}` is not a whole number"))?;
        let per = match unit.trim() {
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            other if other.starts_with(|c: char| c.is_ascii_digit()) => {
                herald_core::duration::parse(other).map_err(|err| format!("invalid rate `{text}`: {err}"))?
            }
            other => {
                return Err(format!(
                    "invalid rate `{text}`: unknown unit `{other}` (expected s, m, h or a duration such as 3s)"
                ));
            }
        };
        if per.is_zero() {
            return Err(format!("invalid rate `{text}`: the window must be longer than zero"));
        }
        Ok((count > 0).then_some(Rate { count, per }))
    }

    pub fn window(self) -> Window {
        Window {
            count: self.count,
            per: self.per,
        }
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Rate::parse(&text)
            .map_err(serde::de::Error::custom)?
            .ok_or_else(|| serde::de::Error::custom("a rate of 0 is written by leaving the key out"))
    }
}

/// The shared outbound path for one platform.
pub struct Delivery<S> {
    sender: Arc<S>,
    limits: RateLimits,
    limiter: Arc<dyn SendLimiter>,
    /// `channels.<name>.streaming: edit`.
    streaming: bool,
    /// After a 429 on a partial answer, none is tried before this instant.
    partials_paused: std::sync::Mutex<Option<tokio::time::Instant>>,
}

impl<S: PlatformSender> Delivery<S> {
    /// Delivery with its own send windows (the tests' shape: adapters
    /// share the process's limiter through [`Delivery::with_limiter`]).
    #[cfg(test)]
    pub fn new(sender: Arc<S>, limits: &RateLimits) -> Self {
        Self::with_limiter(
            sender,
            limits,
            Arc::new(herald_core::rate::LocalLimiter::new(Arc::new(
                herald_core::SteadyClock::new(),
            ))),
        )
    }

    /// Delivery whose windows live in `limiter` (shared by every channel of
    /// the process, or by every process on one database).
    pub fn with_limiter(sender: Arc<S>, limits: &RateLimits, limiter: Arc<dyn SendLimiter>) -> Self {
        Self {
            sender,
            limits: limits.clone(),
            limiter,
            streaming: false,
            partials_paused: std::sync::Mutex::new(None),
        }
    }

    /// Streams answers into place when the platform edits messages
    /// (`channels.<name>.streaming: edit`).
    pub fn with_streaming(mut self, streaming: bool) -> Self {
        self.streaming = streaming;
        self
    }

    /// The windows a send (or an edit, with `edit`) to `conversation` must
    /// fit in.
    fn limits_for(&self, conversation: &ConversationRef, edit: bool) -> Vec<SendLimit> {
        let channel = self.sender.channel();
        let mut limits = Vec::with_capacity(4);
        if edit && let Some(window) = self.sender.edit_window() {
            limits.push(SendLimit {
                key: format!("{channel}:edits"),
                window,
            });
        }
        if let Some(rate) = self.limits.per_chat {
            limits.push(SendLimit {
                key: format!("{channel}:chat:{}", conversation.chat),
                window: rate.window(),
            });
        }
        if conversation.kind == ConversationKind::Group
            && let Some(rate) = self.limits.per_group
        {
            limits.push(SendLimit {
                key: format!("{channel}:group:{}", conversation.chat),
                window: rate.window(),
            });
        }
        if let Some(rate) = self.limits.per_bot {
            limits.push(SendLimit {
                key: format!("{channel}:bot"),
                window: rate.window(),
            });
        }
        limits
    }

    /// Waits until every window has room and takes a place in each; returns
    /// when the place was taken (unix ms), or `None` without limits.
    async fn take_place(&self, limits: &[SendLimit]) -> Result<Option<i64>, ChannelError> {
        if limits.is_empty() {
            return Ok(None);
        }
        let channel = self.sender.channel();
        let mut failures = Retry::new(SEND);
        loop {
            match self.limiter.take(limits).await {
                Ok(SendSlot::Taken { at_ms }) => return Ok(Some(at_ms)),
                Ok(SendSlot::Wait(wait)) => {
                    metrics::counter!("herald_send_window_waits_total", "channel" => channel.to_string()).increment(1);
                    debug!(channel = %channel, ?wait, "send window full; waiting for room");
                    tokio::time::sleep(wait).await;
                }
                Err(err) => {
                    let Some(delay) = failures.next_delay(err.retry_class()) else {
                        return Err(ChannelError::Transient(format!(
                            "the send windows are unavailable: {err}"
                        )));
                    };
                    warn!(channel = %channel, error = %err, ?delay, "could not take a place in the send windows");
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    /// Reports that the send taken at `taken` finished. A window that
    /// cannot be told keeps counting the send from its start, which errs
    /// only by how long the request took.
    async fn finished(&self, limits: &[SendLimit], taken: Option<i64>) {
        if let Some(taken) = taken
            && let Err(err) = self.limiter.sent(limits, taken).await
        {
            warn!(channel = %self.sender.channel(), error = %err, "could not record a finished send");
        }
    }

    async fn send_one(
        &self,
        conversation: &ConversationRef,
        part: Part<'_>,
        reply_to: Option<&str>,
        key: Option<&str>,
    ) -> Result<String, ChannelError> {
        let mut retry = Retry::new(SEND);
        let channel = self.sender.channel();
        let limits = self.limits_for(conversation, matches!(part, Part::Edit(..)));
        loop {
            let taken = self.take_place(&limits).await?;
            let result = match part {
                Part::Text(chunk) => self.sender.send_chunk(conversation, chunk, reply_to, key).await,
                Part::Edit(id, chunk) => self
                    .sender
                    .edit_chunk(conversation, id, chunk)
                    .await
                    .map(|()| id.to_owned()),
                Part::Files(text, files) => self.sender.send_files(conversation, text, files, reply_to, key).await,
            };
            self.finished(&limits, taken).await;
            let err = match result {
                Ok(id) => {
                    metrics::counter!("herald_messages_sent_total", "channel" => channel.to_string()).increment(1);
                    return Ok(id);
                }
                Err(err) => err,
            };
            if let ChannelError::RateLimited { retry_after } = &err {
                metrics::counter!("herald_platform_rate_limited_total", "channel" => channel.to_string()).increment(1);
                warn!(channel = %channel, ?retry_after, "platform rate limit; waiting as asked");
            }
            let Some(delay) = retry.next_delay(err.retry_class()) else {
                metrics::counter!("herald_send_failures_total", "channel" => channel.to_string()).increment(1);
                return Err(err);
            };
            debug!(channel = %channel, error = %err, ?delay, "send failed; retrying");
            tokio::time::sleep(delay).await;
        }
    }
}

#[async_trait]
impl<S: PlatformSender> ChannelOutbound for Delivery<S> {
    fn channel(&self) -> ChannelName {
        self.sender.channel()
    }

    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, ChannelError> {
        self.deliver(message, None).await
    }

    fn max_file_bytes(&self) -> Option<u64> {
        self.sender.uploads().map(|uploads| uploads.max_file_bytes)
    }

    async fn typing(&self, conversation: &ConversationRef) -> Result<Option<Duration>, ChannelError> {
        self.sender.typing(conversation).await
    }

    fn streams(&self) -> bool {
        self.streaming && self.sender.edits()
    }

    async fn show_partial(
        &self,
        message: &OutboundMessage,
        shown: Option<&str>,
        text: &str,
    ) -> Result<Partial, ChannelError> {
        let chunks = self.sender.chunks(text);
        let Some(first) = chunks.first() else {
            return Ok(Partial::Skipped);
        };
        if self
            .partials_paused
            .lock()
            .expect("not poisoned")
            .is_some_and(|until| tokio::time::Instant::now() < until)
        {
            return Ok(Partial::Skipped);
        }
        let limits = self.limits_for(&message.conversation, shown.is_some());
        // A partial answer never waits for a window: the next one will do.
        let taken = if limits.is_empty() {
            None
        } else {
            match self.limiter.take(&limits).await {
                Ok(SendSlot::Taken { at_ms }) => Some(at_ms),
                Ok(SendSlot::Wait(_)) | Err(_) => return Ok(Partial::Skipped),
            }
        };
        let conversation = &message.conversation;
        let result = match shown {
            None => {
                let key = message.idempotency_key.as_ref().map(|key| format!("{key}:0"));
                self.sender
                    .send_chunk(conversation, first, message.reply_to.as_deref(), key.as_deref())
                    .await
            }
            Some(id) => self
                .sender
                .edit_chunk(conversation, id, first)
                .await
                .map(|()| id.to_owned()),
        };
        self.finished(&limits, taken).await;
        let channel = self.sender.channel();
        match result {
            Ok(id) => {
                metrics::counter!("herald_partial_answers_shown_total", "channel" => channel.to_string()).increment(1);
                Ok(if chunks.len() > 1 {
                    Partial::Full(id)
                } else {
                    Partial::Shown(id)
                })
            }
            Err(err @ ChannelError::Fatal(_)) => Err(err),
            Err(ChannelError::RateLimited { retry_after }) => {
                // The platform asked for a pause: no partial answer until it is over.
                metrics::counter!("herald_platform_rate_limited_total", "channel" => channel.to_string()).increment(1);
                warn!(channel = %channel, ?retry_after, "platform rate limit on a partial answer; pausing them");
                *self.partials_paused.lock().expect("not poisoned") = Some(tokio::time::Instant::now() + retry_after);
                Ok(Partial::Skipped)
            }
            Err(err) => {
                debug!(channel = %channel, error = %err, "a partial answer was not shown; the next one may be");
                Ok(Partial::Skipped)
            }
        }
    }

    async fn finish(&self, message: &OutboundMessage, shown: &str) -> Result<SentMessage, ChannelError> {
        self.deliver(message, Some(shown)).await
    }
}

impl<S: PlatformSender> Delivery<S> {
    /// Sends `message`; with `shown`, the message showing its partial
    /// answer is edited to the first chunk instead of a first send.
    async fn deliver(&self, message: &OutboundMessage, shown: Option<&str>) -> Result<SentMessage, ChannelError> {
        let uploads = match (message.files.is_empty(), self.sender.uploads()) {
            (true, _) => None,
            (false, Some(uploads)) => Some(uploads),
            (false, None) => {
                return Err(ChannelError::Fatal(format!(
                    "{} cannot send files yet; nothing was sent",
                    self.sender.channel()
                )));
            }
        };
        if let Some(uploads) = uploads
            && let Some(file) = message.files.iter().find(|file| file.size() > uploads.max_file_bytes)
        {
            return Err(ChannelError::Fatal(format!(
                "{} is {}, over what {} takes ({}); nothing was sent",
                file.name,
                herald_core::human_size(file.size()),
                self.sender.channel(),
                herald_core::human_size(uploads.max_file_bytes)
            )));
        }
        let chunks = self.sender.chunks(&message.text);
        // A platform that carries text with files takes the last chunk with them.
        let carried = match uploads {
            Some(uploads) if uploads.with_text && shown.is_none() => chunks.last().map(|chunk| chunk.text.as_str()),
            _ => None,
        };
        let text_chunks = &chunks[..chunks.len() - usize::from(carried.is_some())];
        let mut ids = Vec::with_capacity(chunks.len() + message.files.len());
        for (index, part) in text_chunks.iter().enumerate() {
            // Only the first chunk replies to the triggering message; the rest follow it.
            let reply_to = if index == 0 { message.reply_to.as_deref() } else { None };
            let key = message.idempotency_key.as_ref().map(|key| format!("{key}:{index}"));
            let part = match shown {
                Some(id) if index == 0 => Part::Edit(id, part),
                _ => Part::Text(part),
            };
            ids.push(
                self.send_one(&message.conversation, part, reply_to, key.as_deref())
                    .await?,
            );
        }
        if let Some(uploads) = uploads {
            for (index, files) in message.files.chunks(uploads.max_files_per_send.max(1)).enumerate() {
                let reply_to = if ids.is_empty() {
                    message.reply_to.as_deref()
                } else {
                    None
                };
                let text = if index == 0 { carried } else { None };
                let key = message
                    .idempotency_key
                    .as_ref()
                    .map(|key| format!("{key}:files:{index}"));
                ids.push(
                    self.send_one(
                        &message.conversation,
                        Part::Files(text, files),
                        reply_to,
                        key.as_deref(),
                    )
                    .await?,
                );
            }
        }
        Ok(SentMessage {
            platform_message_ids: ids,
        })
    }
}

#[cfg(test)]
mod tests;
