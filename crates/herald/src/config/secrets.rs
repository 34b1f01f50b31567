//! Which secrets a config file holds written out instead of read from the
//! environment, so `doctor` and `herald run` can warn when others may read
//! the file.
//!
//! The check reads the parsed config, not the file's lines: every value the
//! config types hold as a secret (`SecretString`: API keys, tokens, signing
//! secrets, passwords, an MCP server's `headers` and `env`) and the password
//! of every URL (`storage.url`, `llm.base_url`, …). YAML's flow style, quoting
//! or anchors cannot hide one, and a key renamed in a crate's config type is
//! still covered by the type. A value counts as read from the environment
//! when a `${VAR}` value is part of it (`Bearer ${TOKEN}`).

use secrecy::{ExposeSecret, SecretString};

use super::Config;

/// The key paths of `config`'s secrets written into the file, in the order
/// of the config's sections; `from_environment` holds the values `${VAR}`
/// expansion put into the text.
pub fn written(config: &Config, from_environment: &[(String, String)]) -> Vec<String> {
    let mut secrets = Secrets::default();
    secrets.url("storage.url", config.storage.url.expose());
    secrets.url("llm.base_url", &config.llm.base_url);
    secrets.secret("llm.api_key", &config.llm.api_key);
    if let Some(transcription) = &config.llm.transcription {
        secrets.url("llm.transcription.base_url", &transcription.base_url);
        secrets.secret("llm.transcription.api_key", &transcription.api_key);
    }
    channels(&mut secrets, &config.channels);
    for (name, server) in &config.mcp.servers {
        let at = format!("mcp.servers.{name}");
        if let Some(url) = &server.url {
            secrets.url(&format!("{at}.url"), url);
        }
        for (key, value) in &server.headers {
            secrets.secret(&format!("{at}.headers.{key}"), value);
        }
        for (key, value) in &server.env {
            secrets.secret(&format!("{at}.env.{key}"), value);
        }
    }
    secrets
        .found
        .into_iter()
        .filter(|(_, value)| !value.is_empty() && !read_from(value, from_environment))
        .map(|(key, _)| key)
        .collect()
}

fn channels(secrets: &mut Secrets, channels: &herald_channels::config::ChannelsConfig) {
    if let Some(telegram) = &channels.telegram {
        secrets.secret("channels.telegram.token", &telegram.token);
        secrets.url("channels.telegram.api_url", &telegram.api_url);
        if let Some(webhook) = &telegram.webhook {
            secrets.url("channels.telegram.webhook.url", &webhook.url);
            secrets.maybe("channels.telegram.webhook.secret", webhook.secret.as_ref());
        }
    }
    if let Some(discord) = &channels.discord {
        secrets.secret("channels.discord.token", &discord.token);
        secrets.url("channels.discord.api_url", &discord.api_url);
    }
    if let Some(slack) = &channels.slack {
        secrets.secret("channels.slack.bot_token", &slack.bot_token);
        secrets.maybe("channels.slack.app_token", slack.app_token.as_ref());
        secrets.maybe("channels.slack.signing_secret", slack.signing_secret.as_ref());
        secrets.url("channels.slack.api_url", &slack.api_url);
    }
    if let Some(email) = &channels.email {
        secrets.secret("channels.email.imap.password", &email.imap.password);
        secrets.maybe("channels.email.smtp.password", email.smtp.password.as_ref());
    }
}

/// Secret values by key path, as they were read.
#[derive(Default)]
struct Secrets {
    found: Vec<(String, String)>,
}

impl Secrets {
    fn secret(&mut self, key: &str, value: &SecretString) {
        self.found.push((key.to_owned(), value.expose_secret().to_owned()));
    }

    fn maybe(&mut self, key: &str, value: Option<&SecretString>) {
        if let Some(value) = value {
            self.secret(key, value);
        }
    }

    /// The password in a URL's user information (`postgres://u:PASSWORD@h`).
    fn url(&mut self, key: &str, value: &str) {
        if let Some(password) = url::Url::parse(value)
            .ok()
            .and_then(|url| url.password().map(str::to_owned))
        {
            self.found.push((key.to_owned(), password));
        }
    }
}

/// Whether an environment value is all of `value`, or part of it with eight
/// characters at least (`Bearer ${TOKEN}`), so a short `${VAR}` elsewhere in
/// the value (`${PORT}`) does not excuse a literal secret beside it.
fn read_from(value: &str, from_environment: &[(String, String)]) -> bool {
    from_environment.iter().any(|(_, read)| {
        !read.is_empty() && (read == value || (read.chars().count() >= 8 && value.contains(read.as_str())))
    })
}
