//! Socket Mode, read by Herald: `apps.connections.open`, the WebSocket it
//! names, and an acknowledgement for every envelope once the queue holds
//! what it carried.
//!
//! slack-morphism's listener hands one envelope at a time to a callback and
//! reads the next only after the callback returned, so with it every event
//! cost one store round trip of its own, one after another. Here the
//! envelopes that have arrived are read together (up to [`MAX_BATCH`]), the
//! messages among them go to the sink in one [`hand_over_all`], and only
//! then is each envelope acknowledged. Nothing is acknowledged before the
//! queue has it, and one connection's events reach the queue in the order
//! Slack sent them. An event's payload is decoded with slack-morphism's
//! types, as the Events API's is; what to make of a frame is decided by
//! [`read_frame`], which is pure. (slack-morphism's own frame types are not
//! reachable from outside the crate: its `socket_mode` model module is
//! shadowed by the listener's.)

use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, SinkExt, StreamExt};
use herald_core::{ChannelError, ChannelName, InboundMessage};
use serde::Deserialize;
use serde_json::value::RawValue;
use slack_morphism::SlackApiToken;
use slack_morphism::events::SlackPushEventCallback;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::CHANNEL;
use super::client::SlackApi;
use super::ingress::{Handler, Prepared};
use crate::retry::{hand_over_all, reconnect};
use crate::tls;

/// The largest Socket Mode message Herald reads: an envelope carries one
/// event (a message is at most 40,000 characters, with its blocks), not the
/// WebSocket library's default of 64 MiB.
const MAX_ENVELOPE: usize = 4 * 1024 * 1024;

/// The most envelopes read before what they carry is stored.
pub const MAX_BATCH: usize = 100;

/// How long a connection Slack is replacing is read before Herald closes it
/// itself (Slack closes it within seconds of its `disconnect`).
const DRAIN_LIMIT: Duration = Duration::from_secs(15);

/// How often Herald pings Slack on an otherwise quiet connection.
const PING_EVERY: Duration = Duration::from_secs(10);

/// A connection from which nothing (not even a pong) came for this long is
/// taken for dead and replaced.
const SILENCE_LIMIT: Duration = Duration::from_secs(35);

type Socket = tls::WebSocket;

/// What a Socket Mode text frame asks of Herald.
#[derive(Debug)]
pub enum Frame {
    /// The connection is ready; Slack counts `connections` open for the app.
    Hello { connections: u32 },
    /// An Events API event, to be stored, then acknowledged.
    Event {
        envelope: String,
        callback: Box<SlackPushEventCallback>,
    },
    /// An envelope Herald has no use for (a slash command, an interaction,
    /// one that did not decode): acknowledged at once so Slack does not send
    /// it again; sending it again would not change what Herald makes of it.
    Acknowledge { envelope: String, what: &'static str },
    /// Slack is about to close the connection (`refresh_requested`,
    /// `warning`, `link_disabled`): open another.
    Disconnect { reason: String },
    /// Not an envelope, and not understood.
    Ignore,
}

/// A Socket Mode frame's fields, as Slack documents them; `payload` stays
/// raw until the frame's type says what it is.
#[derive(Deserialize)]
struct Wire<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    envelope_id: Option<String>,
    num_connections: Option<u32>,
    reason: Option<String>,
    #[serde(borrow)]
    payload: Option<&'a RawValue>,
}

/// What the text frame `text` asks of Herald.
pub fn read_frame(text: &str) -> Frame {
    let Ok(wire) = serde_json::from_str::<Wire<'_>>(text) else {
        return Frame::Ignore;
    };
    let Some(envelope) = wire.envelope_id else {
        return match (wire.kind, wire.num_connections, wire.reason) {
            ("hello", Some(connections), _) => Frame::Hello { connections },
            ("disconnect", _, Some(reason)) => Frame::Disconnect { reason },
            _ => Frame::Ignore,
        };
    };
    let what = match wire.kind {
        "events_api" => {
            let callback = wire
                .payload
                .map(|raw| serde_json::from_str::<SlackPushEventCallback>(raw.get()));
            match callback {
                Some(Ok(callback)) => {
                    return Frame::Event {
                        envelope,
                        callback: Box::new(callback),
                    };
                }
                _ => "an event that did not decode",
            }
        }
        "slash_commands" => "a slash command",
        "interactive" => "an interaction",
        _ => "an envelope of a kind Herald does not know",
    };
    Frame::Acknowledge { envelope, what }
}

/// The frame that acknowledges `envelope`: `{"envelope_id": …}`.
pub fn acknowledgement(envelope: &str) -> String {
    serde_json::json!({ "envelope_id": envelope }).to_string()
}

/// Envelopes read together, and how the connection is to go on after them.
#[derive(Default)]
struct Batch {
    events: Vec<SlackPushEventCallback>,
    /// Every envelope read, in order: acknowledged once the events are stored.
    envelopes: Vec<String>,
    hello: Option<u32>,
    end: Option<End>,
}

/// Why a connection stops being read.
enum End {
    /// Slack asked for a new connection.
    Refresh(String),
    /// Closed by Slack, or broken.
    Lost(String),
}

impl Batch {
    fn add(&mut self, message: Result<Message, tokio_tungstenite::tungstenite::Error>) {
        let text = match message {
            Ok(Message::Text(text)) => text,
            Ok(Message::Close(frame)) => {
                let reason = frame.map_or_else(|| "no reason given".to_owned(), |f| format!("{} {}", f.code, f.reason));
                self.end = Some(End::Lost(format!("Slack closed the connection ({reason})")));
                return;
            }
            // tungstenite answers pings by itself; a pong only shows life.
            Ok(_) => return,
            Err(err) => {
                self.end = Some(End::Lost(format!("the connection broke: {err}")));
                return;
            }
        };
        match read_frame(text.as_str()) {
            Frame::Hello { connections } => self.hello = Some(connections),
            Frame::Event { envelope, callback } => {
                self.envelopes.push(envelope);
                self.events.push(*callback);
            }
            Frame::Acknowledge { envelope, what } => {
                debug!(envelope = %envelope, "acknowledging {what}; Herald does not act on it");
                self.envelopes.push(envelope);
            }
            Frame::Disconnect { reason } => self.end = Some(End::Refresh(reason)),
            Frame::Ignore => warn!("a Socket Mode frame Herald does not understand was ignored"),
        }
    }

    fn is_full(&self) -> bool {
        self.envelopes.len() >= MAX_BATCH || self.end.is_some()
    }
}

/// Herald's Socket Mode connections to Slack.
pub struct SocketMode {
    api: Arc<SlackApi>,
    app_token: SlackApiToken,
    handler: Arc<Handler>,
}

impl SocketMode {
    pub(super) fn new(api: Arc<SlackApi>, app_token: SlackApiToken, handler: Arc<Handler>) -> Self {
        Self {
            api,
            app_token,
            handler,
        }
    }

    /// Keeps `connections` connections open until shutdown, or until one
    /// fails for good (a refused app token).
    pub async fn run(&self, connections: u32, shutdown: &CancellationToken) -> Result<(), ChannelError> {
        let kept = (0..connections.max(1)).map(|number| self.keep_open(number, shutdown));
        futures::future::try_join_all(kept).await.map(|_| ())
    }

    /// One connection, opened again whenever it ends: at once when Slack
    /// asks for it, by the channels' reconnect policy when it is lost.
    async fn keep_open(&self, number: u32, shutdown: &CancellationToken) -> Result<(), ChannelError> {
        let what = format!("Slack Socket Mode connection {number}");
        let channel = ChannelName::new(CHANNEL);
        reconnect(&what, &channel, self.handler.sink.as_ref(), shutdown, || {
            self.until_lost(number, shutdown)
        })
        .await
    }

    /// Connections one after another for as long as Slack asks for fresh
    /// ones; `Ok` at shutdown, an error when one is lost or cannot be opened.
    /// A connection Slack asked to replace is read on while the next one
    /// opens, until Slack closes it: what Slack still sends on it is
    /// acknowledged there, not sent again three seconds later.
    async fn until_lost(&self, number: u32, shutdown: &CancellationToken) -> Result<(), ChannelError> {
        let mut old: Option<Socket> = None;
        loop {
            let next = self.connection(number, shutdown);
            let ended = match old.take() {
                None => next.await,
                Some(socket) => tokio::join!(self.drain(number, socket, shutdown), next).1,
            };
            match ended {
                Ok(None) => return Ok(()),
                Ok(Some((End::Refresh(reason), socket))) => {
                    info!(connection = number, reason = %reason, "Slack asked for a new Socket Mode connection");
                    old = socket;
                }
                Ok(Some((End::Lost(reason), _))) => return Err(ChannelError::Transient(reason)),
                // Only `apps.connections.open` fails for good: the app token.
                Err(ChannelError::Fatal(reason)) => return Err(ChannelError::Fatal(format!("app_token: {reason}"))),
                Err(err) => return Err(err),
            }
        }
    }

    /// Reads a connection Slack is replacing until Slack closes it (at most
    /// [`DRAIN_LIMIT`]), then closes it.
    async fn drain(&self, number: u32, mut socket: Socket, shutdown: &CancellationToken) {
        let ended = tokio::time::timeout(DRAIN_LIMIT, self.read(number, &mut socket, shutdown)).await;
        debug!(
            connection = number,
            "a replaced Socket Mode connection was read to its end"
        );
        if !matches!(ended, Ok(Some(End::Lost(_)))) {
            let _ = socket.close(None).await;
        }
    }

    /// Opens a connection and reads it until it ends; `Ok(None)` is
    /// shutdown. A connection Slack asked to replace comes back open.
    async fn connection(
        &self,
        number: u32,
        shutdown: &CancellationToken,
    ) -> Result<Option<(End, Option<Socket>)>, ChannelError> {
        let url = tokio::select! {
            () = shutdown.cancelled() => return Ok(None),
            url = self.api.open_connection(&self.app_token) => url?,
        };
        let trust = self.api.tls.rustls();
        let connect = tls::connect_websocket(url.as_str(), &trust, MAX_ENVELOPE);
        let mut socket = tokio::select! {
            () = shutdown.cancelled() => return Ok(None),
            socket = connect => socket
                .map_err(|err| ChannelError::Transient(format!("could not open the Socket Mode WebSocket: {err}")))?,
        };
        match self.read(number, &mut socket, shutdown).await {
            None => {
                let _ = socket.close(None).await;
                Ok(None)
            }
            Some(End::Refresh(reason)) => Ok(Some((End::Refresh(reason), Some(socket)))),
            Some(End::Lost(reason)) => Ok(Some((End::Lost(reason), None))),
        }
    }

    /// Reads `socket` until it ends (`None`: shutdown).
    async fn read(&self, number: u32, socket: &mut Socket, shutdown: &CancellationToken) -> Option<End> {
        let mut ping = tokio::time::interval_at(Instant::now() + PING_EVERY, PING_EVERY);
        ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut heard = Instant::now();
        loop {
            let first = tokio::select! {
                biased;
                () = shutdown.cancelled() => return None,
                message = socket.next() => message,
                _ = ping.tick() => {
                    if heard.elapsed() >= SILENCE_LIMIT {
                        return Some(End::Lost(format!("nothing came from Slack for {} s", heard.elapsed().as_secs())));
                    }
                    if let Err(err) = socket.send(Message::Ping(Default::default())).await {
                        return Some(End::Lost(format!("could not ping Slack: {err}")));
                    }
                    continue;
                }
            };
            let mut batch = Batch::default();
            let mut next = first;
            loop {
                match next {
                    Some(message) => batch.add(message),
                    None => batch.end = Some(End::Lost("Slack closed the connection".into())),
                }
                if batch.is_full() {
                    break;
                }
                // What else has arrived goes with it; nothing is waited for.
                match socket.next().now_or_never() {
                    Some(message) => next = message,
                    None => break,
                }
            }
            // With several connections, readiness follows the last one to
            // say hello or to be lost (the reconnect policy reports that).
            if let Some(connections) = batch.hello.take() {
                info!(
                    connection = number,
                    open = connections,
                    "Slack Socket Mode connection ready"
                );
                self.handler.sink.connected(&ChannelName::new(CHANNEL), true);
            }
            if !self.store(&batch.events, shutdown).await {
                return None;
            }
            if let Err(err) = acknowledge(socket, &batch.envelopes).await {
                return Some(
                    batch
                        .end
                        .unwrap_or(End::Lost(format!("could not acknowledge to Slack: {err}"))),
                );
            }
            if let Some(end) = batch.end {
                return Some(end);
            }
            // Silence is measured while listening, not while storing.
            heard = Instant::now();
        }
    }

    /// Hands the messages in `events` to the sink, in order, until the
    /// queue has them all. `false` means shutdown came first.
    async fn store(&self, events: &[SlackPushEventCallback], shutdown: &CancellationToken) -> bool {
        let mut screened: Vec<Prepared> = events.iter().filter_map(|event| self.handler.screen(event)).collect();
        self.handler.name_senders(&mut screened).await;
        let mut pending = Pending::default();
        for Prepared { key, message } in screened {
            // The same message twice (an `app_mention` and its `message`):
            // the first is stored before the second is looked at, as if they
            // had come one by one.
            if pending.keys.contains(&key) {
                if !self.hand_over(&mut pending, shutdown).await {
                    return false;
                }
                if self.handler.was_accepted(&key) {
                    continue;
                }
            }
            pending.keys.push(key);
            pending.messages.push(message);
        }
        self.hand_over(&mut pending, shutdown).await
    }

    async fn hand_over(&self, pending: &mut Pending, shutdown: &CancellationToken) -> bool {
        if pending.messages.is_empty() {
            return true;
        }
        let Some(admissions) = hand_over_all(self.handler.sink.as_ref(), &pending.messages, shutdown).await else {
            return false;
        };
        for ((key, message), admission) in pending.keys.iter().zip(&pending.messages).zip(&admissions) {
            self.handler.accepted(key, message, admission);
        }
        pending.keys.clear();
        pending.messages.clear();
        true
    }
}

/// Messages read and not yet handed to the sink, with their dedup keys.
#[derive(Default)]
struct Pending {
    keys: Vec<String>,
    messages: Vec<InboundMessage>,
}

/// Sends one acknowledgement per envelope, flushed together.
async fn acknowledge(socket: &mut Socket, envelopes: &[String]) -> Result<(), tokio_tungstenite::tungstenite::Error> {
    if envelopes.is_empty() {
        return Ok(());
    }
    for envelope in envelopes {
        socket.feed(Message::Text(acknowledgement(envelope).into())).await?;
    }
    socket.flush().await
}

#[cfg(test)]
mod tests;
