//! The gateway's ingress: what every channel adapter hands its messages to.
//! It cleans the text (control characters out, the length capped), drops
//! what is not for Herald, applies access control, answers pairing commands
//! and `/start` / `/help`, screens the files of what it lets in (stored when
//! the channel has their bytes, else left for the turn to fetch:
//! [`crate::attachments`]), and stores the rest on the queue — all before the
//! adapter acknowledges the event to its platform, so nothing acknowledged
//! is lost.
//!
//! Architecture invariant: what the gateway says at the door goes to an
//! address a sender merely claimed (an unauthenticated mail's `From`) only
//! when the sender is allowed anyway; pairing replies go out once per code
//! and within [`PairingReplies`]' budget, so forged senders cannot make
//! Herald mail a third party again and again.

use std::sync::Arc;

use async_trait::async_trait;
use herald_core::{
    Admins, Admission, ChannelName, ChannelStatus, Clock, ConversationKind, ConversationStore, Enqueued,
    InboundMessage, InboundSink, NewTask, Outbound, OutboundMessage, StoreError, Taken, TaskQueue,
};
use tracing::{info, warn};

use crate::access::{AccessConfig, Decision, Pairing, PairingReplies, decide, decided_without_approval};
use crate::attachments::AttachmentIntake;
use crate::clean;

pub struct Gateway {
    pub queue: Arc<dyn TaskQueue>,
    pub store: Arc<dyn ConversationStore>,
    pub outbound: Outbound,
    pub admins: Admins,
    pub access: AccessConfig,
    /// `channels.max_message_chars`: longer texts are cut to this.
    pub max_message_chars: usize,
    /// How many pairing replies may still go out (`access.pairing_replies`).
    pub pairing_replies: PairingReplies,
    pub clock: Arc<dyn Clock>,
    /// Where adapters' connection reports go (for `/readyz`).
    pub status: ChannelStatus,
    /// Fetches and stores admitted messages' files; `None`: files are only
    /// described by what the platform said of them.
    pub attachments: Option<Arc<AttachmentIntake>>,
}

impl Gateway {
    async fn say(&self, message: &InboundMessage, text: String) {
        let reply = OutboundMessage {
            conversation: message.conversation.clone(),
            text,
            reply_to: Some(message.platform_message_id.clone()),
            idempotency_key: None,
            files: Vec::new(),
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

    /// `/pair …` from an admin, handled without the model. Returns the
    /// answer, or `None` when the message is not a pairing command.
    async fn pairing_command(&self, message: &InboundMessage) -> Result<Option<String>, StoreError> {
        let mut words = message.text.split_whitespace();
        if words.next() != Some("/pair") {
            return Ok(None);
        }
        if !self.admins.contains(&message.sender.id) {
            return Ok(Some("Only an admin can approve pairing codes.".into()));
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
        Ok(Some(reply))
    }
}

#[async_trait]
impl InboundSink for Gateway {
    async fn accept(&self, message: InboundMessage) -> Result<Admission, StoreError> {
        let channel = message.conversation.channel.to_string();
        count(channel, self.admit(message, None).await)
    }

    /// Screens the messages in order, then stores all those let in with one
    /// [`TaskQueue::enqueue_all`]. When that fails, the messages from the
    /// first one to be stored on are not taken (what was said to senders
    /// before it stands; a greeting after it may be said again).
    async fn accept_all(&self, messages: Vec<InboundMessage>) -> Taken {
        let mut steps = Vec::with_capacity(messages.len());
        let mut tasks = Vec::new();
        let mut stopped = None;
        for message in messages {
            let channel = message.conversation.channel.to_string();
            match self.screen(message, None).await {
                Ok(Screened::Done(admission)) => steps.push((channel, Step::Done(admission))),
                Ok(Screened::Queue(admitted)) => {
                    tasks.push(admitted.task);
                    steps.push((channel, Step::Stored { cut: admitted.cut }));
                }
                Err(err) => {
                    stopped = Some((channel, err));
                    break;
                }
            }
        }
        let mut stored = Vec::new().into_iter();
        if !tasks.is_empty() {
            match self.queue.enqueue_all(tasks).await {
                Ok(enqueued) => stored = enqueued.into_iter(),
                Err(err) => {
                    let first = steps.iter().position(|(_, step)| matches!(step, Step::Stored { .. }));
                    let first = first.unwrap_or(steps.len());
                    stopped = Some((steps[first].0.clone(), err));
                    steps.truncate(first);
                }
            }
        }
        let mut admissions = Vec::with_capacity(steps.len());
        for (channel, step) in steps {
            let admission = match step {
                Step::Done(admission) => admission,
                Step::Stored { cut } => {
                    let Some(enqueued) = stored.next() else { break };
                    self.queued(cut, enqueued).await;
                    Admission::Queued(enqueued)
                }
            };
            admissions.extend(count(channel, Ok(admission)).ok());
        }
        Taken {
            admissions,
            error: stopped.and_then(|(channel, err)| count(channel, Err(err)).err()),
        }
    }

    async fn refuse(&self, message: InboundMessage, notice: String) -> Result<Admission, StoreError> {
        let channel = message.conversation.channel.to_string();
        count(channel, self.admit(message, Some(notice)).await)
    }

    fn connected(&self, channel: &ChannelName, connected: bool) {
        self.status.set(channel, connected);
    }

    fn standing_by(&self, channel: &ChannelName) {
        self.status.forget(channel);
    }
}

/// What [`Gateway::screen`] decided for a message.
enum Screened {
    /// Not to be stored; this is what became of it.
    Done(Admission),
    Queue(Box<Admitted>),
}

/// A message let in, as the task to store.
struct Admitted {
    task: NewTask,
    /// The message, when its text was cut (its sender is told once it is
    /// stored).
    cut: Option<Box<InboundMessage>>,
}

/// A screened message of a batch while the batch is stored.
enum Step {
    Done(Admission),
    Stored { cut: Option<Box<InboundMessage>> },
}

/// Counts what became of an inbound message, by channel and outcome.
fn count(channel: String, admission: Result<Admission, StoreError>) -> Result<Admission, StoreError> {
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

impl Gateway {
    /// Cleaning, access control and queueing for one message; see
    /// [`InboundSink::accept`]. With `unread`, the channel could not read the
    /// message and the sender, if allowed, hears that instead.
    async fn admit(&self, message: InboundMessage, unread: Option<String>) -> Result<Admission, StoreError> {
        match self.screen(message, unread).await? {
            Screened::Done(admission) => Ok(admission),
            Screened::Queue(admitted) => {
                let enqueued = self.queue.enqueue(admitted.task).await?;
                self.queued(admitted.cut, enqueued).await;
                Ok(Admission::Queued(enqueued))
            }
        }
    }

    /// Everything [`Gateway::admit`] does before the queue: what to store,
    /// or what became of a message that is not stored.
    async fn screen(&self, mut message: InboundMessage, unread: Option<String>) -> Result<Screened, StoreError> {
        message.text = clean::strip_controls(&message.text);
        message.sender.display_name = clean::strip_controls(&message.sender.display_name);
        // In groups Herald answers only when addressed (mentioned, replied
        // to, or in a channel configured to answer everything).
        if message.conversation.kind == ConversationKind::Group && !message.mentions_bot {
            return Ok(Screened::Done(Admission::Ignored));
        }
        let pairing = Pairing {
            store: self.store.as_ref(),
        };
        // Most messages come from senders whose approval cannot matter:
        // no store read for them.
        let decision = match decided_without_approval(&message.sender.id, &self.admins, &self.access) {
            Some(decision) => decision,
            None => {
                let approved = pairing.is_approved(&message.sender.id).await?;
                decide(&message.sender.id, &self.admins, approved, &self.access)
            }
        };
        if decision == Decision::Allow
            && let Some(reply) = self.pairing_command(&message).await?
        {
            self.say(&message, reply).await;
            return Ok(Screened::Done(Admission::Ignored));
        }
        match decision {
            Decision::Allow => {
                if let Some(notice) = unread {
                    self.say(&message, notice).await;
                    return Ok(Screened::Done(Admission::Ignored));
                }
                if let Some(text) = self.greeting(&message) {
                    self.say(&message, text).await;
                    return Ok(Screened::Done(Admission::Ignored));
                }
                let (text, cut) = clean::cap(&message.text, self.max_message_chars);
                message.text = text;
                // Files are looked at only now, for a sender who is let in;
                // those to download wait on the task for its turn.
                if let Some(intake) = &self.attachments
                    && !message.attachments.is_empty()
                {
                    intake.screen(&mut message).await;
                }
                let cut = cut.then(|| Box::new(message.clone()));
                Ok(Screened::Queue(Box::new(Admitted {
                    task: NewTask::message(message),
                    cut,
                })))
            }
            Decision::Deny => {
                info!(actor = %message.sender.id, "message from an unknown sender denied");
                Ok(Screened::Done(Admission::Denied {
                    conversation: message.conversation.id,
                }))
            }
            Decision::OfferPairing => {
                self.offer_pairing(&pairing, &message).await?;
                Ok(Screened::Done(Admission::Denied {
                    conversation: message.conversation.id,
                }))
            }
        }
    }

    /// After a message was queued: a sender whose text was cut hears so,
    /// once (not for a redelivery).
    async fn queued(&self, cut: Option<Box<InboundMessage>>, enqueued: Enqueued) {
        if let (Some(message), Enqueued::New(_)) = (cut, enqueued) {
            let limit = self.max_message_chars;
            self.say(
                &message,
                format!("Your message was longer than {limit} characters; I read only the first {limit}."),
            )
            .await;
        }
    }

    /// A pairing code for an unknown sender, said once per code: a sender
    /// who writes again while their code is pending hears nothing more (an
    /// auto-responder answering the pairing reply ends there), and no more
    /// than the budget allows go out in all.
    async fn offer_pairing(&self, pairing: &Pairing<'_>, message: &InboundMessage) -> Result<(), StoreError> {
        let now = self.clock.now();
        if pairing.pending_code_of(&message.sender.id, now).await?.is_some() {
            info!(actor = %message.sender.id, "unknown sender wrote again; the pending code is not sent again");
            return Ok(());
        }
        if !self.pairing_replies.try_take(now) {
            warn!(
                actor = %message.sender.id,
                "pairing reply budget used up; unknown sender not answered (access.pairing_replies_per_hour)"
            );
            return Ok(());
        }
        let (code, _) = pairing
            .code_for(
                &message.sender.id,
                &message.sender.display_name,
                now,
                self.access.pairing_code_ttl,
            )
            .await?;
        info!(actor = %message.sender.id, "unknown sender offered a pairing code");
        self.say(
            message,
            format!("I don't know you yet. Ask an admin to approve you with: /pair approve {code}"),
        )
        .await;
        Ok(())
    }
}
