//! The Discord adapter's inbound half: the gateway session.
//!
//! The gateway is serenity's client, run on a thread of its own with a
//! current-thread runtime. serenity spawns one task per event; on that
//! runtime tasks run in the order they were spawned, and the handler's first
//! act is to put the message on an ordered channel. Messages therefore reach
//! [`InboundSink::accept`] one at a time, in the gateway's order, and nothing
//! else (typing, replies) happens before a message is accepted.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use herald_core::channel::ChannelIngress;
use herald_core::{ChannelError, ChannelName, InboundSink};
use secrecy::ExposeSecret;
use serenity::all::{
    ConnectionStage, Context, EventHandler, GatewayError, GatewayIntents, Message, Ready, ResumedEvent,
    ShardStageUpdateEvent,
};
use serenity::http::HttpBuilder;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::client::DiscordApi;
use super::payload::{self, CHANNEL, Place};
use crate::retry::{LOOKUP, Retry, hand_over_all, reconnect};

/// The intents Herald identifies with. MESSAGE_CONTENT is privileged: it
/// must be switched on in the developer portal, or the gateway closes with
/// 4014.
pub fn intents() -> GatewayIntents {
    GatewayIntents::GUILD_MESSAGES | GatewayIntents::DIRECT_MESSAGES | GatewayIntents::MESSAGE_CONTENT
}

/// The most gateway messages handed to the sink at once.
const MAX_BATCH: usize = 100;

/// Receives from the gateway and hands messages to the sink.
pub struct DiscordIngress {
    pub(super) api: Arc<DiscordApi>,
    pub(super) respond_in: HashSet<u64>,
}

#[async_trait]
impl ChannelIngress for DiscordIngress {
    fn channel(&self) -> ChannelName {
        ChannelName::new(CHANNEL)
    }

    async fn run(&self, sink: Arc<dyn InboundSink>, shutdown: CancellationToken) -> Result<(), ChannelError> {
        let channel = ChannelName::new(CHANNEL);
        reconnect(
            "the discord gateway session",
            &channel,
            sink.as_ref(),
            &shutdown,
            || self.session(sink.as_ref(), &shutdown),
        )
        .await
    }

    async fn probe(&self) -> Result<String, ChannelError> {
        let bot = self.api.current_user().await?;
        let gateway = self.api.gateway_url().await?;
        Ok(format!("bot {} ({}), gateway {gateway}", bot.username, bot.id))
    }
}

impl DiscordIngress {
    /// One gateway session: learn who the bot is, connect, and accept
    /// messages until shutdown or until serenity gives up.
    async fn session(&self, sink: &dyn InboundSink, shutdown: &CancellationToken) -> Result<(), ChannelError> {
        let bot = self.api.current_user().await?;
        let gateway_url = self.api.gateway_url().await?;
        info!(bot = %bot.username, gateway = %gateway_url, "connecting to the discord gateway");
        let (events_tx, mut events) = mpsc::unbounded_channel();
        let stop = shutdown.child_token();
        let mut done = spawn_gateway(
            self.api.authorization.expose_secret().to_owned(),
            self.api.api_base.clone(),
            gateway_url,
            events_tx,
            stop.clone(),
        )?;
        let mut places: HashMap<u64, Place> = HashMap::new();
        loop {
            tokio::select! {
                biased;
                event = events.recv() => match event {
                    Some(GatewayEvent::Message(message)) => {
                        // What else the gateway queued meanwhile goes with it,
                        // up to the next event that is not a message.
                        let mut batch = vec![*message];
                        let mut after = None;
                        while batch.len() < MAX_BATCH {
                            match events.try_recv() {
                                Ok(GatewayEvent::Message(message)) => batch.push(*message),
                                Ok(other) => {
                                    after = Some(other);
                                    break;
                                }
                                Err(_) => break,
                            }
                        }
                        self.handle_all(sink, &mut places, bot.id, batch, shutdown).await;
                        if let Some(GatewayEvent::Connected(connected)) = after {
                            sink.connected(&ChannelName::new(CHANNEL), connected);
                        }
                    }
                    Some(GatewayEvent::Connected(connected)) => sink.connected(&ChannelName::new(CHANNEL), connected),
                    None => return (&mut done).await.unwrap_or(Ok(())),
                },
                result = &mut done => return result.unwrap_or(Ok(())),
                () = shutdown.cancelled() => {
                    stop.cancel();
                    let _ = done.await;
                    return Ok(());
                }
            }
        }
    }

    async fn place_of(
        &self,
        places: &mut HashMap<u64, Place>,
        message: &Message,
        shutdown: &CancellationToken,
    ) -> Place {
        let channel = message.channel_id.get();
        if payload::is_direct(message) {
            return Place::Direct { channel };
        }
        if let Some(place) = places.get(&channel) {
            return *place;
        }
        let mut retry = Retry::new(LOOKUP);
        loop {
            match self.api.place(channel).await {
                Ok(place) => {
                    places.insert(channel, place);
                    return place;
                }
                Err(err) => {
                    warn!(error = %err, channel, attempt = retry.failures() + 1, "could not look up a discord channel");
                    if !retry.wait(err.retry_class(), shutdown).await {
                        break;
                    }
                }
            }
        }
        // Posting to the message's own channel still answers in the right
        // place; only a thread's grouping under its parent is lost.
        Place::Channel { channel }
    }

    /// Hands the messages for Herald among `messages` to the sink, in
    /// order and as one batch. A message is only safe once the queue has
    /// it; the next batch is taken only after.
    async fn handle_all(
        &self,
        sink: &dyn InboundSink,
        places: &mut HashMap<u64, Place>,
        bot_id: u64,
        messages: Vec<Message>,
        shutdown: &CancellationToken,
    ) {
        let mut inbound = Vec::with_capacity(messages.len());
        for message in messages {
            if !payload::is_for_herald(&message, bot_id) {
                continue;
            }
            let place = self.place_of(places, &message, shutdown).await;
            inbound.extend(payload::inbound(&message, place, bot_id, &self.respond_in));
        }
        if inbound.is_empty() {
            return;
        }
        if let Some(admissions) = hand_over_all(sink, &inbound, shutdown).await {
            for (message, admission) in inbound.iter().zip(admissions) {
                debug!(conversation = %message.conversation.id, ?admission, "discord message accepted");
            }
        }
    }
}

/// What the gateway thread tells the ingress, in the gateway's order.
enum GatewayEvent {
    Message(Box<Message>),
    /// READY or RESUMED (`true`), or the shard left the connected stage.
    Connected(bool),
}

/// Forwards gateway messages, in order, to the ingress.
struct Forward {
    events: mpsc::UnboundedSender<GatewayEvent>,
}

#[serenity::async_trait]
impl EventHandler for Forward {
    async fn message(&self, _context: Context, message: Message) {
        // Before any await: see the module documentation on ordering.
        let _ = self.events.send(GatewayEvent::Message(Box::new(message)));
    }

    async fn ready(&self, _context: Context, _ready: Ready) {
        let _ = self.events.send(GatewayEvent::Connected(true));
    }

    async fn resume(&self, _context: Context, _resumed: ResumedEvent) {
        let _ = self.events.send(GatewayEvent::Connected(true));
    }

    async fn shard_stage_update(&self, _context: Context, update: ShardStageUpdateEvent) {
        if update.new != ConnectionStage::Connected {
            let _ = self.events.send(GatewayEvent::Connected(false));
        }
    }
}

fn spawn_gateway(
    authorization: String,
    api_base: String,
    gateway_url: String,
    events: mpsc::UnboundedSender<GatewayEvent>,
    stop: CancellationToken,
) -> Result<oneshot::Receiver<Result<(), ChannelError>>, ChannelError> {
    let (done_tx, done_rx) = oneshot::channel();
    std::thread::Builder::new()
        .name("discord-gateway".into())
        .spawn(move || {
            let result = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(runtime) => runtime.block_on(run_gateway(authorization, api_base, gateway_url, events, stop)),
                Err(err) => Err(ChannelError::Fatal(format!(
                    "could not start the discord gateway runtime: {err}"
                ))),
            };
            let _ = done_tx.send(result);
        })
        .map_err(|err| ChannelError::Fatal(format!("could not start the discord gateway thread: {err}")))?;
    Ok(done_rx)
}

async fn run_gateway(
    authorization: String,
    api_base: String,
    gateway_url: String,
    events: mpsc::UnboundedSender<GatewayEvent>,
    stop: CancellationToken,
) -> Result<(), ChannelError> {
    let http = HttpBuilder::new(&authorization)
        .proxy(api_base)
        .ratelimiter_disabled(true)
        .build();
    let mut client = serenity::all::ClientBuilder::new_with_http(http, intents())
        .event_handler(Forward { events })
        .await
        .map_err(|err| ChannelError::Transient(format!("discord client: {err}")))?;
    // serenity fetched the gateway URL itself and falls back to Discord's
    // real gateway when that fails; use the one Herald fetched.
    *client.ws_url.lock().await = gateway_url;
    let manager = client.shard_manager.clone();
    tokio::select! {
        result = client.start() => result.map_err(gateway_error),
        () = stop.cancelled() => {
            manager.shutdown_all().await;
            Ok(())
        }
    }
}

fn gateway_error(err: serenity::Error) -> ChannelError {
    match err {
        serenity::Error::Gateway(GatewayError::InvalidAuthentication) => {
            ChannelError::Fatal("the discord gateway refused the bot token; check channels.discord.token".into())
        }
        serenity::Error::Gateway(GatewayError::DisallowedGatewayIntents) => ChannelError::Fatal(
            "the discord gateway refused the MESSAGE CONTENT intent; switch it on under Bot → Privileged Gateway Intents in the developer portal"
                .into(),
        ),
        serenity::Error::Gateway(GatewayError::InvalidGatewayIntents) => {
            ChannelError::Fatal("the discord gateway refused Herald's intents".into())
        }
        other => ChannelError::Transient(format!("discord gateway: {other}")),
    }
}
