//! The gateway's ingress: what every channel adapter hands its messages to.
//! It drops what is not for Herald, applies access control, answers pairing
//! commands and `/start` / `/help`, and stores the rest on the queue — all before the adapter
//! acknowledges the event to its platform, so nothing acknowledged is lost.

use std::sync::Arc;

use async_trait::async_trait;
use herald_core::{
    Admins, Admission, ChannelName, ChannelStatus, Clock, ConversationKind, ConversationStore, Enqueued,
    InboundMessage, InboundSink, NewTask, Outbound, OutboundMessage, StoreError, TaskQueue,
};
use tracing::{info, warn};

use crate::access::{AccessConfig, Decision, Pairing, decide};

pub struct Gateway {
    pub queue: Arc<dyn TaskQueue>,
    pub store: Arc<dyn ConversationStore>,
    pub outbound: Outbound,
    pub admins: Admins,
    pub access: AccessConfig,
    pub clock: Arc<dyn Clock>,
    /// Where adapters' connection reports go (for `/readyz`).
    pub status: ChannelStatus,
}

impl Gateway {
    async fn say(&self, message: &InboundMessage, text: String) {
        let reply = OutboundMessage {
            conversation: message.conversation.clone(),
            text,
            reply_to: Some(message.platform_message_id.clone()),
            idempotency_key: None,
        };
        if let Err(err) = self.outbound.send(&reply).await {
            warn!(error = %err, conversation = %message.conversation.id, "could not answer at ingress");
        }
    }

    /// The answer to `/start` (a chat platform's first message to a bot)
    /// and `/help`: fixed text, sent without the model.
    fn greeting(&self, message: &InboundMessage) -> Option<String> {
        let command = message.text.split_whitespace().next()?;
        if command != "/start" && command != "/help" {
            return None;
        }
        let mut text = String::from(
            "Hello, I'm Herald. Write to me here and I'll answer.\n\
             In a group, mention me or reply to one of my messages.",
        );
        if self.admins.contains(&message.sender.id) {
            text.push_str(
                "\nAs an admin: /pair list shows who is waiting for access, /pair approve CODE lets them in.",
            );
        }
        Some(text)
    }

    /// `/pair approve CODE` from an admin, handled without the model.
    async fn pairing_command(&self, message: &InboundMessage) -> Result<bool, StoreError> {
        let mut words = message.text.split_whitespace();
        if words.next() != Some("/pair") {
            return Ok(false);
        }
        if !self.admins.contains(&message.sender.id) {
            self.say(message, "Only an admin can approve pairing codes.".into())
                .await;
            return Ok(true);
        }
        let pairing = Pairing {
            store: self.store.as_ref(),
        };
        let now = self.clock.now();
        let reply = match (words.next(), words.next()) {
            (Some("approve"), Some(code)) => match pairing.approve(code, now).await? {
                Some(request) => {
                    info!(actor = %request.actor, "pairing approved");
                    format!("Approved {} ({}).", request.display_name, request.actor)
                }
                None => format!("No pending pairing code {code} (codes expire)."),
            },
            (Some("list") | None, _) => {
                let pending = pairing.pending(now).await?;
                if pending.is_empty() {
                    "No pairing requests are waiting.".into()
                } else {
                    pending
                        .iter()
                        .map(|(code, r)| format!("{code}: {} ({})", r.display_name, r.actor))
                        .collect::<Vec<_>>()
                        .join("\n")
                }
            }
            _ => "Usage: /pair approve CODE, or /pair list".into(),
        };
        self.say(message, reply).await;
        Ok(true)
    }
}

#[async_trait]
impl InboundSink for Gateway {
    async fn accept(&self, message: InboundMessage) -> Result<Admission, StoreError> {
        let channel = message.conversation.channel.to_string();
        let admission = self.admit(message).await;
        let outcome = match &admission {
            Ok(Admission::Queued(Enqueued::New(_))) => "queued",
            Ok(Admission::Queued(Enqueued::Duplicate(_))) => "duplicate",
            Ok(Admission::Ignored) => "ignored",
            Ok(Admission::Denied { .. }) => "denied",
            Err(_) => "error",
        };
        metrics::counter!("herald_inbound_messages_total", "channel" => channel, "outcome" => outcome).increment(1);
        admission
    }

    fn connected(&self, channel: &ChannelName, connected: bool) {
        self.status.set(channel, connected);
    }
}

impl Gateway {
    /// Access control and queueing for one message; see [`InboundSink::accept`].
    async fn admit(&self, message: InboundMessage) -> Result<Admission, StoreError> {
        // In groups Herald answers only when addressed (mentioned, replied
        // to, or in a channel configured to answer everything).
        if message.conversation.kind == ConversationKind::Group && !message.mentions_bot {
            return Ok(Admission::Ignored);
        }
        if self.pairing_command(&message).await? {
            return Ok(Admission::Ignored);
        }
        let pairing = Pairing {
            store: self.store.as_ref(),
        };
        let approved = pairing.is_approved(&message.sender.id).await?;
        match decide(&message.sender.id, &self.admins, approved, &self.access) {
            Decision::Allow => {
                if let Some(text) = self.greeting(&message) {
                    self.say(&message, text).await;
                    return Ok(Admission::Ignored);
                }
                Ok(Admission::Queued(self.queue.enqueue(NewTask::message(message)).await?))
            }
            Decision::Deny => {
                info!(actor = %message.sender.id, "message from an unknown sender denied");
                Ok(Admission::Denied {
                    conversation: message.conversation.id,
                })
            }
            Decision::OfferPairing => {
                let (code, new) = pairing
                    .code_for(
                        &message.sender.id,
                        &message.sender.display_name,
                        self.clock.now(),
                        self.access.pairing_code_ttl,
                    )
                    .await?;
                info!(actor = %message.sender.id, new, "unknown sender offered a pairing code");
                self.say(
                    &message,
                    format!("I don't know you yet. Ask an admin to approve you with: /pair approve {code}"),
                )
                .await;
                Ok(Admission::Denied {
                    conversation: message.conversation.id,
                })
            }
        }
    }
}
