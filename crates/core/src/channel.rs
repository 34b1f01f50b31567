//! The channel seams. Ingress and reply are separate, small traits: an adapter
//! that receives from a platform hands normalized messages to an
//! [`InboundSink`]; the outbound path sends replies through a
//! [`ChannelOutbound`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::ids::{ChannelName, ConversationId};
use crate::message::{ConversationRef, InboundMessage, OutboundMessage};
use crate::retry::RetryClass;
use crate::store::StoreError;
use crate::task::Enqueued;
use crate::tools::TurnScope;

#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("platform rate limited the request; retry after {retry_after:?}")]
    RateLimited { retry_after: Duration },
    #[error("platform request failed: {0}")]
    Transient(String),
    #[error("platform refused the request: {0}")]
    Fatal(String),
}

impl ChannelError {
    pub fn retry_class(&self) -> RetryClass {
        match self {
            ChannelError::RateLimited { retry_after } => RetryClass::RetryAfter(*retry_after),
            ChannelError::Transient(_) => RetryClass::Transient,
            ChannelError::Fatal(_) => RetryClass::Fatal,
        }
    }
}

/// What a platform said about a message it accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentMessage {
    /// The platform's ids of the messages sent (one per chunk).
    pub platform_message_ids: Vec<String>,
}

/// Sends replies to one channel's conversations.
#[async_trait]
pub trait ChannelOutbound: Send + Sync {
    fn channel(&self) -> ChannelName;

    /// Sends one reply, split as the platform needs. Returns once the platform
    /// accepted every part.
    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, ChannelError>;

    /// The largest file this channel uploads for a bot, in bytes; `None`
    /// when it sends no files, and a message with files is refused.
    fn max_file_bytes(&self) -> Option<u64> {
        None
    }

    /// Shows that Herald is working on an answer; returns how long the
    /// platform shows it (the agent renews it before then while a turn
    /// runs). Channels without the ability do nothing and return `None`.
    async fn typing(&self, _conversation: &ConversationRef) -> Result<Option<Duration>, ChannelError> {
        Ok(None)
    }

    /// Whether this channel streams answers into place: shows a reply while
    /// it is written ([`ChannelOutbound::show_partial`]) and edits it into
    /// its final text ([`ChannelOutbound::finish`]).
    fn streams(&self) -> bool {
        false
    }

    /// Shows the answer written so far, `text`, in the message `shown`
    /// (sent now when there is none yet, replying as `message` says; its
    /// `text` is not read). Never waits for a send window: when one is
    /// full, nothing is sent and [`Partial::Skipped`] says so.
    async fn show_partial(
        &self,
        _message: &OutboundMessage,
        _shown: Option<&str>,
        _text: &str,
    ) -> Result<Partial, ChannelError> {
        Ok(Partial::Skipped)
    }

    /// Puts `message` in place of the partial answer shown in `shown`: the
    /// first message is edited to the first chunk, the rest are sent after
    /// it. Waits for the send windows like [`ChannelOutbound::send`].
    async fn finish(&self, message: &OutboundMessage, _shown: &str) -> Result<SentMessage, ChannelError> {
        self.send(message).await
    }
}

/// What [`ChannelOutbound::show_partial`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Partial {
    /// The text is showing in this message (the platform's id).
    Shown(String),
    /// Nothing was sent: a send window is full, or there is nothing to show.
    Skipped,
    /// The answer outgrew one message: its first part is showing in this
    /// message, and the rest waits for [`ChannelOutbound::finish`].
    Full(String),
}

/// Receives from one platform and hands every message to an [`InboundSink`].
#[async_trait]
pub trait ChannelIngress: Send + Sync {
    fn channel(&self) -> ChannelName;

    /// Receives until `shutdown` is cancelled. Reconnects by itself after
    /// transient errors; returns an error only when it cannot go on (bad
    /// credentials).
    async fn run(
        &self,
        sink: Arc<dyn InboundSink>,
        shutdown: tokio_util::sync::CancellationToken,
    ) -> Result<(), ChannelError>;

    /// Checks credentials and reachability for `herald doctor`; returns a
    /// short description (the bot's name) on success.
    async fn probe(&self) -> Result<String, ChannelError>;

    /// Whether only one process at a time may run this ingress: a long poll
    /// (Telegram's `getUpdates`), a gateway session (Discord), a mailbox
    /// (IMAP). Ingress that tolerates several consumers (webhooks, Slack
    /// Socket Mode with event dedup) says `false` and runs in every process.
    fn exclusive(&self) -> bool {
        true
    }
}

/// Where channel adapters put what they receive. Implemented by the gateway:
/// it applies access control and stores the message on the queue before the
/// adapter acknowledges it to the platform.
#[async_trait]
pub trait InboundSink: Send + Sync {
    async fn accept(&self, message: InboundMessage) -> Result<Admission, StoreError>;

    /// Accepts `messages` in order, as [`InboundSink::accept`] does each, in
    /// one store round trip where the sink can: an adapter that receives a
    /// burst at once (a `getUpdates` answer, a gateway's queued events)
    /// hands it over whole. Stops at the first message it could not take;
    /// the caller offers that one and those after it again.
    async fn accept_all(&self, messages: Vec<InboundMessage>) -> Taken {
        accept_one_by_one(self, messages).await
    }

    /// A message the channel could not read (a mail over the size cap, its
    /// body never fetched): access control decides about its sender as for
    /// any message, and an allowed sender is told `notice` instead of
    /// anything being queued. A sink that cannot answer ignores it.
    async fn refuse(&self, _message: InboundMessage, _notice: String) -> Result<Admission, StoreError> {
        Ok(Admission::Ignored)
    }

    /// The ingress of `channel` is receiving from its platform (`true`: a
    /// poll answered, the gateway is ready, the socket or endpoint is up) or
    /// has lost that (`false`). Readiness checks report it.
    fn connected(&self, _channel: &ChannelName, _connected: bool) {}

    /// The ingress of `channel` runs, but receives nothing here for now:
    /// the processes sharing the work gave this one none of it (a Discord
    /// process holding no shard). Readiness checks do not count the channel
    /// until it reports [`InboundSink::connected`] again.
    fn standing_by(&self, _channel: &ChannelName) {}
}

/// [`InboundSink::accept_all`] for a sink without a batch path: `accept`
/// on each message in turn, stopping at the first it could not take. A
/// sink that wraps `accept_all` (to observe or hold it) calls this too.
pub async fn accept_one_by_one<S: InboundSink + ?Sized>(sink: &S, messages: Vec<InboundMessage>) -> Taken {
    let mut admissions = Vec::with_capacity(messages.len());
    for message in messages {
        match sink.accept(message).await {
            Ok(admission) => admissions.push(admission),
            Err(error) => {
                return Taken {
                    admissions,
                    error: Some(error),
                };
            }
        }
    }
    Taken {
        admissions,
        error: None,
    }
}

/// Which channels' ingress is connected, as their adapters last reported
/// through [`InboundSink::connected`]. Cheap to clone; clones share state.
#[derive(Clone, Debug, Default)]
pub struct ChannelStatus {
    connected: Arc<std::sync::Mutex<BTreeMap<ChannelName, bool>>>,
}

impl ChannelStatus {
    pub fn set(&self, channel: &ChannelName, connected: bool) {
        self.connected
            .lock()
            .expect("channel status lock")
            .insert(channel.clone(), connected);
    }

    /// This process does not receive from `channel` (another one does).
    pub fn forget(&self, channel: &ChannelName) {
        self.connected.lock().expect("channel status lock").remove(channel);
    }

    /// Every channel this process expects, with whether it is connected.
    pub fn snapshot(&self) -> Vec<(ChannelName, bool)> {
        let connected = self.connected.lock().expect("channel status lock");
        connected.iter().map(|(name, up)| (name.clone(), *up)).collect()
    }
}

/// What [`InboundSink::accept_all`] took: the admissions of the first
/// messages, in order, and, when it stopped short of the end, why. The
/// messages after those admitted were not taken.
#[derive(Debug)]
pub struct Taken {
    pub admissions: Vec<Admission>,
    pub error: Option<StoreError>,
}

/// What became of an inbound message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    Queued(Enqueued),
    /// Not for Herald (a group message without a mention, the bot's own).
    Ignored,
    /// The sender may not use Herald; nothing was queued.
    Denied {
        conversation: ConversationId,
    },
}

/// The outbound side of every configured channel, by name.
#[derive(Clone, Default)]
pub struct Outbound {
    channels: BTreeMap<ChannelName, Arc<dyn ChannelOutbound>>,
}

impl std::fmt::Debug for Outbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.channels.keys()).finish()
    }
}

impl Outbound {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with(mut self, channel: Arc<dyn ChannelOutbound>) -> Self {
        self.channels.insert(channel.channel(), channel);
        self
    }

    pub fn get(&self, channel: &ChannelName) -> Option<&Arc<dyn ChannelOutbound>> {
        self.channels.get(channel)
    }

    pub fn names(&self) -> impl Iterator<Item = &ChannelName> {
        self.channels.keys()
    }

    /// Sends through the conversation's channel, as it is.
    pub async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, ChannelError> {
        self.send_through_channel(message).await
    }

    /// Sends what a turn produced. In a heartbeat turn the text passes the
    /// `HEARTBEAT_OK` rule first: an acknowledgement is not sent at all (and
    /// no platform message id comes back), an alert is sent without the token.
    pub async fn send_in_turn(
        &self,
        scope: &TurnScope,
        message: &OutboundMessage,
    ) -> Result<SentMessage, ChannelError> {
        let Some(limit) = scope.origin.quiet_limit() else {
            return self.send_through_channel(message).await;
        };
        match crate::heartbeat::strip_ok_token(&message.text, limit) {
            None => Ok(SentMessage {
                platform_message_ids: Vec::new(),
            }),
            Some(text) if text == message.text => self.send_through_channel(message).await,
            Some(text) => {
                self.send_through_channel(&OutboundMessage {
                    text,
                    ..message.clone()
                })
                .await
            }
        }
    }

    /// Puts `message` in place of the partial answer shown in `shown`
    /// ([`ChannelOutbound::finish`]).
    pub async fn finish(&self, message: &OutboundMessage, shown: &str) -> Result<SentMessage, ChannelError> {
        match self.channels.get(&message.conversation.channel) {
            Some(channel) => channel.finish(message, shown).await,
            None => self.send_through_channel(message).await,
        }
    }

    async fn send_through_channel(&self, message: &OutboundMessage) -> Result<SentMessage, ChannelError> {
        match self.channels.get(&message.conversation.channel) {
            Some(channel) => channel.send(message).await,
            None => Err(ChannelError::Fatal(format!(
                "channel `{}` is not configured in this process",
                message.conversation.channel
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::message::ConversationKind;
    use crate::tools::TurnOrigin;

    #[derive(Default)]
    struct Recorder(Mutex<Vec<String>>);

    #[async_trait]
    impl ChannelOutbound for Recorder {
        fn channel(&self) -> ChannelName {
            ChannelName::new("test")
        }

        async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, ChannelError> {
            self.0.lock().unwrap().push(message.text.clone());
            Ok(SentMessage {
                platform_message_ids: vec!["1".into()],
            })
        }
    }

    fn to_test(text: &str) -> OutboundMessage {
        OutboundMessage {
            conversation: ConversationRef {
                id: ConversationId::new("test:1"),
                channel: ChannelName::new("test"),
                kind: ConversationKind::Direct,
                chat: "1".into(),
                thread: None,
            },
            text: text.into(),
            reply_to: None,
            idempotency_key: None,
            files: Vec::new(),
        }
    }

    fn scope(origin: TurnOrigin) -> TurnScope {
        TurnScope {
            task: crate::TaskId(1),
            conversation: to_test("").conversation,
            actor: None,
            is_admin: false,
            reply_to: None,
            origin,
            files: Vec::new(),
        }
    }

    #[tokio::test]
    async fn in_a_heartbeat_turn_acknowledgements_are_not_sent_and_alerts_lose_the_token() {
        let recorder = Arc::new(Recorder::default());
        let outbound = Outbound::new().with(recorder.clone());
        let heartbeat = scope(TurnOrigin::Heartbeat { ack_max_chars: 300 });
        let silent = outbound
            .send_in_turn(&heartbeat, &to_test("HEARTBEAT_OK"))
            .await
            .unwrap();
        assert!(silent.platform_message_ids.is_empty());
        outbound
            .send_in_turn(&heartbeat, &to_test("Disk full. HEARTBEAT_OK otherwise"))
            .await
            .unwrap();
        // In any other turn the text is the sender's business.
        for origin in [TurnOrigin::Person, TurnOrigin::Schedule] {
            outbound
                .send_in_turn(&scope(origin), &to_test("HEARTBEAT_OK"))
                .await
                .unwrap();
        }
        assert_eq!(
            *recorder.0.lock().unwrap(),
            ["Disk full. otherwise", "HEARTBEAT_OK", "HEARTBEAT_OK"]
        );
    }
}
