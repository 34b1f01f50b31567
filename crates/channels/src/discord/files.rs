//! Fetching a message's files the Discord way: every attachment object
//! carries a signed CDN `url`, fetched with a plain GET (no token: the
//! signature is the permission). Only URLs on Discord's CDN hosts (or the
//! configured API host, for a local stand-in) are fetched, so a forged
//! attachment cannot point Herald at another server.

use std::time::Duration;

use async_trait::async_trait;
use herald_core::{Attachment, ChannelError};

use super::config::DiscordConfig;
use crate::attachments::{FetchAttachment, FetchError, download};

/// Discord's CDN hosts.
const CDN_HOSTS: [&str; 2] = ["cdn.discordapp.com", "media.discordapp.net"];

pub struct DiscordFiles {
    client: reqwest::Client,
    hosts: Vec<String>,
}

impl DiscordFiles {
    pub fn new(config: &DiscordConfig, tls: &herald_net::ClientTls) -> Result<Self, ChannelError> {
        let client = tls
            .http()
            .connect_timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|err| ChannelError::Fatal(format!("cannot build the HTTP client: {err}")))?;
        let mut hosts: Vec<String> = CDN_HOSTS.map(String::from).to_vec();
        hosts.extend(download::origin_of(config.api_base()));
        Ok(Self { client, hosts })
    }
}

#[async_trait]
impl FetchAttachment for DiscordFiles {
    async fn fetch(&self, attachment: &Attachment, cap: u64) -> Result<Vec<u8>, FetchError> {
        let url = attachment
            .source
            .as_deref()
            .ok_or_else(|| FetchError::Refused("Discord named no URL".into()))?;
        if !download::on_hosts(url, &self.hosts) {
            return Err(FetchError::Refused("its URL is not on Discord's CDN".into()));
        }
        download::capped(self.client.get(url), cap).await
    }
}
