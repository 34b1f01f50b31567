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
mod outbox;
mod pool;
mod record;
mod serve;
mod stream;
mod typing;

use std::sync::Arc;
use std::time::Duration;

use herald_core::{
    Admins, AttachmentFetcher, ChatModel, ConversationId, ConversationStore, FailOutcome, InstructionOrigin, Lease,
    MessageFile, Outbound, StoreError, TaskId, TaskPayload, TaskQueue, Toolbox, TurnOrigin, TurnScope,
};
use tokio::sync::broadcast;
use tracing::{Instrument, debug, error, info_span, warn};

use self::lease::LeaseKeeper;
use self::outbox::{Served, complete};
pub use self::pool::WorkerPool;
use crate::config::{AgentConfig, TurnLimits};

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
    /// The model streams (`llm.stream`): answers are shown while they are
    /// written, on channels that stream into place.
    pub stream_replies: bool,
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
