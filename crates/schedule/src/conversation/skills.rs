//! The scheduling core skills: `schedule_task`, `list_schedules` and
//! `cancel_schedule`.
//!
//! Policy, enforced when the call runs: a non-admin schedules only into its
//! own conversation, within `schedules.min_interval` and
//! `schedules.max_per_user`, and lists and cancels only the schedules it
//! created in the conversation it is in. Admins are not limited.

use std::sync::Arc;

use crate::{Listed, ScheduleError, ScheduleSpec, Schedules};
use async_trait::async_trait;
use herald_core::{ActorId, ConversationStore, ScheduleId, ToolOutput};
use herald_skills::{CoreSkill, Policy, SkillContext, SkillError, SkillName, SkillSpec, TurnView, target_conversation};
use serde_json::{Value, json};

pub const SCHEDULE_TASK: &str = "schedule_task";

/// The three scheduling skills, for the registry.
pub fn schedule_skills(schedules: Schedules, conversations: Arc<dyn ConversationStore>) -> Vec<Arc<dyn CoreSkill>> {
    vec![
        Arc::new(ScheduleTask::new(schedules.clone(), conversations)),
        Arc::new(ListSchedules::new(schedules.clone())),
        Arc::new(CancelSchedule::new(schedules)),
    ]
}

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
                        "maxLength": crate::service::MAX_INSTRUCTION_CHARS,
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
        let listed = if context.is_admin {
            self.schedules
                .add(target, context.scope.actor.clone(), spec, instruction)
                .await
        } else {
            let actor = known_actor(context)?;
            self.schedules
                .add_within(target, actor.clone(), spec, instruction)
                .await
        }
        .map_err(refusal)?;
        Ok(ToolOutput::ok(format!("Scheduled: {}", listed.line())))
    }
}

pub const LIST_SCHEDULES: &str = "list_schedules";
pub const CANCEL_SCHEDULE: &str = "cancel_schedule";

/// `list_schedules`: admins see every schedule with runs to come; anyone
/// else the ones they created in this conversation.
pub struct ListSchedules {
    spec: SkillSpec,
    schedules: Schedules,
}

impl ListSchedules {
    pub fn new(schedules: Schedules) -> Self {
        let spec = SkillSpec {
            name: SkillName::new(LIST_SCHEDULES).expect("a valid skill name"),
            description: "List the scheduled instructions with runs to come: their ids, when they run and what \
                          they ask. Use before cancel_schedule."
                .into(),
            parameters: json!({"type": "object", "properties": {}, "additionalProperties": false}),
            policy: Policy {
                parallel_safe: true,
                research: true,
                ..Policy::default()
            },
        };
        Self { spec, schedules }
    }
}

#[async_trait]
impl CoreSkill for ListSchedules {
    fn spec(&self) -> &SkillSpec {
        &self.spec
    }

    async fn invoke(&self, context: &SkillContext<'_>, _arguments: Value) -> Result<ToolOutput, SkillError> {
        let listed = if context.is_admin {
            self.schedules.list(None).await
        } else {
            let actor = known_actor(context)?;
            self.schedules.list_own(&context.scope.conversation.id, actor).await
        }
        .map_err(refusal)?;
        Ok(ToolOutput::ok(if listed.is_empty() {
            "No schedules.".to_owned()
        } else {
            listed.iter().map(Listed::line).collect::<Vec<_>>().join("\n")
        }))
    }
}

/// `cancel_schedule`: admins cancel any schedule; anyone else only one they
/// created in this conversation.
pub struct CancelSchedule {
    spec: SkillSpec,
    schedules: Schedules,
}

impl CancelSchedule {
    pub fn new(schedules: Schedules) -> Self {
        let spec = SkillSpec {
            name: SkillName::new(CANCEL_SCHEDULE).expect("a valid skill name"),
            description: "Cancel a scheduled instruction by its id (from list_schedules).".into(),
            parameters: json!({
                "type": "object",
                "properties": {"id": {"type": "integer", "minimum": 1, "description": "The schedule's id"}},
                "required": ["id"],
                "additionalProperties": false
            }),
            policy: Policy {
                side_effect: true,
                ..Policy::default()
            },
        };
        Self { spec, schedules }
    }
}

#[async_trait]
impl CoreSkill for CancelSchedule {
    fn spec(&self) -> &SkillSpec {
        &self.spec
    }

    async fn invoke(&self, context: &SkillContext<'_>, arguments: Value) -> Result<ToolOutput, SkillError> {
        let id = ScheduleId(arguments["id"].as_i64().unwrap_or_default());
        let cancelled = if context.is_admin {
            self.schedules.cancel(id, None).await
        } else {
            let actor = known_actor(context)?;
            self.schedules
                .cancel_own(id, &context.scope.conversation.id, actor)
                .await
        }
        .map_err(refusal)?;
        Ok(ToolOutput::ok(format!("Cancelled: {}", cancelled.line())))
    }
}

/// The sender of a non-admin's turn: schedules are theirs by this id.
fn known_actor<'c>(context: &'c SkillContext<'_>) -> Result<&'c ActorId, SkillError> {
    context
        .scope
        .actor
        .as_ref()
        .ok_or_else(|| SkillError::refused("this turn has no known sender, so it has no schedules of its own"))
}

/// A schedule error as the model reads it: its own mistakes as invalid
/// arguments, policy as a refusal.
fn refusal(err: ScheduleError) -> SkillError {
    match err {
        ScheduleError::TooFrequent { .. } | ScheduleError::TooMany { .. } | ScheduleError::NotFound(_) => {
            SkillError::refused(err.to_string())
        }
        other => SkillError::InvalidArguments(other.to_string()),
    }
}
