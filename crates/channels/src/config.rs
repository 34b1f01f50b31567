//! The `channels:` section of herald.yaml: one optional entry per platform.
//! A platform without an entry is not started.

use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelsConfig {
    /// Inbound texts longer than this many characters are cut (with a
    /// marker) before anything reads them, on every channel.
    #[serde(default = "default_max_message_chars")]
    pub max_message_chars: usize,
    /// What is fetched of the files that come with messages.
    #[serde(default)]
    pub attachments: crate::attachments::AttachmentsConfig,
    #[cfg(feature = "email")]
    #[serde(default)]
    pub email: Option<crate::email::EmailConfig>,
    #[cfg(feature = "discord")]
    #[serde(default)]
    pub discord: Option<crate::discord::DiscordConfig>,
    #[cfg(feature = "telegram")]
    #[serde(default)]
    pub telegram: Option<crate::telegram::TelegramConfig>,
    #[cfg(feature = "slack")]
    #[serde(default)]
    pub slack: Option<crate::slack::SlackConfig>,
}

fn default_max_message_chars() -> usize {
    crate::clean::DEFAULT_MAX_MESSAGE_CHARS
}

impl Default for ChannelsConfig {
    fn default() -> Self {
        Self {
            max_message_chars: default_max_message_chars(),
            attachments: Default::default(),
            #[cfg(feature = "email")]
            email: None,
            #[cfg(feature = "discord")]
            discord: None,
            #[cfg(feature = "telegram")]
            telegram: None,
            #[cfg(feature = "slack")]
            slack: None,
        }
    }
}

impl ChannelsConfig {
    /// Rules the types do not express, as `(key, message)`.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if self.max_message_chars < 100 {
            return Err(("channels.max_message_chars", "must be at least 100".into()));
        }
        self.attachments.check()?;
        Ok(())
    }

    /// Names of the configured platform channels.
    pub fn configured(&self) -> Vec<&'static str> {
        #[allow(unused_mut)]
        let mut names = Vec::new();
        #[cfg(feature = "email")]
        if self.email.is_some() {
            names.push(crate::email::CHANNEL);
        }
        #[cfg(feature = "discord")]
        if self.discord.is_some() {
            names.push(crate::discord::CHANNEL);
        }
        #[cfg(feature = "telegram")]
        if self.telegram.is_some() {
            names.push(crate::telegram::payload::CHANNEL);
        }
        #[cfg(feature = "slack")]
        if self.slack.is_some() {
            names.push(crate::slack::CHANNEL);
        }
        names
    }
}
