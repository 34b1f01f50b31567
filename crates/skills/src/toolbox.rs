//! [`SkillToolbox`]: the registry as the agent sees it, through
//! [`herald_core::Toolbox`]. `prepare` builds the turn's prompt sections and
//! tools for the sender, activates `$name` mentions and expands `/name`
//! requests, and answers chat commands; `invoke` runs a tool call through
//! the policy in [`crate::effects`].
//!
//! Architecture invariant: what a sender may not use is neither offered in
//! `prepare` nor run in `invoke`; `invoke` never trusts that the model only
//! calls what it was offered.

use std::sync::{Arc, Mutex, RwLock};

use async_trait::async_trait;
use herald_core::{
    Admins, Clock, ConversationStore, Outbound, PromptSection, SystemClock, Timestamp, ToolCall, ToolOutput, ToolSpec,
    Toolbox, TurnPreparation, TurnScope,
};

use crate::builtins::core_skills;
use crate::caps::{ActiveSkills, CapLimits};
use crate::catalog::{render_catalog, skill_block};
use crate::command::parse_command;
use crate::config::SkillsConfig;
use crate::discovery::{ReloadReport, ScanLimits, discover};
use crate::effects::TaskCalls;
use crate::error::SkillError;
use crate::gating::{Environment, ProcessEnvironment};
use crate::mention::{MAX_MENTIONS, expand_slash, parse_mentions, parse_slash};
use crate::registry::{CoreSkill, Hidden, Policy, Services, SkillRegistry, TurnView};
use crate::state;

pub struct SkillToolbox {
    pub(crate) services: Arc<Services>,
    admins: Admins,
    environment: Arc<dyn Environment>,
    pub(crate) registry: RwLock<SkillRegistry>,
    last_scan: Mutex<Option<Timestamp>>,
    scanning: tokio::sync::Mutex<()>,
    pub(crate) calls: Mutex<TaskCalls>,
}

impl std::fmt::Debug for SkillToolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkillToolbox")
            .field("registry", &*self.registry.read().expect("registry lock"))
            .finish_non_exhaustive()
    }
}

/// Builds a [`SkillToolbox`]: configuration, the store and the context budget
/// are required; the rest has defaults.
pub struct SkillToolboxBuilder {
    config: SkillsConfig,
    store: Arc<dyn ConversationStore>,
    context_chars: usize,
    outbound: Outbound,
    admins: Admins,
    clock: Arc<dyn Clock>,
    environment: Arc<dyn Environment>,
    extra: Vec<Arc<dyn CoreSkill>>,
}

impl SkillToolboxBuilder {
    /// Where `send_message` and confirmation questions go. Default: nowhere.
    pub fn outbound(mut self, outbound: Outbound) -> Self {
        self.outbound = outbound;
        self
    }

    /// Configured admin ids. A turn is an admin's when `TurnScope::is_admin`
    /// says so or its actor is one of these.
    pub fn admins(mut self, admins: Admins) -> Self {
        self.admins = admins;
        self
    }

    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// What gating checks binaries and variables against. Default: the process.
    pub fn environment(mut self, environment: Arc<dyn Environment>) -> Self {
        self.environment = environment;
        self
    }

    /// Registers another core skill; it wins name clashes with discovered skills.
    pub fn skill(mut self, skill: Arc<dyn CoreSkill>) -> Self {
        self.extra.push(skill);
        self
    }

    /// Scans the skill folders and reads the switches from the store.
    pub async fn build(self) -> Result<SkillToolbox, SkillError> {
        let mut registry = SkillRegistry::new();
        for skill in core_skills().into_iter().chain(self.extra) {
            registry.register(skill);
        }
        let caps = CapLimits::new(&self.config, self.context_chars);
        let toolbox = SkillToolbox {
            services: Arc::new(Services {
                config: self.config,
                store: self.store,
                outbound: self.outbound,
                clock: self.clock,
                caps,
            }),
            admins: self.admins,
            environment: self.environment,
            registry: RwLock::new(registry),
            last_scan: Mutex::new(None),
            scanning: tokio::sync::Mutex::new(()),
            calls: Mutex::new(TaskCalls::default()),
        };
        let report = toolbox.reload().await?;
        let registry = toolbox.registry.read().expect("registry lock");
        tracing::info!(
            skills = report.added.len(),
            problems = registry.diagnostics().len(),
            "skills loaded"
        );
        drop(registry);
        Ok(toolbox)
    }
}

impl SkillToolbox {
    pub fn builder(
        config: SkillsConfig,
        store: Arc<dyn ConversationStore>,
        context_chars: usize,
    ) -> SkillToolboxBuilder {
        SkillToolboxBuilder {
            config,
            store,
            context_chars,
            outbound: Outbound::new(),
            admins: Admins::default(),
            clock: Arc::new(SystemClock),
            environment: Arc::new(ProcessEnvironment),
            extra: Vec::new(),
        }
    }

    pub fn config(&self) -> &SkillsConfig {
        &self.services.config
    }

    /// Whether a turn is an admin's: from configuration only.
    pub fn is_admin(&self, scope: &TurnScope) -> bool {
        scope.is_admin || scope.actor.as_ref().is_some_and(|actor| self.admins.contains(actor))
    }

    /// The policy of a core skill, for the agent's loop guard and scheduling.
    pub fn policy(&self, tool: &str) -> Option<Policy> {
        self.registry
            .read()
            .expect("registry lock")
            .core(tool)
            .map(|skill| skill.spec().policy)
    }

    /// Rescans the skill folders and rereads the switches, reporting what changed.
    pub async fn reload(&self) -> Result<ReloadReport, SkillError> {
        let _scanning = self.scanning.lock().await;
        self.reload_locked().await
    }

    async fn reload_locked(&self) -> Result<ReloadReport, SkillError> {
        let previous = self.registry.read().expect("registry lock").discovery().clone();
        let dirs = self.services.config.dirs.clone();
        let limits = ScanLimits::from(&self.services.config);
        let environment = Arc::clone(&self.environment);
        let discovery = tokio::task::spawn_blocking(move || discover(&dirs, limits, &*environment, Some(&previous)))
            .await
            .map_err(|err| SkillError::refused(format!("skill scan failed: {err}")))?;
        let disabled = state::disabled(self.services.store.as_ref()).await?;
        let report = {
            let mut registry = self.registry.write().expect("registry lock");
            registry.set_disabled(disabled);
            registry.set_discovery(discovery)
        };
        *self.last_scan.lock().expect("scan lock") = Some(self.services.clock.now());
        if !report.is_empty() {
            tracing::info!(changes = %report.summary(), "skills rescanned");
        }
        Ok(report)
    }

    /// The cheap check before a turn: rescan when `rescan_every` has passed.
    async fn rescan_if_due(&self) {
        let every = self.services.config.rescan_every;
        if every.is_zero() {
            return;
        }
        let now = self.services.clock.now();
        let due = self
            .last_scan
            .lock()
            .expect("scan lock")
            .is_none_or(|last| (now - last).to_std().unwrap_or_default() >= every);
        if !due {
            return;
        }
        let Ok(_scanning) = self.scanning.try_lock() else {
            return;
        };
        if let Err(err) = self.reload_locked().await {
            tracing::warn!(error = %err, "skill rescan failed; keeping the skills loaded before");
        }
    }

    pub(crate) fn view(&self, is_admin: bool) -> TurnView {
        self.registry
            .read()
            .expect("registry lock")
            .view(is_admin, self.services.config.eager)
    }

    fn tools(&self, view: &TurnView) -> Vec<ToolSpec> {
        let registry = self.registry.read().expect("registry lock");
        registry
            .core_skills()
            .filter(|skill| {
                let spec = skill.spec();
                registry.is_enabled(&spec.name) && (!spec.policy.elevated || view.is_admin) && skill.offered(view)
            })
            .map(|skill| ToolSpec {
                name: skill.spec().name.to_string(),
                description: skill.spec().description.clone(),
                parameters: skill.parameters(view),
            })
            .collect()
    }

    /// `$name` mentions and trigger patterns, applied to the active set.
    fn activate_from_text(&self, text: &str, view: &TurnView, active: &mut ActiveSkills, notices: &mut Vec<String>) {
        let caps = self.services.caps;
        let size = |n: &crate::SkillName| view.get(n.as_str()).map_or(0, |s| s.document.body_chars());
        let mentions = parse_mentions(text);
        for name in &mentions.names {
            match view.get(name) {
                Some(skill) => {
                    let outcome = active.activate(&skill.name, size, &caps);
                    notices.extend(outcome.notice(&skill.name));
                }
                None => {
                    let hidden = self
                        .registry
                        .read()
                        .expect("registry lock")
                        .hidden(name, view.is_admin)
                        .unwrap_or(Hidden::Unknown);
                    notices.push(hidden_notice(name, &hidden, view.is_admin));
                }
            }
        }
        if mentions.dropped > 0 {
            notices.push(format!(
                "Only the first {MAX_MENTIONS} skill mentions of a message are used; {} more were not.",
                mentions.dropped
            ));
        }
        if self.services.config.triggers {
            for skill in &view.visible {
                if !active.contains(&skill.name) && skill.trigger.as_ref().is_some_and(|t| t.is_match(text)) {
                    let outcome = active.activate(&skill.name, size, &caps);
                    notices.extend(outcome.notice(&skill.name));
                }
            }
        }
    }
}

fn hidden_notice(name: &str, hidden: &Hidden, is_admin: bool) -> String {
    match (hidden, is_admin) {
        (Hidden::Disabled, true) => format!("Skill `{name}` is disabled; /skills enable {name} turns it on."),
        (Hidden::Unavailable(why), true) => format!("Skill `{name}` is unavailable here: it {why}."),
        _ => format!("There is no skill `{name}` available here."),
    }
}

/// The active bodies from their current revision, most recent kept first
/// when they no longer fit together.
fn active_section(active: &ActiveSkills, view: &TurnView, caps: &CapLimits) -> Option<PromptSection> {
    let mut budget = caps.max_chars;
    let mut shown = Vec::new();
    for name in active.names().iter().rev() {
        let Some(skill) = view.get(name.as_str()) else { continue };
        let chars = skill.document.body_chars();
        if chars > budget {
            continue;
        }
        budget -= chars;
        shown.push(skill);
    }
    if shown.is_empty() {
        return None;
    }
    shown.reverse();
    let blocks: Vec<String> = shown.iter().map(|s| skill_block(s.name.as_str(), s.body())).collect();
    Some(PromptSection {
        label: format!("active skills: {}", shown.len()),
        text: format!(
            "Active skills in this conversation; follow their instructions where they apply.\n\n{}",
            blocks.join("\n\n")
        ),
    })
}

fn eager_section(view: &TurnView, caps: &CapLimits) -> Option<PromptSection> {
    let mut budget = caps.max_chars;
    let mut blocks = Vec::new();
    let mut left_out = 0;
    for skill in &view.visible {
        let chars = skill.document.body_chars();
        if chars > budget {
            left_out += 1;
            continue;
        }
        budget -= chars;
        blocks.push(skill_block(skill.name.as_str(), skill.body()));
    }
    if blocks.is_empty() {
        return None;
    }
    let mut text = format!(
        "Skills: follow the instructions of the one that fits the request.\n\n{}",
        blocks.join("\n\n")
    );
    if left_out > 0 {
        text.push_str(&format!("\n\n({left_out} more skills did not fit)"));
    }
    Some(PromptSection {
        label: format!("skills (eager): {}", blocks.len()),
        text,
    })
}

#[async_trait]
impl Toolbox for SkillToolbox {
    async fn prepare(&self, scope: &TurnScope, user_text: Option<&str>) -> TurnPreparation {
        self.rescan_if_due().await;
        // Commands come from people: an instruction someone scheduled (the
        // model included) is text for the model, never a command.
        if scope.origin.is_person()
            && let Some(parsed) = user_text.and_then(parse_command)
        {
            let reply = match parsed {
                Ok(command) => self.run_command(scope, command).await,
                Err(usage) => usage,
            };
            return TurnPreparation {
                direct_reply: Some(reply),
                ..TurnPreparation::default()
            };
        }
        let is_admin = self.is_admin(scope);
        let view = self.view(is_admin);
        let store = self.services.store.as_ref();
        let conversation = &scope.conversation.id;
        let mut preparation = TurnPreparation::default();

        let loaded = state::active(store, conversation).await;
        let mut active = loaded.as_ref().cloned().unwrap_or_else(|err| {
            tracing::warn!(error = %err, conversation = %conversation, "active skills unreadable; starting empty");
            ActiveSkills::default()
        });
        let before = active.clone();
        {
            // Skills that are gone or switched off leave the set; skills this
            // sender may not see stay active for the others, unrendered here.
            let registry = self.registry.read().expect("registry lock");
            active.retain(|name| registry.agent_skill(name.as_str()).is_some() && registry.is_enabled(name));
        }
        if let Some(text) = user_text {
            self.activate_from_text(text, &view, &mut active, &mut preparation.notices);
            if let Some(request) = parse_slash(text)
                && let Some(skill) = view.get(request.name)
            {
                preparation.model_input = Some(expand_slash(request.name, skill.body(), request.rest));
            }
        }
        if active != before
            && let Err(err) = state::save_active(store, conversation, &active).await
        {
            tracing::warn!(error = %err, conversation = %conversation, "active skills not saved");
        }

        let caps = &self.services.caps;
        if view.eager {
            preparation.sections.extend(eager_section(&view, caps));
        } else if !view.visible.is_empty() {
            let entries: Vec<(&str, &str)> = view
                .visible
                .iter()
                .map(|s| (s.name.as_str(), s.description()))
                .collect();
            let catalog = render_catalog(&entries, self.services.config.catalog_chars);
            preparation.sections.push(PromptSection {
                label: format!(
                    "skill catalog: {} listed, {} left out",
                    catalog.listed, catalog.left_out
                ),
                text: catalog.text,
            });
            preparation.sections.extend(active_section(&active, &view, caps));
        }
        preparation.tools = self.tools(&view);
        preparation
    }

    async fn invoke(&self, scope: &TurnScope, call: &ToolCall, ordinal: u32) -> ToolOutput {
        self.invoke_call(scope, call, ordinal).await
    }

    fn parallel_safe(&self, tool: &str) -> bool {
        self.policy(tool).is_some_and(|p| p.parallel_safe)
    }

    fn repeat_budget(&self, tool: &str, default: u32) -> u32 {
        match self.policy(tool) {
            Some(policy) if policy.research => default.saturating_mul(RESEARCH_REPEAT_FACTOR),
            _ => default,
        }
    }
}

/// Research skills (reading files, looking things up) may repeat an identical
/// call this many times as often as others before the loop guard stops them.
const RESEARCH_REPEAT_FACTOR: u32 = 3;

#[cfg(test)]
mod tests;
