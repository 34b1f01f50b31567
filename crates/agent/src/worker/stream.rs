//! Streaming an answer into place: while the model writes, the answer so
//! far is shown in one message and that message is edited as it grows;
//! once the turn is recorded, the outbox edits it into the final text
//! ([`herald_core::ChannelOutbound::finish`]).
//!
//! The turn tells a [`Watcher`] its text; [`Agent::stream_partial`] reads
//! it and decides, with the pure [`Pacer`], when a person should see more:
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
        let message = OutboundMessage {
            conversation: scope.conversation.clone(),
            text: String::new(),
            reply_to: scope.reply_to.clone(),
            idempotency_key: Some(format!("task:{task}:reply")),
            files: Vec::new(),
        };
        let mut pacer = Pacer::new(Pace::default(), shown.is_some());
        loop {
            let current = progress.borrow_and_update().clone();
            match pacer.next(&current, Instant::now()) {
                Step::Show(text) => {
                    let outcome = self.show(channel, &message, &mut shown, &text, task).await;
                    if matches!(outcome, Outcome::Showing | Outcome::Full) {
                        visible.send_replace(true);
                    }
                    pacer.shown(&text, outcome, Instant::now());
                }
                Step::Wait(until) => tokio::select! {
                    changed = progress.changed() => {
                        if changed.is_err() {
                            return shown;
                        }
                    }
                    () = sleep_until(until.unwrap_or_else(Instant::now)), if until.is_some() => {}
                },
            }
        }
    }

    /// One partial show. The first message shown is recorded as the reply's
    /// draft before anything else happens.
    async fn show(
        &self,
        channel: &dyn ChannelOutbound,
        message: &OutboundMessage,
        shown: &mut Option<String>,
        text: &str,
        task: TaskId,
    ) -> Outcome {
        let (id, outcome) = match channel.show_partial(message, shown.as_deref(), text).await {
            Ok(Partial::Shown(id)) => (id, Outcome::Showing),
            Ok(Partial::Full(id)) => (id, Outcome::Full),
            Ok(Partial::Skipped) => return Outcome::Skipped,
            Err(err) => {
                // The reply still goes out whole when the turn is done.
                debug!(error = %err, "a partial answer could not be shown; streaming stops");
                return Outcome::Failed;
            }
        };
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
        outcome
    }
}

/// What one partial show came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The text shows.
    Showing,
    /// Its first part shows; the answer outgrew one message.
    Full,
    /// Not sent (a full window): the same text is tried again shortly.
    Skipped,
    /// The platform refused: nothing more is shown until the answer is whole.
    Failed,
}

/// What the stream does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    Show(String),
    /// Nothing until the text changes, or until this instant.
    Wait(Option<Instant>),
}

/// Decides, from the turn's progress, what a person sees and when. Pure:
/// times are given.
#[derive(Debug)]
pub(crate) struct Pacer {
    pace: Pace,
    /// A message shows (from this attempt or an earlier one).
    has_message: bool,
    /// What it shows.
    showing: String,
    first_text: Option<Instant>,
    last_shown: Option<Instant>,
    /// A skipped show is tried again then.
    retry_at: Option<Instant>,
    round: u32,
    /// Nothing more is shown until the answer is whole.
    done: bool,
}

/// How soon a show skipped for a full window is tried again.
const RETRY_SKIPPED: Duration = Duration::from_millis(250);

impl Pacer {
    pub(crate) fn new(pace: Pace, has_message: bool) -> Self {
        Self {
            pace,
            has_message,
            showing: String::new(),
            first_text: None,
            last_shown: None,
            retry_at: None,
            round: 0,
            done: false,
        }
    }

    pub(crate) fn next(&mut self, progress: &Progress, now: Instant) -> Step {
        if progress.round != self.round {
            self.round = progress.round;
            self.first_text = None;
            // Tool rounds show nothing but that work goes on.
            if self.has_message && !self.done && self.showing != WORKING {
                return Step::Show(WORKING.to_owned());
            }
        }
        if self.done || progress.text.trim().is_empty() || progress.text == self.showing {
            return Step::Wait(None);
        }
        let first = *self.first_text.get_or_insert(now);
        let due = self
            .pace
            .next_show(&progress.text, first, self.last_shown)
            .map(|due| self.retry_at.map_or(due, |retry| due.max(retry)));
        match due {
            Some(due) if due <= now => Step::Show(progress.text.clone()),
            due => Step::Wait(due),
        }
    }

    pub(crate) fn shown(&mut self, text: &str, outcome: Outcome, now: Instant) {
        match outcome {
            Outcome::Showing | Outcome::Full => {
                text.clone_into(&mut self.showing);
                self.has_message = true;
                self.last_shown = Some(now);
                self.retry_at = None;
                self.done = outcome == Outcome::Full;
            }
            Outcome::Skipped => self.retry_at = Some(now + RETRY_SKIPPED),
            Outcome::Failed => self.done = true,
        }
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

    fn progress(text: &str, round: u32) -> Progress {
        Progress {
            text: text.to_owned(),
            round,
        }
    }

    #[test]
    fn the_pacer_shows_a_sentence_at_once_and_edits_a_second_apart() {
        let start = Instant::now();
        let mut pacer = Pacer::new(Pace::default(), false);
        assert_eq!(pacer.next(&progress("", 0), start), Step::Wait(None));
        let second = start + Duration::from_secs(1);
        assert_eq!(pacer.next(&progress("Here is", 0), start), Step::Wait(Some(second)));
        assert_eq!(
            pacer.next(&progress("Here is one.", 0), start),
            Step::Show("Here is one.".into())
        );
        pacer.shown("Here is one.", Outcome::Showing, start);
        assert_eq!(pacer.next(&progress("Here is one.", 0), start), Step::Wait(None));
        assert_eq!(
            pacer.next(&progress("Here is one. And", 0), start),
            Step::Wait(Some(second))
        );
        assert_eq!(
            pacer.next(&progress("Here is one. And", 0), second),
            Step::Show("Here is one. And".into())
        );
    }

    #[test]
    fn a_skipped_show_is_tried_again_shortly_and_a_refusal_ends_the_stream() {
        let start = Instant::now();
        let mut pacer = Pacer::new(Pace::default(), false);
        assert_eq!(pacer.next(&progress("Sure.", 0), start), Step::Show("Sure.".into()));
        pacer.shown("Sure.", Outcome::Skipped, start);
        assert_eq!(
            pacer.next(&progress("Sure.", 0), start),
            Step::Wait(Some(start + RETRY_SKIPPED))
        );
        assert_eq!(
            pacer.next(&progress("Sure.", 0), start + RETRY_SKIPPED),
            Step::Show("Sure.".into())
        );
        pacer.shown("Sure.", Outcome::Failed, start + RETRY_SKIPPED);
        assert_eq!(
            pacer.next(&progress("Sure. More.", 0), start + Duration::from_secs(9)),
            Step::Wait(None)
        );
    }

    #[test]
    fn a_tool_round_replaces_shown_text_with_a_status_and_an_outgrown_message_stays() {
        let start = Instant::now();
        let mut pacer = Pacer::new(Pace::default(), false);
        // Before anything shows, a tool round shows nothing.
        assert_eq!(pacer.next(&progress("", 1), start), Step::Wait(None));
        assert_eq!(
            pacer.next(&progress("Let me look.", 1), start),
            Step::Show("Let me look.".into())
        );
        pacer.shown("Let me look.", Outcome::Showing, start);
        let later = start + Duration::from_secs(2);
        assert_eq!(pacer.next(&progress("", 2), later), Step::Show(WORKING.into()));
        pacer.shown(WORKING, Outcome::Showing, later);
        // The answer after the tools replaces the status.
        let answer = progress("It is 12 °C.", 2);
        assert_eq!(
            pacer.next(&answer, later + Duration::from_secs(1)),
            Step::Show(answer.text.clone())
        );
        pacer.shown(&answer.text, Outcome::Full, later + Duration::from_secs(1));
        assert_eq!(
            pacer.next(&progress("It is 12 °C. More", 2), later + Duration::from_secs(5)),
            Step::Wait(None)
        );
        assert_eq!(
            pacer.next(&progress("", 3), later + Duration::from_secs(5)),
            Step::Wait(None)
        );
    }

    #[test]
    fn an_earlier_attempts_message_gets_the_status_too() {
        let mut pacer = Pacer::new(Pace::default(), true);
        assert_eq!(pacer.next(&progress("", 1), Instant::now()), Step::Show(WORKING.into()));
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
