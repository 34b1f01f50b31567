//! [`SkillToolbox`]: the registry as the agent sees it, through
//! [`herald_core::Toolbox`]. `prepare` answers chat commands
//! ([`crate::admin`]) or builds the turn's prompt sections and tools for the
//! sender ([`crate::activation`]); `invoke` runs a tool call through the
//! policy in [`crate::execution`].
//!
//! Architecture invariant: what a sender may not use is neither offered in
//! `prepare` nor run in `invoke`; `invoke` never trusts that the model only
//! calls what it was offered.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use herald_core::{
    Admins, Clock, ConversationStore, FileStore, McpServers, Outbound, SystemClock, ToolCall, ToolOutput, ToolSpec,
    Toolbox, TurnPreparation, TurnScope,
};

use crate::activation;
use crate::admin::{self, Installed, SkillInfo, parse_command};
use crate::catalog::{Catalog, Diagnostic, Environment, ProcessEnvironment, ReloadReport, SkillEntry};
use crate::catalog::{CoreSkill, Policy, Services};
use crate::config::{CapLimits, SkillsConfig};
use crate::error::SkillError;
use crate::execution::script::script_user_problem;
use crate::execution::{Executor, core_skills};
use crate::name::SkillName;

pub struct SkillToolbox {
    services: Arc<Services>,
    catalog: Arc<Catalog>,
    executor: Executor,
}

impl std::fmt::Debug for SkillToolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkillToolbox")
            .field("catalog", &self.catalog)
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
    mcp: Option<Arc<dyn McpServers>>,
    files: Option<Arc<dyn FileStore>>,
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

    /// The configured MCP servers: each is listed and activated like a
    /// skill, and its tools run under the registry's policy.
    pub fn mcp(mut self, servers: Arc<dyn McpServers>) -> Self {
        self.mcp = Some(servers);
        self
    }

    /// Where files are kept: `run_skill_script` hands the files of the
    /// message being answered to the script, and keeps the files a script
    /// leaves in `out/` so `send_message` can attach them. Default: none.
    pub fn files(mut self, files: Arc<dyn FileStore>) -> Self {
        self.files = Some(files);
        self
    }

    /// Registers several core skills, as [`SkillToolboxBuilder::skill`] does.
    pub fn skills(mut self, skills: impl IntoIterator<Item = Arc<dyn CoreSkill>>) -> Self {
        self.extra.extend(skills);
        self
    }

    /// Scans the skill folders and reads the switches from the store.
    pub async fn build(self) -> Result<SkillToolbox, SkillError> {
        let caps = CapLimits::new(&self.config, self.context_chars);
        let services = Arc::new(Services {
            config: self.config,
            store: self.store,
            outbound: self.outbound,
            clock: self.clock,
            caps,
            mcp: self.mcp,
            files: self.files,
        });
        let core = core_skills().into_iter().chain(self.extra).collect();
        let catalog = Arc::new(Catalog::new(Arc::clone(&services), self.environment, core));
        let toolbox = SkillToolbox {
            executor: Executor::new(Arc::clone(&services), Arc::clone(&catalog), self.admins),
            services,
            catalog,
        };
        let report = toolbox.reload().await?;
        let script_user = toolbox.services.config.script_user.clone();
        if let Ok(Some(problem)) =
            tokio::task::spawn_blocking(move || script_user_problem(script_user.as_deref())).await
        {
            tracing::warn!(problem = %problem, "skill scripts will not run");
        }
        tracing::info!(
            skills = report.added.len(),
            problems = toolbox.catalog.read().diagnostics().len(),
            "skills loaded"
        );
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
            mcp: None,
            files: None,
        }
    }

    pub fn config(&self) -> &SkillsConfig {
        &self.services.config
    }

    /// Whether a turn is an admin's: from configuration only.
    pub fn is_admin(&self, scope: &TurnScope) -> bool {
        self.executor.is_admin(scope)
    }

    /// The policy of a core skill, for the agent's loop guard and scheduling.
    pub fn policy(&self, tool: &str) -> Option<Policy> {
        self.catalog.policy(tool)
    }

    /// Rescans the skill folders and rereads the switches, reporting what changed.
    pub async fn reload(&self) -> Result<ReloadReport, SkillError> {
        self.catalog.reload().await
    }

    /// Every skill with its state; admins also see elevated ones.
    pub fn list(&self, is_admin: bool) -> Vec<SkillEntry> {
        self.catalog.entries(is_admin)
    }

    /// Connects to every configured MCP server and lists its tools (for
    /// `herald doctor` and `herald skills list`): each server's name with
    /// its tools' names, or why it could not be reached.
    pub async fn reach_mcp_servers(&self) -> Vec<(String, Result<Vec<String>, String>)> {
        let mut reached = Vec::new();
        for server in self.catalog.mcp_servers() {
            let tools = match self
                .catalog
                .mcp_tools(&server.name, crate::catalog::WHOLE_LISTING)
                .await
            {
                Ok(tools) => Ok(tools.iter().map(|t| t.spec().name.to_string()).collect()),
                Err(err) => Err(err.to_string()),
            };
            reached.push((server.name, tools));
        }
        reached
    }

    /// What the last scan skipped, shadowed or ignored.
    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        self.catalog.read().diagnostics().to_vec()
    }

    pub fn info(&self, name: &str, is_admin: bool) -> Result<SkillInfo, SkillError> {
        admin::info(&self.catalog, name, is_admin)
    }

    /// Switches a skill on or off, in the store and at once in this process.
    pub async fn set_enabled(&self, name: &str, enabled: bool) -> Result<SkillName, SkillError> {
        self.catalog.set_enabled(name, enabled).await
    }

    /// Installs a folder or `.zip` into the install directory, disabled, and rescans.
    pub async fn install(&self, source: &Path) -> Result<Installed, SkillError> {
        admin::install(&self.catalog, &self.services, source).await
    }
}

impl SkillToolbox {
    /// A turn's preparation; `active` is the conversation's stored active
    /// set when the agent read it with the history (`prepare_with`).
    async fn prepare_turn(
        &self,
        scope: &TurnScope,
        user_text: Option<&str>,
        active: Option<Option<serde_json::Value>>,
    ) -> TurnPreparation {
        self.catalog.rescan_if_due().await;
        let is_admin = self.is_admin(scope);
        // Commands come from people: an instruction someone scheduled (the
        // model included) is text for the model, never a command.
        if scope.origin.is_person()
            && let Some(parsed) = user_text.and_then(parse_command)
        {
            let reply = match parsed {
                Ok(command) => admin::answer(&self.catalog, &self.executor, scope, is_admin, command).await,
                Err(usage) => usage,
            };
            return TurnPreparation {
                direct_reply: Some(reply),
                ..TurnPreparation::default()
            };
        }
        activation::prepare_turn(&self.catalog, &self.services, scope, is_admin, user_text, active).await
    }
}

#[async_trait]
impl Toolbox for SkillToolbox {
    async fn prepare(&self, scope: &TurnScope, user_text: Option<&str>) -> TurnPreparation {
        self.prepare_turn(scope, user_text, None).await
    }

    fn conversation_state_scope(&self) -> Option<&'static str> {
        Some(crate::state::ACTIVE)
    }

    async fn prepare_with(
        &self,
        scope: &TurnScope,
        user_text: Option<&str>,
        state: Option<serde_json::Value>,
    ) -> TurnPreparation {
        self.prepare_turn(scope, user_text, Some(state)).await
    }

    async fn invoke(&self, scope: &TurnScope, call: &ToolCall, occurrence: u32) -> ToolOutput {
        self.executor
            .invoke(scope, self.is_admin(scope), call, occurrence)
            .await
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

    async fn tools_after_round(&self, scope: &TurnScope, called: &[String]) -> Option<Vec<ToolSpec>> {
        // Only an activation changes what is offered within a turn: an MCP
        // server activated by the model brings its tools to the next step.
        if !called.iter().any(|name| name == crate::execution::ACTIVATE_SKILL) || self.services.mcp.is_none() {
            return None;
        }
        Some(activation::tools_now(&self.catalog, &self.services, scope, self.is_admin(scope)).await)
    }
}

/// Research skills (reading files, looking things up) may repeat an identical
/// call this many times as often as others before the loop guard stops them.
const RESEARCH_REPEAT_FACTOR: u32 = 3;

#[cfg(test)]
mod tests;
