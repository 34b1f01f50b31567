//! `herald skills …`: the operator's view of the skill registry, the same
//! operations admins have in chat (`/skills …`), plus strict validation and
//! installation from a folder or a `.zip`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;
use herald_core::Outbound;
use herald_skills::{format_info, format_list, format_validation, validate_paths};

use crate::app::App;

#[derive(Subcommand)]
pub enum SkillsCommand {
    /// Every skill with its state (enabled, disabled, unavailable) and what the last scan reported.
    List,
    /// One skill in detail: description, policy, files, warnings.
    Info { name: String },
    /// Check skill folders strictly; exits non-zero when any has an error.
    Validate {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Install a skill folder or `.zip` into the install folder. It starts disabled.
    Install { path: PathBuf },
    /// Offer a skill to the model.
    Enable { name: String },
    /// Stop offering a skill to the model.
    Disable { name: String },
}

/// `validate` needs no configuration or storage.
pub fn validate(paths: &[PathBuf]) -> ExitCode {
    let results = validate_paths(paths);
    print!("{}", format_validation(&results));
    if results.iter().all(|r| r.is_ok()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

pub async fn skills(app: App, command: SkillsCommand) -> Result<ExitCode> {
    // The CLI is the operator: it sees everything, elevated skills included.
    let toolbox = app.skills(Outbound::new()).await?;
    let code = match command {
        SkillsCommand::List => {
            // The operator sees each MCP server's tools: servers are reached first.
            toolbox.reach_mcp_servers().await;
            print!("{}", format_list(&toolbox.list(true), &toolbox.diagnostics()));
            ExitCode::SUCCESS
        }
        SkillsCommand::Info { name } => {
            toolbox.reach_mcp_servers().await;
            print!("{}", format_info(&toolbox.info(&name, true)?));
            ExitCode::SUCCESS
        }
        SkillsCommand::Install { path } => {
            let installed = toolbox.install(&path).await?;
            println!(
                "installed {} into {} ({} files, {} bytes); it is disabled until you run `herald skills enable {}`",
                installed.name,
                installed.folder.display(),
                installed.files,
                installed.bytes,
                installed.name
            );
            for warning in &installed.warnings {
                println!("warning: {warning}");
            }
            ExitCode::SUCCESS
        }
        SkillsCommand::Enable { name } => {
            let name = toolbox.set_enabled(&name, true).await?;
            println!("{name} enabled");
            ExitCode::SUCCESS
        }
        SkillsCommand::Disable { name } => {
            let name = toolbox.set_enabled(&name, false).await?;
            println!("{name} disabled");
            ExitCode::SUCCESS
        }
        SkillsCommand::Validate { .. } => unreachable!("validated without configuration"),
    };
    app.close().await;
    Ok(code)
}
