//! `channels.discord` in herald.yaml.

use std::collections::HashSet;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use crate::outbound::{Rate, RateLimits};

pub const DEFAULT_API_URL: &str = "https://discord.com";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscordConfig {
    /// The bot token from the developer portal (Bot → Reset Token).
    pub token: SecretString,
    /// Where the REST API lives: requests go to `{api_url}/api/v10/...`.
    /// The gateway URL is whatever `GET {api_url}/api/v10/gateway` answers.
    #[serde(default = "default_api_url")]
    pub api_url: String,
    /// Channel ids (and thread ids) where Herald answers every message, not
    /// only mentions and replies. A listed channel covers its threads.
    #[serde(default)]
    pub respond_in: Vec<Snowflake>,
    /// Herald's own spacing of sends, on top of the per-route buckets
    /// Discord announces in its response headers. The default keeps the
    /// whole bot under Discord's global 50 requests per second.
    #[serde(default = "default_rate_limits")]
    pub rate_limits: RateLimits,
    /// The largest file Herald uploads, in bytes: 8 MiB, what every server
    /// takes from a bot; servers with a Nitro boost take up to 25 or 100 MiB.
    #[serde(default = "default_max_upload_bytes")]
    pub max_upload_bytes: u64,
    /// How many gateway shards the bot runs: `auto` (what Discord
    /// recommends for the bot's guilds; one below 1,000 guilds) or a
    /// number. Herald processes sharing one database spread the shards
    /// among themselves.
    #[serde(default)]
    pub shards: Shards,
    /// `markdown` (the default): the model's Markdown in the subset Discord
    /// shows (tables as blocks, deep headings bold); `plain`: as written.
    #[serde(default)]
    pub format: crate::markdown::Format,
    /// `edit` (the default): an answer shows while it is written, edited
    /// in place as it grows (with `llm.stream` on); `off`: sent complete.
    #[serde(default)]
    pub streaming: crate::outbound::Streaming,
    /// Whether the gateway's frames come zlib-compressed
    /// (`compress=zlib-stream`). On by default: dispatches shrink to a
    /// fraction on the wire.
    #[serde(default = "default_true")]
    pub compress: bool,
}

fn default_true() -> bool {
    true
}

/// `channels.discord.shards`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Shards {
    #[default]
    Auto,
    Count(u32),
}

/// Discord allows shard counts up to this; more is a typo.
pub const MAX_SHARDS: u32 = 4096;

impl Shards {
    /// The shard count to run, given what Discord recommends.
    pub fn resolve(self, recommended: u32) -> u32 {
        match self {
            Shards::Auto => recommended.clamp(1, MAX_SHARDS),
            Shards::Count(count) => count,
        }
    }
}

/// A value YAML may give as a number or as text (`4`, `"4"`, `auto`).
#[derive(Deserialize)]
#[serde(untagged)]
enum Written {
    Number(u64),
    Text(String),
}

impl<'de> Deserialize<'de> for Shards {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let count = match Written::deserialize(deserializer)? {
            Written::Text(text) if text.trim() == "auto" => return Ok(Shards::Auto),
            Written::Text(text) => text
                .trim()
                .parse::<u64>()
                .map_err(|_| serde::de::Error::custom(format!("`{text}` is neither `auto` nor a shard count")))?,
            Written::Number(count) => count,
        };
        match u32::try_from(count) {
            Ok(count) if (1..=MAX_SHARDS).contains(&count) => Ok(Shards::Count(count)),
            _ => Err(serde::de::Error::custom(format!(
                "{count} shards: a count is from 1 to {MAX_SHARDS}, or `auto`"
            ))),
        }
    }
}

pub const DEFAULT_MAX_UPLOAD_BYTES: u64 = 8 * 1024 * 1024;

fn default_max_upload_bytes() -> u64 {
    DEFAULT_MAX_UPLOAD_BYTES
}

fn default_api_url() -> String {
    DEFAULT_API_URL.to_owned()
}

fn default_rate_limits() -> RateLimits {
    RateLimits {
        per_chat: None,
        per_group: None,
        per_bot: Some(Rate {
            count: 50,
            per: Duration::from_secs(1),
        }),
    }
}

impl DiscordConfig {
    /// The channels listed in `respond_in`, as ids.
    pub fn respond_in(&self) -> HashSet<u64> {
        self.respond_in.iter().map(|s| s.0).collect()
    }

    /// `api_url` without a trailing slash (REST paths are joined to it).
    pub fn api_base(&self) -> &str {
        self.api_url.trim_end_matches('/')
    }

    /// The token as the gateway takes it: trimmed, without the `Bot `
    /// prefix REST requests carry (people paste it either way).
    pub fn bare_token(&self) -> SecretString {
        let token = self.token.expose_secret().trim();
        SecretString::from(token.strip_prefix("Bot ").unwrap_or(token).to_owned())
    }
}

/// A Discord id, written in YAML as a number or a quoted string.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Snowflake(pub u64);

impl<'de> Deserialize<'de> for Snowflake {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Written::deserialize(deserializer)? {
            Written::Number(id) => Ok(Snowflake(id)),
            Written::Text(text) => text
                .trim()
                .parse()
                .map(Snowflake)
                .map_err(|_| serde::de::Error::custom(format!("`{text}` is not a Discord id (a number)"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<DiscordConfig, String> {
        serde_json::from_str::<DiscordConfig>(text).map_err(|e| e.to_string())
    }

    #[test]
    fn only_the_token_is_required() {
        let config = parse(r#"{"token": "abc"}"#).unwrap();
        assert_eq!(config.token.expose_secret(), "abc");
        let pasted = parse(r#"{"token": " Bot abc "}"#).unwrap();
        assert_eq!(pasted.bare_token().expose_secret(), "abc");
        assert_eq!(config.api_base(), "https://discord.com");
        assert!(config.respond_in().is_empty());
        assert_eq!(config.rate_limits, default_rate_limits());
        assert_eq!(config.shards, Shards::Auto);
        assert!(config.compress);
    }

    #[test]
    fn shards_are_auto_or_a_count() {
        assert_eq!(
            parse(r#"{"token": "t", "shards": "auto"}"#).unwrap().shards,
            Shards::Auto
        );
        assert_eq!(
            parse(r#"{"token": "t", "shards": 4}"#).unwrap().shards,
            Shards::Count(4)
        );
        assert_eq!(
            parse(r#"{"token": "t", "shards": "2"}"#).unwrap().shards,
            Shards::Count(2)
        );
        assert_eq!(Shards::Auto.resolve(0), 1);
        assert_eq!(Shards::Auto.resolve(7), 7);
        assert_eq!(Shards::Count(2).resolve(7), 2);
        for (text, expected) in [
            (r#"{"token": "t", "shards": 0}"#, "0 shards"),
            (r#"{"token": "t", "shards": 5000}"#, "5000 shards"),
            (
                r#"{"token": "t", "shards": "many"}"#,
                "neither `auto` nor a shard count",
            ),
        ] {
            let error = parse(text).unwrap_err();
            assert!(error.contains(expected), "{text}: {error}");
        }
    }

    #[test]
    fn channel_ids_may_be_numbers_or_strings() {
        let config =
            parse(r#"{"token": "t", "api_url": "http://127.0.0.1:9/", "respond_in": [1200000000000000010, "42"]}"#)
                .unwrap();
        assert_eq!(config.respond_in(), HashSet::from([1200000000000000010, 42]));
        assert_eq!(config.api_base(), "http://127.0.0.1:9");
    }

    #[test]
    fn mistakes_are_named() {
        for (text, expected) in [
            (r#"{"token": "t", "respond_in": ["general"]}"#, "not a Discord id"),
            (r#"{"token": "t", "tokn": "x"}"#, "unknown field `tokn`"),
            (r#"{"api_url": "x"}"#, "missing field `token`"),
        ] {
            let error = parse(text).unwrap_err();
            assert!(error.contains(expected), "{text}: {error}");
        }
    }
}
