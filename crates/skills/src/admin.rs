//! Operating the registry: listing, info, switches, reload, install and
//! validation, shared by the chat commands and the `herald skills` CLI so
//! both say the same thing.

use std::path::{Path, PathBuf};

use herald_core::TurnScope;

use crate::command::SkillCommand;
use crate::discovery::{Diagnostic, DiagnosticKind, ReloadReport};
use crate::error::SkillError;
use crate::install::{Installed, install_skill};
use crate::name::SkillName;
use crate::registry::{SkillEntry, SkillKind};
use crate::skill::SKILL_FILE;
use crate::spec::{self, Mode};
use crate::state;
use crate::toolbox::SkillToolbox;

/// Everything `herald skills info NAME` shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillInfo {
    pub entry: SkillEntry,
    pub license: Option<String>,
    pub compatibility: Option<String>,
    pub allowed_tools: Vec<String>,
    pub files: Vec<String>,
    pub warnings: Vec<String>,
    pub body_chars: usize,
}

/// One path of `herald skills validate`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Validation {
    pub path: PathBuf,
    pub name: Option<String>,
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
}

impl Validation {
    pub fn is_ok(&self) -> bool {
        self.errors.is_empty()
    }
}

impl SkillToolbox {
    /// Every skill with its state; admins also see elevated ones.
    pub fn list(&self, is_admin: bool) -> Vec<SkillEntry> {
        self.registry.read().expect("registry lock").entries(is_admin)
    }

    /// What the last scan skipped, shadowed or ignored.
    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        self.registry.read().expect("registry lock").diagnostics().to_vec()
    }

    pub fn info(&self, name: &str, is_admin: bool) -> Result<SkillInfo, SkillError> {
        let registry = self.registry.read().expect("registry lock");
        let entry = registry
            .entries(is_admin)
            .into_iter()
            .find(|e| e.name.as_str() == name)
            .ok_or_else(|| SkillError::NotFound(name.to_owned()))?;
        let agent = registry.agent_skill(name).filter(|_| entry.kind == SkillKind::Agent);
        Ok(SkillInfo {
            license: agent.and_then(|s| s.document.license.clone()),
            compatibility: agent.and_then(|s| s.document.compatibility.clone()),
            allowed_tools: agent.map(|s| s.document.allowed_tools.clone()).unwrap_or_default(),
            files: agent.map(|s| s.files.clone()).unwrap_or_default(),
            warnings: agent.map(|s| s.warnings.clone()).unwrap_or_default(),
            body_chars: agent.map_or(0, |s| s.document.body_chars()),
            entry,
        })
    }

    /// Switches a skill on or off, in the store and at once in this process.
    pub async fn set_enabled(&self, name: &str, enabled: bool) -> Result<SkillName, SkillError> {
        let name = {
            let registry = self.registry.read().expect("registry lock");
            if !registry.contains(name) {
                return Err(SkillError::NotFound(name.to_owned()));
            }
            SkillName::new(name).map_err(SkillError::InvalidArguments)?
        };
        state::set_enabled(self.services.store.as_ref(), &name, enabled).await?;
        self.registry
            .write()
            .expect("registry lock")
            .set_enabled(&name, enabled);
        tracing::info!(skill = %name, enabled, "skill switched");
        Ok(name)
    }

    /// Installs a folder or `.zip` into the install directory, disabled, and rescans.
    pub async fn install(&self, source: &Path) -> Result<Installed, SkillError> {
        let source = source.to_path_buf();
        let install_dir = self.services.config.install_dir();
        let limits = self.services.config.install_limits.clone();
        let installed = tokio::task::spawn_blocking(move || install_skill(&source, &install_dir, &limits))
            .await
            .map_err(|err| SkillError::refused(format!("install failed: {err}")))??;
        state::set_enabled(self.services.store.as_ref(), &installed.name, false).await?;
        self.reload().await?;
        Ok(installed)
    }

    pub(crate) async fn run_command(&self, scope: &TurnScope, command: SkillCommand) -> String {
        let is_admin = self.is_admin(scope);
        if command.changes_state() && !is_admin {
            tracing::warn!(
                actor = ?scope.actor.as_ref().map(|a| a.as_str()),
                conversation = %scope.conversation.id,
                "skill command refused for a non-admin"
            );
            return "Only an admin can do that.".into();
        }
        match command {
            SkillCommand::List => format_list(
                &self.list(is_admin),
                &if is_admin { self.diagnostics() } else { vec![] },
            ),
            SkillCommand::Info(name) => match self.info(&name, is_admin) {
                Ok(info) => format_info(&info),
                Err(err) => capitalised(err.to_string()),
            },
            SkillCommand::Enable(name) => self.switch_reply(&name, true).await,
            SkillCommand::Disable(name) => self.switch_reply(&name, false).await,
            SkillCommand::Reload => match self.reload().await {
                Ok(report) => format!("Skills reloaded: {}.", report.summary()),
                Err(err) => format!("Reload failed: {err}"),
            },
            SkillCommand::Approve(code) => self.approve(&code).await,
            SkillCommand::Deny(code) => self.deny(&code).await,
        }
    }

    async fn switch_reply(&self, name: &str, enabled: bool) -> String {
        match self.set_enabled(name, enabled).await {
            Ok(name) => {
                let mut reply = format!("Skill `{name}` is {}.", if enabled { "enabled" } else { "disabled" });
                if enabled
                    && let Ok(info) = self.info(name.as_str(), true)
                    && !info.entry.unavailable.is_empty()
                {
                    reply.push_str(&format!(
                        " It stays unavailable until it is satisfied: it {}.",
                        info.entry.unavailable
                    ));
                }
                reply
            }
            Err(err) => capitalised(err.to_string()),
        }
    }
}

/// The reply to `/skills` and the output of `herald skills list`.
pub fn format_list(entries: &[SkillEntry], diagnostics: &[Diagnostic]) -> String {
    if entries.is_empty() {
        return "No skills.".into();
    }
    let mut out = String::new();
    for (kind, title) in [(SkillKind::Agent, "Skills"), (SkillKind::Core, "Core tools")] {
        let group: Vec<&SkillEntry> = entries.iter().filter(|e| e.kind == kind).collect();
        if group.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!("{title}:\n"));
        for entry in group {
            let mut flags = vec![entry.state().to_owned()];
            if !entry.unavailable.is_empty() {
                flags.push(entry.unavailable.clone());
            }
            if entry.elevated {
                flags.push("admins only".into());
            }
            out.push_str(&format!(
                "- {} [{}]: {}\n",
                entry.name,
                flags.join(", "),
                first_line(&entry.description)
            ));
        }
    }
    if !diagnostics.is_empty() {
        out.push_str("\nNot loaded:\n");
        for diagnostic in diagnostics {
            let kind = match diagnostic.kind {
                DiagnosticKind::Skipped => "skipped",
                DiagnosticKind::Shadowed => "shadowed",
                DiagnosticKind::Ignored => "ignored",
            };
            out.push_str(&format!(
                "- {} ({kind}): {}\n",
                diagnostic.path.display(),
                diagnostic.message
            ));
        }
    }
    out.trim_end().to_owned()
}

/// The reply to `/skills info NAME` and the output of `herald skills info NAME`.
pub fn format_info(info: &SkillInfo) -> String {
    let entry = &info.entry;
    let mut lines = vec![
        format!(
            "{} ({})",
            entry.name,
            match entry.kind {
                SkillKind::Agent => "skill",
                SkillKind::Core => "core tool",
            }
        ),
        format!("State: {}", entry.state()),
    ];
    if !entry.unavailable.is_empty() {
        lines.push(format!("Unavailable: {}", entry.unavailable));
    }
    if entry.elevated {
        lines.push("Admins only".into());
    }
    lines.push(format!("Description: {}", entry.description));
    if let Some(revision) = &entry.revision {
        lines.push(format!("Revision: {revision}"));
    }
    if let Some(folder) = &entry.folder {
        lines.push(format!("Folder: {}", folder.display()));
    }
    if entry.kind == SkillKind::Agent {
        lines.push(format!("Instructions: {} characters", info.body_chars));
        lines.push(format!(
            "Files: {}",
            if info.files.is_empty() {
                "none".to_owned()
            } else {
                info.files.join(", ")
            }
        ));
    }
    if let Some(license) = &info.license {
        lines.push(format!("License: {license}"));
    }
    if let Some(compatibility) = &info.compatibility {
        lines.push(format!("Compatibility: {compatibility}"));
    }
    if !info.allowed_tools.is_empty() {
        lines.push(format!("Allowed tools: {}", info.allowed_tools.join(" ")));
    }
    for warning in &info.warnings {
        lines.push(format!("Warning: {warning}"));
    }
    lines.join("\n")
}

/// `herald skills validate PATH…`: strict checks of skill folders, `SKILL.md`
/// files, or folders of skill folders.
pub fn validate_paths(paths: &[PathBuf]) -> Vec<Validation> {
    let mut results = Vec::new();
    for path in paths {
        let folders = if path.is_file() {
            vec![path.parent().map(Path::to_path_buf).unwrap_or_default()]
        } else if path.join(SKILL_FILE).is_file() {
            vec![path.clone()]
        } else {
            let mut children: Vec<PathBuf> = std::fs::read_dir(path)
                .map(|entries| {
                    entries
                        .filter_map(Result::ok)
                        .map(|e| e.path())
                        .filter(|p| p.join(SKILL_FILE).is_file())
                        .collect()
                })
                .unwrap_or_default();
            children.sort();
            if children.is_empty() {
                results.push(Validation {
                    path: path.clone(),
                    name: None,
                    errors: vec![format!("no {SKILL_FILE} here or in the folders below")],
                    warnings: Vec::new(),
                });
            }
            children
        };
        results.extend(folders.into_iter().map(|folder| validate_folder(&folder)));
    }
    results
}

fn validate_folder(folder: &Path) -> Validation {
    let folder_name = folder
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let text = match std::fs::read_to_string(folder.join(SKILL_FILE)) {
        Ok(text) => text,
        Err(err) => {
            return Validation {
                path: folder.to_path_buf(),
                name: None,
                errors: vec![format!("cannot read {SKILL_FILE}: {err}")],
                warnings: Vec::new(),
            };
        }
    };
    let checked = spec::check(&folder_name, &text);
    Validation {
        path: folder.to_path_buf(),
        name: checked.document.as_ref().map(|d| d.name.to_string()),
        errors: checked.errors(Mode::Strict).map(|f| f.message.clone()).collect(),
        warnings: checked.warnings(Mode::Strict).map(|f| f.message.clone()).collect(),
    }
}

/// `herald skills validate` output; the caller exits non-zero when any failed.
pub fn format_validation(results: &[Validation]) -> String {
    let mut out = String::new();
    for result in results {
        let label = result.name.clone().unwrap_or_else(|| result.path.display().to_string());
        out.push_str(&format!(
            "{} {label} ({})\n",
            if result.is_ok() { "ok  " } else { "FAIL" },
            result.path.display()
        ));
        for error in &result.errors {
            out.push_str(&format!("  error: {error}\n"));
        }
        for warning in &result.warnings {
            out.push_str(&format!("  warning: {warning}\n"));
        }
    }
    out
}

/// `1 added (x), …` for `herald skills reload`.
pub fn format_reload(report: &ReloadReport) -> String {
    format!("Skills reloaded: {}.", report.summary())
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

fn capitalised(text: String) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => format!("{}{}.", first.to_uppercase(), chars.as_str()),
        None => text,
    }
}
