//! Builds the configured channel adapters: each platform contributes an
//! outbound half (for replies) and an ingress half (for what it receives).
//! The gateway sink between ingress and the queue is built here too, because
//! it needs the outbound half to answer pairing requests.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use herald_channels::Built;
use herald_channels::access::PairingReplies;
use herald_channels::attachments::{AttachmentIntake, FetchAttachment};
use herald_channels::config::ChannelsConfig;
use herald_channels::gateway::Gateway;
use herald_core::{
    Admins, ChannelIngress, ChannelName, ChannelStatus, ConversationStore, ExclusiveLocks, HeldLock, InboundSink,
    LocalLimiter, Outbound, SendLimiter, SteadyClock, StoreError,
};
use herald_net::ClientTls;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, error, info, info_span, warn};

use crate::app::App;

pub struct Channels {
    pub outbound: Outbound,
    pub ingress: Vec<Arc<dyn ChannelIngress>>,
    /// Each channel's way of fetching its messages' files.
    pub fetchers: BTreeMap<ChannelName, Arc<dyn FetchAttachment>>,
}

/// The adapters `config` asks for, not yet connected. `store` is where
/// adapters keep their progress (Telegram's update offset); `None` when only
/// probing (`herald doctor`); `locks` is how the processes on one
/// database share work an ingress splits (Discord's shards). Every channel
/// keeps its send windows in
/// `limiter` (see [`send_limiter`]); every connection trusts `tls`.
pub fn build(
    config: &ChannelsConfig,
    store: Option<Arc<dyn ConversationStore>>,
    locks: Option<Arc<dyn ExclusiveLocks>>,
    limiter: Arc<dyn SendLimiter>,
    tls: &ClientTls,
) -> Result<Channels> {
    if let Err((key, message)) = config.check() {
        anyhow::bail!("{key}: {message}");
    }
    let mut built: Vec<Built> = Vec::new();
    if let Some(discord) = &config.discord {
        built.push(
            herald_channels::discord::build(discord, store.clone(), locks, limiter.clone(), tls)
                .context("channels.discord")?,
        );
    }
    if let Some(telegram) = &config.telegram {
        built.push(
            herald_channels::telegram::build(telegram, store.clone(), limiter.clone(), tls)
                .context("channels.telegram")?,
        );
    }
    if let Some(slack) = &config.slack {
        built.push(herald_channels::slack::build(slack, limiter.clone(), tls).context("channels.slack")?);
    }
    if let Some(email) = &config.email {
        built
            .push(herald_channels::email::build(email, store.clone(), limiter.clone(), tls).context("channels.email")?);
    }
    let mut outbound = Outbound::new();
    let mut ingress: Vec<Arc<dyn ChannelIngress>> = Vec::new();
    let mut fetchers = BTreeMap::new();
    for channel in built {
        if let Some(fetcher) = channel.fetcher {
            fetchers.insert(channel.ingress.channel(), fetcher);
        }
        outbound = outbound.with(channel.outbound);
        ingress.push(channel.ingress);
    }
    Ok(Channels {
        outbound,
        ingress,
        fetchers,
    })
}

/// Where the channels keep their send windows. On PostgreSQL, the database
/// holds them, so every Herald process on it counts the same sends and the
/// platforms' limits hold for the bot as a whole; on SQLite (one process)
/// they live in this process.
pub fn send_limiter(app: &App) -> Arc<dyn SendLimiter> {
    app.storage
        .send_limiter()
        .unwrap_or_else(|| Arc::new(LocalLimiter::new(Arc::new(SteadyClock::new()))))
}

/// What checks a message's files at the door and fetches them at its
/// turn; one per process (it bounds the process's downloads).
pub fn attachment_intake(
    app: &App,
    fetchers: BTreeMap<ChannelName, Arc<dyn FetchAttachment>>,
) -> Arc<AttachmentIntake> {
    Arc::new(AttachmentIntake::new(
        app.config.channels.attachments.clone(),
        app.storage.files(),
        fetchers,
        app.clock.clone(),
    ))
}

pub fn gateway(
    app: &App,
    outbound: Outbound,
    status: ChannelStatus,
    attachments: Arc<AttachmentIntake>,
) -> Arc<dyn InboundSink> {
    Arc::new(Gateway {
        queue: app.storage.queue(),
        store: app.storage.conversations(),
        outbound,
        admins: Admins::new(app.config.admins.iter().cloned()),
        access: app.config.access.clone(),
        max_message_chars: app.config.channels.max_message_chars,
        pairing_replies: PairingReplies::new(app.config.access.pairing_replies_per_hour),
        clock: app.clock.clone(),
        status,
        attachments: Some(attachments),
    })
}

/// How often a process without an exclusive ingress tries to take it over,
/// and how often the holder checks it still holds it.
const LOCK_INTERVAL: Duration = Duration::from_secs(2);

/// How long a standby waits on an ingress lock in one go, where the engine
/// can wait on it (PostgreSQL).
const STANDBY_WAIT: Duration = Duration::from_secs(30);

/// Starts every ingress; each runs until `shutdown`. An ingress that must
/// have a single consumer ([`ChannelIngress::exclusive`]) runs only while
/// this process holds its lock in `locks`: the others wait on standby and
/// one takes over within seconds when the holder dies.
pub fn spawn_ingress(
    ingress: &[Arc<dyn ChannelIngress>],
    sink: Arc<dyn InboundSink>,
    locks: Arc<dyn ExclusiveLocks>,
    status: ChannelStatus,
    shutdown: CancellationToken,
) -> JoinSet<()> {
    let mut tasks = JoinSet::new();
    for channel in ingress {
        let channel = channel.clone();
        let sink = sink.clone();
        let shutdown = shutdown.clone();
        let locks = locks.clone();
        let status = status.clone();
        let span = info_span!("ingress", channel = %channel.channel());
        tasks.spawn(
            async move {
                if channel.exclusive() {
                    run_exclusive(channel, sink, locks.as_ref(), &status, shutdown).await;
                } else {
                    status.set(&channel.channel(), false);
                    run_receiving(channel.as_ref(), sink, shutdown).await;
                }
            }
            .instrument(span),
        );
    }
    tasks
}

async fn run_receiving(channel: &dyn ChannelIngress, sink: Arc<dyn InboundSink>, shutdown: CancellationToken) {
    info!("receiving");
    if let Err(err) = channel.run(sink.clone(), shutdown).await {
        error!(error = %err, "channel stopped receiving");
    }
    sink.connected(&channel.channel(), false);
}

/// Holds the channel's lock while running it; contends again when the lock
/// is lost (the database connection behind it went away).
async fn run_exclusive(
    channel: Arc<dyn ChannelIngress>,
    sink: Arc<dyn InboundSink>,
    locks: &dyn ExclusiveLocks,
    status: &ChannelStatus,
    shutdown: CancellationToken,
) {
    let name = format!("ingress:{}", channel.channel());
    let mut waiting_logged = false;
    while !shutdown.is_cancelled() {
        let mut held = tokio::select! {
            asked = locks.try_acquire(&name) => lock_or_warn(asked),
            () = shutdown.cancelled() => return,
        };
        if held.is_none() {
            if !waiting_logged {
                info!("another process receives from this channel; standing by");
                waiting_logged = true;
            }
            // A standby process is not expected to be connected.
            status.forget(&channel.channel());
            // Waiting on the lock itself (where the engine can) wakes this
            // standby the moment the holder dies, not a poll later.
            let asked = tokio::select! {
                asked = locks.acquire_within(&name, STANDBY_WAIT) => asked,
                () = shutdown.cancelled() => return,
            };
            if asked.is_err() {
                // An unreachable store is asked again after a pause, not in
                // a tight loop.
                tokio::select! {
                    () = tokio::time::sleep(LOCK_INTERVAL) => {},
                    () = shutdown.cancelled() => return,
                }
            }
            held = lock_or_warn(asked);
        }
        // Still held after the wait: ask again.
        let Some(mut held) = held else { continue };
        waiting_logged = false;
        status.set(&channel.channel(), false);
        let stop = shutdown.child_token();
        let running = run_receiving(channel.as_ref(), sink.clone(), stop.clone());
        tokio::pin!(running);
        let lost = loop {
            tokio::select! {
                () = &mut running => break false,
                () = tokio::time::sleep(LOCK_INTERVAL) => {
                    if !held.still_held().await {
                        break true;
                    }
                }
            }
        };
        if lost {
            warn!("lost the ingress lock; stopping this channel's ingress so another process can take it");
            stop.cancel();
            running.await;
        }
        held.release().await;
        if !lost {
            // The ingress ended by itself: shutdown, or an error it cannot
            // get past (a wrong token). Another process would fail alike.
            return;
        }
    }
}

/// The lock if granted; an error is logged and counts as not granted.
fn lock_or_warn(asked: Result<Option<Box<dyn HeldLock>>, StoreError>) -> Option<Box<dyn HeldLock>> {
    asked.unwrap_or_else(|err| {
        warn!(error = %err, "could not ask for the ingress lock");
        None
    })
}
