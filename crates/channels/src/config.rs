//! The `channels:` section of herald.yaml: one optional entry per platform.
//! A platform without an entry is not started.

use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelsConfig {
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

impl ChannelsConfig {
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
