//! What a core skill is: a spec (name, description, argument schema,
//! policy flags) and an `invoke`, with the context a call runs in. Core
//! skills are written in Rust, here and in the binary (`schedule_task`).
//!
//! The toolbox has checked the caller's rights and the arguments against
//! the schema before `invoke` runs; a skill checks again only what it alone
//! knows (a target conversation, a file inside its folder).

use std::sync::Arc;

use async_trait::async_trait;
use herald_core::{ConversationId, ConversationRef, ConversationStore, Outbound, ToolOutput, TurnScope};
use serde_json::Value;

use crate::catalog::Skill;
use crate::config::{CapLimits, SkillsConfig};
use crate::error::SkillError;
use crate::name::SkillName;

/// How a skill may be run. Enforced when it is called, not only when offered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    /// It changes the world: run once per task and arguments, and never
    /// twice across a crash.
    pub side_effect: bool,
    /// Only admins see and run it.
    pub elevated: bool,
    /// It waits for an admin's `/approve` unless `autonomy: full`.
    pub dangerous: bool,
    /// It may run at the same time as other parallel-safe calls of one step.
    pub parallel_safe: bool,
    /// Looking things up: the loop guard allows it more repetitions.
    pub research: bool,
}

/// What the model is told about a core skill.
#[derive(Clone, Debug, PartialEq)]
pub struct SkillSpec {
    pub name: SkillName,
    pub description: String,
    /// JSON schema of the arguments object.
    pub parameters: Value,
    pub policy: Policy,
}

/// What a turn may see: the Agent Skills this sender may use.
#[derive(Clone, Debug, Default)]
pub struct TurnView {
    pub visible: Vec<Arc<Skill>>,
    pub is_admin: bool,
    pub eager: bool,
}

impl TurnView {
    pub fn get(&self, name: &str) -> Option<&Arc<Skill>> {
        self.visible.iter().find(|s| s.name.as_str() == name)
    }

    pub fn names(&self) -> Vec<Value> {
        self.visible.iter().map(|s| Value::from(s.name.as_str())).collect()
    }
}

/// What every skill can reach while it runs.
pub struct Services {
    pub config: SkillsConfig,
    pub store: Arc<dyn ConversationStore>,
    pub outbound: Outbound,
    pub clock: Arc<dyn herald_core::Clock>,
    pub caps: CapLimits,
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Services")
            .field("outbound", &self.outbound)
            .field("caps", &self.caps)
            .finish_non_exhaustive()
    }
}

/// One call of a skill.
pub struct SkillContext<'a> {
    pub scope: &'a TurnScope,
    /// Whether the turn is an admin's (from configuration only).
    pub is_admin: bool,
    /// The task's call counter, as the agent numbered this call.
    pub ordinal: u32,
    pub view: &'a TurnView,
    pub services: &'a Services,
}

/// A skill written in Rust.
#[async_trait]
pub trait CoreSkill: Send + Sync {
    fn spec(&self) -> &SkillSpec;

    /// The argument schema offered this turn; it is also what the arguments
    /// are checked against. `activate_skill` narrows its `name` to the
    /// visible skills here.
    fn parameters(&self, _view: &TurnView) -> Value {
        self.spec().parameters.clone()
    }

    /// Whether the tool is offered this turn at all.
    fn offered(&self, _view: &TurnView) -> bool {
        true
    }

    async fn invoke(&self, context: &SkillContext<'_>, arguments: Value) -> Result<ToolOutput, SkillError>;
}

/// The conversation a call acts on (sends to, schedules into): the caller's
/// own, unless an admin names another conversation the store knows. `action`
/// completes "only admins may … another conversation" and `nothing` says
/// what did not happen, for the model to read.
pub async fn target_conversation(
    scope: &TurnScope,
    is_admin: bool,
    requested: Option<&str>,
    store: &dyn ConversationStore,
    action: &str,
    nothing: &str,
) -> Result<ConversationRef, SkillError> {
    let current = &scope.conversation;
    let id = match requested {
        None => return Ok(current.clone()),
        Some(id) if id == current.id.as_str() => return Ok(current.clone()),
        Some(id) => id,
    };
    if !is_admin {
        tracing::warn!(
            actor = ?scope.actor.as_ref().map(|a| a.as_str()),
            conversation = %current.id,
            task = %scope.task,
            "a non-admin's call aimed at another conversation was refused"
        );
        return Err(SkillError::refused(format!(
            "only admins may {action} another conversation; {nothing}"
        )));
    }
    store
        .conversation(&ConversationId::new(id))
        .await?
        .ok_or_else(|| SkillError::refused(format!("no known conversation `{id}`; {nothing}")))
}
