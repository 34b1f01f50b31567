//! Fetching a message's files the Slack way: a file object's `url_private`
//! is fetched with `Authorization: Bearer <bot token>` (without it Slack
//! answers its sign-in page). The token goes only to Slack's file host (or
//! the configured API host, for a local stand-in), never to a URL a forged
//! event names elsewhere, and redirects are not followed.

use std::time::Duration;

use async_trait::async_trait;
use herald_core::{Attachment, ChannelError};
use secrecy::{ExposeSecret, SecretString};

use super::config::SlackConfig;
use crate::attachments::{FetchAttachment, FetchError, download};

/// Where Slack serves `url_private`.
const FILE_HOST: &str = "files.slack.com";

pub struct SlackFiles {
    client: reqwest::Client,
    token: SecretString,
    hosts: Vec<String>,
}

impl SlackFiles {
    pub fn new(config: &SlackConfig, tls: &herald_net::ClientTls) -> Result<Self, ChannelError> {
        let client = tls
            .http()
            .connect_timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|err| ChannelError::Fatal(format!("cannot build the HTTP client: {err}")))?;
        let mut hosts = vec![FILE_HOST.to_owned()];
        if let Some(origin) = download::origin_of(&config.api_url)
            && origin != "https://slack.com"
        {
            hosts.push(origin);
        }
        Ok(Self {
            client,
            token: config.bot_token.clone(),
            hosts,
        })
    }
}

#[async_trait]
impl FetchAttachment for SlackFiles {
    async fn fetch(&self, attachment: &Attachment, cap: u64) -> Result<Vec<u8>, FetchError> {
        let url = attachment
            .source
            .as_deref()
            .ok_or_else(|| FetchError::Refused("Slack named no url_private".into()))?;
        if !download::on_hosts(url, &self.hosts) {
            return Err(FetchError::Refused("its URL is not on Slack's file host".into()));
        }
        let request = self.client.get(url).bearer_auth(self.token.expose_secret());
        download::capped(request, cap).await
    }
}
