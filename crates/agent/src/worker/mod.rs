//! Queue workers: claim a task, fetch the files it left waiting, run its
//! turn, record it, deliver the reply, complete the task.
//!
//! The order of those steps is what keeps Herald's promises across crashes:
//! - the turn is recorded in history (the outbox) before anything is sent, so
//!   a task retried after a crash re-sends the recorded reply instead of
//!   asking the model again;
//! - each message a task sends has a delivery slot with a receipt, checked
//!   before sending and written right after, so a retried task does not send
//!   a slot twice;
//! - the task is completed only with its receipts written: the reply's (its
//!   last send) in the same round trip as the completion.
//!
//! A worker keeps its lease alive while a turn runs ([`lease`]), so a slow
//! model does not let a second worker serve the same task.
//!
//! Heartbeat turns are quiet: their scope's origin carries the
//! `HEARTBEAT_OK` allowance, so what they send through the toolbox passes
//! the rule ([`herald_core::Outbound::send_in_turn`]) and their reply passes
//! it in [`record`] before anything is recorded or sent; a silent turn leaves
//! no history; and a failed one is given up without telling anyone (it must
//! not wait in backoff ahead of the target's own messages).

mod lease;
mod pool;
mod record;
mod typing;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use herald_core::{
    Admins, Attachment, AttachmentFetcher, ChatModel, ConversationId, ConversationStore, DeliveryReceipt, FailOutcome,
    HistoryEntry, InstructionOrigin, Lease, MessageFile, Outbound, OutboundMessage, RetryClass, StateWrite, StoreError,
    TaskId, TaskPayload, TaskQueue, Toolbox, TurnOrigin, TurnScope,
};
use tokio::sync::broadcast;
use tracing::{Instrument, debug, error, info, info_span, warn};

use self::lease::LeaseKeeper;
pub use self::pool::WorkerPool;
use self::record::recording;
use self::typing::TYPING_AFTER;
use crate::config::{AgentConfig, TurnLimits};
use crate::prompt::TurnAttachments;
use crate::turn::{TurnOutcome, TurnRequest, run_turn};

/// Everything a worker needs, wired by the binary.
pub struct AgentParts {
    pub queue: Arc<dyn TaskQueue>,
    pub conversations: Arc<dyn ConversationStore>,
    pub outbound: Outbound,
    pub model: Arc<dyn ChatModel>,
    pub toolbox: Arc<dyn Toolbox>,
    /// Decides `TurnScope::is_admin`, from configuration only.
    pub admins: Admins,
    pub config: AgentConfig,
    pub limits: TurnLimits,
    /// The queue's lease time; the worker extends a lease at a third of it.
    pub lease: Duration,
    /// Reads a message's stored files into its prompt; `None`: files are
    /// only named.
    pub attachments: Option<Arc<crate::attachments::AttachmentReader>>,
    /// Fetches the files the gateway left waiting on the task; `None`:
    /// they stay waiting and are described as not downloaded.
    pub fetcher: Option<Arc<dyn AttachmentFetcher>>,
    /// Characters a heartbeat reply may add to `HEARTBEAT_OK` and still be
    /// an acknowledgement that is not sent
    /// ([`herald_core::heartbeat::DEFAULT_ACK_MAX_CHARS`] by default).
    pub heartbeat_ack_max_chars: usize,
}

/// Serves tasks: see the module documentation for the order of its steps.
pub struct Agent {
    parts: AgentParts,
    events: broadcast::Sender<TaskFinished>,
}

/// Told to subscribers whenever a worker is done with a task for good.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskFinished {
    pub task: TaskId,
    pub conversation: ConversationId,
    pub outcome: Finish,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    Done,
    Dead,
}

/// State key under which the last prompt's accounting of a conversation is kept.
pub const EXPLAIN_SCOPE: &str = "explain";

/// Why a task did not complete.
#[derive(Debug)]
enum Failure {
    /// Worth another attempt later.
    Retry(String),
    /// No attempt will do better.
    GiveUp(String),
}

impl Failure {
    fn store(err: StoreError) -> Self {
        Failure::Retry(err.to_string())
    }
}

impl Agent {
    pub fn new(parts: AgentParts) -> Self {
        let (events, _) = broadcast::channel(1024);
        Self { parts, events }
    }

    pub fn subscribe(&self) -> broadcast::Receiver<TaskFinished> {
        self.events.subscribe()
    }

    /// Serves one claimed task to its end: completed, retried later, or dead.
    pub async fn serve(&self, lease: Lease) {
        let task = &lease.task;
        let span = info_span!("task", task = %task.id, conversation = %task.conversation, attempt = task.attempt);
        async {
            let started = std::time::Instant::now();
            let channel = lease.task.channel.to_string();
            // How long the task waited on the queue before a worker took it.
            let waited = (chrono::Utc::now() - lease.task.enqueued_at).to_std().unwrap_or_default();
            metrics::histogram!("herald_queue_wait_seconds", "channel" => channel.clone())
                .record(waited.as_secs_f64());
            let scope = self.scope_of(&lease);
            let keeper = LeaseKeeper::start(self.parts.queue.clone(), lease.clone(), self.parts.lease);
            // A lease lost means another worker may hold the task now: the
            // turn stops where it is rather than send what that worker will.
            let result = tokio::select! {
                result = self.serve_task(&lease, &scope) => result,
                () = keeper.lost.cancelled() => {
                    warn!("lease lost mid-turn; stopping the turn and leaving the task to its new holder");
                    metrics::counter!("herald_turns_total", "channel" => channel, "outcome" => "lease_lost").increment(1);
                    return;
                }
            };
            keeper.stop.cancel();
            let result = match (result, scope.origin) {
                // A heartbeat fails closed: nothing is sent, and the next one
                // comes soon enough; a retry would hold up the target.
                (Err(Failure::Retry(reason) | Failure::GiveUp(reason)), TurnOrigin::Heartbeat { .. }) => Err(
                    Failure::GiveUp(format!("heartbeat failed and nothing was sent: {reason}")),
                ),
                (result, _) => result,
            };
            let finish = self.settle(&lease, &scope, result).await;
            let outcome_label = match finish {
                Some(Finish::Done) => "completed",
                Some(Finish::Dead) => "dead",
                None => "retried",
            };
            metrics::histogram!("herald_turn_duration_seconds", "channel" => channel.clone(), "outcome" => outcome_label)
                .record(started.elapsed().as_secs_f64());
            metrics::counter!("herald_turns_total", "channel" => channel, "outcome" => outcome_label).increment(1);
            if let Some(outcome) = finish {
                debug!(?outcome, "task finished");
                let _ = self.events.send(TaskFinished {
                    task: lease.task.id,
                    conversation: lease.task.conversation.clone(),
                    outcome,
                });
            }
        }
        .instrument(span)
        .await
    }

    /// Completes, kills or fails the task as its result says; `None` when it
    /// will be tried again (or the store could not be told). A done task's
    /// last receipt is written with its completion.
    async fn settle(&self, lease: &Lease, scope: &TurnScope, result: Result<Served, Failure>) -> Option<Finish> {
        let queue = &self.parts.queue;
        match result {
            Ok(served) => match complete(queue.as_ref(), lease, served).await {
                Ok(()) => Some(Finish::Done),
                Err(err) => {
                    warn!(error = %err, "could not complete task");
                    None
                }
            },
            Err(Failure::GiveUp(reason)) => {
                error!(reason = %reason, "task given up");
                self.notify_failure(lease, scope).await;
                match queue.kill(lease, &reason).await {
                    Ok(()) => Some(Finish::Dead),
                    Err(err) => {
                        warn!(error = %err, "could not mark task dead");
                        None
                    }
                }
            }
            Err(Failure::Retry(reason)) => match queue.fail(lease, &reason).await {
                Ok(FailOutcome::Retry { after, .. }) => {
                    warn!(reason = %reason, retry_in = ?after, "turn failed; will retry");
                    None
                }
                Ok(FailOutcome::Dead) => {
                    error!(reason = %reason, "turn failed on its last attempt");
                    self.notify_failure(lease, scope).await;
                    Some(Finish::Dead)
                }
                Err(err) => {
                    warn!(error = %err, "could not record task failure");
                    None
                }
            },
        }
    }

    /// The task's turn, recorded and delivered; or its recorded reply
    /// delivered, when an earlier attempt got as far as recording it.
    async fn serve_task(&self, lease: &Lease, scope: &TurnScope) -> Result<Served, Failure> {
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
            info!("turn was recorded before; delivering the recorded reply");
            if let Some(entry) = recorded
                .iter()
                .rev()
                .find(|e| e.role == herald_core::Role::Assistant && !e.text.trim().is_empty())
            {
                let receipt = self
                    .deliver(
                        task.id,
                        "reply",
                        scope,
                        &entry.text,
                        Receipts::Check,
                        Written::WithCompletion,
                    )
                    .await?;
                return Ok(Served { last_receipt: receipt });
            }
            return Ok(Served::default());
        }
        // A heartbeat shows no sign of life unless it has something to say.
        let typing_in = match scope.origin.quiet_limit() {
            None => parts.outbound.get(&scope.conversation.channel).map(AsRef::as_ref),
            Some(_) => None,
        };
        let (payload, prepared, outcome) = typing::while_running(typing_in, &scope.conversation, TYPING_AFTER, async {
            let payload = self.fetch_files(&task.payload).await;
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
                .run(scope, &earlier, input, turn_files.as_ref(), toolbox_state)
                .await;
            (payload, prepared, outcome)
        })
        .await;
        let mut outcome = outcome?;
        let input = turn_input(&payload, prepared.as_ref());
        if let Some(prepared) = &prepared {
            outcome.accounting.transcripts = prepared.transcripts;
            outcome.notices.splice(0..0, prepared.notices.iter().cloned());
        }
        let Some(recorded) = recording(scope.origin, input, scope.actor.as_ref(), &outcome) else {
            info!("heartbeat: nothing needs attention; nothing sent or recorded");
            return Ok(Served::default());
        };
        for (index, notice) in outcome.notices.iter().enumerate() {
            self.deliver(
                task.id,
                &format!("notice:{index}"),
                scope,
                notice,
                Receipts::Check,
                Written::Now,
            )
            .await?;
        }
        // The prompt's accounting (for `herald explain`) goes with the
        // record, in the same round trip.
        let accounting = recorded
            .explain
            .then(|| serde_json::to_value(&outcome.accounting).ok())
            .flatten();
        let first = match &accounting {
            Some(value) => {
                let state = StateWrite {
                    scope: EXPLAIN_SCOPE,
                    key: scope.conversation.id.as_str(),
                    value,
                };
                conversations
                    .record_turn_with_state(&scope.conversation.id, task.id, &recorded.entries, state)
                    .await
            }
            None => {
                conversations
                    .record_turn(&scope.conversation.id, task.id, &recorded.entries)
                    .await
            }
        }
        .map_err(Failure::store)?;
        if let Some(text) = recorded.reply.filter(|t| !t.trim().is_empty()) {
            // The reply slot is sent only after its turn is recorded, so a
            // turn this attempt recorded first has no receipt to look for.
            let receipts = if first { Receipts::NoneYet } else { Receipts::Check };
            let receipt = self
                .deliver(task.id, "reply", scope, &text, receipts, Written::WithCompletion)
                .await?;
            return Ok(Served { last_receipt: receipt });
        }
        Ok(Served::default())
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
    async fn prepare_files(&self, payload: &TaskPayload) -> Option<crate::attachments::PreparedInput> {
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
        };
        run_turn(parts.model.as_ref(), parts.toolbox.as_ref(), request)
            .await
            .map_err(|err| match err.retry_class_fatal() {
                true => Failure::GiveUp(err.to_string()),
                false => Failure::Retry(err.to_string()),
            })
    }

    /// Sends one slot of a task's output once: skipped when a receipt exists.
    /// Returns the receipt when it is to be written with the completion.
    async fn deliver(
        &self,
        task: TaskId,
        slot: &str,
        scope: &TurnScope,
        text: &str,
        receipts: Receipts,
        written: Written,
    ) -> Result<Option<DeliveryReceipt>, Failure> {
        let conversations = &self.parts.conversations;
        if receipts == Receipts::Check
            && conversations
                .delivery(task, slot)
                .await
                .map_err(Failure::store)?
                .is_some()
        {
            debug!(slot, "already delivered");
            return Ok(None);
        }
        let message = OutboundMessage {
            conversation: scope.conversation.clone(),
            text: text.to_owned(),
            reply_to: scope.reply_to.clone(),
            idempotency_key: Some(format!("task:{task}:{slot}")),
            files: Vec::new(),
        };
        let sent = self
            .parts
            .outbound
            .send(&message)
            .await
            .map_err(|err| match err.retry_class() {
                RetryClass::Fatal => Failure::GiveUp(format!("sending {slot} failed: {err}")),
                _ => Failure::Retry(format!("sending {slot} failed: {err}")),
            })?;
        let receipt = DeliveryReceipt {
            task,
            slot: slot.to_owned(),
            conversation: scope.conversation.id.clone(),
            platform_message_ids: sent.platform_message_ids,
            delivered_at: chrono::Utc::now(),
        };
        match written {
            Written::WithCompletion => {
                debug!(
                    slot,
                    chars = text.chars().count(),
                    "sent; the receipt goes with the completion"
                );
                Ok(Some(receipt))
            }
            Written::Now => {
                conversations.record_delivery(&receipt).await.map_err(Failure::store)?;
                info!(slot, chars = text.chars().count(), "delivered");
                Ok(None)
            }
        }
    }

    /// Tells the user their message could not be handled, once.
    async fn notify_failure(&self, lease: &Lease, scope: &TurnScope) {
        if !matches!(lease.task.payload, TaskPayload::Message(_)) {
            return;
        }
        if let Err(err) = self
            .deliver(
                lease.task.id,
                "failure",
                scope,
                &self.parts.config.failure_notice,
                Receipts::Check,
                Written::Now,
            )
            .await
        {
            warn!(error = ?err, "could not tell the user about the failure");
        }
    }

    fn scope_of(&self, lease: &Lease) -> TurnScope {
        let (conversation, actor, reply_to, origin, files) = match &lease.task.payload {
            TaskPayload::Message(message) => (
                message.conversation.clone(),
                Some(message.sender.id.clone()),
                Some(message.platform_message_id.clone()),
                TurnOrigin::Person,
                MessageFile::of(&message.attachments),
            ),
            TaskPayload::Instruction {
                conversation,
                actor,
                origin,
                ..
            } => (
                conversation.clone(),
                actor.clone(),
                None,
                match origin {
                    InstructionOrigin::Schedule { .. } => TurnOrigin::Schedule,
                    InstructionOrigin::Heartbeat => TurnOrigin::Heartbeat {
                        ack_max_chars: self.parts.heartbeat_ack_max_chars,
                    },
                },
                Vec::new(),
            ),
        };
        let is_admin = actor.as_ref().is_some_and(|actor| self.parts.admins.contains(actor));
        TurnScope {
            task: lease.task.id,
            conversation,
            actor,
            is_admin,
            reply_to,
            origin,
            files,
        }
    }
}

/// Completes a served task, with its last receipt when it has one.
/// "delivered" is logged once a receipt is stored, as for every slot.
async fn complete(queue: &dyn TaskQueue, lease: &Lease, served: Served) -> Result<(), StoreError> {
    let Some(receipt) = served.last_receipt else {
        return queue.complete(lease).await;
    };
    let completed = queue.complete_delivered(lease, &receipt).await;
    if matches!(completed, Ok(()) | Err(StoreError::LeaseLost(_))) {
        info!(slot = %receipt.slot, "delivered");
    }
    completed
}

/// What a served task leaves for its completion.
#[derive(Debug, Default)]
struct Served {
    /// The receipt of its last message, written with the completion (one
    /// round trip instead of two).
    last_receipt: Option<DeliveryReceipt>,
}

/// When a slot's receipt is written: right after the send, or with the
/// task's completion (the reply, the task's last send). Either way before
/// the task is done, so a retry finds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Written {
    Now,
    WithCompletion,
}

/// Whether a slot may have a receipt already, and must be looked up first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Receipts {
    Check,
    /// The slot cannot have been sent before (see `serve_task`).
    NoneYet,
}

/// History before this task, and the entries an earlier attempt of the task
/// recorded (empty when none did).
fn split_recorded(history: Vec<HistoryEntry>, task: TaskId) -> (Vec<HistoryEntry>, Vec<HistoryEntry>) {
    history.into_iter().partition(|entry| entry.task != Some(task))
}

/// What the turn reads: the message with its files' text when they were
/// prepared, else the payload's own text.
fn turn_input<'a>(
    payload: &'a TaskPayload,
    prepared: Option<&'a crate::attachments::PreparedInput>,
) -> Option<&'a str> {
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
