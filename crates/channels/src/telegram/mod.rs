//! Telegram, through the Bot API, on the workspace's one HTTP client.
//!
//! - [`config`]: `channels.telegram` in herald.yaml.
//! - [`model`]: the part of the Bot API's objects Herald reads, and the
//!   bodies of the methods it calls.
//! - [`payload`]: update -> [`InboundMessage`](herald_core::InboundMessage) (pure).
//! - [`render`]: reply chunk -> `sendMessage` / `sendChatAction` (pure).
//! - [`client`]: the Bot API client and the outbound sender.
//! - [`ingress`]: long polling (default) or the webhook server.
//! - [`files`]: fetching a message's files (`getFile` and the file endpoint).
//!
//! Architecture invariant: only `client` and `ingress` do I/O, and neither
//! ever logs or returns the bot token (it is part of every request URL).
//! Replies go through the shared [`Delivery`] — chunking to 4096 UTF-16
//! units, the rate limits, 429s waited out — never around it.
//!
//! `/start` and `/help` are answered by the gateway without the model, after
//! access control (see [`crate::gateway`]); this module only strips the
//! `@botname` Telegram appends to commands in groups.

mod client;
pub mod config;
mod files;
mod ingress;
pub mod model;
pub mod payload;
mod render;

use std::sync::Arc;

use herald_core::{ChannelError, ConversationStore, SendLimiter};

use client::{TelegramApi, TelegramSender};
pub use config::{TelegramConfig, TelegramMode};
use ingress::TelegramIngress;

use crate::Built;
use crate::outbound::Delivery;
use ingress::WebhookSettings;
use payload::PayloadRules;

/// Builds the channel from its configuration. `store` keeps the polling
/// offset across restarts; without one (`herald doctor`, which only probes)
/// Telegram's own confirmation state is all there is. `limiter` keeps the
/// send windows.
pub fn build(
    config: &TelegramConfig,
    store: Option<Arc<dyn ConversationStore>>,
    limiter: Arc<dyn SendLimiter>,
    tls: &herald_net::ClientTls,
) -> Result<Built, ChannelError> {
    if let Err((key, message)) = config.check() {
        return Err(ChannelError::Fatal(format!("{key}: {message}")));
    }
    let api = Arc::new(TelegramApi::new(config, tls)?);
    let sender = Arc::new(TelegramSender {
        api: api.clone(),
        format: config.format,
    });
    let outbound = Arc::new(
        Delivery::with_limiter(sender, &config.rate_limits.limits(), limiter)
            .with_streaming(config.streaming == crate::outbound::Streaming::Edit),
    );
    let fetcher = Arc::new(files::TelegramFiles { api: api.clone() });
    let ingress = Arc::new(TelegramIngress {
        api,
        store,
        rules: PayloadRules {
            respond_in: config.respond_in.clone(),
            handle_edits: config.handle_edits,
        },
        mode: config.mode,
        webhook: config.webhook.as_ref().map(WebhookSettings::from),
        poll_timeout: config.poll_timeout,
    });
    Ok(Built {
        outbound,
        ingress,
        fetcher: Some(fetcher),
    })
}
