//! Builds the configured channel adapters: each platform contributes an
//! outbound half (for replies) and an ingress half (for what it receives).
//! The gateway sink between ingress and the queue is built here too, because
//! it needs the outbound half to answer pairing requests.

use std::sync::Arc;

use anyhow::{Context, Result};
use herald_channels::config::ChannelsConfig;
use herald_channels::gateway::Gateway;
use herald_core::{Admins, ChannelIngress, ConversationStore, InboundSink, Outbound};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, error, info, info_span};

use crate::app::App;

pub struct Channels {
    pub outbound: Outbound,
    pub ingress: Vec<Arc<dyn ChannelIngress>>,
}

/// The adapters `config` asks for, not yet connected. `store` is where
/// adapters keep their progress (Telegram's update offset); `None` when only
/// probing (`herald doctor`).
pub fn build(config: &ChannelsConfig, store: Option<Arc<dyn ConversationStore>>) -> Result<Channels> {
    let mut outbound = Outbound::new();
    let mut ingress: Vec<Arc<dyn ChannelIngress>> = Vec::new();
    if let Some(discord) = &config.discord {
        let (delivery, receiver) = herald_channels::discord::build(discord).context("channels.discord")?;
        outbound = outbound.with(Arc::new(delivery));
        ingress.push(Arc::new(receiver));
    }
    if let Some(telegram) = &config.telegram {
        let built = herald_channels::telegram::build(telegram, store.clone()).context("channels.telegram")?;
        outbound = outbound.with(built.outbound);
        ingress.push(built.ingress);
    }
    if let Some(slack) = &config.slack {
        let built = herald_channels::slack::build(slack).context("channels.slack")?;
        outbound = outbound.with(built.outbound);
        ingress.push(built.ingress);
    }
    if let Some(email) = &config.email {
        let built = herald_channels::email::build(email, store.clone()).context("channels.email")?;
        outbound = outbound.with(built.outbound);
        ingress.push(built.ingress);
    }
    Ok(Channels { outbound, ingress })
}

pub fn gateway(app: &App, outbound: Outbound) -> Arc<dyn InboundSink> {
    Arc::new(Gateway {
        queue: app.storage.queue(),
        store: app.storage.conversations(),
        outbound,
        admins: Admins::new(app.config.admins.iter().cloned()),
        access: app.config.access.clone(),
        clock: app.clock.clone(),
    })
}

/// Starts every ingress; each runs until `shutdown`.
pub fn spawn_ingress(
    ingress: &[Arc<dyn ChannelIngress>],
    sink: Arc<dyn InboundSink>,
    shutdown: CancellationToken,
) -> JoinSet<()> {
    let mut tasks = JoinSet::new();
    for channel in ingress {
        let channel = channel.clone();
        let sink = sink.clone();
        let shutdown = shutdown.clone();
        let span = info_span!("ingress", channel = %channel.channel());
        tasks.spawn(
            async move {
                info!("receiving");
                if let Err(err) = channel.run(sink, shutdown).await {
                    error!(error = %err, "channel stopped receiving");
                }
            }
            .instrument(span),
        );
    }
    tasks
}
