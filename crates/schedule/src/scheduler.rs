//! The scheduler loop: every tick it queues the schedules that are due and,
//! when its interval has come, the heartbeat. It only ever enqueues; the
//! agent's workers serve what it queued like any message.
//!
//! Every task it queues carries a run key as its dedup key (schedule and due
//! time, or heartbeat target and interval), so a tick repeated after a crash,
//! or the same tick in several processes sharing a database, queues a run
//! once. Time comes from the injected [`Clock`]; tests call [`Scheduler::tick`]
//! after moving a manual clock.

use std::sync::{Arc, Mutex};

use herald_core::{
    ActorId, Admins, ClaimFilter, Clock, ConversationKind, ConversationRef, ConversationStore, Enqueued,
    InstructionOrigin, NewTask, Role, ScheduleId, ScheduleStore, TaskPayload, TaskQueue, Timestamp,
};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::heartbeat::{HeartbeatConfig, checklist_is_empty, heartbeat_slot};
use crate::runs::{ScheduleConfig, heartbeat_run_key, run_key, settle};
use crate::service::read;

/// Scheduled runs go after people's messages (priority 0).
pub const SCHEDULE_PRIORITY: i32 = 1;
/// Heartbeats go after scheduled runs.
pub const HEARTBEAT_PRIORITY: i32 = 2;

/// Due schedules looked at per tick; the rest wait for the next one.
const DUE_PER_TICK: usize = 100;

/// What one tick did, for logs and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TickReport {
    /// Runs queued (or found queued already), with their due time.
    pub fired: Vec<(ScheduleId, Timestamp)>,
    /// Missed runs dropped by the `skip` policy.
    pub skipped: Vec<(ScheduleId, Timestamp)>,
    pub heartbeat: HeartbeatOutcome,
}

/// What became of the heartbeat in a tick.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum HeartbeatOutcome {
    #[default]
    Disabled,
    /// This interval's heartbeat was dealt with already.
    AlreadyHandled,
    OutsideActiveHours,
    /// No `heartbeat.target` and no admin to default to.
    NoTarget,
    /// The target has never written to Herald, so where it lives is unknown.
    UnknownTarget,
    /// The default target turned out to be a group.
    GroupNotAllowed,
    /// Nothing to check: no model call is made.
    EmptyChecklist,
    /// The target has a turn in flight (a message, or the last heartbeat).
    Deferred,
    Queued(Enqueued),
    /// The store could not be asked; tried again next tick.
    Failed(String),
}

#[derive(Debug, Default)]
struct HeartbeatState {
    handled_slot: Option<Timestamp>,
    /// The last outcome warned about, so a lasting problem is logged once.
    warned: Option<HeartbeatOutcome>,
}

pub struct Scheduler {
    schedules: Arc<dyn ScheduleStore>,
    queue: Arc<dyn TaskQueue>,
    conversations: Arc<dyn ConversationStore>,
    clock: Arc<dyn Clock>,
    admins: Admins,
    config: ScheduleConfig,
    heartbeat: HeartbeatConfig,
    state: Mutex<HeartbeatState>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("config", &self.config)
            .field("heartbeat", &self.heartbeat)
            .finish_non_exhaustive()
    }
}

impl Scheduler {
    pub fn new(
        schedules: Arc<dyn ScheduleStore>,
        queue: Arc<dyn TaskQueue>,
        conversations: Arc<dyn ConversationStore>,
        clock: Arc<dyn Clock>,
        admins: Admins,
        config: ScheduleConfig,
        heartbeat: HeartbeatConfig,
    ) -> Self {
        Self {
            schedules,
            queue,
            conversations,
            clock,
            admins,
            config,
            heartbeat,
            state: Mutex::new(HeartbeatState::default()),
        }
    }

    /// Ticks every `schedules.tick` until `shutdown` is cancelled.
    pub async fn run(&self, shutdown: CancellationToken) {
        info!(
            tick = ?self.config.tick,
            heartbeat = ?self.heartbeat.enabled().then_some(self.heartbeat.every),
            "scheduler started"
        );
        loop {
            let report = self.tick().await;
            if !report.fired.is_empty() || !report.skipped.is_empty() {
                debug!(
                    fired = report.fired.len(),
                    skipped = report.skipped.len(),
                    "scheduler tick"
                );
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(self.config.tick) => {}
            }
        }
        info!("scheduler stopped");
    }

    /// One pass: due schedules, then the heartbeat.
    pub async fn tick(&self) -> TickReport {
        let now = self.clock.now();
        let mut report = TickReport::default();
        self.fire_due_schedules(now, &mut report).await;
        report.heartbeat = self.heartbeat_tick(now).await;
        report
    }

    async fn fire_due_schedules(&self, now: Timestamp, report: &mut TickReport) {
        let due = match self.schedules.due(now, DUE_PER_TICK).await {
            Ok(due) => due,
            Err(err) => {
                warn!(error = %err, "could not read due schedules");
                return;
            }
        };
        for schedule in due {
            let Some(due_at) = schedule.next_run_at else { continue };
            let id = schedule.id;
            let listed = match read(schedule) {
                Ok(listed) => listed,
                Err(err) => {
                    // It can never run; finish it rather than meet it every tick.
                    warn!(schedule = %id, error = %err, "unreadable schedule finished without running");
                    let _ = self.schedules.mark_fired(id, due_at, None).await;
                    continue;
                }
            };
            let decision = settle(&listed.spec, due_at, now, &self.config);
            if decision.fire {
                let schedule = &listed.schedule;
                let task = NewTask {
                    payload: TaskPayload::Instruction {
                        conversation: schedule.conversation.clone(),
                        instruction: schedule.instruction.clone(),
                        actor: schedule.actor.clone(),
                        origin: InstructionOrigin::Schedule { schedule_id: id.0 },
                    },
                    dedup_key: Some(run_key(id.0, due_at)),
                    priority: SCHEDULE_PRIORITY,
                    not_before: None,
                };
                match self.queue.enqueue(task).await {
                    Ok(enqueued) => {
                        info!(schedule = %id, due = %due_at, missed = decision.missed, ?enqueued, "scheduled run queued");
                        report.fired.push((id, due_at));
                    }
                    Err(err) => {
                        // Not moved on: the next tick tries the same run again.
                        warn!(schedule = %id, error = %err, "could not queue a scheduled run");
                        continue;
                    }
                }
            } else {
                info!(schedule = %id, due = %due_at, "missed run skipped");
                report.skipped.push((id, due_at));
            }
            match self.schedules.mark_fired(id, due_at, decision.next).await {
                Ok(true) if decision.next.is_none() => info!(schedule = %id, "schedule finished: no run left"),
                Ok(true) => {}
                Ok(false) => debug!(schedule = %id, "another process moved this schedule on first"),
                Err(err) => warn!(schedule = %id, error = %err, "could not move a schedule past its run"),
            }
        }
    }

    async fn heartbeat_tick(&self, now: Timestamp) -> HeartbeatOutcome {
        if !self.heartbeat.enabled() {
            return HeartbeatOutcome::Disabled;
        }
        let slot = heartbeat_slot(self.heartbeat.every, now);
        if self.state().handled_slot == Some(slot) {
            return HeartbeatOutcome::AlreadyHandled;
        }
        // Checked every tick, so a heartbeat runs as soon as the hours begin.
        if let Some(hours) = &self.heartbeat.active_hours
            && !hours.contains(now)
        {
            return HeartbeatOutcome::OutsideActiveHours;
        }
        let outcome = self.try_heartbeat(slot).await;
        let settled = !matches!(
            outcome,
            HeartbeatOutcome::Deferred | HeartbeatOutcome::Failed(_) | HeartbeatOutcome::UnknownTarget
        );
        let mut state = self.state();
        if settled {
            state.handled_slot = Some(slot);
        }
        match &outcome {
            HeartbeatOutcome::NoTarget
            | HeartbeatOutcome::UnknownTarget
            | HeartbeatOutcome::GroupNotAllowed
            | HeartbeatOutcome::Failed(_)
                if state.warned.as_ref() != Some(&outcome) =>
            {
                // A target the operator chose and cannot be reached is a
                // problem; the default (the first admin) not being usable
                // yet is how a new install starts.
                if self.heartbeat.target.is_some() || matches!(outcome, HeartbeatOutcome::Failed(_)) {
                    warn!(outcome = ?outcome, "heartbeat did not run");
                } else {
                    info!(
                        outcome = ?outcome,
                        "heartbeat idle: no usable target yet (set heartbeat.target, or an admin writes to Herald first)"
                    );
                }
                state.warned = Some(outcome.clone());
            }
            HeartbeatOutcome::Queued(_) => state.warned = None,
            _ => {}
        }
        outcome
    }

    async fn try_heartbeat(&self, slot: Timestamp) -> HeartbeatOutcome {
        // Nothing to check means nothing to do, wherever it would go: a
        // Herald without a checklist stays idle and says nothing.
        let checklist = match tokio::fs::read_to_string(&self.heartbeat.file).await {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(err) => {
                return HeartbeatOutcome::Failed(format!("reading {}: {err}", self.heartbeat.file.display()));
            }
        };
        if checklist_is_empty(&checklist) {
            debug!(file = %self.heartbeat.file.display(), "heartbeat checklist is empty; no model call");
            return HeartbeatOutcome::EmptyChecklist;
        }
        let Some(target) = self.heartbeat.target_or_default(&self.admins) else {
            return HeartbeatOutcome::NoTarget;
        };
        let reference = match self.conversations.conversation(&target.conversation).await {
            Ok(Some(reference)) => reference,
            Ok(None) => return HeartbeatOutcome::UnknownTarget,
            Err(err) => return HeartbeatOutcome::Failed(err.to_string()),
        };
        if target.is_default && reference.kind == ConversationKind::Group {
            return HeartbeatOutcome::GroupNotAllowed;
        }
        match self
            .queue
            .pending(&ClaimFilter::conversation(reference.id.clone()))
            .await
        {
            Ok(0) => {}
            Ok(_) => {
                debug!(conversation = %reference.id, "heartbeat deferred: the target has a turn in flight");
                return HeartbeatOutcome::Deferred;
            }
            Err(err) => return HeartbeatOutcome::Failed(err.to_string()),
        }
        let task = NewTask {
            payload: TaskPayload::Instruction {
                actor: self.heartbeat_actor(&reference).await,
                conversation: reference.clone(),
                instruction: self.heartbeat.instruction(&checklist),
                origin: InstructionOrigin::Heartbeat,
            },
            dedup_key: Some(heartbeat_run_key(&reference.id, slot)),
            priority: HEARTBEAT_PRIORITY,
            not_before: None,
        };
        match self.queue.enqueue(task).await {
            Ok(enqueued) => {
                info!(conversation = %reference.id, ?enqueued, "heartbeat queued");
                HeartbeatOutcome::Queued(enqueued)
            }
            Err(err) => HeartbeatOutcome::Failed(err.to_string()),
        }
    }

    /// Heartbeats act with the target's permissions: the admin whose direct
    /// conversation it is, or the person last seen in a direct conversation;
    /// in a group, nobody's.
    async fn heartbeat_actor(&self, reference: &ConversationRef) -> Option<ActorId> {
        let own = ActorId::new(reference.id.as_str());
        if self.admins.contains(&own) {
            return Some(own);
        }
        if reference.kind != ConversationKind::Direct {
            return None;
        }
        let history = self.conversations.history(&reference.id, 50).await.ok()?;
        history
            .into_iter()
            .rev()
            .find(|entry| entry.role == Role::User)
            .and_then(|entry| entry.actor)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, HeartbeatState> {
        self.state.lock().expect("scheduler state lock")
    }
}
