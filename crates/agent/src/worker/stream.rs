//! Streaming an answer into place: while the model writes, the answer so
//! far is shown in one message and that message is edited as it grows;
//! once the turn is recorded, the outbox edits it into the final text
//! ([`herald_core::ChannelOutbound::finish`]).
//!
//! The turn tells a [`Watcher`] its text; [`Agent::stream_partial`] reads
//! it and decides, with the pure [`Pace`], when a person should see more:
//! the first part once there is a sentence or a second has passed, then at
//! most one edit a second, and never when a send window is full (the
//! channel skips it; a busy group gets fewer edits). An answer that
//! outgrows one message stops being edited: its first part stays, and the
//! rest follows as new messages when the answer is complete.
//!
//! Crash safety: the message showing the partial answer is recorded as the
//! `reply:draft` delivery the moment it is sent, so a retried task edits
//! that message (to the recorded final text, or to the answer of the turn
//! run again) and never sends a second reply.

use std::time::Duration;

use herald_core::{ChannelOutbound, DeliveryReceipt, OutboundMessage, Partial, TaskId, TextSink, TurnScope};
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};
use tracing::{debug, info, warn};

use super::Agent;

/// The slot of the message a streamed reply is shown in.
pub(super) const DRAFT: &str = "reply:draft";

/// What is shown in place of a partial answer while tools run.
const WORKING: &str = "…";

/// The answer as the turn has written it so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Progress {
    pub text: String,
    /// Tool rounds so far: a new round's text starts again from nothing.
    pub round: u32,
}

/// The sink a streamed turn writes into.
pub(super) struct Watcher(pub watch::Sender<Progress>);

impl TextSink for Watcher {
    fn text(&self, text: &str) {
        self.0.send_if_modified(|progress| {
            if progress.text == text {
                return false;
            }
            text.clone_into(&mut progress.text);
            true
        });
    }

    fn tool_round(&self) {
        self.0.send_modify(|progress| {
            progress.text.clear();
            progress.round += 1;
        });
    }
}

/// When a partial answer is shown. Pure: times are given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pace {
    /// The first part goes once there is a sentence, or this long after the
    /// first text.
    pub first_after: Duration,
    /// Edits come at most this often.
    pub every: Duration,
}

impl Default for Pace {
    fn default() -> Self {
        Self {
            first_after: Duration::from_secs(1),
            every: Duration::from_secs(1),
        }
    }
}

impl Pace {
    /// When `text` (first seen at `first_text`) may be shown, given the
    /// last show at `last_shown`; `None` when there is nothing to show yet.
    pub fn next_show(&self, text: &str, first_text: Instant, last_shown: Option<Instant>) -> Option<Instant> {
        if text.trim().is_empty() {
            return None;
        }
        Some(match last_shown {
            Some(at) => at + self.every,
            None if has_sentence(text) => first_text,
            None => first_text + self.first_after,
        })
    }
}

/// Whether `text` holds a whole sentence (or line) a person can read.
fn has_sentence(text: &str) -> bool {
    let text = text.trim_start();
    text.contains(". ")
        || text.contains("! ")
        || text.contains("? ")
        || text.contains(":\n")
        || text.trim_end().ends_with(['.', '!', '?'])
        || text.trim_end().contains('\n')
}

impl Agent {
    /// The message a streamed reply of `task` was shown in by an earlier
    /// attempt, if it got that far.
    pub(super) async fn draft_of(&self, task: TaskId) -> Option<String> {
        match self.parts.conversations.delivery(task, DRAFT).await {
            Ok(receipt) => receipt.and_then(|receipt| receipt.platform_message_ids.into_iter().next()),
            Err(err) => {
                warn!(error = %err, "could not read the draft of a streamed reply; it will be sent anew");
                None
            }
        }
    }

    /// Shows the turn's answer as it grows until the turn is over (the
    /// watch's sender is dropped); returns the message it is shown in.
    /// `shown` is an earlier attempt's message, edited instead of a new one.
    pub(super) async fn stream_partial(
        &self,
        channel: &dyn ChannelOutbound,
        task: TaskId,
        scope: &TurnScope,
        mut progress: watch::Receiver<Progress>,
        mut shown: Option<String>,
        visible: watch::Sender<bool>,
    ) -> Option<String> {
        let pace = Pace::default();
        let message = OutboundMessage {
            conversation: scope.conversation.clone(),
            text: String::new(),
            reply_to: scope.reply_to.clone(),
            idempotency_key: Some(format!("task:{task}:reply")),
            files: Vec::new(),
        };
        let mut first_text: Option<Instant> = None;
        let mut last_shown: Option<Instant> = None;
        let mut showing = String::new();
        let mut round = 0;
        let mut full = false;
        loop {
            let current = progress.borrow_and_update().clone();
            if current.round != round {
                round = current.round;
                first_text = None;
                // Tool rounds show nothing but that work goes on.
                if shown.is_some() && !full && showing != WORKING {
                    self.show(channel, &message, &mut shown, WORKING, &mut full, task).await;
                    showing = WORKING.to_owned();
                    last_shown = Some(Instant::now());
                }
            }
            if !current.text.trim().is_empty() {
                first_text.get_or_insert_with(Instant::now);
            }
            let due = match (full, first_text) {
                (false, Some(first)) if current.text != showing => pace.next_show(&current.text, first, last_shown),
                _ => None,
            };
            if let Some(at) = due
                && at <= Instant::now()
            {
                if self
                    .show(channel, &message, &mut shown, &current.text, &mut full, task)
                    .await
                {
                    showing = current.text.clone();
                    last_shown = Some(Instant::now());
                    visible.send_replace(true);
                } else {
                    // A full window: try again shortly.
                    last_shown = Some(Instant::now() - pace.every + Duration::from_millis(250));
                }
                continue;
            }
            tokio::select! {
                changed = progress.changed() => {
                    if changed.is_err() {
                        return shown;
                    }
                }
                () = sleep_until(due.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600))), if due.is_some() => {}
            }
        }
    }

    /// One partial show; whether it went out. The first message shown is
    /// recorded as the reply's draft before anything else happens.
    async fn show(
        &self,
        channel: &dyn ChannelOutbound,
        message: &OutboundMessage,
        shown: &mut Option<String>,
        text: &str,
        full: &mut bool,
        task: TaskId,
    ) -> bool {
        let (id, now_full) = match channel.show_partial(message, shown.as_deref(), text).await {
            Ok(Partial::Shown(id)) => (id, false),
            Ok(Partial::Full(id)) => (id, true),
            Ok(Partial::Skipped) => return false,
            Err(err) => {
                // The reply still goes out whole when the turn is done.
                debug!(error = %err, "a partial answer could not be shown; streaming stops");
                *full = true;
                return false;
            }
        };
        *full = now_full;
        if shown.is_none() {
            let receipt = DeliveryReceipt {
                task,
                slot: DRAFT.to_owned(),
                conversation: message.conversation.id.clone(),
                platform_message_ids: vec![id.clone()],
                delivered_at: chrono::Utc::now(),
            };
            match self.parts.conversations.record_delivery(&receipt).await {
                Ok(()) => info!(slot = DRAFT, "the answer shows while it is written"),
                Err(err) => warn!(error = %err, "could not record the draft of a streamed reply"),
            }
            *shown = Some(id);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sentence_shows_at_once_and_a_fragment_after_a_second() {
        let pace = Pace::default();
        let start = Instant::now();
        assert_eq!(pace.next_show("", start, None), None);
        assert_eq!(pace.next_show("Sure. Here", start, None), Some(start));
        assert_eq!(
            pace.next_show("Here is the", start, None),
            Some(start + Duration::from_secs(1))
        );
        assert_eq!(pace.next_show("Steps:\n1. mix", start, None), Some(start));
    }

    #[test]
    fn edits_come_at_most_once_a_second() {
        let pace = Pace::default();
        let start = Instant::now();
        let shown = start + Duration::from_millis(300);
        assert_eq!(
            pace.next_show("Sure. Here is more", start, Some(shown)),
            Some(shown + Duration::from_secs(1))
        );
    }

    #[test]
    fn the_watcher_keeps_the_latest_text_and_starts_again_after_tools() {
        let (tx, rx) = watch::channel(Progress::default());
        let watcher = Watcher(tx);
        watcher.text("Let me");
        watcher.text("Let me check");
        assert_eq!(rx.borrow().text, "Let me check");
        watcher.tool_round();
        assert_eq!(
            *rx.borrow(),
            Progress {
                text: String::new(),
                round: 1
            }
        );
        watcher.text("It is 12 °C.");
        assert_eq!(rx.borrow().text, "It is 12 °C.");
    }
}
