//! Scheduling from a conversation: the `schedule_task` core skill the model
//! calls, and the `/schedule` command admins type. Both live here, in the
//! binary, because they join two libraries that may not know each other: the
//! skill registry's [`CoreSkill`] and herald-schedule's [`Schedules`].
//!
//! Policy, enforced when the call runs: a non-admin schedules only into its
//! own conversation, and only admins use `/schedule`.

use std::sync::Arc;

use async_trait::async_trait;
use herald_core::{ConversationStore, ToolCall, ToolOutput, Toolbox, TurnPreparation, TurnScope};
use herald_schedule::command::USAGE;
use herald_schedule::{Listed, ScheduleCommand, ScheduleSpec, Schedules, parse_schedule_command};
use herald_skills::{CoreSkill, Policy, SkillContext, SkillError, SkillName, SkillSpec, TurnView, target_conversation};
use serde_json::{Value, json};

pub const SCHEDULE_TASK: &str = "schedule_task";

/// The `schedule_task` core skill.
pub struct ScheduleTask {
    spec: SkillSpec,
    schedules: Schedules,
    conversations: Arc<dyn ConversationStore>,
}

impl ScheduleTask {
    pub fn new(schedules: Schedules, conversations: Arc<dyn ConversationStore>) -> Self {
        let spec = SkillSpec {
            name: SkillName::new(SCHEDULE_TASK).expect("a valid skill name"),
            description: "Schedule an instruction to run later or repeatedly in this conversation: once at a time, \
                          every interval, or on a cron expression. When a run is due you get the instruction as a \
                          new task here and answer it."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "when": {
                        "type": "string",
                        "minLength": 1,
                        "description": "One of: `at 2026-12-24T18:00 Europe/Berlin`, `every 30m`, \
                                        `every 1d from 2026-06-02T09:00 Europe/Berlin`, `cron \"0 9 * * 1-5\" Europe/Berlin`. \
                                        The time zone is optional (UTC by default)."
                    },
                    "instruction": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": herald_schedule::service::MAX_INSTRUCTION_CHARS,
                        "description": "What to do at each run, written as a request to yourself"
                    },
                    "conversation": {
                        "type": "string",
                        "description": "Another conversation's id (admins only); default: this one"
                    }
                },
                "required": ["when", "instruction"],
                "additionalProperties": false
            }),
            policy: Policy {
                side_effect: true,
                ..Policy::default()
            },
        };
        Self {
            spec,
            schedules,
            conversations,
        }
    }
}

#[async_trait]
impl CoreSkill for ScheduleTask {
    fn spec(&self) -> &SkillSpec {
        &self.spec
    }

    fn parameters(&self, view: &TurnView) -> Value {
        let mut parameters = self.spec.parameters.clone();
        if !view.is_admin
            && let Some(properties) = parameters.get_mut("properties").and_then(Value::as_object_mut)
        {
            properties.remove("conversation");
        }
        parameters
    }

    async fn invoke(&self, context: &SkillContext<'_>, arguments: Value) -> Result<ToolOutput, SkillError> {
        let target = target_conversation(
            context.scope,
            context.is_admin,
            arguments.get("conversation").and_then(Value::as_str),
            self.conversations.as_ref(),
            "schedule into",
            "nothing was scheduled",
        )
        .await?;
        let when = arguments["when"].as_str().unwrap_or_default();
        let instruction = arguments["instruction"].as_str().unwrap_or_default();
        let (spec, rest) = ScheduleSpec::parse_words(when, self.schedules.now())
            .map_err(|err| SkillError::InvalidArguments(err.to_string()))?;
        if !rest.is_empty() {
            return Err(SkillError::InvalidArguments(format!(
                "`when` has words after the time: `{rest}`; put them in `instruction`"
            )));
        }
        let listed = self
            .schedules
            .add(target, context.scope.actor.clone(), spec, instruction)
            .await
            .map_err(|err| SkillError::InvalidArguments(err.to_string()))?;
        Ok(ToolOutput::ok(format!("Scheduled: {}", listed.line())))
    }
}

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

    async fn answer(&self, scope: &TurnScope, command: ScheduleCommand) -> String {
        match command {
            ScheduleCommand::List => match self.schedules.list(None).await {
                Ok(listed) if listed.is_empty() => "No schedules.".into(),
                Ok(listed) => listed.iter().map(Listed::line).collect::<Vec<_>>().join("\n"),
                Err(err) => format!("Could not list schedules: {err}"),
            },
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
            ScheduleCommand::Cancel(id) => match self.schedules.cancel(id, None).await {
                Ok(listed) => format!("Cancelled: {}", listed.line()),
                Err(err) => format!("Not cancelled: {err}"),
            },
        }
    }
}

#[async_trait]
impl Toolbox for ScheduleCommands {
    async fn prepare(&self, scope: &TurnScope, user_text: Option<&str>) -> TurnPreparation {
        if scope.origin.is_person()
            && let Some(parsed) = user_text.and_then(parse_schedule_command)
        {
            let reply = match parsed {
                _ if !scope.is_admin => {
                    "Only admins can use /schedule. You can ask me to schedule something for this conversation."
                        .to_owned()
                }
                Err(usage) => usage,
                Ok(command) => self.answer(scope, command).await,
            };
            return TurnPreparation {
                direct_reply: Some(reply),
                ..TurnPreparation::default()
            };
        }
        self.inner.prepare(scope, user_text).await
    }

    async fn invoke(&self, scope: &TurnScope, call: &ToolCall, occurrence: u32) -> ToolOutput {
        self.inner.invoke(scope, call, occurrence).await
    }

    fn parallel_safe(&self, tool: &str) -> bool {
        self.inner.parallel_safe(tool)
    }
}

#[cfg(test)]
mod tests;
