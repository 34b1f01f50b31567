//! What a server's tool list becomes in Herald, pure: the tool names the
//! model sees (`mcp__<server>__<tool>`, sanitized, at most 64 characters,
//! unique), the policy flags from MCP's annotations with the configured
//! overrides on top, the allow/deny filter, and the argument schema.
//!
//! The mapping: `readOnlyHint: true` → no side effect and parallel-safe;
//! anything else is a side effect; `destructiveHint: true` → dangerous.
//! Annotations are hints from a server Herald may not trust, so the
//! operator's `policy` always wins.

use std::collections::BTreeSet;

use herald_core::mcp::TOOL_PREFIX;
use herald_core::{McpTool, McpToolFlags};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::config::{PolicyOverride, ServerConfig};

/// The longest tool name model servers accept.
pub const MAX_TOOL_NAME_CHARS: usize = 64;
/// A tool description longer than this is cut: the schema is paid every turn.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;

/// The flags of a tool from its annotations, then the configured override.
pub fn flags(read_only: Option<bool>, destructive: Option<bool>, overrides: Option<&PolicyOverride>) -> McpToolFlags {
    let read_only = read_only == Some(true);
    let mut flags = McpToolFlags {
        side_effect: !read_only,
        dangerous: !read_only && destructive == Some(true),
        parallel_safe: read_only,
    };
    if let Some(o) = overrides {
        flags.side_effect = o.side_effect.unwrap_or(flags.side_effect);
        flags.dangerous = o.dangerous.unwrap_or(flags.dangerous);
        flags.parallel_safe = o.parallel_safe.unwrap_or(flags.parallel_safe);
    }
    flags
}

/// Herald's name for `remote` on `server`, unique among `taken`.
pub fn tool_name(server: &str, remote: &str, taken: &BTreeSet<String>) -> String {
    let mut name = format!("{TOOL_PREFIX}{server}__{}", sanitize(remote));
    if name.len() > MAX_TOOL_NAME_CHARS || taken.contains(&name) {
        // A short hash of the server's own name keeps two long or clashing
        // names apart, the same on every start.
        let digest = hex::encode(&Sha256::digest(remote.as_bytes())[..4]);
        name.truncate(MAX_TOOL_NAME_CHARS - digest.len() - 1);
        name.push('_');
        name.push_str(&digest);
    }
    name
}

/// `getTinyImage` → `get_tiny_image`, `read.file` → `read_file`: lowercase
/// letters, digits, `_` and `-` only, as Herald's skill names are.
fn sanitize(remote: &str) -> String {
    let mut out = String::with_capacity(remote.len() + 4);
    let mut previous_lower = false;
    for c in remote.chars() {
        if c.is_ascii_uppercase() {
            if previous_lower {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
            previous_lower = false;
        } else if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
            previous_lower = true;
        } else if c == '-' || c == '_' {
            out.push(c);
            previous_lower = false;
        } else {
            out.push('_');
            previous_lower = false;
        }
    }
    if out.is_empty() { "tool".into() } else { out }
}

/// One tool as the server listed it, before Herald's mapping.
#[derive(Clone, Debug)]
pub struct Listed {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub input_schema: Map<String, Value>,
    pub read_only: Option<bool>,
    pub destructive: Option<bool>,
}

/// The tools Herald offers from `server`: filtered, named and flagged.
pub fn map_tools(server: &str, config: &ServerConfig, listed: Vec<Listed>) -> Vec<McpTool> {
    let mut taken = BTreeSet::new();
    let mut tools = Vec::new();
    for tool in listed {
        if !config.tools.allows(&tool.name) {
            continue;
        }
        let name = tool_name(server, &tool.name, &taken);
        taken.insert(name.clone());
        let description = tool
            .description
            .filter(|d| !d.trim().is_empty())
            .or(tool.title)
            .unwrap_or_else(|| format!("`{}` of the MCP server `{server}`", tool.name));
        tools.push(McpTool {
            server: server.to_owned(),
            name,
            description: cut(&description, MAX_DESCRIPTION_CHARS),
            parameters: schema(tool.input_schema),
            flags: flags(tool.read_only, tool.destructive, config.policy.get(&tool.name)),
            remote_name: tool.name,
        });
    }
    tools
}

/// The argument schema: always an object schema, whatever the server sent.
fn schema(mut input: Map<String, Value>) -> Value {
    if input.get("type").and_then(Value::as_str) != Some("object") {
        input.insert("type".into(), Value::from("object"));
    }
    if !input.get("properties").is_some_and(Value::is_object) {
        input.insert("properties".into(), Value::Object(Map::new()));
    }
    // Meta keys some servers send are no use to a model and cost tokens.
    input.remove("$schema");
    Value::Object(input)
}

fn cut(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max_chars - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows: readOnlyHint, destructiveHint, override → side effect, dangerous, parallel-safe.
    #[test]
    fn annotations_map_to_flags_and_configuration_wins() {
        let dangerous = PolicyOverride {
            dangerous: Some(true),
            ..PolicyOverride::default()
        };
        let harmless = PolicyOverride {
            side_effect: Some(false),
            parallel_safe: Some(true),
            ..PolicyOverride::default()
        };
        for (read_only, destructive, overrides, expected) in [
            (Some(true), None, None, (false, false, true)),
            (Some(true), Some(true), None, (false, false, true)),
            (Some(false), None, None, (true, false, false)),
            (None, None, None, (true, false, false)),
            (None, Some(true), None, (true, true, false)),
            (Some(false), Some(false), None, (true, false, false)),
            (Some(true), None, Some(&dangerous), (false, true, true)),
            (None, Some(true), Some(&harmless), (false, true, true)),
        ] {
            let f = flags(read_only, destructive, overrides);
            assert_eq!(
                (f.side_effect, f.dangerous, f.parallel_safe),
                expected,
                "{read_only:?} {destructive:?} {overrides:?}"
            );
        }
    }

    /// Rows: server, tool → Herald's name.
    #[test]
    fn tool_names_are_sanitized_and_bounded() {
        let none = BTreeSet::new();
        for (server, remote, expected) in [
            ("files", "read_file", "mcp__files__read_file"),
            ("everything", "getTinyImage", "mcp__everything__get_tiny_image"),
            ("everything", "get-sum", "mcp__everything__get-sum"),
            ("x", "a.b/c d", "mcp__x__a_b_c_d"),
            ("x", "HTTPGet", "mcp__x__httpget"),
            ("x", "", "mcp__x__tool"),
        ] {
            assert_eq!(tool_name(server, remote, &none), expected);
        }
        let long = tool_name(
            "a-server-name-of-thirty-two-char",
            &"very_long_tool_name_".repeat(4),
            &none,
        );
        assert_eq!(long.len(), MAX_TOOL_NAME_CHARS, "{long}");
        let taken: BTreeSet<String> = ["mcp__x__get_sum".to_owned()].into();
        let second = tool_name("x", "getSum", &taken);
        assert_ne!(second, "mcp__x__get_sum");
        assert!(second.starts_with("mcp__x__get_sum_"), "{second}");
    }

    #[test]
    fn filters_apply_before_naming_and_schemas_become_objects() {
        let config: ServerConfig =
            serde_yaml::from_str("command: x\ntools: {deny: [move_file]}\npolicy: {write_file: {dangerous: true}}\n")
                .unwrap();
        let listed = |name: &str| Listed {
            name: name.into(),
            title: None,
            description: None,
            input_schema: Map::new(),
            read_only: None,
            destructive: None,
        };
        let tools = map_tools(
            "files",
            &config,
            vec![listed("read_file"), listed("move_file"), listed("write_file")],
        );
        let names: Vec<&str> = tools.iter().map(|t| t.remote_name.as_str()).collect();
        assert_eq!(names, ["read_file", "write_file"]);
        assert!(tools[1].flags.dangerous && !tools[0].flags.dangerous);
        assert_eq!(
            tools[0].parameters,
            serde_json::json!({"type": "object", "properties": {}})
        );
        assert!(tools[0].description.contains("read_file"));
    }
}
