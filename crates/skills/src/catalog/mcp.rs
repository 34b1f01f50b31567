//! MCP servers in the registry. A configured server is a skill of a third
//! kind: listed in the catalog by name and description like an Agent
//! Skill, activated the same ways and within the same caps, and what it
//! brings is tools rather than instructions. Each of its tools becomes a
//! core skill ([`McpToolSkill`]) with the server's policy, so every call
//! passes the same checks at execution (elevation, switches, the schema,
//! confirmation of dangerous calls, side-effect deduplication).
//!
//! The registry reaches servers only through [`McpServers`] from
//! `herald-core`; the client lives in `herald-mcp`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use herald_core::{McpError, McpServerInfo, McpTool, ToolOutput, ToolSpec};
use serde_json::Value;

use crate::catalog::{
    Catalog, CoreSkill, Policy, SkillContext, SkillEntry, SkillKind, SkillSpec, TurnView, describe_arguments,
};
use crate::error::SkillError;
use crate::name::SkillName;

/// MCP tools offered in one turn at most, however many servers are active.
pub const MAX_MCP_TOOLS_PER_TURN: usize = 64;

/// How long a turn waits for an eager server's listing: not at all. Eager
/// servers are listed when Herald starts; one that has not answered yet (or
/// hangs) is left out of the turn while its listing goes on.
pub const EAGER_WAIT: Duration = Duration::ZERO;
/// How long a turn waits for an activated server's listing (after a restart
/// of Herald, or a change of its list) before it goes on without it.
pub const ACTIVE_WAIT: Duration = Duration::from_secs(1);
/// What someone who asked for a server by name waits: the listing's own
/// bounds (`startup_timeout` and `call_timeout`).
pub const WHOLE_LISTING: Duration = Duration::MAX;

/// One tool of an MCP server, as a core skill.
pub struct McpToolSkill {
    spec: SkillSpec,
    server: String,
}

impl McpToolSkill {
    pub fn server(&self) -> &str {
        &self.server
    }
}

#[async_trait]
impl CoreSkill for McpToolSkill {
    fn spec(&self) -> &SkillSpec {
        &self.spec
    }

    fn describe_call(&self, _view: &TurnView, arguments: &Value) -> String {
        describe_arguments(
            &format!(
                "Confirm: Herald wants to run `{}` on the MCP server `{}`.",
                self.spec.name, self.server
            ),
            arguments,
        )
    }

    async fn invoke(&self, context: &SkillContext<'_>, arguments: Value) -> Result<ToolOutput, SkillError> {
        let Some(servers) = &context.services.mcp else {
            return Err(SkillError::refused("no MCP servers are configured"));
        };
        let arguments = match arguments {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        servers
            .call(&self.server, self.spec.name.as_str(), arguments)
            .await
            .map_err(|err| SkillError::refused(format!("{err}; it was not run or did not finish")))
    }
}

/// The characters a tool's schema costs in every prompt that offers it.
pub fn schema_chars(tool: &McpTool) -> usize {
    tool.name.len() + tool.description.chars().count() + tool.parameters.to_string().chars().count()
}

fn skill_of(tool: &McpTool, server: &McpServerInfo) -> Option<Arc<McpToolSkill>> {
    let name = SkillName::new(tool.name.clone()).ok()?;
    Some(Arc::new(McpToolSkill {
        spec: SkillSpec {
            name,
            description: tool.description.clone(),
            parameters: tool.parameters.clone(),
            policy: Policy {
                side_effect: tool.flags.side_effect,
                elevated: server.elevated,
                dangerous: tool.flags.dangerous,
                parallel_safe: tool.flags.parallel_safe,
                research: false,
            },
        },
        server: server.name.clone(),
    }))
}

impl Catalog {
    /// Every configured MCP server, none when there is no client.
    pub fn mcp_servers(&self) -> Vec<McpServerInfo> {
        self.services.mcp.as_ref().map(|m| m.servers()).unwrap_or_default()
    }

    /// The MCP servers this sender may use: switched on, for admins only
    /// when elevated, and not named like a skill (the skill wins).
    pub fn visible_mcp_servers(&self, is_admin: bool) -> Vec<McpServerInfo> {
        let registry = self.read();
        self.mcp_servers()
            .into_iter()
            .filter(|server| {
                (is_admin || !server.elevated)
                    && !registry.contains(&server.name)
                    && SkillName::new(server.name.clone()).is_ok_and(|n| registry.is_enabled(&n))
            })
            .collect()
    }

    /// The schema characters of a server's tools, when they are known.
    pub fn mcp_size(&self, server: &str) -> usize {
        let Some(mcp) = &self.services.mcp else { return 0 };
        mcp.known_tools(server)
            .map_or(0, |tools| tools.iter().map(schema_chars).sum())
    }

    /// The tools of `server` as core skills, connecting when needed; the
    /// lookup table for execution is brought up to date on the way.
    pub async fn mcp_tools(&self, server: &str, wait: Duration) -> Result<Vec<Arc<McpToolSkill>>, McpError> {
        let Some(mcp) = &self.services.mcp else {
            return Err(McpError::UnknownServer(server.to_owned()));
        };
        let info = mcp
            .servers()
            .into_iter()
            .find(|s| s.name == server)
            .ok_or_else(|| McpError::UnknownServer(server.to_owned()))?;
        let tools = mcp.tools(server, wait).await?;
        let skills: Vec<Arc<McpToolSkill>> = tools.iter().filter_map(|tool| skill_of(tool, &info)).collect();
        let mut table = self.mcp_table.write().expect("mcp table lock");
        table.retain(|_, skill| skill.server != server);
        for skill in &skills {
            table.insert(skill.spec.name.to_string(), Arc::clone(skill));
        }
        Ok(skills)
    }

    /// An MCP tool known from an earlier listing.
    pub fn mcp_tool(&self, name: &str) -> Option<Arc<McpToolSkill>> {
        self.mcp_table.read().expect("mcp table lock").get(name).cloned()
    }

    /// The tool specs of the servers in `servers`, in order, within the
    /// per-turn bounds: `max_chars` of schemas and [`MAX_MCP_TOOLS_PER_TURN`].
    /// Switched-off tools are left out. A server that cannot be reached is
    /// skipped with a line for the log.
    pub async fn mcp_tool_specs(&self, servers: &[String], max_chars: usize) -> Vec<ToolSpec> {
        let mut specs = Vec::new();
        let mut used = 0;
        let infos = self.mcp_servers();
        for server in servers {
            let eager = infos.iter().any(|info| &info.name == server && info.eager);
            let wait = if eager { EAGER_WAIT } else { ACTIVE_WAIT };
            let tools = match self.mcp_tools(server, wait).await {
                Ok(tools) => tools,
                Err(err) => {
                    tracing::warn!(server = %server, error = %err, "mcp server's tools not offered this turn");
                    continue;
                }
            };
            let registry = self.read();
            for tool in tools {
                let spec = &tool.spec;
                if !registry.is_enabled(&spec.name) {
                    continue;
                }
                let chars = spec.name.as_str().len()
                    + spec.description.chars().count()
                    + spec.parameters.to_string().chars().count();
                if specs.len() >= MAX_MCP_TOOLS_PER_TURN || used + chars > max_chars {
                    tracing::warn!(server = %server, tool = %spec.name, "mcp tool left out: the turn's tool budget is spent");
                    continue;
                }
                used += chars;
                specs.push(ToolSpec {
                    name: spec.name.to_string(),
                    description: spec.description.clone(),
                    parameters: spec.parameters.clone(),
                });
            }
        }
        specs
    }
}

impl Catalog {
    /// Every skill with its state, then every MCP server and the tools
    /// known of it; elevated ones only for admins.
    pub fn entries(&self, is_admin: bool) -> Vec<SkillEntry> {
        let mut entries = self.read().entries(is_admin);
        let servers = self.mcp_servers();
        let registry = self.read();
        for server in servers.iter().filter(|s| is_admin || !s.elevated) {
            let Ok(name) = SkillName::new(server.name.clone()) else {
                continue;
            };
            let shadowed = registry.contains(&server.name);
            entries.push(SkillEntry {
                enabled: registry.is_enabled(&name),
                name,
                kind: SkillKind::McpServer,
                unavailable: if shadowed {
                    "a skill of the same name takes precedence".into()
                } else if server.state.starts_with("failed") {
                    server.state.clone()
                } else {
                    String::new()
                },
                elevated: server.elevated,
                description: server.description.clone(),
                revision: None,
                folder: None,
                detail: if server.eager {
                    format!("{}; eager", server.state)
                } else {
                    server.state.clone()
                },
            });
            let Some(mcp) = &self.services.mcp else { continue };
            for tool in mcp.known_tools(&server.name).unwrap_or_default() {
                let Ok(tool_name) = SkillName::new(tool.name.clone()) else {
                    continue;
                };
                let mut flags = Vec::new();
                if tool.flags.side_effect {
                    flags.push("side effect");
                }
                if tool.flags.dangerous {
                    flags.push("dangerous");
                }
                if tool.flags.parallel_safe {
                    flags.push("parallel-safe");
                }
                entries.push(SkillEntry {
                    enabled: registry.is_enabled(&tool_name),
                    name: tool_name,
                    kind: SkillKind::McpTool,
                    unavailable: String::new(),
                    elevated: server.elevated,
                    description: tool.description.clone(),
                    revision: None,
                    folder: None,
                    detail: if flags.is_empty() {
                        format!("on {}, read-only", server.name)
                    } else {
                        format!("on {}, {}", server.name, flags.join(", "))
                    },
                });
            }
        }
        entries
    }
}

/// The MCP tool table kept by the catalog: Herald's tool name → the skill.
pub type McpTable = BTreeMap<String, Arc<McpToolSkill>>;
