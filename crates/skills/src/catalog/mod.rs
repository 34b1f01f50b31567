//! What skills exist: Agent Skills found on disk (discovery, `SKILL.md`
//! parsing, gating), the core skills registered in Rust, the switches that
//! turn them off, and the prompt catalog of names and descriptions.
//!
//! [`Catalog`] is the live registry a running Herald holds: it rescans the
//! skill folders, rereads the switches, and answers what a sender may see.
//! It never runs a skill; that is [`crate::execution`]'s job.

mod core_skill;
mod discovery;
mod gating;
mod mcp;
mod paths;
mod prompt;
mod registry;
mod skill;
pub(crate) mod spec;

use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};

use herald_core::{Timestamp, ToolSpec};

pub use core_skill::{
    CoreSkill, Policy, Services, SkillContext, SkillSpec, TurnView, describe_arguments, quoted, target_conversation,
};
pub use discovery::{Diagnostic, DiagnosticKind, Discovery, ReloadReport, ScanLimits, discover};
pub use gating::{Environment, FixedEnvironment, ProcessEnvironment};
#[cfg(test)]
pub use mcp::MAX_MCP_TOOLS_PER_TURN;
pub use mcp::{McpTable, WHOLE_LISTING, schema_chars as mcp_schema_chars};
pub(crate) use paths::{check_relative, resolve_inside};
pub use prompt::{CATALOG_HEADER, RenderedCatalog, render_catalog, skill_block};
pub use registry::{Hidden, SkillEntry, SkillKind, SkillRegistry};
pub(crate) use skill::list_files;
pub use skill::{SKILL_FILE, Skill};
pub use spec::Mode;
pub(crate) use spec::check as check_document;

use crate::error::SkillError;
use crate::name::SkillName;

/// The registry as it is now, kept current by rescans.
pub(crate) struct Catalog {
    services: Arc<Services>,
    environment: Arc<dyn Environment>,
    registry: RwLock<SkillRegistry>,
    last_scan: Mutex<Option<Timestamp>>,
    scanning: tokio::sync::Mutex<()>,
    /// MCP tools seen in the servers' latest listings, by Herald's name.
    mcp_table: RwLock<McpTable>,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog")
            .field("registry", &*self.read())
            .finish_non_exhaustive()
    }
}

impl Catalog {
    /// A catalog of `core` skills; Agent Skills arrive with the first [`Catalog::reload`].
    pub fn new(services: Arc<Services>, environment: Arc<dyn Environment>, core: Vec<Arc<dyn CoreSkill>>) -> Self {
        let mut registry = SkillRegistry::new();
        for skill in core {
            registry.register(skill);
        }
        Self {
            services,
            environment,
            registry: RwLock::new(registry),
            last_scan: Mutex::new(None),
            scanning: tokio::sync::Mutex::new(()),
            mcp_table: RwLock::new(McpTable::new()),
        }
    }

    pub fn read(&self) -> RwLockReadGuard<'_, SkillRegistry> {
        self.registry.read().expect("registry lock")
    }

    /// Rescans the skill folders and rereads the switches, reporting what changed.
    pub async fn reload(&self) -> Result<ReloadReport, SkillError> {
        let _scanning = self.scanning.lock().await;
        self.reload_locked().await
    }

    async fn reload_locked(&self) -> Result<ReloadReport, SkillError> {
        let previous = self.read().discovery().clone();
        let dirs = self.services.config.dirs.clone();
        let limits = ScanLimits::from(&self.services.config);
        let environment = Arc::clone(&self.environment);
        let discovery = tokio::task::spawn_blocking(move || discover(&dirs, limits, &*environment, Some(&previous)))
            .await
            .map_err(|err| SkillError::refused(format!("skill scan failed: {err}")))?;
        let disabled = crate::state::disabled(self.services.store.as_ref()).await?;
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
    pub async fn rescan_if_due(&self) {
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

    /// The Agent Skills a sender may use this turn.
    pub fn view(&self, is_admin: bool) -> TurnView {
        let mut view = self.read().view(is_admin, self.services.config.eager);
        view.mcp = self.visible_mcp_servers(is_admin);
        view.mcp_sizes = view
            .mcp
            .iter()
            .map(|server| (server.name.clone(), self.mcp_size(&server.name)))
            .collect();
        view
    }

    /// The core skills offered to this view, with their schemas for it.
    pub fn tools(&self, view: &TurnView) -> Vec<ToolSpec> {
        let registry = self.read();
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

    /// The core skill `name` (an MCP tool included, when listed before) and
    /// whether it is switched on; an MCP tool is on when its server and the
    /// tool both are.
    pub fn core(&self, name: &str) -> Option<(Arc<dyn CoreSkill>, bool)> {
        let registry = self.read();
        if let Some(skill) = registry.core(name) {
            return Some((Arc::clone(skill), registry.is_enabled(&skill.spec().name)));
        }
        let tool = self.mcp_tool(name)?;
        let server_on = SkillName::new(tool.server()).is_ok_and(|server| registry.is_enabled(&server));
        let enabled = server_on && registry.is_enabled(&tool.spec().name);
        Some((tool as Arc<dyn CoreSkill>, enabled))
    }

    pub fn policy(&self, tool: &str) -> Option<Policy> {
        if let Some(skill) = self.read().core(tool) {
            return Some(skill.spec().policy);
        }
        self.mcp_tool(tool).map(|tool| tool.spec().policy)
    }

    /// Switches a skill on or off, in the store and at once in this process.
    pub async fn set_enabled(&self, name: &str, enabled: bool) -> Result<SkillName, SkillError> {
        let name = {
            let registry = self.read();
            let mcp_server = self.mcp_servers().iter().any(|server| server.name == name);
            let mcp_tool = herald_core::mcp::server_of_tool(name)
                .is_some_and(|server| self.mcp_servers().iter().any(|s| s.name == server));
            if !registry.contains(name) && !mcp_server && !mcp_tool {
                return Err(SkillError::NotFound(name.to_owned()));
            }
            SkillName::new(name).map_err(SkillError::InvalidArguments)?
        };
        crate::state::set_enabled(self.services.store.as_ref(), &name, enabled).await?;
        self.registry
            .write()
            .expect("registry lock")
            .set_enabled(&name, enabled);
        tracing::info!(skill = %name, enabled, "skill switched");
        Ok(name)
    }
}
