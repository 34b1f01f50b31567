//! The policy every tool call passes, at execution: the skill exists and is
//! enabled, elevated skills run only for admins, arguments fit the schema,
//! dangerous skills wait for an admin's `/approve`, and side effects run at
//! most once per task and arguments, across crashes too.
//!
//! Order matters: the idempotency record is written before the effect runs,
//! so a task retried after a crash finds it and does not repeat the effect.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use herald_core::{TaskId, ToolCall, ToolOutput, TurnScope};
use serde_json::Value;

use crate::config::Autonomy;
use crate::confirm::{PendingCall, new_code};
use crate::name::SkillName;
use crate::registry::{CoreSkill, SkillContext, TurnView};
use crate::state::{self, CallRecord, StoredOutput};
use crate::toolbox::SkillToolbox;

/// Tasks whose side effects are remembered in memory (the store keeps them all).
const REMEMBERED_TASKS: usize = 256;

/// First results of side-effect calls, per task, by skill and canonical arguments.
#[derive(Debug, Default)]
pub(crate) struct TaskCalls {
    by_task: BTreeMap<TaskId, HashMap<(SkillName, String), ToolOutput>>,
}

impl TaskCalls {
    fn get(&self, task: TaskId, skill: &SkillName, canonical: &str) -> Option<ToolOutput> {
        self.by_task
            .get(&task)?
            .get(&(skill.clone(), canonical.to_owned()))
            .cloned()
    }

    fn insert(&mut self, task: TaskId, skill: &SkillName, canonical: &str, output: ToolOutput) {
        self.by_task
            .entry(task)
            .or_default()
            .insert((skill.clone(), canonical.to_owned()), output);
        while self.by_task.len() > REMEMBERED_TASKS {
            self.by_task.pop_first();
        }
    }
}

/// Counts a tool call that policy or validation stopped before it ran.
fn refused(reason: &'static str) {
    metrics::counter!("herald_skill_calls_refused_total", "reason" => reason).increment(1);
}

impl SkillToolbox {
    pub(crate) async fn invoke_call(&self, scope: &TurnScope, call: &ToolCall, ordinal: u32) -> ToolOutput {
        let is_admin = self.is_admin(scope);
        let (skill, enabled) = {
            let registry = self.registry.read().expect("registry lock");
            match registry.core(&call.name) {
                Some(skill) => (Arc::clone(skill), registry.is_enabled(&skill.spec().name)),
                None => {
                    refused("unknown_tool");
                    return ToolOutput::error(format!("no tool named `{}` exists", call.name));
                }
            }
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
        let view = self.view(is_admin);
        if let Err(errors) = crate::schema::validate(&arguments, &skill.parameters(&view)) {
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
            return self
                .ask_confirmation(scope, &skill, arguments, canonical, ordinal)
                .await;
        }
        self.run_effect(scope, is_admin, ordinal, &skill, &view, arguments, &canonical)
            .await
    }

    /// Runs the skill, once per task and arguments when it has side effects.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn run_effect(
        &self,
        scope: &TurnScope,
        is_admin: bool,
        ordinal: u32,
        skill: &Arc<dyn CoreSkill>,
        view: &TurnView,
        arguments: Value,
        canonical: &str,
    ) -> ToolOutput {
        let spec = skill.spec();
        let context = SkillContext {
            scope,
            is_admin,
            ordinal,
            view,
            services: &self.services,
        };
        if !spec.policy.side_effect {
            return into_output(skill.invoke(&context, arguments).await);
        }
        if let Some(first) = self
            .calls
            .lock()
            .expect("calls lock")
            .get(scope.task, &spec.name, canonical)
        {
            tracing::debug!(skill = %spec.name, task = %scope.task, "repeated side effect answered from the first call");
            return first;
        }
        let store = self.services.store.as_ref();
        let key = state::call_key(ordinal, &spec.name, canonical);
        match state::call_record(store, scope.task, &key).await {
            Ok(Some(CallRecord::Done(stored))) => {
                let output = ToolOutput::from(stored);
                self.remember(scope.task, &spec.name, canonical, &output);
                return output;
            }
            Ok(Some(CallRecord::Started)) => {
                tracing::warn!(skill = %spec.name, task = %scope.task, "side effect interrupted before; not repeated");
                let output = ToolOutput::error(format!(
                    "`{}` was started with these arguments before Herald restarted and may have taken \
                     effect; it is not repeated",
                    spec.name
                ));
                self.remember(scope.task, &spec.name, canonical, &output);
                return output;
            }
            Ok(None) => {}
            Err(err) => {
                tracing::warn!(error = %err, skill = %spec.name, "idempotency record unreadable; effect not run");
                return ToolOutput::error(format!("storage is unavailable, so `{}` was not run", spec.name));
            }
        }
        if let Err(err) = state::put_call_record(store, scope.task, &key, &CallRecord::Started).await {
            tracing::warn!(error = %err, skill = %spec.name, "idempotency record not written; effect not run");
            return ToolOutput::error(format!("storage is unavailable, so `{}` was not run", spec.name));
        }
        let output = into_output(skill.invoke(&context, arguments).await);
        let done = CallRecord::Done(StoredOutput::from(&output));
        if let Err(err) = state::put_call_record(store, scope.task, &key, &done).await {
            tracing::warn!(error = %err, skill = %spec.name, "side effect ran but its result was not stored");
        }
        self.remember(scope.task, &spec.name, canonical, &output);
        output
    }

    fn remember(&self, task: TaskId, skill: &SkillName, canonical: &str, output: &ToolOutput) {
        self.calls
            .lock()
            .expect("calls lock")
            .insert(task, skill, canonical, output.clone());
    }

    async fn ask_confirmation(
        &self,
        scope: &TurnScope,
        skill: &Arc<dyn CoreSkill>,
        arguments: Value,
        canonical: String,
        ordinal: u32,
    ) -> ToolOutput {
        let store = self.services.store.as_ref();
        let name = &skill.spec().name;
        let now = self.services.clock.now();
        let existing = match store.list_state(state::CONFIRMATIONS).await {
            Ok(entries) => {
                let mut found = None;
                for (code, value) in entries {
                    match serde_json::from_value::<PendingCall>(value) {
                        Ok(pending) if pending.expires_at >= now => {
                            if pending.task == scope.task && &pending.skill == name && pending.canonical == canonical {
                                found = Some(pending);
                            }
                        }
                        // Expired or unreadable questions are dropped as they are met.
                        _ => {
                            if let Err(err) = store.delete_state(state::CONFIRMATIONS, &code).await {
                                tracing::debug!(error = %err, "stale confirmation not removed");
                            }
                        }
                    }
                }
                found
            }
            Err(err) => {
                tracing::warn!(error = %err, skill = %name, "confirmations unreadable; not asking");
                return ToolOutput::error(format!("storage is unavailable, so `{name}` was not run"));
            }
        };
        let valid_for = herald_core::duration::format(self.services.config.confirm_timeout);
        if existing.is_none() {
            let timeout = chrono::Duration::from_std(self.services.config.confirm_timeout)
                .unwrap_or_else(|_| chrono::Duration::minutes(10));
            let pending = PendingCall {
                code: new_code(),
                task: scope.task,
                conversation: scope.conversation.clone(),
                actor: scope.actor.clone(),
                reply_to: scope.reply_to.clone(),
                skill: name.clone(),
                arguments,
                canonical,
                ordinal,
                expires_at: now + timeout,
            };
            let value = serde_json::to_value(&pending).unwrap_or_default();
            if let Err(err) = store.put_state(state::CONFIRMATIONS, &pending.code, &value).await {
                tracing::warn!(error = %err, skill = %name, "confirmation not stored; not asking");
                return ToolOutput::error(format!("storage is unavailable, so `{name}` was not run"));
            }
            let question = herald_core::OutboundMessage {
                conversation: scope.conversation.clone(),
                text: pending.question(&valid_for),
                reply_to: scope.reply_to.clone(),
                idempotency_key: None,
            };
            if let Err(err) = self.services.outbound.send_in_turn(scope, &question).await {
                tracing::warn!(error = %err, skill = %name, "confirmation question not sent");
            }
            tracing::info!(skill = %name, task = %scope.task, "dangerous skill waits for confirmation");
        }
        // The code goes to the people in the conversation only: a model that
        // read it could get it typed back to Herald (a scheduled instruction,
        // a quoted message) and approve its own call.
        ToolOutput::ok(format!(
            "Not run yet: `{name}` needs an admin's confirmation, which was asked for in this conversation \
             (valid {valid_for}); it runs when an admin approves. Tell the user and do not call it again."
        ))
    }

    /// `/approve CODE` from an admin: runs the waiting call.
    pub(crate) async fn approve(&self, code: &str) -> String {
        let pending = match self.take_pending(code).await {
            Ok(pending) => pending,
            Err(reply) => return reply,
        };
        let skill = self
            .registry
            .read()
            .expect("registry lock")
            .core(pending.skill.as_str())
            .cloned();
        let Some(skill) = skill else {
            return format!("`{}` no longer exists; nothing was run.", pending.skill);
        };
        let scope = pending.scope();
        let view = self.view(true);
        tracing::info!(skill = %pending.skill, task = %pending.task, "dangerous skill approved");
        let output = self
            .run_effect(
                &scope,
                true,
                pending.ordinal,
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
            "Approved `{}`{}:\n{content}",
            pending.skill,
            if output.is_error { " (it failed)" } else { "" }
        )
    }

    /// `/deny CODE` from an admin: drops the waiting call.
    pub(crate) async fn deny(&self, code: &str) -> String {
        match self.take_pending(code).await {
            Ok(pending) => {
                tracing::info!(skill = %pending.skill, task = %pending.task, "dangerous skill denied");
                format!("Denied: `{}` was not run.", pending.skill)
            }
            Err(reply) => reply,
        }
    }

    /// Removes and returns the pending call of `code`, or the reply saying why not.
    async fn take_pending(&self, code: &str) -> Result<PendingCall, String> {
        let store = self.services.store.as_ref();
        let unknown = || format!("No request is waiting for code {code}.");
        let value = match store.get_state(state::CONFIRMATIONS, code).await {
            Ok(Some(value)) => value,
            Ok(None) => return Err(unknown()),
            Err(err) => return Err(format!("Storage is unavailable ({err}); try again.")),
        };
        let pending: PendingCall = serde_json::from_value(value).map_err(|_| unknown())?;
        if let Err(err) = store.delete_state(state::CONFIRMATIONS, code).await {
            return Err(format!("Storage is unavailable ({err}); try again."));
        }
        if pending.expires_at < self.services.clock.now() {
            return Err(format!("Code {code} has expired; `{}` was not run.", pending.skill));
        }
        Ok(pending)
    }
}

fn into_output(result: Result<ToolOutput, crate::SkillError>) -> ToolOutput {
    result.unwrap_or_else(|err| ToolOutput::error(err.to_string()))
}
