//! Creating, listing and cancelling schedules: what the `schedule_task` skill,
//! the `/schedule` chat command and `herald schedule` all go through, so a
//! schedule is checked the same way wherever it comes from.

use std::sync::Arc;

use herald_core::{
    ActorId, Clock, ConversationId, ConversationRef, NewSchedule, Schedule, ScheduleId, ScheduleStore, StoreError,
    Timestamp,
};

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

/// Schedules over the store, with the clock that decides what "now" is.
#[derive(Clone)]
pub struct Schedules {
    store: Arc<dyn ScheduleStore>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Schedules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schedules").finish_non_exhaustive()
    }
}

impl Schedules {
    pub fn new(store: Arc<dyn ScheduleStore>, clock: Arc<dyn Clock>) -> Self {
        Self { store, clock }
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
