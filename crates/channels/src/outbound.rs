//! The one outbound path every platform shares: chunk the reply to the
//! platform's limit, wait for the rate limiters (per chat and per bot), send
//! each chunk in order in the conversation's thread, and wait out a 429 for
//! exactly as long as the platform asked before the next try.
//!
//! A platform adapter implements [`PlatformSender`] (one chunk, one request)
//! and gets a [`ChannelOutbound`] from [`Delivery`].

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use governor::clock::DefaultClock;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use herald_core::{
    ChannelError, ChannelName, ChannelOutbound, ConversationKind, ConversationRef, OutboundMessage, SentMessage,
};
use serde::Deserialize;
use tracing::{debug, warn};

use crate::chunk::{Limit, chunk};
use crate::retry::{Retry, SEND};

/// One chunk, one platform request.
#[async_trait]
pub trait PlatformSender: Send + Sync {
    fn channel(&self) -> ChannelName;

    fn limit(&self) -> Limit;

    /// Sends one chunk to the conversation (in its thread), replying to
    /// `reply_to` when given. Returns the platform's id of the new message.
    /// `key` is the same for every try of this chunk; a platform that can
    /// make sends idempotent uses it, the others ignore it.
    async fn send_chunk(
        &self,
        conversation: &ConversationRef,
        text: &str,
        reply_to: Option<&str>,
        key: Option<&str>,
    ) -> Result<String, ChannelError>;

    async fn typing(&self, _conversation: &ConversationRef) -> Result<(), ChannelError> {
        Ok(())
    }
}

/// Send rates, as `N/s` or `N/m` (`30/s`, `20/m`); `0` or absent means no limit.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RateLimits {
    /// Per direct conversation.
    pub per_chat: Option<Rate>,
    /// Per group, channel or room.
    pub per_group: Option<Rate>,
    /// For the whole bot.
    pub per_bot: Option<Rate>,
}

/// `count` messages per `per`.
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
            .ok_or_else(|| format!("invalid rate `{text}`: expected N/s, N/m or off"))?;
        let count: u32 = count
            .trim()
            .parse()
            .map_err(|_| format!("invalid rate `{text}`: `{count}` is not a whole number"))?;
        let per = match unit.trim() {
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            other => {
                return Err(format!(
                    "invalid rate `{text}`: unknown unit `{other}` (expected s, m or h)"
                ));
            }
        };
        Ok((count > 0).then_some(Rate { count, per }))
    }

    fn quota(self) -> Quota {
        let count = NonZeroU32::new(self.count).unwrap_or(NonZeroU32::MIN);
        // One message per (per / count), no burst beyond one: the platform
        // counts sends, so Herald spaces them.
        Quota::with_period(self.per / self.count.max(1))
            .unwrap_or(Quota::per_second(count))
            .allow_burst(NonZeroU32::MIN)
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

type KeyedLimiter = RateLimiter<String, DefaultKeyedStateStore<String>, DefaultClock>;

/// The shared outbound path for one platform.
pub struct Delivery<S> {
    sender: Arc<S>,
    per_chat: Option<KeyedLimiter>,
    per_group: Option<KeyedLimiter>,
    per_bot: Option<DefaultDirectRateLimiter>,
}

impl<S: PlatformSender> Delivery<S> {
    pub fn new(sender: Arc<S>, limits: &RateLimits) -> Self {
        Self {
            sender,
            per_chat: limits.per_chat.map(|r| RateLimiter::keyed(r.quota())),
            per_group: limits.per_group.map(|r| RateLimiter::keyed(r.quota())),
            per_bot: limits.per_bot.map(|r| RateLimiter::direct(r.quota())),
        }
    }

    async fn wait_for_rate(&self, conversation: &ConversationRef) {
        let limiter = match conversation.kind {
            ConversationKind::Direct => self.per_chat.as_ref(),
            ConversationKind::Group => self.per_group.as_ref(),
        };
        if let Some(limiter) = limiter {
            limiter.until_key_ready(&conversation.chat).await;
        }
        if let Some(limiter) = &self.per_bot {
            limiter.until_ready().await;
        }
    }

    async fn send_one(
        &self,
        conversation: &ConversationRef,
        text: &str,
        reply_to: Option<&str>,
        key: Option<&str>,
    ) -> Result<String, ChannelError> {
        let mut retry = Retry::new(SEND);
        let channel = self.sender.channel();
        loop {
            self.wait_for_rate(conversation).await;
            let err = match self.sender.send_chunk(conversation, text, reply_to, key).await {
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
        let chunks = chunk(&message.text, self.sender.limit());
        let mut ids = Vec::with_capacity(chunks.len());
        for (index, part) in chunks.iter().enumerate() {
            // Only the first chunk replies to the triggering message; the rest follow it.
            let reply_to = if index == 0 { message.reply_to.as_deref() } else { None };
            let key = message.idempotency_key.as_ref().map(|key| format!("{key}:{index}"));
            ids.push(
                self.send_one(&message.conversation, part, reply_to, key.as_deref())
                    .await?,
            );
        }
        Ok(SentMessage {
            platform_message_ids: ids,
        })
    }

    async fn typing(&self, conversation: &ConversationRef) -> Result<(), ChannelError> {
        self.sender.typing(conversation).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use herald_core::ConversationId;

    use crate::chunk::LengthUnit;

    use super::*;

    #[test]
    fn rates_parse_as_written() {
        for (text, expected) in [
            (
                "30/s",
                Ok(Some(Rate {
                    count: 30,
                    per: Duration::from_secs(1),
                })),
            ),
            (
                "20/m",
                Ok(Some(Rate {
                    count: 20,
                    per: Duration::from_secs(60),
                })),
            ),
            ("off", Ok(None)),
            ("0", Ok(None)),
        ] {
            assert_eq!(Rate::parse(text), expected, "{text}");
        }
        for bad in ["30", "x/s", "3/d"] {
            assert!(Rate::parse(bad).is_err(), "{bad}");
        }
    }

    /// A platform that answers 429 to its first `limited` requests.
    struct Flaky {
        limited: Mutex<u32>,
        sent: Mutex<Vec<(String, Option<String>, tokio::time::Instant)>>,
    }

    #[async_trait]
    impl PlatformSender for Flaky {
        fn channel(&self) -> ChannelName {
            ChannelName::new("flaky")
        }
        fn limit(&self) -> Limit {
            Limit {
                max: 10,
                unit: LengthUnit::Chars,
            }
        }
        async fn send_chunk(
            &self,
            _: &ConversationRef,
            text: &str,
            reply_to: Option<&str>,
            _: Option<&str>,
        ) -> Result<String, ChannelError> {
            let mut limited = self.limited.lock().unwrap();
            if *limited > 0 {
                *limited -= 1;
                return Err(ChannelError::RateLimited {
                    retry_after: Duration::from_secs(3),
                });
            }
            let mut sent = self.sent.lock().unwrap();
            sent.push((
                text.to_owned(),
                reply_to.map(str::to_owned),
                tokio::time::Instant::now(),
            ));
            Ok(sent.len().to_string())
        }
    }

    fn conversation() -> ConversationRef {
        ConversationRef {
            id: ConversationId::new("flaky:1"),
            channel: ChannelName::new("flaky"),
            kind: ConversationKind::Direct,
            chat: "1".into(),
            thread: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn chunks_go_in_order_and_a_429_is_waited_out() {
        let sender = Arc::new(Flaky {
            limited: Mutex::new(1),
            sent: Mutex::new(Vec::new()),
        });
        let delivery = Delivery::new(sender.clone(), &RateLimits::default());
        let start = tokio::time::Instant::now();
        let message = OutboundMessage {
            conversation: conversation(),
            text: "aaaa bbbb cccc dddd".into(),
            reply_to: Some("42".into()),
            idempotency_key: None,
        };
        let sent = delivery.send(&message).await.unwrap();
        assert_eq!(sent.platform_message_ids, ["1", "2"]);
        let log = sender.sent.lock().unwrap();
        let texts: Vec<_> = log.iter().map(|(t, r, _)| (t.as_str(), r.as_deref())).collect();
        assert_eq!(texts, [("aaaa bbbb", Some("42")), ("cccc dddd", None)]);
        assert!(
            log[0].2 - start >= Duration::from_secs(3),
            "the first send waited for retry_after"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_platform_that_keeps_refusing_is_reported_not_dropped() {
        let sender = Arc::new(Flaky {
            limited: Mutex::new(100),
            sent: Mutex::new(Vec::new()),
        });
        let delivery = Delivery::new(sender, &RateLimits::default());
        let message = OutboundMessage {
            conversation: conversation(),
            text: "hi".into(),
            reply_to: None,
            idempotency_key: None,
        };
        assert!(matches!(
            delivery.send(&message).await,
            Err(ChannelError::RateLimited { .. })
        ));
    }
}
