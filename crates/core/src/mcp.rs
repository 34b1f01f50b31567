//! The seam between the skill registry and the MCP client: what a
//! configured Model Context Protocol server looks like to the registry, and
//! the one trait the client implements (`herald-mcp`) and the registry
//! consumes (`herald-skills`), so neither depends on the other.
//!
//! The registry decides who sees and runs what (elevation, activation,
//! switches, confirmation, side-effect deduplication); the client owns the
//! connections (start, restart, timeouts, the environment a server gets) and
//! turns what a server says into these plain values.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::tools::ToolOutput;

/// One configured MCP server as the catalog lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpServerInfo {
    /// `[a-z0-9-]`, at most 32 characters: the name in the catalog and in `$name`.
    pub name: String,
    /// The configured description, else the server's own instructions or
    /// title once it has been reached, else a generic line.
    pub description: String,
    /// Only admins see it and get its tools.
    pub elevated: bool,
    /// Its tools are offered every turn without activation.
    pub eager: bool,
    /// What the connection is doing now, for operators (`running, 12 tools`).
    pub state: String,
    /// What operators should know about its last tool list: names it listed
    /// twice (dropped), rules in the configuration that match no tool, a
    /// list cut at Herald's bound.
    pub notes: Vec<String>,
}

/// How a tool may be run, from the server's annotations and the
/// configuration's per-tool overrides.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct McpToolFlags {
    pub side_effect: bool,
    pub dangerous: bool,
    pub parallel_safe: bool,
}

/// One tool a server offers, after `tools.allow`/`tools.deny`.
#[derive(Clone, Debug, PartialEq)]
pub struct McpTool {
    pub server: String,
    /// Herald's name for it: `mcp__<server>__<tool>`, sanitized, at most 64.
    pub name: String,
    /// The server's own name, used on the wire.
    pub remote_name: String,
    pub description: String,
    /// JSON schema of the arguments object, in the portable subset.
    pub parameters: Value,
    pub flags: McpToolFlags,
}

/// Why a server or a call could not be served.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    #[error("no MCP server named `{0}` is configured")]
    UnknownServer(String),
    #[error("MCP server `{server}` has no tool `{tool}` that Herald may call")]
    UnknownTool { server: String, tool: String },
    #[error("MCP server `{server}` is unavailable: {reason}")]
    Unavailable { server: String, reason: String },
    #[error("MCP server `{server}` did not answer within {}", crate::duration::format(*.after))]
    Timeout { server: String, after: Duration },
    #[error("MCP server `{server}` failed: {reason}")]
    Failed { server: String, reason: String },
}

/// The configured MCP servers, started when first needed.
#[async_trait]
pub trait McpServers: Send + Sync {
    /// Every configured server, in name order. Never starts one.
    fn servers(&self) -> Vec<McpServerInfo>;

    /// The tools of `server`, connecting (or reconnecting) first when needed.
    /// The caller waits for a listing at most `wait` (the listing goes on);
    /// a list kept from before is answered at once.
    async fn tools(&self, server: &str, wait: Duration) -> Result<Vec<McpTool>, McpError>;

    /// The tools of `server` known without connecting: `None` when it has
    /// not been reached yet.
    fn known_tools(&self, server: &str) -> Option<Vec<McpTool>>;

    /// Calls `tool` (Herald's name) on `server` within its call timeout.
    /// A tool error the server reports is an `Ok` output marked as an error.
    async fn call(&self, server: &str, tool: &str, arguments: Map<String, Value>) -> Result<ToolOutput, McpError>;
}

/// The server a Herald tool name belongs to: `mcp__files__read` → `files`.
pub fn server_of_tool(tool: &str) -> Option<&str> {
    let rest = tool.strip_prefix(TOOL_PREFIX)?;
    let (server, remote) = rest.split_once("__")?;
    (!server.is_empty() && !remote.is_empty()).then_some(server)
}

/// What every MCP tool name starts with.
pub const TOOL_PREFIX: &str = "mcp__";

#[cfg(test)]
mod tests {
    use super::server_of_tool;

    #[test]
    fn tool_names_name_their_server() {
        for (tool, server) in [
            ("mcp__files__read_file", Some("files")),
            ("mcp__a-b__x__y", Some("a-b")),
            ("mcp____x", None),
            ("mcp__files__", None),
            ("activate_skill", None),
        ] {
            assert_eq!(server_of_tool(tool), server, "{tool}");
        }
    }
}
