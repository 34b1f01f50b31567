//! The registry: every skill Herald knows, keyed by [`SkillName`]. Core
//! skills are Rust values implementing [`CoreSkill`]; Agent Skills come from
//! discovery. A core skill wins a name clash with a discovered one.
//!
//! The registry is a plain value with no I/O; the toolbox loads it, keeps it
//! current and persists the switches.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use crate::catalog::discovery::{Diagnostic, DiagnosticKind, Discovery, ReloadReport, compare};
use crate::catalog::skill::Skill;
use crate::catalog::{CoreSkill, TurnView};
use crate::name::SkillName;

/// Where a skill comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SkillKind {
    Core,
    Agent,
    /// A configured MCP server.
    McpServer,
    /// One tool of an MCP server.
    McpTool,
}

/// A line of `/skills` and `herald skills list`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillEntry {
    pub name: SkillName,
    pub kind: SkillKind,
    pub enabled: bool,
    /// Why it cannot be offered though enabled (`needs jq`), empty if it can.
    pub unavailable: String,
    pub elevated: bool,
    pub description: String,
    pub revision: Option<String>,
    pub folder: Option<PathBuf>,
    /// More state for operators: an MCP server's connection, an MCP tool's flags.
    pub detail: String,
}

impl SkillEntry {
    pub fn state(&self) -> &'static str {
        match (self.enabled, self.unavailable.is_empty()) {
            (false, _) => "disabled",
            (true, false) => "unavailable",
            (true, true) => "enabled",
        }
    }
}

/// Why a name cannot be used by a sender.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hidden {
    Unknown,
    Disabled,
    Unavailable(String),
    AdminOnly,
}

#[derive(Default)]
pub struct SkillRegistry {
    core: BTreeMap<SkillName, Arc<dyn CoreSkill>>,
    discovery: Discovery,
    disabled: BTreeSet<SkillName>,
}

impl std::fmt::Debug for SkillRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkillRegistry")
            .field("core", &self.core.keys().collect::<Vec<_>>())
            .field("agent", &self.discovery.skills.keys().collect::<Vec<_>>())
            .field("disabled", &self.disabled)
            .finish()
    }
}

impl SkillRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a core skill; a second one of the same name replaces the first.
    pub fn register(&mut self, skill: Arc<dyn CoreSkill>) {
        let name = skill.spec().name.clone();
        if self.core.insert(name.clone(), skill).is_some() {
            tracing::warn!(skill = %name, "core skill registered twice; the later one is kept");
        }
        if let Some(agent) = self.discovery.skills.remove(&name) {
            self.discovery.diagnostics.push(shadowed_by_core(&agent));
        }
    }

    /// Replaces the discovered skills; names taken by core skills are dropped
    /// and reported.
    pub fn set_discovery(&mut self, mut discovery: Discovery) -> ReloadReport {
        let clashing: Vec<SkillName> = discovery
            .skills
            .keys()
            .filter(|name| self.core.contains_key(*name))
            .cloned()
            .collect();
        for name in clashing {
            if let Some(agent) = discovery.skills.remove(&name) {
                discovery.diagnostics.push(shadowed_by_core(&agent));
            }
        }
        let report = compare(&self.discovery, &discovery);
        self.discovery = discovery;
        report
    }

    pub fn discovery(&self) -> &Discovery {
        &self.discovery
    }

    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.discovery.diagnostics
    }

    pub fn set_disabled(&mut self, disabled: BTreeSet<SkillName>) {
        self.disabled = disabled;
    }

    pub fn set_enabled(&mut self, name: &SkillName, enabled: bool) {
        if enabled {
            self.disabled.remove(name);
        } else {
            self.disabled.insert(name.clone());
        }
    }

    pub fn is_enabled(&self, name: &SkillName) -> bool {
        !self.disabled.contains(name)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.core.contains_key(name) || self.discovery.skills.contains_key(name)
    }

    pub fn core(&self, name: &str) -> Option<&Arc<dyn CoreSkill>> {
        self.core.get(name)
    }

    pub fn core_skills(&self) -> impl Iterator<Item = &Arc<dyn CoreSkill>> {
        self.core.values()
    }

    pub fn agent_skill(&self, name: &str) -> Option<&Arc<Skill>> {
        self.discovery.skills.get(name)
    }

    /// Whether `name` is an Agent Skill this sender may use, and if not, why.
    pub fn hidden(&self, name: &str, is_admin: bool) -> Option<Hidden> {
        let Some(skill) = self.discovery.skills.get(name) else {
            return Some(Hidden::Unknown);
        };
        if skill.elevated && !is_admin {
            Some(Hidden::AdminOnly)
        } else if !self.is_enabled(&skill.name) {
            Some(Hidden::Disabled)
        } else if !skill.availability.is_available() {
            Some(Hidden::Unavailable(skill.availability.describe()))
        } else {
            None
        }
    }

    /// The Agent Skills a sender may use this turn, by name.
    pub fn view(&self, is_admin: bool, eager: bool) -> TurnView {
        TurnView {
            visible: self
                .discovery
                .skills
                .values()
                .filter(|s| self.hidden(s.name.as_str(), is_admin).is_none())
                .cloned()
                .collect(),
            is_admin,
            eager,
            ..TurnView::default()
        }
    }

    /// Every skill with its state; elevated ones only for admins.
    pub fn entries(&self, is_admin: bool) -> Vec<SkillEntry> {
        let core = self.core.values().map(|skill| {
            let spec = skill.spec();
            SkillEntry {
                name: spec.name.clone(),
                kind: SkillKind::Core,
                enabled: self.is_enabled(&spec.name),
                unavailable: String::new(),
                elevated: spec.policy.elevated,
                description: spec.description.clone(),
                revision: None,
                folder: None,
                detail: String::new(),
            }
        });
        let agent = self.discovery.skills.values().map(|skill| SkillEntry {
            name: skill.name.clone(),
            kind: SkillKind::Agent,
            enabled: self.is_enabled(&skill.name),
            unavailable: skill.availability.describe(),
            elevated: skill.elevated,
            description: skill.description().to_owned(),
            revision: Some(skill.revision.clone()),
            folder: Some(skill.folder.clone()),
            detail: String::new(),
        });
        core.chain(agent).filter(|e| is_admin || !e.elevated).collect()
    }
}

fn shadowed_by_core(agent: &Skill) -> Diagnostic {
    Diagnostic {
        path: agent.folder.clone(),
        kind: DiagnosticKind::Shadowed,
        message: format!(
            "skill `{}` has the name of a core skill, which takes precedence; this one is not loaded",
            agent.name
        ),
    }
}

#[cfg(test)]
mod tests {
    use async_trait::async_trait;
    use herald_core::ToolOutput;
    use serde_json::Value;

    use super::*;
    use crate::catalog::discovery::{ScanLimits, discover};
    use crate::catalog::gating::FixedEnvironment;
    use crate::catalog::{Policy, SkillContext, SkillSpec};
    use crate::error::SkillError;
    use crate::test_support::write_skill;

    struct Named(SkillSpec);

    #[async_trait]
    impl CoreSkill for Named {
        fn spec(&self) -> &SkillSpec {
            &self.0
        }

        async fn invoke(&self, _: &SkillContext<'_>, _: Value) -> Result<ToolOutput, SkillError> {
            Ok(ToolOutput::ok("core"))
        }
    }

    fn core(name: &str, elevated: bool) -> Arc<dyn CoreSkill> {
        Arc::new(Named(SkillSpec {
            name: SkillName::new(name).unwrap(),
            description: format!("{name} in Rust"),
            parameters: serde_json::json!({"type": "object"}),
            policy: Policy {
                elevated,
                ..Policy::default()
            },
        }))
    }

    fn registry_with(dir: &std::path::Path) -> SkillRegistry {
        write_skill(dir, "weather", "Weather.", "w");
        write_skill(dir, "notes", "Notes.", "n");
        std::fs::create_dir_all(dir.join("ops")).unwrap();
        std::fs::write(
            dir.join("ops/SKILL.md"),
            "---\nname: ops\ndescription: Ops.\nmetadata:\n  elevated: 'true'\n---\nops",
        )
        .unwrap();
        std::fs::create_dir_all(dir.join("gh")).unwrap();
        std::fs::write(
            dir.join("gh/SKILL.md"),
            "---\nname: gh\ndescription: GitHub.\nmetadata:\n  requires-bins: gh\n---\ngh",
        )
        .unwrap();
        let limits = ScanLimits {
            max_depth: 2,
            max_skills: 10,
        };
        let mut registry = SkillRegistry::new();
        registry.register(core("weather", false));
        registry.register(core("shell", true));
        registry.set_discovery(discover(&[dir.into()], limits, &FixedEnvironment::default(), None));
        registry
    }

    #[test]
    fn core_skills_win_name_clashes() {
        let dir = tempfile::tempdir().unwrap();
        let registry = registry_with(dir.path());
        assert!(registry.core("weather").is_some());
        assert!(registry.agent_skill("weather").is_none());
        assert!(
            registry
                .diagnostics()
                .iter()
                .any(|d| d.kind == DiagnosticKind::Shadowed && d.message.contains("core skill"))
        );
    }

    /// Rows: name, admin? → why hidden.
    #[test]
    fn visibility_depends_on_switches_gating_and_elevation() {
        let dir = tempfile::tempdir().unwrap();
        let mut registry = registry_with(dir.path());
        registry.set_enabled(&SkillName::new("notes").unwrap(), false);
        for (name, is_admin, hidden) in [
            ("notes", true, Some(Hidden::Disabled)),
            ("gh", true, Some(Hidden::Unavailable("needs gh".into()))),
            ("ops", false, Some(Hidden::AdminOnly)),
            ("ops", true, None),
            ("nope", true, Some(Hidden::Unknown)),
        ] {
            assert_eq!(registry.hidden(name, is_admin), hidden, "{name} {is_admin}");
        }
        let names = |view: TurnView| view.visible.iter().map(|s| s.name.to_string()).collect::<Vec<_>>();
        assert_eq!(names(registry.view(true, false)), vec!["ops"]);
        assert!(registry.view(false, false).visible.is_empty());
        registry.set_enabled(&SkillName::new("notes").unwrap(), true);
        assert_eq!(names(registry.view(false, false)), vec!["notes"]);
    }

    #[test]
    fn entries_list_state_and_hide_elevated_ones_from_others() {
        let dir = tempfile::tempdir().unwrap();
        let registry = registry_with(dir.path());
        let admin: Vec<(String, &str)> = registry
            .entries(true)
            .iter()
            .map(|e| (e.name.to_string(), e.state()))
            .collect();
        assert_eq!(
            admin,
            vec![
                ("shell".into(), "enabled"),
                ("weather".into(), "enabled"),
                ("gh".into(), "unavailable"),
                ("notes".into(), "enabled"),
                ("ops".into(), "enabled"),
            ]
        );
        let others: Vec<String> = registry.entries(false).iter().map(|e| e.name.to_string()).collect();
        assert_eq!(others, vec!["weather", "gh", "notes"]);
    }
}
