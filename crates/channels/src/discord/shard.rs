//! One gateway shard's connection: Herald's own reader of Discord's
//! gateway protocol ([`super::gateway`], which is pure).
//!
//! A shard that cannot resume waits for its identify turn
//! ([`super::starts`]) before it connects; HELLO says how often to
//! heartbeat; IDENTIFY (or RESUME, for a session that lost its connection)
//! opens the session; `MESSAGE_CREATE` events arrive in the gateway's
//! order. The frames that have arrived together (up to [`MAX_BATCH`]) are
//! read together, and the messages among them go to the sink in one
//! [`hand_over_all`], in order; the next frames are read only once the
//! queue holds them, and nothing else (typing, replies) happens for a
//! message before. Heartbeats go on while a batch is being stored.
//!
//! A lost connection resumes its session at the URL READY gave: Discord
//! replays what the session missed, with the same message ids, which are
//! the queue's dedup key, so a replayed message is stored once. The session
//! (id, resume URL, last sequence number) is kept in the store at READY, at
//! every heartbeat and when the connection ends, so a restarted Herald, or
//! the process that takes the shard over, resumes it too and receives what
//! was written meanwhile; a sequence number kept a little behind only means
//! a few messages replayed and stored once. Shutdown therefore closes with
//! a code that keeps the session resumable. RECONNECT (op 7) connects again
//! at once; an invalid session after a wait that doubles with every one in
//! a row ([`Backoff`]); a dropped or closed connection through the
//! channels' reconnect policy; a close code that says a setting is wrong
//! (the token, the MESSAGE CONTENT intent) ends the channel with an error
//! that names the setting.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, SinkExt, StreamExt};
use herald_core::{ChannelError, ChannelName, ConversationStore, InboundSink};
use secrecy::{ExposeSecret, SecretString};
use tokio::sync::Mutex;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::client::DiscordApi;
use super::gateway::start::Backoff;
use super::gateway::zlib::Inflater;
use super::gateway::{self, AfterClose, Beat, Event, Frame, Heartbeat, Session, ShardId};
use super::model::Message;
use super::payload::{self, CHANNEL, Place};
use super::starts::Starts;
use crate::retry::{LOOKUP, Retry, hand_over_all, pause, reconnect};
use crate::tls;

/// The largest gateway message Herald reads, inflated. Discord's
/// dispatches are kilobytes, and a large guild's `GUILD_CREATE` without the
/// member and presence intents stays well under a megabyte; the WebSocket
/// library's default (64 MiB) would let one frame take that much memory.
pub const MAX_GATEWAY_FRAME: usize = 8 * 1024 * 1024;

/// The most gateway frames read before the messages among them are stored.
pub const MAX_BATCH: usize = 100;

/// How long a new connection may take to say HELLO.
const HELLO_WAIT: Duration = Duration::from_secs(20);

/// Where the store keeps the shards' sessions.
const STATE_SCOPE: &str = "discord";

type Socket = tls::WebSocket;

/// What every shard of the bot shares.
pub(super) struct Gateway {
    pub(super) api: Arc<DiscordApi>,
    pub(super) respond_in: HashSet<u64>,
    /// The bot token without `Bot `, as IDENTIFY and RESUME carry it.
    pub(super) token: SecretString,
    pub(super) tls: Arc<rustls::ClientConfig>,
    pub(super) compress: bool,
    /// Where sessions are kept across restarts; `None` keeps them in memory.
    pub(super) store: Option<Arc<dyn ConversationStore>>,
}

/// One shard, as it runs in this process.
pub(super) struct Shard<'a> {
    pub(super) gateway: &'a Gateway,
    pub(super) starts: &'a Starts,
    pub(super) id: ShardId,
    pub(super) bot_id: u64,
    /// What `GET /gateway/bot` named, for new sessions.
    pub(super) url: String,
}

/// What one run of a shard keeps from connection to connection.
#[derive(Default)]
struct State {
    session: Session,
    /// Where each channel is (a DM, a guild channel, a thread), looked up
    /// once.
    places: HashMap<u64, Place>,
    backoff: Backoff,
}

/// Why a connection stopped being read.
enum End {
    /// The gateway asked for a new connection (RECONNECT, or an invalid
    /// session that may be resumed): open it now.
    Again(String),
    /// The session cannot go on and a new one must wait, as Discord asks
    /// after an invalid session that cannot be resumed.
    Identify(String),
    /// Closed by the gateway, or broken: connect again by the policy.
    Lost(String),
    /// A close code that connecting again cannot help.
    Fatal(String),
}

impl Shard<'_> {
    /// Runs the shard until `shutdown`; an error only when it cannot go on.
    pub(super) async fn run(&self, sink: &dyn InboundSink, shutdown: &CancellationToken) -> Result<(), ChannelError> {
        let channel = ChannelName::new(CHANNEL);
        let state = Mutex::new(State {
            session: self.kept_session().await,
            ..State::default()
        });
        reconnect(
            &format!("the discord gateway session of shard {}", self.id),
            &channel,
            sink,
            shutdown,
            || self.until_lost(sink, &state, shutdown),
        )
        .await
    }

    fn state_key(&self) -> String {
        format!("session {} {}", self.bot_id, self.id)
    }

    /// The session the store kept for this shard, if any.
    async fn kept_session(&self) -> Session {
        let Some(store) = &self.gateway.store else {
            return Session::default();
        };
        match store.get_state(STATE_SCOPE, &self.state_key()).await {
            Ok(Some(value)) => match serde_json::from_value::<Session>(value) {
                Ok(session) => {
                    if session.can_resume() {
                        info!(shard = %self.id, seq = session.seq, "resuming the discord session kept in the store");
                    }
                    session
                }
                Err(err) => {
                    warn!(shard = %self.id, error = %err, "the kept discord session did not decode; opening a new one");
                    Session::default()
                }
            },
            Ok(None) => Session::default(),
            Err(err) => {
                warn!(shard = %self.id, error = %err, "could not read the kept discord session; opening a new one");
                Session::default()
            }
        }
    }

    /// Keeps `session` in the store (a failure costs only a fresh session
    /// after a restart, so it is logged, not fatal).
    async fn keep(&self, session: &Session) {
        let Some(store) = &self.gateway.store else { return };
        let value = match serde_json::to_value(session) {
            Ok(value) => value,
            Err(err) => {
                warn!(error = %err, "could not encode the discord session");
                return;
            }
        };
        if let Err(err) = store.put_state(STATE_SCOPE, &self.state_key(), &value).await {
            warn!(shard = %self.id, error = %err, "could not keep the discord session in the store");
        }
    }

    /// Connections one after another for as long as the gateway asks for
    /// fresh ones; `Ok` at shutdown, an error when one is lost.
    async fn until_lost(
        &self,
        sink: &dyn InboundSink,
        state: &Mutex<State>,
        shutdown: &CancellationToken,
    ) -> Result<(), ChannelError> {
        let mut state = state.lock().await;
        loop {
            match self.connection(sink, &mut state, shutdown).await? {
                None => return Ok(()),
                Some(End::Again(reason)) => info!(reason = %reason, "connecting to the discord gateway again"),
                Some(End::Identify(reason)) => {
                    // Discord asks for one to five seconds; every invalid
                    // session in a row doubles it, so a storm of them does
                    // not spend the day's session starts.
                    let wait = state.backoff.refused(rand::random::<f64>());
                    let in_a_row = state.backoff.failures();
                    info!(reason = %reason, ?wait, in_a_row, "opening a new discord gateway session");
                    if !pause(wait, shutdown).await {
                        return Ok(());
                    }
                }
                Some(End::Lost(reason)) => return Err(ChannelError::Transient(reason)),
                Some(End::Fatal(reason)) => return Err(ChannelError::Fatal(reason)),
            }
        }
    }

    /// Opens a connection and reads it until it ends; `Ok(None)` is
    /// shutdown.
    async fn connection(
        &self,
        sink: &dyn InboundSink,
        state: &mut State,
        shutdown: &CancellationToken,
    ) -> Result<Option<End>, ChannelError> {
        let resuming = state.session.can_resume();
        // A new session waits for its turn (identify pacing and the
        // session-start budget) before it connects.
        let turn = if resuming {
            None
        } else {
            match self.starts.turn(self.id, shutdown).await? {
                Some(turn) => Some(turn),
                None => return Ok(None),
            }
        };
        let url = state.session.url(&self.url, self.gateway.compress);
        info!(shard = %self.id, gateway = %url, resuming, "connecting to the discord gateway");
        let connect = tls::connect_websocket(url.as_str(), &self.gateway.tls, MAX_GATEWAY_FRAME);
        let mut socket = tokio::select! {
            () = shutdown.cancelled() => return Ok(None),
            socket = connect => socket
                .map_err(|err| ChannelError::Transient(format!("could not open the discord gateway: {err}")))?,
        };
        let ended = self.read(sink, &mut socket, state, turn, shutdown).await;
        self.keep(&state.session).await;
        let close = match &ended {
            // Closing with 1000 ends the session: the bot shows offline at once.
            Some(End::Fatal(_)) | Some(End::Identify(_)) => Some(CloseCode::Normal),
            // Any other code keeps the session resumable: at shutdown too,
            // so the next start (or the process taking the shard over)
            // resumes it and receives what was written meanwhile.
            None | Some(End::Again(_)) => Some(CloseCode::from(gateway::CLOSE_TO_RESUME)),
            Some(End::Lost(_)) => None,
        };
        if let Some(code) = close {
            let frame = CloseFrame {
                code,
                reason: "".into(),
            };
            let _ = tokio::time::timeout(Duration::from_secs(2), socket.close(Some(frame))).await;
        }
        Ok(ended)
    }

    /// Reads `socket` until it ends (`None`: shutdown).
    async fn read(
        &self,
        sink: &dyn InboundSink,
        socket: &mut Socket,
        state: &mut State,
        turn: Option<super::starts::Turn>,
        shutdown: &CancellationToken,
    ) -> Option<End> {
        let mut inflater = self.gateway.compress.then(|| Inflater::new(MAX_GATEWAY_FRAME));
        let interval = match tokio::time::timeout(HELLO_WAIT, socket.next()).await {
            Err(_) => return Some(End::Lost("the discord gateway said no HELLO".into())),
            Ok(first) => {
                let mut batch = Batch::default();
                let mut heartbeat = Heartbeat::new(Duration::MAX);
                batch.add(first, &mut inflater, &mut state.session, &mut heartbeat);
                match (batch.hello, batch.end) {
                    (Some(interval), None) => interval,
                    (_, Some(end)) => return Some(end),
                    (None, None) => return Some(End::Lost("the discord gateway did not begin with HELLO".into())),
                }
            }
        };
        let greeting = state.session.greeting(self.gateway.token.expose_secret(), self.id);
        if let Err(err) = socket.send(WsMessage::text(greeting)).await {
            return Some(End::Lost(format!("could not identify to the discord gateway: {err}")));
        }
        if let Some(turn) = turn {
            turn.identified();
        }
        let mut heartbeat = Heartbeat::new(interval);
        let mut next_beat = Instant::now() + heartbeat.first_after(rand::random::<f64>());
        loop {
            let first = tokio::select! {
                biased;
                () = shutdown.cancelled() => return None,
                // What has arrived (an acknowledgement among it) is read
                // before a heartbeat falls due.
                message = socket.next() => message,
                () = tokio::time::sleep_until(next_beat) => {
                    // From now, not from when it was due: a late beat does
                    // not bring the next ones closer together.
                    next_beat = Instant::now() + heartbeat.interval;
                    if heartbeat.due() == Beat::Zombie {
                        return Some(End::Lost("the discord gateway did not acknowledge a heartbeat".into()));
                    }
                    if let Err(err) = socket.send(WsMessage::text(gateway::heartbeat(state.session.seq))).await {
                        return Some(End::Lost(format!("could not send a heartbeat: {err}")));
                    }
                    // Where a restart resumes from, kept every heartbeat.
                    self.keep(&state.session).await;
                    continue;
                }
            };
            let mut batch = Batch::default();
            let mut next = first;
            loop {
                batch.add(next, &mut inflater, &mut state.session, &mut heartbeat);
                if batch.is_full() {
                    break;
                }
                // What else has arrived goes with it; nothing is waited for.
                match socket.next().now_or_never() {
                    Some(message) => next = message,
                    None => break,
                }
            }
            if let Some(connected) = batch.connected {
                sink.connected(&ChannelName::new(CHANNEL), connected);
                state.backoff.ready();
                self.keep(&state.session).await;
            }
            if !batch.messages.is_empty() {
                let messages = std::mem::take(&mut batch.messages);
                let stored = {
                    let handing = self.handle_all(sink, &mut state.places, messages, shutdown);
                    tokio::pin!(handing);
                    // A store that is slow must not cost the connection:
                    // heartbeats go on meanwhile (their acknowledgements are
                    // read with the next frames).
                    loop {
                        tokio::select! {
                            stored = &mut handing => break stored,
                            () = tokio::time::sleep_until(next_beat) => {
                                next_beat = Instant::now() + heartbeat.interval;
                                heartbeat.due();
                                let beat = gateway::heartbeat(state.session.seq);
                                if let Err(err) = socket.send(WsMessage::text(beat)).await {
                                    batch.end.get_or_insert(End::Lost(format!("could not send a heartbeat: {err}")));
                                }
                            }
                        }
                    }
                };
                if !stored {
                    return None;
                }
            }
            if batch.beat_now {
                let beat = gateway::heartbeat(state.session.seq);
                if let Err(err) = socket.send(WsMessage::text(beat)).await {
                    return Some(End::Lost(format!("could not send a heartbeat: {err}")));
                }
            }
            if let Some(end) = batch.end {
                return Some(end);
            }
        }
    }

    async fn place_of(
        &self,
        places: &mut HashMap<u64, Place>,
        message: &Message,
        shutdown: &CancellationToken,
    ) -> Place {
        let channel = message.channel_id;
        if payload::is_direct(message) {
            return Place::Direct { channel };
        }
        if let Some(place) = places.get(&channel) {
            return *place;
        }
        let mut retry = Retry::new(LOOKUP);
        loop {
            match self.gateway.api.place(channel).await {
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
    /// it. `false` means shutdown came first.
    async fn handle_all(
        &self,
        sink: &dyn InboundSink,
        places: &mut HashMap<u64, Place>,
        messages: Vec<Message>,
        shutdown: &CancellationToken,
    ) -> bool {
        let mut inbound = Vec::with_capacity(messages.len());
        for message in messages {
            if !payload::is_for_herald(&message, self.bot_id) {
                continue;
            }
            let place = self.place_of(places, &message, shutdown).await;
            inbound.extend(payload::inbound(&message, place, self.bot_id, &self.gateway.respond_in));
        }
        if inbound.is_empty() {
            return true;
        }
        let Some(admissions) = hand_over_all(sink, &inbound, shutdown).await else {
            return false;
        };
        for (message, admission) in inbound.iter().zip(admissions) {
            debug!(conversation = %message.conversation.id, ?admission, "discord message accepted");
        }
        true
    }
}

/// Frames read together, and how the connection is to go on after them.
#[derive(Default)]
struct Batch {
    messages: Vec<Message>,
    frames: usize,
    hello: Option<Duration>,
    /// READY or RESUMED (`true`).
    connected: Option<bool>,
    /// The gateway asked for a heartbeat now.
    beat_now: bool,
    end: Option<End>,
}

impl Batch {
    fn add(
        &mut self,
        message: Option<Result<WsMessage, tokio_tungstenite::tungstenite::Error>>,
        inflater: &mut Option<Inflater>,
        session: &mut Session,
        heartbeat: &mut Heartbeat,
    ) {
        self.frames += 1;
        // A text frame is read where it lies; an inflated one where the
        // inflater put it.
        let (plain, inflated);
        let text: &str = match message {
            Some(Ok(WsMessage::Text(text))) => {
                plain = text;
                plain.as_str()
            }
            Some(Ok(WsMessage::Close(frame))) => {
                self.end = Some(closed(frame, session));
                return;
            }
            Some(Ok(WsMessage::Binary(bytes))) => {
                let Some(inflater) = inflater else {
                    warn!("the discord gateway sent a binary frame, which Herald did not ask for; ignored");
                    return;
                };
                match inflater.push(&bytes) {
                    // The rest of the message is in the next frames.
                    Ok(None) => return,
                    Ok(Some(text)) => {
                        inflated = text;
                        inflated.as_str()
                    }
                    Err(err) => {
                        // The stream cannot be read on; a new connection
                        // starts a new one and resumes.
                        self.end = Some(End::Lost(err.to_string()));
                        return;
                    }
                }
            }
            // tungstenite answers pings by itself.
            Some(Ok(_)) => return,
            Some(Err(err)) => {
                self.end = Some(End::Lost(format!("the discord gateway connection broke: {err}")));
                return;
            }
            None => {
                self.end = Some(End::Lost("the discord gateway closed the connection".into()));
                return;
            }
        };
        match gateway::read_frame(text) {
            Frame::Dispatch { seq, event } => {
                session.saw(seq);
                match event {
                    Event::Message(message) => self.messages.push(*message),
                    Event::Ready { session_id, resume_url } => {
                        info!(session = %session_id, "discord gateway session ready");
                        session.resumable = Some((session_id, resume_url));
                        self.connected = Some(true);
                    }
                    Event::Resumed => {
                        info!("discord gateway session resumed");
                        self.connected = Some(true);
                    }
                    Event::Undecodable(error) => {
                        warn!(seq, error = %error, "a discord event did not decode; skipped");
                    }
                    Event::Other => {}
                }
            }
            Frame::Hello { interval } => self.hello = Some(interval),
            Frame::HeartbeatNow => self.beat_now = true,
            Frame::HeartbeatAck => heartbeat.acknowledged(),
            Frame::Reconnect => self.end = Some(End::Again("the gateway asked for a reconnect".into())),
            Frame::InvalidSession { resumable } => {
                self.end = Some(if resumable {
                    End::Again("the gateway invalidated the connection; resuming".into())
                } else {
                    session.forget();
                    End::Identify("the gateway invalidated the session".into())
                });
            }
            Frame::Ignore => debug!("a discord gateway frame Herald does not act on was ignored"),
        }
    }

    fn is_full(&self) -> bool {
        self.frames >= MAX_BATCH || self.end.is_some()
    }
}

/// What the gateway closing the connection means.
fn closed(frame: Option<CloseFrame>, session: &mut Session) -> End {
    let Some(frame) = frame else {
        return End::Lost("the discord gateway closed the connection".into());
    };
    let code = u16::from(frame.code);
    let why = format!("the discord gateway closed the connection ({code} {})", frame.reason);
    match gateway::after_close(code) {
        AfterClose::Resume => End::Lost(why),
        AfterClose::Identify => {
            session.forget();
            End::Lost(why)
        }
        AfterClose::Fatal(reason) => End::Fatal(reason),
    }
}
