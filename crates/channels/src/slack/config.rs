//! `channels.slack` in herald.yaml.

use std::net::SocketAddr;
use std::time::Duration;

use secrecy::SecretString;
use serde::Deserialize;

use crate::outbound::{Rate, RateLimits};

/// How Slack delivers events to Herald.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SlackMode {
    /// Herald opens a WebSocket to Slack (needs `app_token`); no public URL.
    #[default]
    Socket,
    /// Slack POSTs events to `listen` + `events_path` (needs `signing_secret`).
    Events,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlackConfig {
    /// The bot token (`xoxb-…`), for the Web API.
    pub bot_token: SecretString,
    /// The app-level token (`xapp-…`, scope `connections:write`), for Socket Mode.
    #[serde(default)]
    pub app_token: Option<SecretString>,
    /// The app's signing secret, for the Events API.
    #[serde(default)]
    pub signing_secret: Option<SecretString>,
    /// The Web API base, without a trailing slash.
    #[serde(default = "default_api_url")]
    pub api_url: String,
    #[serde(default)]
    pub mode: SlackMode,
    /// Where the Events API endpoint listens (`mode: events`).
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    /// The path of the Events API endpoint: the Request URL's path.
    #[serde(default = "default_events_path")]
    pub events_path: String,
    /// Channel ids (`C…`) where Herald answers every message, not only mentions.
    #[serde(default)]
    pub respond_in: Vec<String>,
    /// Socket Mode connections kept open (at most 10, Slack's limit). Two by
    /// default, as Slack recommends: when one is lost or refreshed the other
    /// goes on receiving. Slack spreads events over the open connections, so
    /// two messages sent in the same instant may reach the queue in either
    /// order; `1` keeps Slack's order, with a gap whenever the one
    /// connection is lost.
    #[serde(default = "default_socket_connections")]
    pub socket_connections: u32,
    /// Send rates; Slack allows about one message per second per channel.
    #[serde(default = "default_rate_limits")]
    pub rate_limits: RateLimits,
    /// `markdown` (the default): the model's Markdown as Slack's `mrkdwn`;
    /// `plain`: the text as the model wrote it (escaped, as Slack requires).
    #[serde(default)]
    pub format: crate::markdown::Format,
    /// `edit` (the default): an answer shows while it is written, edited
    /// in place as it grows (with `llm.stream` on); `off`: sent complete.
    #[serde(default)]
    pub streaming: crate::outbound::Streaming,
}

pub const DEFAULT_API_URL: &str = "https://slack.com/api";

fn default_api_url() -> String {
    DEFAULT_API_URL.into()
}

fn default_listen() -> SocketAddr {
    SocketAddr::from(([0, 0, 0, 0], 3000))
}

fn default_events_path() -> String {
    "/slack/events".into()
}

fn default_socket_connections() -> u32 {
    2
}

/// Slack's documented rate for `chat.postMessage`: one per second per channel.
pub fn default_rate_limits() -> RateLimits {
    let one_per_second = Rate {
        count: 1,
        per: Duration::from_secs(1),
    };
    RateLimits {
        per_chat: Some(one_per_second),
        per_group: Some(one_per_second),
        per_bot: None,
    }
}

impl SlackConfig {
    /// What the chosen mode needs that is missing, as the key to set.
    pub fn check(&self) -> Result<(), String> {
        match self.mode {
            SlackMode::Socket if self.app_token.is_none() => {
                Err("`app_token` (xapp-…) is required in socket mode; or set `mode: events`".into())
            }
            SlackMode::Events if self.signing_secret.is_none() => {
                Err("`signing_secret` is required in events mode".into())
            }
            _ if self.socket_connections == 0 => Err("`socket_connections` must be at least 1".into()),
            _ if self.socket_connections > 10 => {
                Err("`socket_connections` may be at most 10 (Slack's limit per app)".into())
            }
            _ if !self.events_path.starts_with('/') => Err("`events_path` must start with `/`".into()),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<SlackConfig, String> {
        serde_yaml::from_str::<SlackConfig>(yaml).map_err(|e| e.to_string())
    }

    #[test]
    fn socket_mode_is_the_default_and_needs_an_app_token() {
        let config = parse("bot_token: xoxb-1\napp_token: xapp-1\n").unwrap();
        assert_eq!(config.mode, SlackMode::Socket);
        assert_eq!(config.api_url, DEFAULT_API_URL);
        assert_eq!(config.rate_limits, default_rate_limits());
        assert_eq!(config.socket_connections, 2);
        assert!(config.check().is_ok());
        let missing = parse("bot_token: xoxb-1\n").unwrap();
        assert!(missing.check().unwrap_err().contains("app_token"));
    }

    #[test]
    fn events_mode_needs_a_signing_secret() {
        let config = parse("bot_token: x\nmode: events\nlisten: 127.0.0.1:8089\n").unwrap();
        assert!(config.check().unwrap_err().contains("signing_secret"));
        let config = parse("bot_token: x\nmode: events\nsigning_secret: s\nrespond_in: [C1]\n").unwrap();
        assert!(config.check().is_ok());
        assert_eq!(config.respond_in, ["C1"]);
        assert_eq!(config.events_path, "/slack/events");
    }

    #[test]
    fn typos_are_refused() {
        assert!(parse("bot_token: x\napp_tokn: y\n").unwrap_err().contains("app_tokn"));
        assert!(parse("bot_token: x\nmode: webhook\n").is_err());
    }
}
