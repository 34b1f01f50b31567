//! MCP servers in the registry, through the `McpServers` seam with many
//! servers of many tools: what a turn offers stays bounded, elevated
//! servers stay hidden, and refused calls never reach a server. (The real
//! client against real servers is tested end to end in the binary.)

use herald_core::{McpError, McpServerInfo, McpServers, McpTool, McpToolFlags};

use super::*;
use crate::catalog::MAX_MCP_TOOLS_PER_TURN;

/// `servers` servers `s0`, `s1`, … of `tools` tools each; `s0` is elevated.
struct ManyServers {
    servers: usize,
    tools: usize,
    eager: bool,
    calls: AtomicUsize,
}

impl ManyServers {
    fn tool(&self, server: &str, index: usize) -> McpTool {
        McpTool {
            server: server.to_owned(),
            name: format!("mcp__{server}__tool{index}"),
            remote_name: format!("tool{index}"),
            description: format!("Tool {index} of {server}, described at some length to cost a little."),
            parameters: json!({"type": "object", "properties": {"query": {"type": "string"}}}),
            flags: McpToolFlags {
                parallel_safe: true,
                ..McpToolFlags::default()
            },
        }
    }
}

#[async_trait]
impl McpServers for ManyServers {
    fn servers(&self) -> Vec<McpServerInfo> {
        (0..self.servers)
            .map(|i| McpServerInfo {
                name: format!("s{i}"),
                description: format!("Server {i}."),
                elevated: i == 0,
                eager: self.eager,
                state: "running".into(),
                notes: Vec::new(),
            })
            .collect()
    }

    async fn tools(&self, server: &str, _wait: std::time::Duration) -> Result<Vec<McpTool>, McpError> {
        Ok((0..self.tools).map(|i| self.tool(server, i)).collect())
    }

    fn known_tools(&self, server: &str) -> Option<Vec<McpTool>> {
        Some((0..self.tools).map(|i| self.tool(server, i)).collect())
    }

    async fn call(&self, _: &str, tool: &str, _: serde_json::Map<String, Value>) -> Result<ToolOutput, McpError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::ok(format!("ran {tool}")))
    }
}

async fn mcp_toolbox(fixture: &Fixture, servers: Arc<ManyServers>) -> SkillToolbox {
    SkillToolbox::builder(
        fixture.config(),
        Arc::clone(&fixture.store) as Arc<dyn ConversationStore>,
        10_000,
    )
    .admins(herald_core::Admins::new([ActorId::new(ADMIN)]))
    .mcp(servers)
    .build()
    .await
    .unwrap()
}

fn mcp_schema_chars(preparation: &TurnPreparation) -> (usize, usize) {
    let tools: Vec<_> = preparation
        .tools
        .iter()
        .filter(|t| t.name.starts_with("mcp__"))
        .collect();
    let chars = tools
        .iter()
        .map(|t| t.name.len() + t.description.chars().count() + t.parameters.to_string().chars().count())
        .sum();
    (tools.len(), chars)
}

#[tokio::test]
async fn the_schemas_of_a_turn_stay_bounded_however_many_tools_there_are() {
    let fixture = Fixture::new();
    // Eager: every server's tools would be offered without a bound.
    let servers = Arc::new(ManyServers {
        servers: 50,
        tools: 100,
        eager: true,
        calls: AtomicUsize::new(0),
    });
    let toolbox = mcp_toolbox(&fixture, servers).await;
    let preparation = toolbox.prepare(&scope(1, true), Some("hi")).await;
    let (count, chars) = mcp_schema_chars(&preparation);
    assert!(count > 0 && count <= MAX_MCP_TOOLS_PER_TURN, "{count} tools");
    assert!(
        chars <= 5_000,
        "{chars} characters of MCP schemas, over the caps' share"
    );

    // Activated ones: the active set's caps bound them the same way.
    let fixture = Fixture::new();
    let servers = Arc::new(ManyServers {
        servers: 20,
        tools: 10,
        eager: false,
        calls: AtomicUsize::new(0),
    });
    let toolbox = mcp_toolbox(&fixture, servers).await;
    let mentions: Vec<String> = (1..12).map(|i| format!("$s{i}")).collect();
    let text = mentions.join(" ");
    let preparation = toolbox.prepare(&scope(2, true), Some(&text)).await;
    let (count, chars) = mcp_schema_chars(&preparation);
    assert!(count > 0 && count <= MAX_MCP_TOOLS_PER_TURN, "{count} tools");
    assert!(chars <= 5_000, "{chars} characters");
    assert!(
        preparation.notices.iter().any(|n| n.contains("Deactivated")),
        "the caps evicted servers: {:?}",
        preparation.notices
    );
}

#[tokio::test]
async fn an_elevated_server_is_invisible_and_unusable_for_others() {
    let fixture = Fixture::new();
    let servers = Arc::new(ManyServers {
        servers: 2,
        tools: 2,
        eager: false,
        calls: AtomicUsize::new(0),
    });
    let toolbox = mcp_toolbox(&fixture, Arc::clone(&servers)).await;
    let alice = toolbox.prepare(&scope(1, false), Some("$s0 $s1")).await;
    assert!(!prompt(&alice).contains("s0:"), "{}", prompt(&alice));
    assert!(prompt(&alice).contains("- s1: Server 1."));
    assert_eq!(
        tool_names(&alice).iter().filter(|t| t.starts_with("mcp__s0")).count(),
        0
    );
    assert_eq!(
        tool_names(&alice).iter().filter(|t| t.starts_with("mcp__s1")).count(),
        2
    );
    let refused = toolbox
        .invoke(&scope(1, false), &call("mcp__s0__tool0", json!({})), 1)
        .await;
    assert!(
        refused.is_error && refused.content.contains("admins only"),
        "{refused:?}"
    );
    assert_eq!(servers.calls.load(Ordering::SeqCst), 0, "the server was never called");

    // The admin activated s0 in this same conversation; alice still cannot use it.
    toolbox.prepare(&scope(2, true), Some("$s0")).await;
    let refused = toolbox
        .invoke(&scope(3, false), &call("mcp__s0__tool0", json!({})), 1)
        .await;
    assert!(refused.is_error, "{refused:?}");
    let ran = toolbox
        .invoke(&scope(4, true), &call("mcp__s0__tool0", json!({})), 1)
        .await;
    assert_eq!(ran.content, "ran mcp__s0__tool0");
    assert_eq!(servers.calls.load(Ordering::SeqCst), 1);
}
