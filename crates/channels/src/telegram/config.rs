//! `channels.telegram` in herald.yaml.

use std::net::SocketAddr;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use crate::outbound::{Rate, RateLimits};

/// The real Bot API.
pub const DEFAULT_API_URL: &str = "https://api.telegram.org";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelegramConfig {
    /// The token @BotFather gave, `123456789:AA...`.
    pub token: SecretString,
    /// Requests go to `{api_url}/bot{token}/{method}`.
    #[serde(default = "default_api_url")]
    pub api_url: String,
    #[serde(default)]
    pub mode: TelegramMode,
    /// Required when `mode: webhook`.
    #[serde(default)]
    pub webhook: Option<WebhookConfig>,
    /// Chats (`-1001234567890`) or forum topics (`-1001234567890/7`) where
    /// Herald answers every message, not only those that address it.
    #[serde(default)]
    pub respond_in: Vec<ChatSelector>,
    /// Overrides of Telegram's documented send rates, key by key.
    #[serde(default)]
    pub rate_limits: RateOverrides,
    /// How long one `getUpdates` long poll waits for news.
    #[serde(default = "default_poll_timeout", with = "herald_core::duration::serde")]
    pub poll_timeout: Duration,
    /// Treat an edited message as a new one (by default edits are ignored).
    #[serde(default)]
    pub handle_edits: bool,
    /// `markdown` (the default): the model's Markdown as Telegram's HTML;
    /// `plain`: the text as the model wrote it.
    #[serde(default)]
    pub format: crate::markdown::Format,
    /// `edit` (the default): an answer shows while it is written, edited
    /// in place as it grows (with `llm.stream` on); `off`: sent complete.
    #[serde(default)]
    pub streaming: crate::outbound::Streaming,
}

fn default_api_url() -> String {
    DEFAULT_API_URL.into()
}

fn default_poll_timeout() -> Duration {
    Duration::from_secs(25)
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TelegramMode {
    /// Herald asks Telegram for updates (`getUpdates`); works behind NAT.
    #[default]
    Polling,
    /// Telegram POSTs updates to `webhook.url`, which must reach `webhook.listen`.
    Webhook,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// The local address Herald's webhook server binds, e.g. `0.0.0.0:8443`.
    pub listen: SocketAddr,
    /// The public HTTPS URL Telegram posts to; its path is the route served.
    pub url: String,
    /// Sent by Telegram in `X-Telegram-Bot-Api-Secret-Token`; requests
    /// without it are refused with 401. 32 to 256 of `A-Z a-z 0-9 _ -`;
    /// when absent, each start generates a random one and registers it
    /// with `setWebhook` (set one when several processes share the URL).
    #[serde(default)]
    pub secret: Option<SecretString>,
}

/// The shortest webhook secret accepted: a guess must not be feasible.
pub const MIN_WEBHOOK_SECRET: usize = 32;

/// A random webhook secret: 48 characters of Telegram's alphabet.
pub fn generate_webhook_secret() -> SecretString {
    use rand::Rng;
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
    let mut rng = rand::thread_rng();
    let secret: String = (0..48)
        .map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())] as char)
        .collect();
    SecretString::from(secret)
}

/// A chat id, or a chat id and topic, as written in `respond_in`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatSelector {
    pub chat: String,
    pub thread: Option<String>,
}

impl ChatSelector {
    pub fn matches(&self, chat: &str, thread: Option<&str>) -> bool {
        self.chat == chat && (self.thread.is_none() || self.thread.as_deref() == thread)
    }
}

impl<'de> Deserialize<'de> for ChatSelector {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Number(i64),
            Text(String),
        }
        let text = match Written::deserialize(deserializer)? {
            Written::Number(n) => n.to_string(),
            Written::Text(text) => text.trim().to_owned(),
        };
        let (chat, thread) = match text.split_once('/') {
            Some((chat, thread)) => (chat, Some(thread)),
            None => (text.as_str(), None),
        };
        let valid = chat.parse::<i64>().is_ok() && thread.is_none_or(|t| t.parse::<i32>().is_ok());
        if !valid {
            return Err(serde::de::Error::custom(format!(
                "`{text}` is not a chat id (-1001234567890) or chat/topic (-1001234567890/7)"
            )));
        }
        Ok(ChatSelector {
            chat: chat.to_owned(),
            thread: thread.map(str::to_owned),
        })
    }
}

/// One rate, or `off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateSetting(pub Option<Rate>);

impl<'de> Deserialize<'de> for RateSetting {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Rate::parse(&text).map(RateSetting).map_err(serde::de::Error::custom)
    }
}

/// `rate_limits`: each key given replaces Telegram's default for it; `off`
/// removes that limit.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RateOverrides {
    pub per_chat: Option<RateSetting>,
    pub per_group: Option<RateSetting>,
    pub per_bot: Option<RateSetting>,
}

impl RateOverrides {
    /// Telegram's documented limits (about one message per second in a
    /// chat, twenty per minute in a group, thirty per second in all) with
    /// these overrides applied.
    pub fn limits(&self) -> RateLimits {
        let rate = |count, seconds| {
            Some(Rate {
                count,
                per: Duration::from_secs(seconds),
            })
        };
        let pick = |setting: Option<RateSetting>, default| setting.map_or(default, |s| s.0);
        RateLimits {
            per_chat: pick(self.per_chat, rate(1, 1)),
            per_group: pick(self.per_group, rate(20, 60)),
            per_bot: pick(self.per_bot, rate(30, 1)),
        }
    }
}

impl TelegramConfig {
    /// Rules the types do not express, as `(key, message)`.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        let token = self.token.expose_secret();
        if token.trim().is_empty() || !token.contains(':') {
            return Err((
                "channels.telegram.token",
                "is not a bot token (`123456789:AA...` from @BotFather)".into(),
            ));
        }
        if !(self.api_url.starts_with("https://") || self.api_url.starts_with("http://")) {
            return Err(("channels.telegram.api_url", "must be an http(s) URL".into()));
        }
        if self.poll_timeout < Duration::from_secs(1) || self.poll_timeout > Duration::from_secs(50) {
            return Err(("channels.telegram.poll_timeout", "must be between 1s and 50s".into()));
        }
        match (self.mode, &self.webhook) {
            (TelegramMode::Webhook, None) => Err((
                "channels.telegram.webhook",
                "is required with `mode: webhook` (listen, url, secret)".into(),
            )),
            (TelegramMode::Webhook, Some(webhook)) => {
                if let Some(secret) = &webhook.secret {
                    let secret = secret.expose_secret();
                    let allowed = secret
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                    if secret.len() < MIN_WEBHOOK_SECRET || secret.len() > 256 || !allowed {
                        return Err((
                            "channels.telegram.webhook.secret",
                            "must be 32 to 256 characters of A-Z, a-z, 0-9, `_` and `-` (or left out: Herald then generates one)"
                                .into(),
                        ));
                    }
                }
                if !webhook.url.starts_with("https://") && !webhook.url.starts_with("http://") {
                    return Err((
                        "channels.telegram.webhook.url",
                        "must be the public https:// URL Telegram posts to".into(),
                    ));
                }
                Ok(())
            }
            (TelegramMode::Polling, _) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<TelegramConfig, String> {
        serde_json::from_value::<TelegramConfig>(yaml_to_json(yaml)).map_err(|e| e.to_string())
    }

    /// The tests write YAML-like JSON; this keeps them free of a YAML dependency.
    fn yaml_to_json(text: &str) -> serde_json::Value {
        serde_json::from_str(text).expect("test config is JSON")
    }

    #[test]
    fn defaults_are_telegrams() {
        let config = parse(r#"{"token": "1:abc"}"#).unwrap();
        assert_eq!(config.api_url, DEFAULT_API_URL);
        assert_eq!(config.mode, TelegramMode::Polling);
        assert_eq!(config.poll_timeout, Duration::from_secs(25));
        let limits = config.rate_limits.limits();
        assert_eq!(limits.per_chat, Rate::parse("1/s").unwrap());
        assert_eq!(limits.per_group, Rate::parse("20/m").unwrap());
        assert_eq!(limits.per_bot, Rate::parse("30/s").unwrap());
        assert!(config.check().is_ok());
        assert!(!format!("{config:?}").contains("1:abc"), "the token is never printed");
    }

    #[test]
    fn rate_overrides_replace_one_key_at_a_time() {
        let config = parse(r#"{"token": "1:abc", "rate_limits": {"per_chat": "20/s", "per_bot": "off"}}"#).unwrap();
        let limits = config.rate_limits.limits();
        assert_eq!(limits.per_chat, Rate::parse("20/s").unwrap());
        assert_eq!(
            limits.per_group,
            Rate::parse("20/m").unwrap(),
            "untouched keys keep the default"
        );
        assert_eq!(limits.per_bot, None);
    }

    #[test]
    fn respond_in_takes_chats_and_topics() {
        let config = parse(r#"{"token": "1:abc", "respond_in": [-1001, "-1002/7"]}"#).unwrap();
        let [chat, topic] = config.respond_in.as_slice() else {
            panic!("two selectors")
        };
        assert!(chat.matches("-1001", None));
        assert!(chat.matches("-1001", Some("3")), "a chat selector covers its topics");
        assert!(topic.matches("-1002", Some("7")));
        assert!(!topic.matches("-1002", Some("8")));
        assert!(!topic.matches("-1002", None));
        assert!(parse(r#"{"token": "1:abc", "respond_in": ["general"]}"#).is_err());
    }

    #[test]
    fn a_webhook_secret_is_long_or_generated() {
        let with = |secret: &str| {
            parse(&format!(
                r#"{{"token": "1:a", "mode": "webhook", "webhook": {{"listen": "127.0.0.1:8443", "url": "https://x/tg"{secret}}}}}"#
            ))
            .unwrap()
        };
        assert!(
            with(r#", "secret": "abcdefghijklmnopqrstuvwxyz012345""#)
                .check()
                .is_ok()
        );
        assert!(with("").check().is_ok(), "left out, one is generated");
        let generated = generate_webhook_secret();
        let generated = generated.expose_secret();
        assert_eq!(generated.len(), 48);
        assert!(
            generated
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        );
        assert_ne!(generated, generate_webhook_secret().expose_secret());
    }

    #[test]
    fn checks_name_the_key() {
        for (json, key) in [
            (r#"{"token": "nocolon"}"#, "channels.telegram.token"),
            (r#"{"token": "1:a", "mode": "webhook"}"#, "channels.telegram.webhook"),
            (
                r#"{"token": "1:a", "mode": "webhook", "webhook": {"listen": "127.0.0.1:8443", "url": "https://x/tg", "secret": "has space"}}"#,
                "channels.telegram.webhook.secret",
            ),
            // Guessable: one character, or 31.
            (
                r#"{"token": "1:a", "mode": "webhook", "webhook": {"listen": "127.0.0.1:8443", "url": "https://x/tg", "secret": "x"}}"#,
                "channels.telegram.webhook.secret",
            ),
            (
                r#"{"token": "1:a", "mode": "webhook", "webhook": {"listen": "127.0.0.1:8443", "url": "https://x/tg", "secret": "abcdefghijklmnopqrstuvwxyz01234"}}"#,
                "channels.telegram.webhook.secret",
            ),
            (
                r#"{"token": "1:a", "poll_timeout": "90s"}"#,
                "channels.telegram.poll_timeout",
            ),
            (
                r#"{"token": "1:a", "api_url": "api.telegram.org"}"#,
                "channels.telegram.api_url",
            ),
        ] {
            let config = parse(json).unwrap();
            assert_eq!(config.check().map_err(|(k, _)| k), Err(key), "{json}");
        }
        assert!(
            parse(r#"{"token": "1:a", "tokn": "x"}"#)
                .unwrap_err()
                .contains("unknown field")
        );
    }
}
