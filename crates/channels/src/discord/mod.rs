//! The Discord channel: a bot on the gateway with the GUILD_MESSAGES,
//! DIRECT_MESSAGES and MESSAGE_CONTENT intents, answering DMs, mentions and
//! replies in guild channels and threads, and every message in the channels
//! listed in `respond_in`. The five REST routes and the gateway are
//! Herald's own, on the workspace's one HTTP client and TLS set-up.
//!
//! - [`config`]: `channels.discord` in herald.yaml.
//! - [`model`]: the part of Discord's objects Herald reads.
//! - [`payload`]: pure, Discord message to [`herald_core::InboundMessage`].
//! - [`gateway`]: pure, the gateway protocol (frames, heartbeats, close
//!   codes, session starts, zlib-stream).
//! - [`render`]: pure, reply to create-message request body.
//! - [`ratelimit`]: pure, per-route buckets from the response headers.
//! - [`client`]: REST calls, and the outbound sender.
//! - [`ingress`]: the bot's gateway shards, messages in; [`shard`] one
//!   shard's connection, [`starts`] the identify turns, [`spread`] how
//!   processes sharing a database share the shards.
//!
//! Architecture invariant: a received message goes to the sink before
//! anything else happens for it, and messages reach the sink in the
//! gateway's order. Redelivered messages (a RESUME replays what the session
//! missed) carry the same message id, which is the queue's dedup key, so
//! they are stored once.

mod client;
pub mod config;
mod files;
pub mod gateway;
mod ingress;
pub mod model;
pub mod payload;
mod ratelimit;
mod render;
mod shard;
mod spread;
mod starts;
mod status;

use std::sync::Arc;

use herald_core::{ChannelError, ConversationStore, ExclusiveLocks};

use client::{DiscordApi, DiscordSender};
pub use config::DiscordConfig;
use ingress::DiscordIngress;
pub use payload::CHANNEL;

use crate::Built;
use crate::outbound::Delivery;

/// The two halves of the Discord channel, sharing one REST client (and so
/// one set of rate-limit buckets). `store` keeps the shards' sessions
/// across restarts and `locks` shares the shards among the processes on
/// one database; without them (probing, tests) one process runs every
/// shard and a restart opens new sessions.
pub fn build(
    config: &DiscordConfig,
    store: Option<Arc<dyn ConversationStore>>,
    locks: Option<Arc<dyn ExclusiveLocks>>,
    limiter: Arc<dyn herald_core::SendLimiter>,
    tls: &herald_net::ClientTls,
) -> Result<Built, ChannelError> {
    let api = Arc::new(DiscordApi::new(config, tls)?);
    let delivery = Delivery::with_limiter(
        Arc::new(DiscordSender {
            api: api.clone(),
            max_upload_bytes: config.max_upload_bytes,
            format: config.format,
        }),
        &config.rate_limits,
        limiter,
    )
    .with_streaming(config.streaming == crate::outbound::Streaming::Edit);
    let ingress = DiscordIngress {
        gateway: shard::Gateway {
            api,
            respond_in: config.respond_in(),
            token: config.bare_token(),
            tls: tls.rustls(),
            compress: config.compress,
            store,
        },
        shards: config.shards,
        locks,
    };
    Ok(Built {
        outbound: Arc::new(delivery),
        ingress: Arc::new(ingress),
        fetcher: Some(Arc::new(files::DiscordFiles::new(config, tls)?)),
    })
}
