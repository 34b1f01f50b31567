//! Queue workers: claim a task, run its turn, record it, deliver the reply,
//! complete the task.
//!
//! The order of those steps is what keeps Herald's promises across crashes:
//! - the turn is recorded in history (the outbox) before anything is sent, so
//!   a task retried after a crash re-sends the recorded reply instead of
//!   asking the model again;
//! - each message a task sends has a delivery slot with a receipt, checked
//!   before sending and written right after, so a retried task does not send
//!   a slot twice;
//! - the task is completed only after its receipts are written.
//!
//! A worker keeps its lease alive while a turn runs, so a slow model does not
//! let a second worker serve the same task.
//!
//! Heartbeat turns are quiet by construction: they run inside
//! [`quiet_replies`], so whatever they send passes the `HEARTBEAT_OK` rule;
//! their final reply passes it before anything is recorded or sent; a silent
//! turn leaves no history; and a failed one is given up without telling
//! anyone (it must not wait in backoff ahead of the target's own messages).

use std::sync::Arc;
use std::time::Duration;

use herald_core::heartbeat::{DEFAULT_ACK_MAX_CHARS, quiet_replies, strip_ok_token};
use herald_core::{
    Admins, ChatModel, ClaimFilter, ConversationId, ConversationStore, DeliveryReceipt, FailOutcome, HistoryEntry,
    InstructionOrigin, Lease, NewHistoryEntry, Outbound, OutboundMessage, Role, StoreError, TaskId, TaskPayload,
    TaskQueue, Toolbox, TurnOrigin, TurnScope,
};
use tokio::sync::broadcast;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, error, info, info_span, warn};

use crate::config::{AgentConfig, TurnLimits};
use crate::turn::{TurnOutcome, TurnRequest, run_turn};

/// Everything a worker needs, wired by the binary.
pub struct Agent {
    pub queue: Arc<dyn TaskQueue>,
    pub conversations: Arc<dyn ConversationStore>,
    pub outbound: Outbound,
    pub model: Arc<dyn ChatModel>,
    pub toolbox: Arc<dyn Toolbox>,
    pub admins: Admins,
    pub config: AgentConfig,
    pub limits: TurnLimits,
    /// The queue's lease time; the worker extends a lease at a third of it.
    pub lease: Duration,
    /// Characters a heartbeat reply may add to `HEARTBEAT_OK` and still be
    /// an acknowledgement that is not sent.
    pub heartbeat_ack_max_chars: usize,
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

#[allow(clippy::too_many_arguments)]
impl Agent {
    pub fn new(
        queue: Arc<dyn TaskQueue>,
        conversations: Arc<dyn ConversationStore>,
        outbound: Outbound,
        model: Arc<dyn ChatModel>,
        toolbox: Arc<dyn Toolbox>,
        admins: Admins,
        config: AgentConfig,
        limits: TurnLimits,
        lease: Duration,
    ) -> Self {
        let (events, _) = broadcast::channel(1024);
        Self {
            queue,
            conversations,
            outbound,
            model,
            toolbox,
            admins,
            config,
            limits,
            lease,
            heartbeat_ack_max_chars: DEFAULT_ACK_MAX_CHARS,
            events,
        }
    }

    pub fn with_heartbeat_ack_max_chars(mut self, ack_max_chars: usize) -> Self {
        self.heartbeat_ack_max_chars = ack_max_chars;
        self
    }

    /// The `HEARTBEAT_OK` limit when the task is a heartbeat.
    fn heartbeat_limit(&self, payload: &TaskPayload) -> Option<usize> {
        matches!(
            payload,
            TaskPayload::Instruction {
                origin: InstructionOrigin::Heartbeat,
                ..
            }
        )
        .then_some(self.heartbeat_ack_max_chars)
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
            let keeper = self.keep_lease_alive(lease.clone());
            let heartbeat = self.heartbeat_limit(&lease.task.payload);
            let turn = async {
                match heartbeat {
                    Some(limit) => quiet_replies(limit, self.serve_inner(&lease, Some(limit)))
                        .await
                        .map_err(|failure| {
                            // Fail closed: nothing is sent, and the next heartbeat
                            // comes soon enough; a retry would hold up the target.
                            match failure {
                                Failure::Retry(reason) | Failure::GiveUp(reason) => {
                                    Failure::GiveUp(format!("heartbeat failed and nothing was sent: {reason}"))
                                }
                            }
                        }),
                    None => self.serve_inner(&lease, None).await,
                }
            };
            // A lease lost (this process stalled past it, or the store said
            // so) means another worker may hold the task now: the turn stops
            // where it is rather than send what that worker will send.
            let result = tokio::select! {
                result = turn => result,
                () = keeper.lost.cancelled() => {
                    warn!("lease lost mid-turn; stopping the turn and leaving the task to its new holder");
                    metrics::counter!("herald_turns_total", "channel" => channel, "outcome" => "lease_lost").increment(1);
                    return;
                }
            };
            keeper.stop.cancel();
            let finish = match result {
                Ok(()) => match self.queue.complete(&lease).await {
                    Ok(()) => Some(Finish::Done),
                    Err(err) => {
                        warn!(error = %err, "could not complete task");
                        None
                    }
                },
                Err(Failure::GiveUp(reason)) => {
                    error!(reason = %reason, "task given up");
                    self.notify_failure(&lease).await;
                    match self.queue.kill(&lease, &reason).await {
                        Ok(()) => Some(Finish::Dead),
                        Err(err) => {
                            warn!(error = %err, "could not mark task dead");
                            None
                        }
                    }
                }
                Err(Failure::Retry(reason)) => match self.queue.fail(&lease, &reason).await {
                    Ok(FailOutcome::Retry { after, .. }) => {
                        warn!(reason = %reason, retry_in = ?after, "turn failed; will retry");
                        None
                    }
                    Ok(FailOutcome::Dead) => {
                        error!(reason = %reason, "turn failed on its last attempt");
                        self.notify_failure(&lease).await;
                        Some(Finish::Dead)
                    }
                    Err(err) => {
                        warn!(error = %err, "could not record task failure");
                        None
                    }
                },
            };
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

    /// `heartbeat` is the `HEARTBEAT_OK` limit of a heartbeat task.
    async fn serve_inner(&self, lease: &Lease, heartbeat: Option<usize>) -> Result<(), Failure> {
        let task = &lease.task;
        if task.attempt > task.max_attempts {
            return Err(Failure::GiveUp(format!(
                "claimed {} times without finishing (the worker kept stopping)",
                task.attempt - 1
            )));
        }
        let scope = self.scope_of(lease);
        let conversation = &scope.conversation;
        let recorded = self.conversations.task_entries(task.id).await.map_err(Failure::store)?;
        let reply = match recorded.iter().rev().find(|e| e.role == Role::Assistant) {
            Some(entry) => {
                info!("turn was recorded before; delivering the recorded reply");
                Some(entry.text.clone())
            }
            None => {
                // A heartbeat shows no sign of life unless it has something to say.
                if heartbeat.is_none()
                    && let Some(channel) = self.outbound.get(&conversation.channel)
                    && let Err(err) = channel.typing(conversation).await
                {
                    debug!(error = %err, "typing indicator failed");
                }
                let outcome = self.run(&scope, lease).await?;
                let mut reply = outcome.reply_to_send().map(str::to_owned);
                let mut entries = Vec::with_capacity(2);
                if let Some(limit) = heartbeat {
                    reply = reply.and_then(|text| strip_ok_token(&text, limit));
                    // What the turn said, by tools and in its reply (last, so
                    // a retry re-sends only the reply), is kept; the
                    // checklist prompt is not.
                    entries.extend(
                        outcome
                            .delivered_by_tools
                            .iter()
                            .filter_map(|text| strip_ok_token(text, limit))
                            .chain(reply.clone())
                            .map(|text| NewHistoryEntry {
                                role: Role::Assistant,
                                actor: None,
                                text,
                            }),
                    );
                    if entries.is_empty() {
                        info!("heartbeat: nothing needs attention; nothing sent or recorded");
                        return Ok(());
                    }
                } else {
                    if let Some(text) = input_text(&task.payload) {
                        entries.push(NewHistoryEntry {
                            role: Role::User,
                            actor: scope.actor.clone(),
                            text: text.to_owned(),
                        });
                    }
                    entries.push(NewHistoryEntry {
                        role: Role::Assistant,
                        actor: None,
                        text: reply.clone().unwrap_or_else(|| outcome.text.clone()),
                    });
                }
                for (index, notice) in outcome.notices.iter().enumerate() {
                    self.deliver(task.id, &format!("notice:{index}"), &scope, notice)
                        .await?;
                }
                self.conversations
                    .record_turn(&conversation.id, task.id, &entries)
                    .await
                    .map_err(Failure::store)?;
                if !outcome.direct
                    && heartbeat.is_none()
                    && let Ok(value) = serde_json::to_value(&outcome.accounting)
                    && let Err(err) = self
                        .conversations
                        .put_state(EXPLAIN_SCOPE, conversation.id.as_str(), &value)
                        .await
                {
                    debug!(error = %err, "could not store prompt accounting");
                }
                reply
            }
        };
        if let Some(text) = reply.filter(|t| !t.trim().is_empty()) {
            self.deliver(task.id, "reply", &scope, &text).await?;
        }
        Ok(())
    }

    async fn run(&self, scope: &TurnScope, lease: &Lease) -> Result<TurnOutcome, Failure> {
        let history: Vec<HistoryEntry> = self
            .conversations
            .history(&scope.conversation.id, self.config.history_limit)
            .await
            .map_err(Failure::store)?;
        let input = input_text(&lease.task.payload);
        let request = TurnRequest {
            scope,
            system_prompt: &self.config.system_prompt,
            history: &history,
            input,
            limits: self.limits,
            max_identical_calls: self.config.max_identical_calls,
        };
        run_turn(self.model.as_ref(), self.toolbox.as_ref(), request)
            .await
            .map_err(|err| match err.retry_class_fatal() {
                true => Failure::GiveUp(err.to_string()),
                false => Failure::Retry(err.to_string()),
            })
    }

    /// Sends one slot of a task's output once: skipped when a receipt exists.
    async fn deliver(&self, task: TaskId, slot: &str, scope: &TurnScope, text: &str) -> Result<(), Failure> {
        if self
            .conversations
            .delivery(task, slot)
            .await
            .map_err(Failure::store)?
            .is_some()
        {
            debug!(slot, "already delivered");
            return Ok(());
        }
        let message = OutboundMessage {
            conversation: scope.conversation.clone(),
            text: text.to_owned(),
            reply_to: scope.reply_to.clone(),
            idempotency_key: Some(format!("task:{task}:{slot}")),
        };
        let sent = self
            .outbound
            .send(&message)
            .await
            .map_err(|err| match err.retry_class() {
                herald_core::RetryClass::Fatal => Failure::GiveUp(format!("sending {slot} failed: {err}")),
                _ => Failure::Retry(format!("sending {slot} failed: {err}")),
            })?;
        let receipt = DeliveryReceipt {
            task,
            slot: slot.to_owned(),
            conversation: scope.conversation.id.clone(),
            platform_message_ids: sent.platform_message_ids,
            delivered_at: chrono::Utc::now(),
        };
        self.conversations
            .record_delivery(&receipt)
            .await
            .map_err(Failure::store)?;
        info!(slot, chars = text.chars().count(), "delivered");
        Ok(())
    }

    /// Tells the user their message could not be handled, once.
    async fn notify_failure(&self, lease: &Lease) {
        if !matches!(lease.task.payload, TaskPayload::Message(_)) {
            return;
        }
        let scope = self.scope_of(lease);
        if let Err(err) = self
            .deliver(lease.task.id, "failure", &scope, &self.config.failure_notice)
            .await
        {
            warn!(error = ?err, "could not tell the user about the failure");
        }
    }

    fn scope_of(&self, lease: &Lease) -> TurnScope {
        let (conversation, actor, reply_to, origin) = match &lease.task.payload {
            TaskPayload::Message(message) => (
                message.conversation.clone(),
                Some(message.sender.id.clone()),
                Some(message.platform_message_id.clone()),
                TurnOrigin::Person,
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
                    InstructionOrigin::Heartbeat => TurnOrigin::Heartbeat,
                },
            ),
        };
        let is_admin = actor.as_ref().is_some_and(|actor| self.admins.contains(actor));
        TurnScope {
            task: lease.task.id,
            conversation,
            actor,
            is_admin,
            reply_to,
            origin,
        }
    }

    fn keep_lease_alive(&self, mut lease: Lease) -> LeaseKeeper {
        let keeper = LeaseKeeper {
            stop: CancellationToken::new(),
            lost: CancellationToken::new(),
        };
        let queue = self.queue.clone();
        let every = (self.lease / 3).max(Duration::from_millis(100));
        let (stopped, lost) = (keeper.stop.clone(), keeper.lost.clone());
        tokio::spawn(
            async move {
                loop {
                    tokio::select! {
                        _ = stopped.cancelled() => return,
                        _ = tokio::time::sleep(every) => {}
                    }
                    if let Err(err) = queue.extend(&mut lease).await {
                        warn!(error = %err, "could not extend lease");
                        if matches!(err, StoreError::LeaseLost(_)) {
                            lost.cancel();
                            return;
                        }
                    }
                }
            }
            .in_current_span(),
        );
        keeper
    }
}

/// The task that keeps one lease alive while its turn runs.
struct LeaseKeeper {
    /// Cancelled by the worker when the turn is over.
    stop: CancellationToken,
    /// Cancelled by the keeper when the store says the lease is gone.
    lost: CancellationToken,
}

fn input_text(payload: &TaskPayload) -> Option<&str> {
    match payload {
        TaskPayload::Message(message) => Some(&message.text),
        TaskPayload::Instruction { instruction, .. } => Some(instruction),
    }
}

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

/// Workers claiming from the queue until told to stop.
pub struct WorkerPool {
    stop_claiming: CancellationToken,
    abort: CancellationToken,
    workers: JoinSet<()>,
}

impl WorkerPool {
    pub fn start(agent: Arc<Agent>, filter: ClaimFilter, count: usize) -> Self {
        let stop_claiming = CancellationToken::new();
        let abort = CancellationToken::new();
        let mut workers = JoinSet::new();
        for index in 0..count.max(1) {
            let agent = agent.clone();
            let filter = filter.clone();
            let stop = stop_claiming.clone();
            let abort = abort.clone();
            workers.spawn(
                async move { worker_loop(agent, filter, stop, abort).await }.instrument(info_span!("worker", index)),
            );
        }
        Self {
            stop_claiming,
            abort,
            workers,
        }
    }

    /// Stops claiming, waits for turns in flight up to `drain`, then gives
    /// the leases of unfinished turns back to the queue.
    pub async fn shutdown(mut self, drain: Duration) {
        self.stop_claiming.cancel();
        let drained = tokio::time::timeout(drain, async { while self.workers.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            warn!(
                ?drain,
                "turns still running at the drain deadline; releasing their tasks"
            );
            self.abort.cancel();
            while self.workers.join_next().await.is_some() {}
        }
    }
}

async fn worker_loop(agent: Arc<Agent>, filter: ClaimFilter, stop: CancellationToken, abort: CancellationToken) {
    let mut error_backoff = Duration::from_millis(200);
    while !stop.is_cancelled() {
        match agent.queue.claim(&filter).await {
            Ok(Some(lease)) => {
                error_backoff = Duration::from_millis(200);
                tokio::select! {
                    _ = agent.serve(lease.clone()) => {}
                    _ = abort.cancelled() => {
                        if let Err(err) = agent.queue.release(&lease).await {
                            warn!(error = %err, task = %lease.task.id, "could not release task at shutdown");
                        }
                        return;
                    }
                }
            }
            Ok(None) => {
                tokio::select! {
                    _ = agent.queue.wait_for_work(Duration::from_secs(30)) => {}
                    _ = stop.cancelled() => {}
                }
            }
            Err(err) => {
                warn!(error = %err, "claiming a task failed");
                tokio::select! {
                    _ = tokio::time::sleep(error_backoff) => {}
                    _ = stop.cancelled() => {}
                }
                error_backoff = (error_backoff * 2).min(Duration::from_secs(10));
            }
        }
    }
}
