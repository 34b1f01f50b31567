//! Running tool calls: the policy every call passes at execution, the core
//! skills, confirmation of dangerous calls, side-effect deduplication,
//! scripts and file reads.
//!
//! The policy, in order: the skill exists and is enabled, elevated skills
//! run only for admins, arguments fit the schema, dangerous skills wait for
//! an admin's `/approve`, and side effects run at most once per task and
//! arguments, across crashes too.
//!
//! Architecture invariant: [`Executor::invoke`] never trusts that the model
//! only calls what it was offered; everything is checked again here.

mod confirm;
mod core_skills;
mod dedup;
mod files;
mod mcp;
mod schema;
pub mod script;

use std::sync::Arc;

use herald_core::{Admins, ToolCall, ToolOutput, TurnScope};
use serde_json::Value;

#[cfg(test)]
pub(crate) use core_skills::MAX_NAME_ENUM;
pub(crate) use core_skills::{ACTIVATE_SKILL, core_skills};

use crate::catalog::Catalog;
use crate::catalog::{CoreSkill, Services, SkillContext, TurnView};
use crate::config::Autonomy;
use dedup::{CallName, SideEffects};

/// Counts a tool call that policy or validation stopped before it ran.
fn refused(reason: &'static str) {
    metrics::counter!("herald_skill_calls_refused_total", "reason" => reason).increment(1);
}

/// Runs tool calls through the policy.
pub(crate) struct Executor {
    services: Arc<Services>,
    catalog: Arc<Catalog>,
    admins: Admins,
    effects: SideEffects,
}

impl Executor {
    pub fn new(services: Arc<Services>, catalog: Arc<Catalog>, admins: Admins) -> Self {
        Self {
            services,
            catalog,
            admins,
            effects: SideEffects::default(),
        }
    }

    /// Whether a turn is an admin's: from configuration only.
    pub fn is_admin(&self, scope: &TurnScope) -> bool {
        scope.is_admin || scope.actor.as_ref().is_some_and(|actor| self.admins.contains(actor))
    }

    pub async fn invoke(&self, scope: &TurnScope, is_admin: bool, call: &ToolCall, occurrence: u32) -> ToolOutput {
        if let Err(refusal) = mcp::admit(&self.services, &self.catalog, scope, is_admin, &call.name).await {
            return refusal;
        }
        let Some((skill, enabled)) = self.catalog.core(&call.name) else {
            refused("unknown_tool");
            return ToolOutput::error(format!("no tool named `{}` exists", call.name));
        };
        let spec = skill.spec();
        if spec.policy.elevated && !is_admin {
            tracing::warn!(
                skill = %spec.name,
                actor = ?scope.actor.as_ref().map(|a| a.as_str()),
                conversation = %scope.conversation.id,
                task = %scope.task,
                "refused an elevated skill for a non-admin"
            );
            refused("elevated");
            return ToolOutput::error(format!(
                "`{}` is for admins only; it was not run. Tell the user you cannot do this for them.",
                spec.name
            ));
        }
        if !enabled {
            refused("disabled");
            return ToolOutput::error(format!("`{}` is disabled by an admin; it was not run", spec.name));
        }
        let arguments: Value = match call.arguments.trim() {
            "" => Value::Object(Default::default()),
            text => match serde_json::from_str(text) {
                Ok(value) => value,
                Err(err) => {
                    refused("invalid_arguments");
                    return ToolOutput::error(format!("arguments are not valid JSON ({err}); nothing was run"));
                }
            },
        };
        let view = self.catalog.view(is_admin);
        if let Err(errors) = schema::validate(&arguments, &skill.parameters(&view)) {
            refused("invalid_arguments");
            return ToolOutput::error(format!("invalid arguments: {}; nothing was run", errors.join("; ")));
        }
        let canonical = herald_core::json::canonical(&arguments);
        if spec.policy.dangerous && self.services.config.autonomy != Autonomy::Full {
            if !is_admin {
                tracing::warn!(skill = %spec.name, task = %scope.task, "refused a dangerous skill for a non-admin");
                refused("dangerous");
                return ToolOutput::error(format!(
                    "`{}` needs an admin's confirmation and only admins may ask for it; it was not run",
                    spec.name
                ));
            }
            return confirm::ask(&self.services, scope, &skill, &view, arguments, canonical, occurrence).await;
        }
        self.run(scope, is_admin, occurrence, &skill, &view, arguments, &canonical)
            .await
    }

    /// Runs the skill, once per task and arguments when it has side effects.
    #[allow(clippy::too_many_arguments)]
    async fn run(
        &self,
        scope: &TurnScope,
        is_admin: bool,
        occurrence: u32,
        skill: &Arc<dyn CoreSkill>,
        view: &TurnView,
        arguments: Value,
        canonical: &str,
    ) -> ToolOutput {
        let spec = skill.spec();
        let call_key = crate::state::call_key(&spec.name, canonical, occurrence);
        let context = SkillContext {
            scope,
            is_admin,
            occurrence,
            call_key: &call_key,
            view,
            services: &self.services,
        };
        let effect = async { into_output(skill.invoke(&context, arguments).await) };
        if !spec.policy.side_effect {
            return effect.await;
        }
        let name = CallName {
            task: scope.task,
            skill: &spec.name,
            canonical,
            occurrence,
        };
        self.effects.run_once(self.services.store.as_ref(), name, effect).await
    }

    /// `/approve CODE` from an admin: runs the waiting call, after checking
    /// everything again as it is now. Whatever has changed since the
    /// question voids the code: nothing runs, and the model may ask again.
    pub async fn approve(&self, approver: &TurnScope, code: &str) -> String {
        if !self.is_admin(approver) {
            tracing::warn!(conversation = %approver.conversation.id, "approval refused for a non-admin");
            return "Only an admin can do that.".into();
        }
        let pending = match confirm::take(&self.services, code).await {
            Ok(pending) => pending,
            Err(reply) => return reply,
        };
        let name = &pending.skill;
        // An MCP tool asked for in another process is listed again first.
        if let Some(server) = herald_core::mcp::server_of_tool(name.as_str())
            && self.catalog.core(name.as_str()).is_none()
        {
            let _ = self.catalog.mcp_tools(server, crate::catalog::WHOLE_LISTING).await;
        }
        let refuse = |why: String| {
            tracing::warn!(skill = %name, task = %pending.task, reason = %why, "approval refused");
            refused("approval_voided");
            format!("Not run: {why}; nothing was run.")
        };
        let Some((skill, enabled)) = self.catalog.core(name.as_str()) else {
            return refuse(format!("`{name}` no longer exists"));
        };
        if !enabled {
            return refuse(format!("`{name}` has been disabled since the question"));
        }
        // The call runs as the person who asked for it, who must still be
        // allowed to ask.
        let scope = pending.scope();
        let requester_is_admin = pending.actor.as_ref().is_some_and(|actor| self.admins.contains(actor));
        if !requester_is_admin {
            let who = pending.actor.as_ref().map_or("nobody known", |actor| actor.as_str());
            return refuse(format!("`{who}`, who asked for `{name}`, is no longer an admin"));
        }
        let view = self.catalog.view(true);
        let shown = confirm::shown_call(skill.as_ref(), &view, &pending.arguments, &pending.files);
        if confirm::shown_hash(&shown) != pending.shown_hash
            || herald_core::json::canonical(&pending.arguments) != pending.canonical
        {
            return refuse(format!(
                "`{name}` with these arguments is no longer what was shown when the code was issued (its skill \
                 may have been switched off, changed or removed)"
            ));
        }
        tracing::info!(skill = %name, task = %pending.task, "dangerous skill approved");
        let output = self
            .run(
                &scope,
                true,
                pending.occurrence,
                &skill,
                &view,
                pending.arguments.clone(),
                &pending.canonical,
            )
            .await;
        let mut content: String = output.content.chars().take(3000).collect();
        if output.content.chars().count() > 3000 {
            content.push('…');
        }
        format!(
            "Approved `{name}`{}:\n{content}",
            if output.is_error { " (it failed)" } else { "" }
        )
    }

    /// `/deny CODE` from an admin: drops the waiting call.
    pub async fn deny(&self, code: &str) -> String {
        match confirm::take(&self.services, code).await {
            Ok(pending) => {
                tracing::info!(skill = %pending.skill, task = %pending.task, "dangerous skill denied");
                format!("Denied: `{}` was not run.", pending.skill)
            }
            Err(reply) => reply,
        }
    }
}

fn into_output(result: Result<ToolOutput, crate::error::SkillError>) -> ToolOutput {
    result.unwrap_or_else(|err| ToolOutput::error(err.to_string()))
}
