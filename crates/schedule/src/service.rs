//! Creating, listing and cancelling schedules: what the `schedule_task`,
//! `list_schedules` and `cancel_schedule` skills, the `/schedule` chat
//! command and `herald schedule` all go through, so a schedule is checked
//! the same way wherever it comes from.
//!
//! Who may do what is decided by the caller; this service offers the two
//! kinds of request: unbounded ones for admins and the operator, and
//! bounded ones for everyone else ([`ScheduleLimits`]: how often, how many),
//! whose listing and cancelling reach only their own schedules in their own
//! conversation, and never say whether anyone else's exists.

use std::sync::Arc;

use herald_core::{
    ActorId, Clock, ConversationId, ConversationRef, NewSchedule, Schedule, ScheduleId, ScheduleStore, StoreError,
    Timestamp,
};

use crate::runs::ScheduleLimits;
use crate::spec::{ScheduleSpec, SpecError};

/// The most characters an instruction may have.
pub const MAX_INSTRUCTION_CHARS: usize = 4000;

#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error("a schedule needs an instruction: what should Herald do when it runs?")]
    NoInstruction,
    #[error("the instruction is longer than {MAX_INSTRUCTION_CHARS} characters")]
    InstructionTooLong,
    #[error("no schedule {0} here")]
    NotFound(ScheduleId),
    #[error(
        "a schedule may run at most once every {min}; this one would run {shortest} apart (only admins may schedule more often)"
    )]
    TooFrequent { shortest: String, min: String },
    #[error("you have {max} schedules with runs to come, the most allowed; cancel one first")]
    TooMany { max: usize },
    #[error("stored schedule {id} is unreadable: {reason}")]
    Unreadable { id: ScheduleId, reason: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A stored schedule with its timing read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    pub schedule: Schedule,
    pub spec: ScheduleSpec,
}

impl Listed {
    /// One line for `/schedule list` and `herald schedule list`.
    pub fn line(&self) -> String {
        let next = self.schedule.next_run_at.map_or_else(
            || "no run left".to_owned(),
            |at| format!("next {}", at.format("%Y-%m-%d %H:%M UTC")),
        );
        format!(
            "#{} {} ({next}) in {}: {}",
            self.schedule.id,
            self.spec,
            self.schedule.conversation.id,
            one_line(&self.schedule.instruction, 80)
        )
    }
}

fn one_line(text: &str, max_chars: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max_chars {
        flat
    } else {
        format!("{}…", flat.chars().take(max_chars).collect::<String>())
    }
}

/// Schedules over the store, with the clock that decides what "now" is and
/// the limits of non-admins.
#[derive(Clone)]
pub struct Schedules {
    store: Arc<dyn ScheduleStore>,
    clock: Arc<dyn Clock>,
    limits: ScheduleLimits,
    /// Held from counting a non-admin's schedules to storing the new one, so
    /// calls at once (a model's parallel tool calls) cannot all pass the
    /// count. Shared by the clones the skills and commands hold.
    counting: Arc<tokio::sync::Mutex<()>>,
}

impl std::fmt::Debug for Schedules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schedules").finish_non_exhaustive()
    }
}

impl Schedules {
    /// Schedules with the default limits for non-admins.
    pub fn new(store: Arc<dyn ScheduleStore>, clock: Arc<dyn Clock>) -> Self {
        Self {
            store,
            clock,
            limits: ScheduleLimits::default(),
            counting: Arc::default(),
        }
    }

    /// The limits of [`Schedules::add_within`] (`schedules.min_interval`,
    /// `schedules.max_per_user`).
    pub fn with_limits(mut self, limits: ScheduleLimits) -> Self {
        self.limits = limits;
        self
    }

    pub fn limits(&self) -> ScheduleLimits {
        self.limits
    }

    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Checks and stores a schedule whose runs go to `conversation` and act
    /// as `actor`.
    pub async fn add(
        &self,
        conversation: ConversationRef,
        actor: Option<ActorId>,
        spec: ScheduleSpec,
        instruction: &str,
    ) -> Result<Listed, ScheduleError> {
        let instruction = instruction.trim();
        if instruction.is_empty() {
            return Err(ScheduleError::NoInstruction);
        }
        if instruction.chars().count() > MAX_INSTRUCTION_CHARS {
            return Err(ScheduleError::InstructionTooLong);
        }
        let now = self.now();
        spec.check(now)?;
        // `check` made sure there is a run to come.
        let next_run_at = spec
            .next_after(now - chrono::Duration::milliseconds(1))
            .ok_or(SpecError::Never)?;
        let schedule = self
            .store
            .create(NewSchedule {
                conversation,
                actor,
                instruction: instruction.to_owned(),
                spec: serde_json::to_string(&spec).expect("a spec serialises"),
                next_run_at,
            })
            .await?;
        tracing::info!(schedule = %schedule.id, conversation = %schedule.conversation.id, %spec, "schedule created");
        Ok(Listed { schedule, spec })
    }

    /// [`Schedules::add`] for someone who is not an admin, within the limits:
    /// runs at least `min_interval` apart, and at most `max_per_user`
    /// schedules of `actor` with runs to come.
    pub async fn add_within(
        &self,
        conversation: ConversationRef,
        actor: ActorId,
        spec: ScheduleSpec,
        instruction: &str,
    ) -> Result<Listed, ScheduleError> {
        let limits = &self.limits;
        if let Some(shortest) = spec.shortest_gap(self.now(), limits.min_interval)
            && shortest < limits.min_interval
        {
            return Err(ScheduleError::TooFrequent {
                shortest: herald_core::duration::format(shortest),
                min: herald_core::duration::format(limits.min_interval),
            });
        }
        let _counting = self.counting.lock().await;
        let owned = self
            .store
            .list(None)
            .await?
            .iter()
            .filter(|schedule| schedule.actor.as_ref() == Some(&actor))
            .count();
        if owned >= limits.max_per_user {
            tracing::warn!(actor = %actor, owned, "schedule refused: the actor has the most allowed");
            return Err(ScheduleError::TooMany {
                max: limits.max_per_user,
            });
        }
        self.add(conversation, Some(actor), spec, instruction).await
    }

    /// `at …`, `every …` or `cron …` followed by the instruction, as typed in
    /// chat or on the command line.
    pub async fn add_words(
        &self,
        conversation: ConversationRef,
        actor: Option<ActorId>,
        text: &str,
    ) -> Result<Listed, ScheduleError> {
        let (spec, instruction) = ScheduleSpec::parse_words(text, self.now())?;
        self.add(conversation, actor, spec, instruction).await
    }

    /// Schedules with a run to come, of one conversation or all.
    pub async fn list(&self, conversation: Option<&ConversationId>) -> Result<Vec<Listed>, ScheduleError> {
        self.store.list(conversation).await?.into_iter().map(read).collect()
    }

    /// The schedules with runs to come that `actor` created in `conversation`.
    pub async fn list_own(&self, conversation: &ConversationId, actor: &ActorId) -> Result<Vec<Listed>, ScheduleError> {
        self.store
            .list(Some(conversation))
            .await?
            .into_iter()
            .filter(|schedule| schedule.actor.as_ref() == Some(actor))
            .map(read)
            .collect()
    }

    /// Cancels a schedule `actor` created in `conversation`; anyone else's
    /// is [`ScheduleError::NotFound`], as if it did not exist.
    pub async fn cancel_own(
        &self,
        id: ScheduleId,
        conversation: &ConversationId,
        actor: &ActorId,
    ) -> Result<Listed, ScheduleError> {
        let schedule = self.store.get(id).await?.ok_or(ScheduleError::NotFound(id))?;
        if schedule.actor.as_ref() != Some(actor) {
            tracing::warn!(schedule = %id, actor = %actor, "cancelling someone else's schedule refused");
            return Err(ScheduleError::NotFound(id));
        }
        self.cancel(id, Some(conversation)).await
    }

    /// Cancels a schedule; with `only_in`, only one of that conversation.
    pub async fn cancel(&self, id: ScheduleId, only_in: Option<&ConversationId>) -> Result<Listed, ScheduleError> {
        let schedule = self.store.get(id).await?.ok_or(ScheduleError::NotFound(id))?;
        if only_in.is_some_and(|conversation| *conversation != schedule.conversation.id) {
            return Err(ScheduleError::NotFound(id));
        }
        let listed = read(schedule)?;
        if !self.store.cancel(id).await? {
            return Err(ScheduleError::NotFound(id));
        }
        tracing::info!(schedule = %id, "schedule cancelled");
        Ok(listed)
    }
}

/// Reads a stored schedule's timing back.
pub fn read(schedule: Schedule) -> Result<Listed, ScheduleError> {
    match serde_json::from_str::<ScheduleSpec>(&schedule.spec) {
        Ok(spec) => Ok(Listed { schedule, spec }),
        Err(err) => Err(ScheduleError::Unreadable {
            id: schedule.id,
            reason: err.to_string(),
        }),
    }
}
