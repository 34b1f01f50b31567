//! The Discord adapter's inbound half: the bot's gateway shards.
//!
//! `GET /gateway/bot` names the gateway, the shard count Discord
//! recommends (`channels.discord.shards: auto`) and the session-start
//! budget; each shard is one connection ([`super::shard`]), opened in its
//! identify turn ([`super::starts`]). Alone (no store to coordinate through,
//! as in `herald doctor` or a test), this process runs every shard; with
//! the store's exclusive locks, the Herald processes sharing the database
//! spread the shards among themselves ([`super::spread`]).

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use herald_core::channel::ChannelIngress;
use herald_core::{ChannelError, ChannelName, ExclusiveLocks, InboundSink};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info, info_span, warn};

use super::config::Shards;
use super::gateway::ShardId;
use super::payload::CHANNEL;
use super::shard::{Gateway, Shard};
use super::spread::Rounds;
use super::starts::Starts;
use super::status::{ShardSink, ShardsUp};
use crate::retry::persist;

/// Receives from the gateway and hands messages to the sink.
pub struct DiscordIngress {
    pub(super) gateway: Gateway,
    pub(super) shards: Shards,
    /// The store's locks, through which processes share the shards.
    pub(super) locks: Option<Arc<dyn ExclusiveLocks>>,
}

#[async_trait]
impl ChannelIngress for DiscordIngress {
    fn channel(&self) -> ChannelName {
        ChannelName::new(CHANNEL)
    }

    async fn run(&self, sink: Arc<dyn InboundSink>, shutdown: CancellationToken) -> Result<(), ChannelError> {
        let api = &self.gateway.api;
        let Some(bot) = persist("GET /users/@me", &shutdown, || api.current_user())
            .await
            .transpose()?
        else {
            return Ok(());
        };
        info!(bot = %bot.username, id = bot.id, "signed in to discord");
        let Some(found) = persist("GET /gateway/bot", &shutdown, || api.gateway_bot())
            .await
            .transpose()?
        else {
            return Ok(());
        };
        let count = self.shards.resolve(found.shards);
        if count < found.shards {
            warn!(
                shards = count,
                recommended = found.shards,
                "channels.discord.shards is below what Discord recommends for this bot's guilds"
            );
        }
        info!(
            shards = count,
            recommended = found.shards,
            "running the discord gateway"
        );
        let starts = Starts::new(api.clone(), self.locks.clone(), found.session_start_limit.buckets());
        let shard = |id: u32| Shard {
            gateway: &self.gateway,
            starts: &starts,
            id: ShardId { id, count },
            bot_id: bot.id,
            url: found.url.clone(),
        };
        match &self.locks {
            Some(locks) => {
                let status = ShardsUp::default();
                let rounds = Rounds {
                    locks: locks.as_ref(),
                    count,
                    shard: &shard,
                    sink: sink.as_ref(),
                    status: &status,
                };
                rounds.run(&shutdown).await
            }
            None => every_shard(count, &shard, sink.as_ref(), &shutdown).await,
        }
    }

    async fn probe(&self) -> Result<String, ChannelError> {
        let bot = self.gateway.api.current_user().await?;
        let gateway = self.gateway.api.gateway_bot().await?;
        let starts = &gateway.session_start_limit;
        Ok(format!(
            "bot {} ({}), gateway {}, {} shard(s) recommended, {} of {} session starts left today",
            bot.username, bot.id, gateway.url, gateway.shards, starts.remaining, starts.total
        ))
    }

    /// With the store's locks the shards are shared out shard by shard, so
    /// the ingress runs in every process; without, one process runs it.
    fn exclusive(&self) -> bool {
        self.locks.is_none()
    }
}

/// Runs all `count` shards here until shutdown; a shard that fails for
/// good ends them all.
async fn every_shard<'a>(
    count: u32,
    shard: &(dyn Fn(u32) -> Shard<'a> + Sync),
    sink: &dyn InboundSink,
    shutdown: &CancellationToken,
) -> Result<(), ChannelError> {
    let stop = shutdown.child_token();
    let status = ShardsUp::default();
    let mut runs: FuturesUnordered<_> = (0..count)
        .map(|id| {
            let shard = shard(id);
            let (stop, status) = (&stop, &status);
            let span = info_span!("shard", shard = %shard.id);
            async move {
                let sink = ShardSink::new(sink, id, status);
                shard.run(&sink, stop).await
            }
            .instrument(span)
        })
        .collect();
    let mut failed = None;
    while let Some(ended) = runs.next().await {
        if let Err(err) = ended {
            stop.cancel();
            failed.get_or_insert(err);
        }
    }
    failed.map_or(Ok(()), Err)
}
