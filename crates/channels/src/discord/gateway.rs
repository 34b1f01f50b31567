//! Discord's gateway protocol, pure: what a frame from the gateway asks of
//! Herald, the frames Herald sends, the heartbeat's bookkeeping, and what a
//! close code means. The connection that uses it is
//! [`super::ingress`]; nothing here does I/O, so all of it is unit-tested
//! with the frames Discord's documentation shows.
//!
//! Herald speaks the gateway itself instead of through serenity's client
//! (see ARCHITECTURE.md for the measurements),
//! which parsed every event twice (into a `serde_json::Value`, then into its
//! full model), spawned a task per event on a runtime of its own thread, and
//! waited for frames 500 ms at a time. Here a frame is parsed once, an
//! event's payload only when it is one Herald acts on, and into
//! [`Message`]: only what Herald reads.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;
use serde_json::value::RawValue;

use super::model::Message;

pub mod start;
pub mod zlib;

/// The query every gateway URL is opened with: API v10, JSON.
pub const QUERY: &str = "v=10&encoding=json";

/// What the query adds for transport compression (see [`zlib`]).
pub const COMPRESS: &str = "&compress=zlib-stream";

/// The intents Herald identifies with: GUILD_MESSAGES, DIRECT_MESSAGES and
/// MESSAGE_CONTENT. The last is privileged: it must be switched on in the
/// developer portal, or the gateway closes with 4014.
pub const INTENTS: u64 = (1 << 9) | (1 << 12) | (1 << 15);

const DISPATCH: u8 = 0;
const HEARTBEAT: u8 = 1;
const IDENTIFY: u8 = 2;
const RESUME: u8 = 6;
const RECONNECT: u8 = 7;
const INVALID_SESSION: u8 = 9;
const HELLO: u8 = 10;
const HEARTBEAT_ACK: u8 = 11;

/// What a frame from the gateway asks of Herald.
#[derive(Debug)]
pub enum Frame {
    /// The first frame of a connection: heartbeat every `interval`.
    Hello {
        interval: Duration,
    },
    /// An event, with its sequence number.
    Dispatch {
        seq: Option<u64>,
        event: Event,
    },
    /// The gateway asks for a heartbeat now.
    HeartbeatNow,
    HeartbeatAck,
    /// Reconnect and resume.
    Reconnect,
    /// The session cannot go on; `resumable` says whether a RESUME may
    /// still work or a new IDENTIFY is needed.
    InvalidSession {
        resumable: bool,
    },
    /// An opcode Herald does not know, or a frame that did not decode.
    Ignore,
}

/// The events Herald acts on.
#[derive(Debug)]
pub enum Event {
    /// The session is open: what a RESUME needs later.
    Ready {
        session_id: String,
        resume_url: String,
    },
    /// A RESUME worked; what was missed has been replayed before it.
    Resumed,
    Message(Box<Message>),
    /// A `MESSAGE_CREATE` whose payload did not decode, with why.
    Undecodable(String),
    /// Every other event (guilds, typing, reactions, …).
    Other,
}

/// A gateway payload's fields; `d` stays raw until `op` and `t` say what
/// it is.
#[derive(Deserialize)]
struct Wire<'a> {
    op: u8,
    #[serde(borrow, default)]
    d: Option<&'a RawValue>,
    #[serde(default)]
    s: Option<u64>,
    #[serde(borrow, default)]
    t: Option<&'a str>,
}

/// What the text frame `text` asks of Herald.
pub fn read_frame(text: &str) -> Frame {
    let Ok(wire) = serde_json::from_str::<Wire<'_>>(text) else {
        return Frame::Ignore;
    };
    let data = wire.d.map_or("null", RawValue::get);
    match wire.op {
        DISPATCH => Frame::Dispatch {
            seq: wire.s,
            event: read_event(wire.t.unwrap_or_default(), data),
        },
        HEARTBEAT => Frame::HeartbeatNow,
        HEARTBEAT_ACK => Frame::HeartbeatAck,
        RECONNECT => Frame::Reconnect,
        INVALID_SESSION => Frame::InvalidSession {
            resumable: serde_json::from_str(data).unwrap_or(false),
        },
        HELLO => {
            #[derive(Deserialize)]
            struct Hello {
                heartbeat_interval: u64,
            }
            match serde_json::from_str::<Hello>(data) {
                Ok(hello) => Frame::Hello {
                    interval: Duration::from_millis(hello.heartbeat_interval.max(1)),
                },
                Err(_) => Frame::Ignore,
            }
        }
        _ => Frame::Ignore,
    }
}

fn read_event(name: &str, data: &str) -> Event {
    match name {
        "MESSAGE_CREATE" => match serde_json::from_str::<Message>(data) {
            Ok(message) => Event::Message(Box::new(message)),
            Err(err) => Event::Undecodable(err.to_string()),
        },
        "READY" => {
            #[derive(Deserialize)]
            struct Ready {
                session_id: String,
                resume_gateway_url: String,
            }
            match serde_json::from_str::<Ready>(data) {
                Ok(ready) => Event::Ready {
                    session_id: ready.session_id,
                    resume_url: ready.resume_gateway_url,
                },
                Err(err) => Event::Undecodable(format!("READY: {err}")),
            }
        }
        "RESUMED" => Event::Resumed,
        _ => Event::Other,
    }
}

/// `url` with the gateway query: Discord's URLs come without a path
/// (`wss://gateway.discord.gg`), and with one the query follows it.
pub fn connect_url(url: &str, compress: bool) -> String {
    let base = url.split('?').next().unwrap_or_default();
    let slash = if base.ends_with('/') { "" } else { "/" };
    let compress = if compress { COMPRESS } else { "" };
    format!("{base}{slash}?{QUERY}{compress}")
}

/// One shard of the bot: `id` of `count`, as IDENTIFY's `shard` field
/// carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardId {
    pub id: u32,
    pub count: u32,
}

impl std::fmt::Display for ShardId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.id, self.count)
    }
}

/// IDENTIFY: opens a new session on `shard`. `token` is the bot token
/// without its `Bot ` prefix.
pub fn identify(token: &str, shard: ShardId) -> String {
    json!({
        "op": IDENTIFY,
        "d": {
            "token": token,
            "intents": INTENTS,
            "shard": [shard.id, shard.count],
            "properties": { "os": std::env::consts::OS, "browser": "herald", "device": "herald" },
        }
    })
    .to_string()
}

/// A heartbeat carrying the last sequence number received.
pub fn heartbeat(seq: Option<u64>) -> String {
    json!({ "op": HEARTBEAT, "d": seq }).to_string()
}

/// A session the gateway can resume: what a lost connection carries over
/// to the next one, and what the store keeps so a restarted Herald resumes
/// too.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// The session id and the URL to resume it at, once READY said them.
    pub resumable: Option<(String, String)>,
    /// The last sequence number received.
    pub seq: Option<u64>,
}

impl Session {
    /// The URL to connect to: the session's resume URL, or `gateway` (what
    /// `GET /gateway/bot` answered) for a new session.
    pub fn url(&self, gateway: &str, compress: bool) -> String {
        connect_url(
            self.resumable.as_ref().map_or(gateway, |(_, url)| url.as_str()),
            compress,
        )
    }

    /// Whether the next connection resumes rather than identifies.
    pub fn can_resume(&self) -> bool {
        self.resumable.is_some() && self.seq.is_some()
    }

    /// The frame that follows HELLO: RESUME where the session can be
    /// resumed, IDENTIFY otherwise.
    pub fn greeting(&self, token: &str, shard: ShardId) -> String {
        match (&self.resumable, self.seq) {
            (Some((session_id, _)), Some(seq)) => json!({
                "op": RESUME,
                "d": { "token": token, "session_id": session_id, "seq": seq },
            })
            .to_string(),
            _ => identify(token, shard),
        }
    }

    /// Takes note of a received frame's sequence number.
    pub fn saw(&mut self, seq: Option<u64>) {
        if let Some(seq) = seq {
            self.seq = Some(seq);
        }
    }

    /// Forgets the session: the next connection identifies anew.
    pub fn forget(&mut self) {
        *self = Self::default();
    }
}

/// The heartbeat's bookkeeping on one connection. Discord closes a
/// connection that misses heartbeats; a connection whose last heartbeat was
/// not acknowledged by the time the next is due is a zombie and is replaced.
#[derive(Debug)]
pub struct Heartbeat {
    pub interval: Duration,
    awaiting_ack: bool,
}

/// What to do when a heartbeat falls due.
#[derive(Debug, PartialEq, Eq)]
pub enum Beat {
    Send,
    /// The previous heartbeat was never acknowledged.
    Zombie,
}

impl Heartbeat {
    pub fn new(interval: Duration) -> Self {
        Self {
            interval,
            awaiting_ack: false,
        }
    }

    /// The wait before the first heartbeat: `interval * jitter` (Discord
    /// asks for a random fraction so that clients reconnecting together do
    /// not beat together). `jitter` is in `[0, 1)`.
    pub fn first_after(&self, jitter: f64) -> Duration {
        self.interval.mul_f64(jitter.clamp(0.0, 1.0))
    }

    pub fn due(&mut self) -> Beat {
        if self.awaiting_ack {
            return Beat::Zombie;
        }
        self.awaiting_ack = true;
        Beat::Send
    }

    pub fn acknowledged(&mut self) {
        self.awaiting_ack = false;
    }
}

/// What a close code from the gateway means for the next connection.
#[derive(Debug, PartialEq, Eq)]
pub enum AfterClose {
    /// Connect again and resume the session.
    Resume,
    /// Connect again with a new session.
    Identify,
    /// Connecting again cannot help: a setting is wrong.
    Fatal(String),
}

/// Discord's gateway close codes, as its documentation lists them.
pub fn after_close(code: u16) -> AfterClose {
    match code {
        4004 => AfterClose::Fatal(
            "the discord gateway refused the bot token (4004); check channels.discord.token".into(),
        ),
        4010 => AfterClose::Fatal("the discord gateway refused Herald's shard (4010); check channels.discord.shards".into()),
        4011 => AfterClose::Fatal(
            "the discord gateway requires more shards for this bot's guilds (4011); set channels.discord.shards to auto or a larger count"
                .into(),
        ),
        4012 => AfterClose::Fatal("the discord gateway refused API version 10 (4012)".into()),
        4013 => AfterClose::Fatal("the discord gateway refused Herald's intents (4013)".into()),
        4014 => AfterClose::Fatal(
            "the discord gateway refused the MESSAGE CONTENT intent (4014); switch it on under Bot → Privileged Gateway Intents in the developer portal"
                .into(),
        ),
        // Invalid sequence number, session timed out: the session is gone.
        4007 | 4009 => AfterClose::Identify,
        _ => AfterClose::Resume,
    }
}

/// The close code Herald sends when it leaves a connection to resume on
/// another: anything but 1000 and 1001, which end the session.
pub const CLOSE_TO_RESUME: u16 = 4000;

#[cfg(test)]
mod tests;
