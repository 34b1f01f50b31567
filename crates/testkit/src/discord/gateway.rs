//! The fake's gateway websocket: HELLO, then IDENTIFY (token and intents
//! checked) answered with READY, or RESUME answered with the missed
//! dispatches and RESUMED; heartbeats acknowledged; `MESSAGE_CREATE`
//! dispatched with sequence numbers, to the shard of the message's guild
//! (DMs to shard 0); frames zlib-compressed for a client that asks for
//! `compress=zlib-stream`; the session-start budget and the identify
//! buckets of `session_start_limit` enforced. Violations of the protocol close the
//! connection with Discord's close codes.

use std::sync::Arc;

use futures::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::wire;
use super::{Identify, Outgoing, Session, Shared};

/// Discord's gateway close codes the fake uses.
pub const UNKNOWN_OPCODE: u16 = 4001;
pub const DECODE_ERROR: u16 = 4002;
pub const NOT_AUTHENTICATED: u16 = 4003;
pub const AUTHENTICATION_FAILED: u16 = 4004;
pub const ALREADY_AUTHENTICATED: u16 = 4005;
pub const INVALID_API_VERSION: u16 = 4012;
pub const INVALID_INTENTS: u16 = 4013;
pub const DISALLOWED_INTENTS: u16 = 4014;

/// One IDENTIFY per bucket in this time, as Discord allows.
const IDENTIFY_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// `session_start_limit` as the fake keeps it: Discord's daily budget of
/// IDENTIFYs and its identify buckets.
pub(super) struct SessionStart {
    pub(super) total: u32,
    pub(super) remaining: u32,
    pub(super) reset_after: std::time::Duration,
    /// When `remaining` goes back to `total`.
    pub(super) resets_at: std::time::Instant,
    pub(super) max_concurrency: u32,
    /// When each bucket last took an IDENTIFY.
    pub(super) last_identify: std::collections::HashMap<u64, std::time::Instant>,
}

impl SessionStart {
    pub(super) fn refresh(&mut self, now: std::time::Instant) {
        if now >= self.resets_at {
            self.remaining = self.total;
            self.resets_at = now + self.reset_after;
        }
    }
}

pub(super) fn serve(listener: TcpListener, shared: Arc<Shared>) -> oneshot::Sender<()> {
    let (stop, mut stopped) = oneshot::channel::<()>();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = &mut stopped => break,
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    // Frames go out at once, as from Discord's own front end.
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(connection(stream, shared.clone()));
                }
            }
        }
    });
    stop
}

/// What the connection has established so far.
enum Stage {
    /// HELLO sent, waiting for IDENTIFY or RESUME.
    Hello,
    /// Attached to this session.
    Session(String),
}

async fn connection(stream: TcpStream, shared: Arc<Shared>) {
    let mut query = String::new();
    // The callback's error type is tungstenite's, large or not.
    #[allow(clippy::result_large_err)]
    let capture = |request: &Request, response: Response| {
        query = request.uri().query().unwrap_or_default().to_owned();
        Ok(response)
    };
    let Ok(mut socket) = tokio_tungstenite::accept_hdr_async(stream, capture).await else {
        return;
    };
    let (tx, mut rx) = mpsc::unbounded_channel::<Outgoing>();
    let connection_id = {
        let mut state = shared.lock();
        state.next_connection += 1;
        state.next_connection
    };
    let version_ok = query.split('&').any(|pair| pair == "v=10");
    let compress = query.split('&').any(|pair| pair == "compress=zlib-stream");
    let mut deflater = compress.then(super::zlib::Deflater::new);
    if compress {
        shared.lock().compressed_connections += 1;
    }
    let encoding_ok = query
        .split('&')
        .filter_map(|pair| pair.strip_prefix("encoding="))
        .all(|encoding| encoding == "json");
    if !version_ok || !encoding_ok {
        let _ = tx.send(Outgoing::Close(INVALID_API_VERSION, "Invalid API version"));
    } else {
        let interval = shared.lock().heartbeat_interval_ms;
        let _ = tx.send(Outgoing::Frame(wire::hello(interval).to_string()));
    }
    let mut stage = Stage::Hello;
    loop {
        tokio::select! {
            outgoing = rx.recv() => match outgoing {
                Some(Outgoing::Frame(frame)) => {
                    // With zlib-stream, every frame is a piece of the one
                    // zlib stream, in a binary message.
                    let message = match &mut deflater {
                        Some(deflater) => Message::binary(deflater.message(&frame)),
                        None => Message::text(frame),
                    };
                    if socket.send(message).await.is_err() {
                        break;
                    }
                }
                Some(Outgoing::Close(code, reason)) => {
                    let frame = CloseFrame { code: CloseCode::from(code), reason: reason.into() };
                    let _ = socket.close(Some(frame)).await;
                    break;
                }
                None => break,
            },
            incoming = socket.next() => match incoming {
                Some(Ok(Message::Text(text))) => {
                    handle_frame(&shared, &tx, connection_id, &mut stage, text.as_str());
                }
                Some(Ok(Message::Binary(_))) => {
                    let _ = tx.send(Outgoing::Close(DECODE_ERROR, "Error while decoding payload."));
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            },
        }
    }
    if let Stage::Session(session_id) = stage {
        let mut state = shared.lock();
        if let Some(session) = state.sessions.get_mut(&session_id)
            && session.connection.as_ref().is_some_and(|(id, _)| *id == connection_id)
        {
            session.connection = None;
        }
        drop(state);
        shared.publish_online();
    }
}

fn token_matches(expected: &str, given: &str) -> bool {
    given == expected || given.strip_prefix("Bot ") == Some(expected)
}

fn handle_frame(
    shared: &Arc<Shared>,
    tx: &mpsc::UnboundedSender<Outgoing>,
    connection_id: u64,
    stage: &mut Stage,
    text: &str,
) {
    let Ok(payload) = serde_json::from_str::<Value>(text) else {
        let _ = tx.send(Outgoing::Close(DECODE_ERROR, "Error while decoding payload."));
        return;
    };
    let Some(op) = payload["op"].as_u64() else {
        let _ = tx.send(Outgoing::Close(DECODE_ERROR, "Error while decoding payload."));
        return;
    };
    match (op, &*stage) {
        (wire::OP_HEARTBEAT, _) => {
            let mut state = shared.lock();
            state.heartbeats += 1;
            if !state.heartbeats_unanswered {
                let _ = tx.send(Outgoing::Frame(wire::heartbeat_ack().to_string()));
            }
        }
        (wire::OP_IDENTIFY, Stage::Hello) => {
            if let Some(session_id) = identify(shared, tx, connection_id, &payload["d"]) {
                *stage = Stage::Session(session_id);
                shared.publish_online();
            }
        }
        (wire::OP_RESUME, Stage::Hello) => {
            if let Some(session_id) = resume(shared, tx, connection_id, &payload["d"]) {
                *stage = Stage::Session(session_id);
                shared.publish_online();
            }
        }
        (wire::OP_IDENTIFY | wire::OP_RESUME, Stage::Session(_)) => {
            let _ = tx.send(Outgoing::Close(ALREADY_AUTHENTICATED, "Already authenticated."));
        }
        (wire::OP_PRESENCE_UPDATE, Stage::Session(_)) => {}
        (wire::OP_PRESENCE_UPDATE, Stage::Hello) => {
            let _ = tx.send(Outgoing::Close(NOT_AUTHENTICATED, "Not authenticated."));
        }
        _ => {
            let _ = tx.send(Outgoing::Close(UNKNOWN_OPCODE, "Unknown opcode."));
        }
    }
}

fn identify(
    shared: &Arc<Shared>,
    tx: &mpsc::UnboundedSender<Outgoing>,
    connection_id: u64,
    data: &Value,
) -> Option<String> {
    let mut state = shared.lock();
    let (Some(token), Some(intents), Some(_properties)) = (
        data["token"].as_str(),
        data["intents"].as_u64(),
        data["properties"].as_object(),
    ) else {
        let _ = tx.send(Outgoing::Close(DECODE_ERROR, "Error while decoding payload."));
        return None;
    };
    let shard = data["shard"]
        .as_array()
        .and_then(|s| Some([s.first()?.as_u64()?, s.get(1)?.as_u64()?]));
    state.identifies.push(Identify {
        token: token.to_owned(),
        intents,
        shard,
    });
    let now = std::time::Instant::now();
    state.identify_times.push(now);
    if !token_matches(&state.token, token) {
        let _ = tx.send(Outgoing::Close(AUTHENTICATION_FAILED, "Authentication failed."));
        return None;
    }
    if intents & !wire::ALL_INTENTS != 0 {
        let _ = tx.send(Outgoing::Close(INVALID_INTENTS, "Invalid intent(s)."));
        return None;
    }
    if intents & wire::INTENT_MESSAGE_CONTENT != 0 && !state.message_content_allowed {
        let _ = tx.send(Outgoing::Close(DISALLOWED_INTENTS, "Disallowed intent(s)."));
        return None;
    }
    if let Some([id, total]) = shard
        && (total == 0 || id >= total)
    {
        let _ = tx.send(Outgoing::Close(4010, "Invalid shard."));
        return None;
    }
    state.session_start.refresh(now);
    if state.session_start.remaining == 0 {
        // Discord's answer to a bot that used up its day's session starts:
        // its token is reset, so nothing works until a person makes a new one.
        state
            .buckets
            .record_violation("IDENTIFY with no session starts left: Discord resets the bot's token".into());
        state.token = "reset-by-discord".into();
        let _ = tx.send(Outgoing::Close(AUTHENTICATION_FAILED, "Authentication failed."));
        return None;
    }
    state.session_start.remaining -= 1;
    let bucket = shard.map_or(0, |[id, _]| id) % u64::from(state.session_start.max_concurrency.max(1));
    if let Some(last) = state.session_start.last_identify.insert(bucket, now)
        && now.duration_since(last) < IDENTIFY_INTERVAL
    {
        state.buckets.record_violation(format!(
            "IDENTIFY in bucket {bucket} {:?} after the last, under Discord's 5 s",
            now.duration_since(last)
        ));
        let _ = tx.send(Outgoing::Frame(wire::invalid_session(false).to_string()));
        return None;
    }
    if state.refuse_identifies > 0 {
        state.refuse_identifies -= 1;
        let _ = tx.send(Outgoing::Frame(wire::invalid_session(false).to_string()));
        return None;
    }
    let session_id = format!("fake{:x}", state.next_snowflake);
    state.next_snowflake += 1;
    let guild_ids = vec![super::GUILD_ID.to_owned()];
    let ready = wire::ready(&wire::ReadyInfo {
        bot: &state.bot,
        application_id: super::APPLICATION_ID,
        guild_ids: &guild_ids,
        session_id: &session_id,
        resume_gateway_url: &state.gateway_url,
        shard: shard.unwrap_or([0, 1]),
    });
    let frame = wire::dispatch(1, "READY", ready).to_string();
    let mut session = Session {
        intents,
        seq: 1,
        sent: vec![(1, frame.clone())],
        connection: Some((connection_id, tx.clone())),
        shard: shard.unwrap_or([0, 1]),
    };
    let _ = tx.send(Outgoing::Frame(frame));
    // Discord follows READY with a GUILD_CREATE per guild when the GUILDS
    // intent is given.
    if intents & wire::INTENT_GUILDS != 0 {
        session.seq += 1;
        let guild = serde_json::json!({ "id": super::GUILD_ID, "unavailable": false, "name": "Herald Test" });
        let frame = wire::dispatch(session.seq, "GUILD_CREATE", guild).to_string();
        session.sent.push((session.seq, frame.clone()));
        let _ = tx.send(Outgoing::Frame(frame));
    }
    state.sessions.insert(session_id.clone(), session);
    Some(session_id)
}

fn resume(
    shared: &Arc<Shared>,
    tx: &mpsc::UnboundedSender<Outgoing>,
    connection_id: u64,
    data: &Value,
) -> Option<String> {
    let mut state = shared.lock();
    let (Some(token), Some(session_id), Some(seq)) = (
        data["token"].as_str(),
        data["session_id"].as_str(),
        data["seq"].as_u64(),
    ) else {
        let _ = tx.send(Outgoing::Close(DECODE_ERROR, "Error while decoding payload."));
        return None;
    };
    if !token_matches(&state.token, token) {
        let _ = tx.send(Outgoing::Close(AUTHENTICATION_FAILED, "Authentication failed."));
        return None;
    }
    let Some(session) = state.sessions.get_mut(session_id) else {
        let _ = tx.send(Outgoing::Frame(wire::invalid_session(false).to_string()));
        return None;
    };
    if seq > session.seq {
        let _ = tx.send(Outgoing::Close(4007, "Invalid seq."));
        return None;
    }
    if let Some((_, old)) = session.connection.take() {
        let _ = old.send(Outgoing::Close(4009, "Session timed out."));
    }
    for (_, frame) in session.sent.iter().filter(|(s, _)| *s > seq) {
        let _ = tx.send(Outgoing::Frame(frame.clone()));
    }
    session.seq += 1;
    let resumed = wire::dispatch(
        session.seq,
        "RESUMED",
        serde_json::json!({ "_trace": ["fake-discord-gateway"] }),
    );
    let frame = resumed.to_string();
    session.sent.push((session.seq, frame.clone()));
    let _ = tx.send(Outgoing::Frame(frame));
    session.connection = Some((connection_id, tx.clone()));
    state.resumes += 1;
    Some(session_id.to_owned())
}
