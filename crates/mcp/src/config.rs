//! The `mcp:` section of Herald's configuration: which MCP servers exist,
//! how each is reached (a program on stdio, or a streamable HTTP URL), what
//! it may see of Herald's environment, and the policy its tools run under.
//! The binary composes it into its own file (`${VAR}` is expanded there);
//! this module says what the keys mean, what they default to, and which
//! combinations cannot work ([`McpConfig::problems`], each naming its key).

use std::collections::BTreeMap;
use std::time::Duration;

use secrecy::SecretString;
use serde::Deserialize;

/// Longest server name: it is part of every tool name, which may have 64 characters.
pub const MAX_SERVER_NAME_CHARS: usize = 32;

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpConfig {
    /// The servers by name (`[a-z0-9-]`, at most 32 characters).
    pub servers: BTreeMap<String, ServerConfig>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// stdio transport: the program to start.
    pub command: Option<String>,
    /// Its arguments.
    pub args: Vec<String>,
    /// The only variables it gets besides `PATH`.
    pub env: BTreeMap<String, SecretString>,
    /// Streamable HTTP transport: the server's URL.
    pub url: Option<String>,
    /// Sent with every HTTP request (credentials, typically).
    pub headers: BTreeMap<String, SecretString>,
    /// The catalog line; else the server's own instructions or title.
    pub description: Option<String>,
    /// Only admins see and run its tools.
    pub elevated: bool,
    /// Its tools are offered every turn without activation.
    pub eager: bool,
    pub tools: ToolFilter,
    /// Whether its tool annotations (`readOnlyHint`, `destructiveHint`) are
    /// believed; without it every tool is a dangerous side effect.
    pub trust_annotations: bool,
    /// Per-tool overrides of the flags its annotations give.
    pub policy: BTreeMap<String, PolicyOverride>,
    #[serde(with = "herald_core::duration::serde")]
    pub startup_timeout: Duration,
    #[serde(with = "herald_core::duration::serde")]
    pub call_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            url: None,
            headers: BTreeMap::new(),
            description: None,
            elevated: true,
            eager: false,
            tools: ToolFilter::default(),
            trust_annotations: false,
            policy: BTreeMap::new(),
            startup_timeout: Duration::from_secs(10),
            call_timeout: Duration::from_secs(60),
        }
    }
}

/// Which of a server's tools Herald offers, by the server's tool names.
/// An empty `allow` allows every tool; `deny` wins over `allow`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolFilter {
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

impl ToolFilter {
    pub fn allows(&self, tool: &str) -> bool {
        (self.allow.is_empty() || self.allow.iter().any(|t| t == tool)) && !self.deny.iter().any(|t| t == tool)
    }
}

/// Flags set here win over what the server's annotations say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PolicyOverride {
    pub side_effect: Option<bool>,
    pub dangerous: Option<bool>,
    pub parallel_safe: Option<bool>,
}

/// How a server is reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transport {
    Stdio,
    Http,
}

impl ServerConfig {
    pub fn transport(&self) -> Transport {
        if self.url.is_some() {
            Transport::Http
        } else {
            Transport::Stdio
        }
    }
}

impl McpConfig {
    /// Values that parse but cannot work, each as (`mcp.servers.NAME.key`, reason).
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        for (name, server) in &self.servers {
            let key = |k: &str| format!("mcp.servers.{name}.{k}");
            if let Some(reason) = server_name_problem(name) {
                problems.push((format!("mcp.servers.{name}"), reason));
            }
            match (&server.command, &server.url) {
                (None, None) => problems.push((
                    format!("mcp.servers.{name}"),
                    "needs `command` (a program on stdio) or `url` (streamable HTTP)".into(),
                )),
                (Some(_), Some(_)) => problems.push((key("url"), "give either `command` or `url`, not both".into())),
                (Some(command), None) if command.trim().is_empty() => {
                    problems.push((key("command"), "is empty".into()));
                }
                _ => {}
            }
            if let Some(url) = &server.url
                && !(url.starts_with("http://") || url.starts_with("https://"))
            {
                problems.push((key("url"), format!("`{url}` is not an http:// or https:// URL")));
            }
            if server.url.is_some() && (!server.args.is_empty() || !server.env.is_empty()) {
                problems.push((
                    key(if server.args.is_empty() { "env" } else { "args" }),
                    "applies only to a `command` server".into(),
                ));
            }
            if server.command.is_some() && !server.headers.is_empty() {
                problems.push((key("headers"), "applies only to a `url` server".into()));
            }
            for header in server.headers.keys() {
                if http::HeaderName::from_bytes(header.as_bytes()).is_err() {
                    problems.push((key("headers"), format!("`{header}` is not a valid header name")));
                }
            }
            for variable in server.env.keys() {
                if variable.is_empty() || variable.contains('=') || variable.contains('\0') {
                    problems.push((key("env"), format!("`{variable}` is not a variable name")));
                }
            }
            for (field, value) in [
                ("startup_timeout", server.startup_timeout),
                ("call_timeout", server.call_timeout),
            ] {
                if value.is_zero() {
                    problems.push((key(field), "must be more than 0".into()));
                }
            }
            if let Some(tool) = server.tools.allow.iter().find(|t| server.tools.deny.contains(t)) {
                problems.push((key("tools"), format!("`{tool}` is both allowed and denied")));
            }
        }
        problems
    }
}

/// What is wrong with a server name, if anything.
pub fn server_name_problem(name: &str) -> Option<String> {
    if name.is_empty() || name.len() > MAX_SERVER_NAME_CHARS {
        return Some(format!(
            "the server name `{name}` must be 1 to {MAX_SERVER_NAME_CHARS} characters"
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Some(format!(
            "the server name `{name}` may only contain lowercase letters, digits and `-`"
        ));
    }
    if name.starts_with('-') {
        return Some(format!("the server name `{name}` must start with a letter or a digit"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<McpConfig, String> {
        serde_yaml::from_str(yaml).map_err(|err| err.to_string())
    }

    #[test]
    fn the_documented_example_parses_with_its_defaults() {
        let config = parse(
            "servers:\n  files:\n    command: npx\n    args: [\"-y\", \"@modelcontextprotocol/server-filesystem\", \"/srv\"]\n    \
             env: {LOG_LEVEL: info}\n    tools: {allow: [], deny: [move_file]}\n    policy: {write_file: {dangerous: true}}\n    \
             startup_timeout: 10s\n    call_timeout: 60s\n  tracker:\n    url: https://mcp.example.com/mcp\n    \
             headers: {Authorization: \"Bearer abc\"}\n",
        )
        .unwrap();
        let files = &config.servers["files"];
        assert!(files.elevated, "elevated by default");
        assert!(!files.eager);
        assert_eq!(files.transport(), Transport::Stdio);
        assert!(!files.tools.allows("move_file") && files.tools.allows("read_file"));
        assert_eq!(files.policy["write_file"].dangerous, Some(true));
        assert_eq!(config.servers["tracker"].transport(), Transport::Http);
        assert!(config.problems().is_empty(), "{:?}", config.problems());
        let shown = format!("{:?}", config.servers["tracker"]);
        assert!(!shown.contains("Bearer abc"), "header values do not print: {shown}");
    }

    /// Rows: YAML → the key the problem names.
    #[test]
    fn impossible_servers_name_their_key() {
        for (yaml, key) in [
            ("servers: {Files: {command: x}}", "mcp.servers.Files"),
            (
                "servers: {a-very-long-server-name-over-32-chars: {command: x}}",
                "mcp.servers.a-very",
            ),
            ("servers: {s: {}}", "mcp.servers.s"),
            ("servers: {s: {command: x, url: 'http://h'}}", "mcp.servers.s.url"),
            ("servers: {s: {url: 'ftp://h'}}", "mcp.servers.s.url"),
            ("servers: {s: {url: 'http://h', env: {A: b}}}", "mcp.servers.s.env"),
            ("servers: {s: {command: x, headers: {A: b}}}", "mcp.servers.s.headers"),
            (
                "servers: {s: {url: 'http://h', headers: {'bad header': b}}}",
                "mcp.servers.s.headers",
            ),
            (
                "servers: {s: {command: x, call_timeout: 0s}}",
                "mcp.servers.s.call_timeout",
            ),
            (
                "servers: {s: {command: x, tools: {allow: [a], deny: [a]}}}",
                "mcp.servers.s.tools",
            ),
        ] {
            let problems = parse(yaml).unwrap().problems();
            assert!(problems.iter().any(|(k, _)| k.starts_with(key)), "{yaml}: {problems:?}");
        }
        let err = parse("servers: {s: {command: x, comand: y}}").unwrap_err();
        assert!(err.contains("comand"), "{err}");
        let err = parse("servers: {s: {command: x, policy: {t: {destructive: true}}}}").unwrap_err();
        assert!(err.contains("destructive"), "{err}");
    }
}
