//! One task's turn, in the order that keeps the outbox's promises: the
//! history read once, then either the reply an earlier attempt recorded
//! delivered again ([`Agent::replay`]), or a fresh turn run
//! ([`Agent::fresh_turn`]: files fetched and read, the model asked) and
//! recorded before anything of it is sent ([`Agent::record_then_deliver`]).

use std::borrow::Cow;

use herald_core::{
    Attachment, HistoryEntry, Lease, MessageFile, NoText, StateWrite, TaskId, TaskPayload, TextSink, TurnScope,
};
use tokio::sync::watch;
use tracing::info;

use super::outbox::{Receipts, Served, Slot};
use super::record::recording;
use super::stream::{Progress, Watcher};
use super::typing::{self, TYPING_AFTER};
use super::{Agent, EXPLAIN_SCOPE, Failure};
use crate::attachments::PreparedInput;
use crate::prompt::TurnAttachments;
use crate::turn::{TurnOutcome, TurnRequest, run_turn};

/// A turn this attempt ran: what it read and what came of it.
struct FreshTurn<'a> {
    /// The task's payload, with the files that waited fetched.
    payload: Cow<'a, TaskPayload>,
    /// Its files read for the model, when it has any.
    prepared: Option<PreparedInput>,
    outcome: TurnOutcome,
    /// The message its answer was streamed into, if it was.
    shown: Option<String>,
}

impl FreshTurn<'_> {
    /// What the turn read, as it is recorded.
    fn input(&self) -> Option<&str> {
        turn_input(&self.payload, self.prepared.as_ref())
    }
}

impl Agent {
    /// The task's turn, recorded and delivered; or its recorded reply
    /// delivered, when an earlier attempt got as far as recording it.
    pub(super) async fn serve_task(&self, lease: &Lease, scope: &TurnScope) -> Result<Served, Failure> {
        let task = &lease.task;
        if task.attempt > task.max_attempts {
            return Err(Failure::GiveUp(format!(
                "claimed {} times without finishing (the worker kept stopping)",
                task.attempt - 1
            )));
        }
        let parts = &self.parts;
        let conversations = &parts.conversations;
        // One read serves both questions: what the conversation said before,
        // and whether an earlier attempt recorded this turn. A task is its
        // conversation's head (no later task of it has run), so its own
        // entries, if any, are the newest of the conversation.
        // The toolbox's per-conversation state (the active skills) comes
        // along in the same round trip.
        let conversation = &scope.conversation.id;
        let limit = parts.config.history_limit;
        let (history, toolbox_state) = match parts.toolbox.conversation_state_scope() {
            Some(state_scope) => {
                let (history, state) = conversations
                    .history_and_state(conversation, limit, state_scope)
                    .await
                    .map_err(Failure::store)?;
                (history, Some(state))
            }
            None => (
                conversations
                    .history(conversation, limit)
                    .await
                    .map_err(Failure::store)?,
                None,
            ),
        };
        let (earlier, recorded) = split_recorded(history, task.id);
        if !recorded.is_empty() {
            return self.replay(task.id, scope, &recorded).await;
        }
        let turn = self.fresh_turn(lease, scope, &earlier, toolbox_state).await?;
        self.record_then_deliver(task.id, scope, &turn).await
    }

    /// Delivers the reply an earlier attempt recorded (once: its receipt is
    /// looked up first); the model is not asked again.
    async fn replay(&self, task: TaskId, scope: &TurnScope, recorded: &[HistoryEntry]) -> Result<Served, Failure> {
        info!("turn was recorded before; delivering the recorded reply");
        let Some(entry) = recorded
            .iter()
            .rev()
            .find(|e| e.role == herald_core::Role::Assistant && !e.text.trim().is_empty())
        else {
            return Ok(Served::default());
        };
        // A reply streamed before the crash is edited into place.
        let shown = match self.streams_in(scope) {
            Some(_) => self.draft_of(task).await,
            None => None,
        };
        let receipt = self
            .deliver(
                task,
                scope,
                &entry.text,
                Slot::Reply {
                    receipts: Receipts::Check,
                    shown: shown.as_deref(),
                },
            )
            .await?;
        Ok(Served { last_receipt: receipt })
    }

    /// Runs the turn: the files that waited fetched and read, the model
    /// asked with the history before this task, the typing indicator up
    /// meanwhile (not for a heartbeat, which shows no sign of life unless it
    /// has something to say).
    async fn fresh_turn<'a>(
        &self,
        lease: &'a Lease,
        scope: &TurnScope,
        earlier: &[HistoryEntry],
        toolbox_state: Option<Option<serde_json::Value>>,
    ) -> Result<FreshTurn<'a>, Failure> {
        let typing_in = match scope.origin.quiet_limit() {
            None => self.parts.outbound.get(&scope.conversation.channel).map(AsRef::as_ref),
            Some(_) => None,
        };
        let streams_in = self.streams_in(scope);
        // An earlier attempt's partial answer is edited, not sent again.
        let draft = match streams_in {
            Some(_) => self.draft_of(lease.task.id).await,
            None => None,
        };
        let (progress, watched) = watch::channel(Progress::default());
        let (visible, text_visible) = watch::channel(false);
        let turn = typing::while_running(typing_in, &scope.conversation, TYPING_AFTER, text_visible, async {
            // The watcher goes when the turn does: the stream then ends.
            let watcher = Watcher(progress);
            let text: &dyn TextSink = match streams_in {
                Some(_) => &watcher,
                None => &NoText,
            };
            let payload = self.fetch_files(&lease.task.payload).await;
            let fetched_scope;
            let scope = match &payload {
                Cow::Owned(TaskPayload::Message(message)) => {
                    fetched_scope = TurnScope {
                        files: MessageFile::of(&message.attachments),
                        ..scope.clone()
                    };
                    &fetched_scope
                }
                _ => scope,
            };
            let prepared = self.prepare_files(&payload).await;
            let input = turn_input(&payload, prepared.as_ref());
            let turn_files = prepared.as_ref().map(|p| TurnAttachments {
                images: p.images.clone(),
                documents: p.documents.clone(),
            });
            let outcome = self
                .run(scope, earlier, input, turn_files.as_ref(), toolbox_state, text)
                .await;
            (payload, prepared, outcome)
        });
        let ((payload, prepared, outcome), shown) = match streams_in {
            Some(channel) => {
                let stream = self.stream_partial(channel, lease.task.id, scope, watched, draft, visible);
                tokio::join!(turn, stream)
            }
            None => (turn.await, None),
        };
        let mut outcome = outcome?;
        if let Some(prepared) = &prepared {
            outcome.accounting.transcripts = prepared.transcripts;
            outcome.notices.splice(0..0, prepared.notices.iter().cloned());
        }
        Ok(FreshTurn {
            payload,
            prepared,
            outcome,
            shown,
        })
    }

    /// Records the turn (with its prompt's accounting), then sends its
    /// notices and its reply: nothing is sent of a turn that is not in
    /// history, so a retry after a crash replays it instead of asking again.
    /// A heartbeat with nothing to say leaves neither.
    async fn record_then_deliver(
        &self,
        task: TaskId,
        scope: &TurnScope,
        turn: &FreshTurn<'_>,
    ) -> Result<Served, Failure> {
        let outcome = &turn.outcome;
        let Some(recorded) = recording(scope.origin, turn.input(), scope.actor.as_ref(), outcome) else {
            info!("heartbeat: nothing needs attention; nothing sent or recorded");
            return Ok(Served::default());
        };
        for (index, notice) in outcome.notices.iter().enumerate() {
            self.deliver(task, scope, notice, Slot::Notice(&format!("notice:{index}")))
                .await?;
        }
        // The prompt's accounting (for `herald explain`) goes with the
        // record, in the same round trip.
        let accounting = recorded
            .explain
            .then(|| serde_json::to_value(&outcome.accounting).ok())
            .flatten();
        let conversations = &self.parts.conversations;
        let first = match &accounting {
            Some(value) => {
                let state = StateWrite {
                    scope: EXPLAIN_SCOPE,
                    key: scope.conversation.id.as_str(),
                    value,
                };
                conversations
                    .record_turn_with_state(&scope.conversation.id, task, &recorded.entries, state)
                    .await
            }
            None => {
                conversations
                    .record_turn(&scope.conversation.id, task, &recorded.entries)
                    .await
            }
        }
        .map_err(Failure::store)?;
        // A streamed answer already shows: it ends as the turn's text, even
        // when a tool sent that text too, rather than stay half written.
        let reply = recorded.reply.filter(|t| !t.trim().is_empty()).or_else(|| {
            turn.shown
                .as_ref()
                .map(|_| outcome.text.clone())
                .filter(|t| !t.trim().is_empty())
        });
        if let Some(text) = reply {
            // The reply slot is sent only after its turn is recorded, so a
            // turn this attempt recorded first has no receipt to look for.
            let receipts = if first { Receipts::NoneYet } else { Receipts::Check };
            let receipt = self
                .deliver(
                    task,
                    scope,
                    &text,
                    Slot::Reply {
                        receipts,
                        shown: turn.shown.as_deref(),
                    },
                )
                .await?;
            return Ok(Served { last_receipt: receipt });
        }
        Ok(Served::default())
    }

    /// The channel a turn in `scope` streams its answer into, if it does:
    /// the model streams, the channel edits in place, and the turn is not a
    /// heartbeat (which may end silent, and must show nothing before).
    fn streams_in(&self, scope: &TurnScope) -> Option<&dyn herald_core::ChannelOutbound> {
        if !self.parts.stream_replies || scope.origin.quiet_limit().is_some() {
            return None;
        }
        self.parts
            .outbound
            .get(&scope.conversation.channel)
            .map(AsRef::as_ref)
            .filter(|channel| channel.streams())
    }

    /// The payload with the files the gateway left waiting fetched (the
    /// task's own payload when none wait).
    async fn fetch_files<'a>(&self, payload: &'a TaskPayload) -> Cow<'a, TaskPayload> {
        match (payload, &self.parts.fetcher) {
            (TaskPayload::Message(message), Some(fetcher))
                if message.attachments.iter().any(Attachment::is_waiting) =>
            {
                let mut message = message.clone();
                fetcher.fetch_waiting(&mut message).await;
                Cow::Owned(TaskPayload::Message(message))
            }
            _ => Cow::Borrowed(payload),
        }
    }

    /// A message's files read for its turn; `None` without files (or
    /// without a reader), when the input is the text as it came.
    async fn prepare_files(&self, payload: &TaskPayload) -> Option<PreparedInput> {
        match (payload, &self.parts.attachments) {
            (TaskPayload::Message(message), Some(reader)) if !message.attachments.is_empty() => {
                Some(reader.prepare(message).await)
            }
            _ => None,
        }
    }

    async fn run(
        &self,
        scope: &TurnScope,
        history: &[HistoryEntry],
        input: Option<&str>,
        attachments: Option<&TurnAttachments>,
        toolbox_state: Option<Option<serde_json::Value>>,
        text: &dyn TextSink,
    ) -> Result<TurnOutcome, Failure> {
        let parts = &self.parts;
        let request = TurnRequest {
            toolbox_state,
            scope,
            system_prompt: &parts.config.system_prompt,
            history,
            input,
            limits: &parts.limits,
            max_identical_calls: parts.config.max_identical_calls,
            attachments,
            text,
        };
        run_turn(parts.model.as_ref(), parts.toolbox.as_ref(), request)
            .await
            .map_err(|err| match err.retry_class_fatal() {
                true => Failure::GiveUp(err.to_string()),
                false => Failure::Retry(err.to_string()),
            })
    }
}

/// History before this task, and the entries an earlier attempt of the task
/// recorded (empty when none did).
fn split_recorded(history: Vec<HistoryEntry>, task: TaskId) -> (Vec<HistoryEntry>, Vec<HistoryEntry>) {
    history.into_iter().partition(|entry| entry.task != Some(task))
}

/// What the turn reads: the message with its files' text when they were
/// prepared, else the payload's own text.
fn turn_input<'a>(payload: &'a TaskPayload, prepared: Option<&'a PreparedInput>) -> Option<&'a str> {
    prepared.map_or(input_text(payload), |p| Some(p.text.as_str()))
}

fn input_text(payload: &TaskPayload) -> Option<&str> {
    match payload {
        TaskPayload::Message(message) => Some(&message.text),
        TaskPayload::Instruction { instruction, .. } => Some(instruction),
    }
}

#[cfg(test)]
mod tests {
    use herald_core::Role;

    use super::*;

    fn entry(id: i64, task: Option<i64>, role: Role) -> HistoryEntry {
        HistoryEntry {
            id,
            task: task.map(TaskId),
            role,
            actor: None,
            text: format!("entry {id}"),
            at: chrono::Utc::now(),
        }
    }

    #[test]
    fn a_tasks_own_entries_are_split_from_the_history_before_it() {
        let history = vec![
            entry(1, Some(7), Role::User),
            entry(2, Some(7), Role::Assistant),
            entry(3, None, Role::Assistant),
            entry(4, Some(9), Role::User),
            entry(5, Some(9), Role::Assistant),
        ];
        let (earlier, recorded) = split_recorded(history.clone(), TaskId(9));
        assert_eq!(earlier.iter().map(|e| e.id).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(recorded.iter().map(|e| e.id).collect::<Vec<_>>(), [4, 5]);
        let (earlier, recorded) = split_recorded(history, TaskId(10));
        assert_eq!(earlier.len(), 5, "a first attempt finds nothing of its own");
        assert!(recorded.is_empty());
    }
}
