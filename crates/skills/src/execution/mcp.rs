//! The checks an MCP tool call passes before the common policy: the
//! server exists, this sender may use it (elevated servers are for admins
//! only), it is switched on, and it is active in this conversation (or
//! eager). Only then is the server started and its tool list read, so a
//! call the model makes to a server it was never given starts nothing.

use herald_core::mcp::server_of_tool;
use herald_core::{ToolOutput, TurnScope};

use crate::activation::load_active;
use crate::catalog::{Catalog, Services};
use crate::execution::refused;
use crate::name::SkillName;

/// `Ok` when `tool` is no MCP tool, or an MCP tool this call may go on
/// with (its server's tools listed); else the refusal for the model.
pub(crate) async fn admit(
    services: &Services,
    catalog: &Catalog,
    scope: &TurnScope,
    is_admin: bool,
    tool: &str,
) -> Result<(), ToolOutput> {
    let Some(server_name) = server_of_tool(tool) else {
        return Ok(());
    };
    if catalog.read().core(tool).is_some() {
        return Ok(());
    }
    let Some(server) = catalog.mcp_servers().into_iter().find(|s| s.name == server_name) else {
        return Ok(());
    };
    if server.elevated && !is_admin {
        tracing::warn!(
            tool,
            actor = ?scope.actor.as_ref().map(|a| a.as_str()),
            conversation = %scope.conversation.id,
            task = %scope.task,
            "refused an elevated MCP server's tool for a non-admin"
        );
        refused("elevated");
        return Err(ToolOutput::error(format!(
            "`{tool}` is for admins only; it was not run. Tell the user you cannot do this for them."
        )));
    }
    let name = SkillName::new(server.name.clone()).map_err(ToolOutput::error)?;
    if !catalog.read().is_enabled(&name) || catalog.read().contains(&server.name) {
        refused("disabled");
        return Err(ToolOutput::error(format!(
            "the MCP server `{}` is disabled by an admin; `{tool}` was not run",
            server.name
        )));
    }
    if !server.eager {
        let active = load_active(services.store.as_ref(), &scope.conversation.id)
            .await
            .unwrap_or_default();
        if !active.contains(&name) {
            refused("inactive");
            return Err(ToolOutput::error(format!(
                "`{tool}` belongs to the MCP server `{}`, which is not active in this conversation; \
                 call activate_skill with the name `{}` first. Nothing was run.",
                server.name, server.name
            )));
        }
    }
    match catalog.mcp_tools(&server.name, crate::catalog::WHOLE_LISTING).await {
        Ok(_) => Ok(()),
        Err(err) => {
            refused("mcp_unavailable");
            Err(ToolOutput::error(format!("{err}; `{tool}` was not run")))
        }
    }
}
