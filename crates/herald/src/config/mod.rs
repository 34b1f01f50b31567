//! herald.yaml: one file, deserialised into the typed config structs each
//! crate owns, after `${VAR}` expansion. Every error names the file, the line
//! and the key path, because a stranger deploying Herald will make typos.

pub mod env;
mod secrets;

use std::fmt;
use std::path::{Path, PathBuf};

use herald_agent::AgentConfig;
use herald_channels::access::AccessConfig;
use herald_channels::config::ChannelsConfig;
use herald_core::ActorId;
use herald_llm::LlmConfig;
use herald_mcp::McpConfig;
use herald_schedule::{HeartbeatConfig, ScheduleConfig};
use herald_skills::SkillsConfig;
use herald_store::{QueueConfig, StorageConfig};
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub storage: StorageConfig,
    #[serde(default)]
    pub queue: QueueConfig,
    #[serde(default)]
    pub llm: LlmConfig,
    #[serde(default)]
    pub agent: AgentConfig,
    /// Platform user ids with admin rights: `telegram:123456789`, `local:owner`.
    #[serde(default)]
    pub admins: Vec<ActorId>,
    #[serde(default)]
    pub skills: SkillsConfig,
    /// MCP servers, offered as skills.
    #[serde(default)]
    pub mcp: McpConfig,
    #[serde(default)]
    pub access: AccessConfig,
    #[serde(default)]
    pub channels: ChannelsConfig,
    #[serde(default)]
    pub heartbeat: HeartbeatConfig,
    #[serde(default)]
    pub schedules: ScheduleConfig,
    #[serde(default)]
    pub log: LogConfig,
    #[serde(default)]
    pub observability: crate::observability::ObservabilityConfig,
    #[serde(default)]
    pub tls: TlsConfig,
    /// The trust every client is built on: the system's roots and
    /// `tls.extra_ca_file`, read once by [`Config::load`].
    #[serde(skip)]
    pub client_tls: herald_net::ClientTls,
    /// The environment variables the file read (`${VAR}`), which Herald
    /// removes from its own environment once they are loaded.
    #[serde(skip)]
    pub environment: Vec<String>,
    /// Keys that hold a secret written into the file itself rather than
    /// read from the environment (see [`secrets::written`]).
    #[serde(skip)]
    pub written_secrets: Vec<String>,
    /// [`Config::written_secrets`] when the file is readable by other users.
    #[serde(skip)]
    pub exposed_secrets: Vec<String>,
}

/// Whom Herald trusts when it connects out over TLS.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    /// PEM certificates trusted beside the system's roots by every
    /// connection Herald makes (a company CA, a private model server's);
    /// relative to the config file.
    pub extra_ca_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// A tracing filter: `info`, `warn`, `herald=debug,info`. `RUST_LOG` wins.
    pub level: String,
    pub format: LogFormat,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            level: "info".into(),
            format: LogFormat::Human,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    Human,
    Json,
}

/// A configuration error, with where it is.
#[derive(Debug)]
pub struct ConfigError {
    pub file: PathBuf,
    pub line: Option<usize>,
    pub key: Option<String>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(key) = self.key.as_deref().filter(|k| !k.is_empty()) {
            write!(f, ": `{key}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Turns served at once: `agent.workers` when set, else twice the
    /// model's `llm.max_concurrency`, so turns that are sending, running a
    /// tool or waiting out a platform limit do not leave the model idle.
    pub fn turns_in_flight(&self) -> usize {
        self.agent
            .workers
            .unwrap_or_else(|| self.llm.max_concurrency.saturating_mul(2))
            .max(1)
    }

    /// Reads and checks a config file, expanding variables from the process
    /// environment.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|err| ConfigError {
            file: path.to_owned(),
            line: None,
            key: None,
            message: if err.kind() == std::io::ErrorKind::NotFound {
                "config file not found (copy config.example.yaml to herald.yaml, or pass --config)".into()
            } else {
                format!("cannot read config file: {err}")
            },
        })?;
        let mut config = Self::parse(path, &text, |name| std::env::var(name).ok())?;
        if readable_by_others(path) {
            config.exposed_secrets = config.written_secrets.clone();
        }
        // Relative skill folders and the heartbeat checklist are relative to
        // the config file, wherever Herald is started from.
        let base = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        config.skills = config.skills.resolved_against(base);
        if config.heartbeat.file.is_relative() {
            config.heartbeat.file = base.join(&config.heartbeat.file);
        }
        if let Some(file) = &mut config.tls.extra_ca_file
            && file.is_relative()
        {
            *file = base.join(&*file);
        }
        config.client_tls =
            herald_net::ClientTls::load(config.tls.extra_ca_file.as_deref()).map_err(|err| ConfigError {
                file: path.to_owned(),
                line: line_of_key(&text, "tls.extra_ca_file"),
                key: Some("tls.extra_ca_file".into()),
                message: err.to_string(),
            })?;
        config.llm.tls = config.client_tls.clone();
        Ok(config)
    }

    pub fn parse(path: &Path, text: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        // The values read from the environment, so no error echoes one.
        let read = std::cell::RefCell::new(Vec::<(String, String)>::new());
        let expanded = env::expand(text, |name| {
            let value = lookup(name);
            if let Some(value) = &value {
                read.borrow_mut().push((name.to_owned(), value.clone()));
            }
            value
        })
        .map_err(|err| ConfigError {
            file: path.to_owned(),
            line: Some(err.line),
            key: Some(err.key),
            message: err.message,
        })?;
        let read = read.into_inner();
        if expanded.trim().is_empty() {
            return Ok(Config::default());
        }
        let deserializer = serde_yaml::Deserializer::from_str(&expanded);
        let mut config: Config = serde_path_to_error::deserialize(deserializer).map_err(|err| {
            let key = err.path().to_string();
            let inner = err.into_inner();
            let line = inner.location().map(|l| l.line());
            ConfigError {
                file: path.to_owned(),
                line,
                message: hide_values(&strip_path(&strip_location(&inner.to_string()), &key), &read),
                key: Some(key).filter(|k| k != "."),
            }
        })?;
        config.written_secrets = secrets::written(&config, &read);
        config.environment = read.into_iter().map(|(name, _)| name).collect();
        config.environment.dedup();
        config.check().map_err(|(key, message)| ConfigError {
            file: path.to_owned(),
            line: line_of_key(text, key),
            key: Some(key.to_owned()),
            message,
        })?;
        if let Some((key, message)) = config.mcp.problems().into_iter().next() {
            return Err(ConfigError {
                file: path.to_owned(),
                line: line_of_key(text, &key),
                key: Some(key),
                message,
            });
        }
        Ok(config)
    }

    /// Rules that types alone do not express.
    fn check(&self) -> Result<(), (&'static str, String)> {
        if self.agent.workers == Some(0) {
            return Err(("agent.workers", "must be at least 1".into()));
        }
        if self.agent.history_limit == 0 {
            return Err(("agent.history_limit", "must be at least 1".into()));
        }
        if self.llm.max_concurrency == 0 {
            return Err(("llm.max_concurrency", "must be at least 1".into()));
        }
        if self.llm.max_tool_iterations == 0 {
            return Err(("llm.max_tool_iterations", "must be at least 1".into()));
        }
        if self.llm.context_chars.is_some_and(|chars| chars < 1000) {
            return Err(("llm.context_chars", "must be at least 1000 characters".into()));
        }
        if self.llm.context_tokens.is_some_and(|tokens| tokens < 512) {
            return Err(("llm.context_tokens", "must be at least 512 tokens".into()));
        }
        if let Some(problem) = self.skills.problems().into_iter().next() {
            return Err(("skills", problem));
        }
        if let Err((key, message)) = self.heartbeat.check() {
            let key = match key {
                "every" => "heartbeat.every",
                "target" => "heartbeat.target",
                _ => "heartbeat.active_hours",
            };
            return Err((key, message));
        }
        if self.schedules.tick < std::time::Duration::from_millis(100) {
            return Err(("schedules.tick", "must be at least 100ms".into()));
        }
        for admin in &self.admins {
            if !admin.as_str().contains(':') {
                return Err((
                    "admins",
                    format!("`{admin}` is not `channel:user-id` (for example telegram:123456789)"),
                ));
            }
        }
        Ok(())
    }
}

/// `message` with every value read from the environment replaced by the
/// `${VAR}` it came from: a value is often a secret, and a type error would
/// otherwise quote it.
fn hide_values(message: &str, read: &[(String, String)]) -> String {
    let mut message = message.to_owned();
    let mut values: Vec<&(String, String)> = read.iter().filter(|(_, value)| value.chars().count() >= 4).collect();
    // Longest first, so a value inside another is not replaced half.
    values.sort_by_key(|(_, value)| std::cmp::Reverse(value.len()));
    for (name, value) in values {
        message = message.replace(value.as_str(), &format!("${{{name}}}"));
    }
    message
}

/// Whether users other than the owner may read the file.
fn readable_by_others(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o044 != 0)
}

/// serde_yaml appends " at line L column C"; the line is reported separately.
fn strip_location(message: &str) -> String {
    match message.find(" at line ") {
        Some(index) => message[..index].to_owned(),
        None => message.to_owned(),
    }
}

/// serde_yaml starts nested errors with the parent path (`llm: unknown
/// field`); the key is reported separately.
fn strip_path(message: &str, key: &str) -> String {
    if let Some((prefix, rest)) = message.split_once(": ")
        && !prefix.contains(' ')
        && key.starts_with(prefix)
    {
        return rest.to_owned();
    }
    message.to_owned()
}

/// The line where a dotted key's last part is written, for checks done after
/// parsing.
fn line_of_key(text: &str, key: &str) -> Option<usize> {
    let last = key.rsplit('.').next()?;
    text.lines()
        .position(|line| line.trim_start().starts_with(&format!("{last}:")))
        .map(|i| i + 1)
}

#[cfg(test)]
mod tests;
