//! Operating the registry: the chat commands (`/skills …`, `/approve`,
//! `/deny`), listing, info, switches, install and validation, shared by the
//! chat commands and the `herald skills` CLI so both say the same thing.
//!
//! Architecture invariant: a command that changes anything is refused for a
//! non-admin here, before it reaches the catalog or the executor.

mod command;
mod install;
mod listing;
mod validate;

use std::path::Path;

use herald_core::TurnScope;

pub use command::{SkillCommand, parse_command};
pub use install::Installed;
pub use listing::{SkillInfo, format_info, format_list, format_reload};
pub use validate::{Validation, format_validation, validate_paths};

use crate::catalog::Services;
use crate::catalog::{Catalog, SkillKind};
use crate::error::SkillError;
use crate::execution::Executor;
use crate::name::SkillName;
use crate::state;

/// The answer to a chat command.
pub(crate) async fn answer(
    catalog: &Catalog,
    executor: &Executor,
    scope: &TurnScope,
    is_admin: bool,
    command: SkillCommand,
) -> String {
    if command.changes_state() && !is_admin {
        tracing::warn!(
            actor = ?scope.actor.as_ref().map(|a| a.as_str()),
            conversation = %scope.conversation.id,
            "skill command refused for a non-admin"
        );
        return "Only an admin can do that.".into();
    }
    match command {
        SkillCommand::List => {
            let diagnostics = if is_admin {
                catalog.read().diagnostics().to_vec()
            } else {
                Vec::new()
            };
            format_list(&catalog.entries(is_admin), &diagnostics)
        }
        SkillCommand::Info(name) => match info(catalog, &name, is_admin) {
            Ok(info) => format_info(&info),
            Err(err) => capitalised(err.to_string()),
        },
        SkillCommand::Enable(name) => switch_reply(catalog, &name, true).await,
        SkillCommand::Disable(name) => switch_reply(catalog, &name, false).await,
        SkillCommand::Reload => match catalog.reload().await {
            Ok(report) => format_reload(&report),
            Err(err) => format!("Reload failed: {err}"),
        },
        SkillCommand::Approve(code) => executor.approve(scope, &code).await,
        SkillCommand::Deny(code) => executor.deny(&code).await,
    }
}

/// Everything `/skills info NAME` shows, for this sender.
pub(crate) fn info(catalog: &Catalog, name: &str, is_admin: bool) -> Result<SkillInfo, SkillError> {
    let entry = catalog
        .entries(is_admin)
        .into_iter()
        .find(|e| e.name.as_str() == name)
        .ok_or_else(|| SkillError::NotFound(name.to_owned()))?;
    let registry = catalog.read();
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

/// Installs a folder or `.zip` into the install directory, disabled, and
/// rescans. The disabled switch is recorded before the skill is moved into
/// place, so no failure leaves it in place enabled; any failure after that
/// puts the switch back as it was and removes what was installed.
pub(crate) async fn install(catalog: &Catalog, services: &Services, source: &Path) -> Result<Installed, SkillError> {
    let source = source.to_path_buf();
    let install_dir = services.config.install_dir();
    let limits = services.config.install_limits.clone();
    let staged = tokio::task::spawn_blocking(move || install::stage_skill(&source, &install_dir, &limits))
        .await
        .map_err(|err| SkillError::refused(format!("install failed: {err}")))??;
    let name = staged.installed().name.clone();
    let store = services.store.as_ref();
    let previous = state::switch(store, &name).await?;
    // A failure here drops the staged files.
    state::set_enabled(store, &name, false).await?;
    let committed = tokio::task::spawn_blocking(move || staged.commit())
        .await
        .map_err(|err| SkillError::refused(format!("install failed: {err}")));
    let installed = match committed {
        Ok(Ok(installed)) => installed,
        Ok(Err(err)) | Err(err) => {
            put_switch_back(services, &name, previous.as_ref()).await;
            return Err(err);
        }
    };
    if let Err(err) = catalog.reload().await {
        tracing::warn!(error = %err, skill = %name, "rescan after install failed; removing the skill again");
        if let Err(remove) = std::fs::remove_dir_all(&installed.folder) {
            tracing::warn!(error = %remove, folder = %installed.folder.display(), "installed folder not removed");
        }
        put_switch_back(services, &name, previous.as_ref()).await;
        return Err(err);
    }
    Ok(installed)
}

async fn put_switch_back(services: &Services, name: &SkillName, previous: Option<&serde_json::Value>) {
    if let Err(err) = state::restore_switch(services.store.as_ref(), name, previous).await {
        tracing::warn!(error = %err, skill = %name, "switch of a failed install not put back");
    }
}

async fn switch_reply(catalog: &Catalog, name: &str, enabled: bool) -> String {
    match catalog.set_enabled(name, enabled).await {
        Ok(name) => {
            let mut reply = format!("Skill `{name}` is {}.", if enabled { "enabled" } else { "disabled" });
            if enabled
                && let Ok(info) = info(catalog, name.as_str(), true)
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

fn capitalised(text: String) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => format!("{}{}.", first.to_uppercase(), chars.as_str()),
        None => text,
    }
}
