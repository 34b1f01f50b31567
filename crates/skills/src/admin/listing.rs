//! What `/skills`, `/skills info` and `herald skills list|info|reload`
//! print, in one place so chat and the command line say the same thing.

use crate::catalog::{Diagnostic, DiagnosticKind, ReloadReport, SkillEntry, SkillKind};

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

/// The reply to `/skills` and the output of `herald skills list`.
pub fn format_list(entries: &[SkillEntry], diagnostics: &[Diagnostic]) -> String {
    if entries.is_empty() {
        return "No skills.".into();
    }
    let mut out = String::new();
    for (kind, title) in [
        (SkillKind::Agent, "Skills"),
        (SkillKind::McpServer, "MCP servers"),
        (SkillKind::McpTool, "MCP tools"),
        (SkillKind::Core, "Core tools"),
    ] {
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
            if !entry.detail.is_empty() {
                flags.push(entry.detail.clone());
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
                SkillKind::McpServer => "MCP server",
                SkillKind::McpTool => "MCP tool",
            }
        ),
        format!("State: {}", entry.state()),
    ];
    if !entry.detail.is_empty() {
        lines.push(format!("Status: {}", entry.detail));
    }
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

/// `1 added (x), …` for `herald skills reload`.
pub fn format_reload(report: &ReloadReport) -> String {
    format!("Skills reloaded: {}.", report.summary())
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}
