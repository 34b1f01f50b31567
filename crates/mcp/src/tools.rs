//! What a server's tool list becomes in Herald, pure: the tool names the
//! model sees (`mcp__<server>__<tool>`, sanitized, at most 64 characters,
//! unique), the policy flags from MCP's annotations with the configured
//! overrides on top, the allow/deny filter, and the argument schema.
//!
//! Annotations are hints from a server Herald may not trust (the MCP
//! specification says a client must treat them as untrusted unless the
//! server is), so by default they count for nothing: every tool is a side
//! effect, dangerous (it waits for an admin's `/approve`) and run alone.
//! An operator who trusts a server sets `trust_annotations`; then they are
//! read as the specification defines them: `readOnlyHint: true` → no side
//! effect and parallel-safe; otherwise a side effect, dangerous unless
//! `destructiveHint: false` (the specification's default is `true`). The
//! operator's `policy` wins over both.
//!
//! A name the server lists twice is dropped (both entries: which one a call
//! would reach is the server's to decide), and so is the whole list when a
//! `tools.deny` entry names no listed tool: the rule was written for a tool
//! that is now called something else, so nothing is offered until the
//! operator looks (fail closed). Other configured names that match nothing
//! are reported.

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

/// The flags of a tool from its annotations (when `trusted`), then the
/// configured override.
pub fn flags(
    read_only: Option<bool>,
    destructive: Option<bool>,
    trusted: bool,
    overrides: Option<&PolicyOverride>,
) -> McpToolFlags {
    let mut flags = if !trusted {
        McpToolFlags {
            side_effect: true,
            dangerous: true,
            parallel_safe: false,
        }
    } else if read_only == Some(true) {
        McpToolFlags {
            side_effect: false,
            dangerous: false,
            parallel_safe: true,
        }
    } else {
        McpToolFlags {
            side_effect: true,
            dangerous: destructive != Some(false),
            parallel_safe: false,
        }
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

/// What a server's listing became: the tools Herald offers, and what the
/// operator should know about it (names dropped, rules that match nothing).
#[derive(Debug, Default)]
pub struct Mapped {
    pub tools: Vec<McpTool>,
    pub notes: Vec<String>,
}

/// Why a listing is not used at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Withheld(pub String);

/// The tools Herald offers from `server`: filtered, named and flagged.
pub fn map_tools(server: &str, config: &ServerConfig, listed: Vec<Listed>) -> Result<Mapped, Withheld> {
    let mut seen = std::collections::BTreeMap::<&str, usize>::new();
    for tool in &listed {
        *seen.entry(tool.name.as_str()).or_default() += 1;
    }
    let unmatched = |names: &[String]| -> Vec<String> {
        names
            .iter()
            .filter(|name| !seen.contains_key(name.as_str()))
            .cloned()
            .collect()
    };
    let denied_nothing = unmatched(&config.tools.deny);
    if !denied_nothing.is_empty() {
        return Err(Withheld(format!(
            "tools.deny names {}, which it does not list; none of its tools are offered until the rule names its tools",
            quoted(&denied_nothing)
        )));
    }
    let mut notes = Vec::new();
    let allowed_nothing = unmatched(&config.tools.allow);
    if !allowed_nothing.is_empty() {
        notes.push(format!(
            "tools.allow names {}, which it does not list",
            quoted(&allowed_nothing)
        ));
    }
    let policy_keys: Vec<String> = config.policy.keys().cloned().collect();
    let ruled_nothing = unmatched(&policy_keys);
    if !ruled_nothing.is_empty() {
        notes.push(format!(
            "policy names {}, which it does not list (those rules apply to nothing)",
            quoted(&ruled_nothing)
        ));
    }
    let twice: Vec<String> = seen
        .iter()
        .filter(|(_, count)| **count > 1)
        .map(|(name, _)| (*name).to_owned())
        .collect();
    if !twice.is_empty() {
        notes.push(format!(
            "it lists {} more than once; those are not offered",
            quoted(&twice)
        ));
    }
    let mut taken = BTreeSet::new();
    let mut tools = Vec::new();
    for tool in listed {
        if !config.tools.allows(&tool.name) || twice.contains(&tool.name) {
            continue;
        }
        let name = tool_name(server, &tool.name, &taken);
        taken.insert(name.clone());
        let description = tool
            .description
            .filter(|d| !d.trim().is_empty())
            .or(tool.title)
            .map(|d| herald_core::text::printable(&d))
            .unwrap_or_else(|| format!("`{}` of the MCP server `{server}`", tool.name));
        tools.push(McpTool {
            server: server.to_owned(),
            name,
            description: cut(&description, MAX_DESCRIPTION_CHARS),
            parameters: schema(tool.input_schema),
            flags: flags(
                tool.read_only,
                tool.destructive,
                config.trust_annotations,
                config.policy.get(&tool.name),
            ),
            remote_name: tool.name,
        });
    }
    Ok(Mapped { tools, notes })
}

fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|name| format!("`{}`", herald_core::text::printable_line(name)))
        .collect::<Vec<_>>()
        .join(", ")
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

    /// Rows: readOnlyHint, destructiveHint, trusted, override → side effect,
    /// dangerous, parallel-safe.
    #[test]
    fn annotations_count_only_when_trusted_and_configuration_wins() {
        let dangerous = PolicyOverride {
            dangerous: Some(true),
            ..PolicyOverride::default()
        };
        let harmless = PolicyOverride {
            side_effect: Some(false),
            dangerous: Some(false),
            parallel_safe: Some(true),
        };
        for (read_only, destructive, trusted, overrides, expected) in [
            // Untrusted: whatever the server says, the safe side.
            (Some(true), None, false, None, (true, true, false)),
            (Some(true), Some(false), false, None, (true, true, false)),
            (None, None, false, None, (true, true, false)),
            (Some(true), None, false, Some(&harmless), (false, false, true)),
            // Trusted: the specification's reading and defaults.
            (Some(true), None, true, None, (false, false, true)),
            (Some(true), Some(true), true, None, (false, false, true)),
            (Some(false), None, true, None, (true, true, false)),
            (None, None, true, None, (true, true, false)),
            (None, Some(true), true, None, (true, true, false)),
            (Some(false), Some(false), true, None, (true, false, false)),
            (Some(true), None, true, Some(&dangerous), (false, true, true)),
            (None, Some(true), true, Some(&harmless), (false, false, true)),
        ] {
            let f = flags(read_only, destructive, trusted, overrides);
            assert_eq!(
                (f.side_effect, f.dangerous, f.parallel_safe),
                expected,
                "{read_only:?} {destructive:?} trusted {trusted} {overrides:?}"
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

    fn listed(name: &str) -> Listed {
        Listed {
            name: name.into(),
            title: None,
            description: None,
            input_schema: Map::new(),
            read_only: None,
            destructive: None,
        }
    }

    #[test]
    fn filters_apply_before_naming_and_schemas_become_objects() {
        let config: ServerConfig = serde_yaml::from_str(
            "command: x\ntrust_annotations: true\ntools: {deny: [move_file]}\npolicy: {write_file: {dangerous: true}, read_file: {dangerous: false}}\n",
        )
        .unwrap();
        let mapped = map_tools(
            "files",
            &config,
            vec![listed("read_file"), listed("move_file"), listed("write_file")],
        )
        .unwrap();
        let tools = mapped.tools;
        let names: Vec<&str> = tools.iter().map(|t| t.remote_name.as_str()).collect();
        assert_eq!(names, ["read_file", "write_file"]);
        assert!(tools[1].flags.dangerous && !tools[0].flags.dangerous);
        assert_eq!(
            tools[0].parameters,
            serde_json::json!({"type": "object", "properties": {}})
        );
        assert!(tools[0].description.contains("read_file"));
        assert!(mapped.notes.is_empty(), "{:?}", mapped.notes);
    }

    #[test]
    fn a_name_listed_twice_is_dropped_and_said() {
        let config: ServerConfig = serde_yaml::from_str("command: x\n").unwrap();
        let mut destructive = listed("write");
        destructive.destructive = Some(true);
        let mut harmless = listed("write");
        harmless.read_only = Some(true);
        let mapped = map_tools("files", &config, vec![harmless, listed("read"), destructive]).unwrap();
        let names: Vec<&str> = mapped.tools.iter().map(|t| t.remote_name.as_str()).collect();
        assert_eq!(names, ["read"]);
        assert_eq!(mapped.notes, ["it lists `write` more than once; those are not offered"]);
    }

    #[test]
    fn a_deny_rule_that_matches_nothing_withholds_every_tool() {
        let config: ServerConfig =
            serde_yaml::from_str("command: x\ntools: {deny: [write_file]}\npolicy: {gone: {dangerous: false}}\n")
                .unwrap();
        // The server renamed `write_file` to `write_file_v2`.
        let withheld = map_tools("files", &config, vec![listed("read_file"), listed("write_file_v2")]).unwrap_err();
        assert!(withheld.0.contains("tools.deny names `write_file`"), "{withheld:?}");
        let config: ServerConfig =
            serde_yaml::from_str("command: x\ntools: {allow: [old]}\npolicy: {gone: {dangerous: false}}\n").unwrap();
        let mapped = map_tools("files", &config, vec![listed("read_file")]).unwrap();
        assert!(mapped.tools.is_empty());
        assert_eq!(
            mapped.notes,
            [
                "tools.allow names `old`, which it does not list",
                "policy names `gone`, which it does not list (those rules apply to nothing)"
            ]
        );
    }

    #[test]
    fn descriptions_lose_their_escapes() {
        let config: ServerConfig = serde_yaml::from_str("command: x\n").unwrap();
        let mut tool = listed("read");
        tool.description = Some("Reads.\u{1b}]52;c;cGF5bG9hZA==\u{7}\u{1b}[2J".into());
        let mapped = map_tools("files", &config, vec![tool]).unwrap();
        assert_eq!(mapped.tools[0].description, "Reads.]52;c;cGF5bG9hZA==[2J");
    }
}
