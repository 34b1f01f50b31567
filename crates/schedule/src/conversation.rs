//! Scheduling from a conversation: the core skills the model calls
//! (`schedule_task`, `list_schedules`, `cancel_schedule`, in [`skills`]) and
//! the `/schedule` command people type, both on the schedule service
//! ([`Schedules`]). The skills are the skill registry's `CoreSkill`s, which
//! is why this crate depends on `herald-skills` (the one edge between
//! library crates besides `herald-core` and `herald-net`; see
//! ARCHITECTURE.md).
//!
//! Policy, enforced when the call runs: a non-admin schedules only into its
//! own conversation, within the non-admin limits, and sees and cancels only
//! its own schedules in the conversation it is in; `/schedule add` is for
//! admins (anyone else asks the model, within the limits).

mod skills;

pub use skills::{
    CANCEL_SCHEDULE, CancelSchedule, LIST_SCHEDULES, ListSchedules, SCHEDULE_TASK, ScheduleTask, schedule_skills,
};

use std::sync::Arc;

use crate::command::USAGE;
use crate::{Listed, ScheduleCommand, ScheduleError, Schedules, parse_schedule_command};
use async_trait::async_trait;
use herald_core::{ToolCall, ToolOutput, Toolbox, TurnPreparation, TurnScope};

/// A toolbox that answers `/schedule …` itself and hands everything else to
/// the skill registry.
pub struct ScheduleCommands {
    inner: Arc<dyn Toolbox>,
    schedules: Schedules,
}

impl ScheduleCommands {
    pub fn new(inner: Arc<dyn Toolbox>, schedules: Schedules) -> Self {
        Self { inner, schedules }
    }

    /// An admin's command: every schedule.
    async fn answer(&self, scope: &TurnScope, command: ScheduleCommand) -> String {
        match command {
            ScheduleCommand::List => listing(self.schedules.list(None).await),
            ScheduleCommand::Add(text) => {
                match self
                    .schedules
                    .add_words(scope.conversation.clone(), scope.actor.clone(), &text)
                    .await
                {
                    Ok(listed) => format!("Scheduled: {}", listed.line()),
                    Err(err) => format!("Not scheduled: {err}\n{USAGE}"),
                }
            }
            ScheduleCommand::Cancel(id) => cancelled(self.schedules.cancel(id, None).await),
        }
    }

    /// Anyone else's command: their own schedules in this conversation.
    async fn answer_own(&self, scope: &TurnScope, command: ScheduleCommand) -> String {
        let Some(actor) = &scope.actor else {
            return "Only admins can use /schedule here.".into();
        };
        let here = &scope.conversation.id;
        match command {
            ScheduleCommand::List => listing(self.schedules.list_own(here, actor).await),
            ScheduleCommand::Cancel(id) => cancelled(self.schedules.cancel_own(id, here, actor).await),
            ScheduleCommand::Add(_) => {
                "Only admins can add schedules with /schedule. You can ask me to schedule something for this \
                 conversation."
                    .into()
            }
        }
    }
}

fn listing(listed: Result<Vec<Listed>, ScheduleError>) -> String {
    match listed {
        Ok(listed) if listed.is_empty() => "No schedules.".into(),
        Ok(listed) => listed.iter().map(Listed::line).collect::<Vec<_>>().join("\n"),
        Err(err) => format!("Could not list schedules: {err}"),
    }
}

fn cancelled(cancelled: Result<Listed, ScheduleError>) -> String {
    match cancelled {
        Ok(listed) => format!("Cancelled: {}", listed.line()),
        Err(err) => format!("Not cancelled: {err}"),
    }
}

impl ScheduleCommands {
    /// The answer to a `/schedule` command from a person, if the text is one.
    async fn command_reply(&self, scope: &TurnScope, user_text: Option<&str>) -> Option<TurnPreparation> {
        if !scope.origin.is_person() {
            return None;
        }
        let reply = match user_text.and_then(parse_schedule_command)? {
            Err(usage) => usage,
            Ok(command) if scope.is_admin => self.answer(scope, command).await,
            Ok(command) => self.answer_own(scope, command).await,
        };
        Some(TurnPreparation {
            direct_reply: Some(reply),
            ..TurnPreparation::default()
        })
    }
}

#[async_trait]
impl Toolbox for ScheduleCommands {
    async fn prepare(&self, scope: &TurnScope, user_text: Option<&str>) -> TurnPreparation {
        match self.command_reply(scope, user_text).await {
            Some(reply) => reply,
            None => self.inner.prepare(scope, user_text).await,
        }
    }

    fn conversation_state_scope(&self) -> Option<&'static str> {
        self.inner.conversation_state_scope()
    }

    async fn prepare_with(
        &self,
        scope: &TurnScope,
        user_text: Option<&str>,
        state: Option<serde_json::Value>,
    ) -> TurnPreparation {
        match self.command_reply(scope, user_text).await {
            Some(reply) => reply,
            None => self.inner.prepare_with(scope, user_text, state).await,
        }
    }

    async fn invoke(&self, scope: &TurnScope, call: &ToolCall, occurrence: u32) -> ToolOutput {
        self.inner.invoke(scope, call, occurrence).await
    }

    fn parallel_safe(&self, tool: &str) -> bool {
        self.inner.parallel_safe(tool)
    }

    fn repeat_budget(&self, tool: &str, default: u32) -> u32 {
        self.inner.repeat_budget(tool, default)
    }

    async fn tools_after_round(&self, scope: &TurnScope, called: &[String]) -> Option<Vec<herald_core::ToolSpec>> {
        self.inner.tools_after_round(scope, called).await
    }
}

#[cfg(test)]
mod tests;
