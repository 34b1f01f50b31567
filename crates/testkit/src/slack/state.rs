//! The fake workspace's state: users, conversations, what the bot posted, the
//! rate rules it enforces, and the Socket Mode envelopes waiting for acks.
//! Everything here is synchronous and runs under one lock; the servers in
//! `web`, `socket` and `push` call into it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::FakeSlackOptions;
use super::edits::{Edit, StoredMessage};
use super::wire;
use crate::platform::{FakeUser, SentMessage, Stamped};

/// A frame for one Socket Mode connection's writer.
#[derive(Debug)]
pub enum Frame {
    Text(String),
    Close,
}

/// A conversation the fake knows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Conversation {
    /// A public channel the bot is a member of.
    Channel,
    /// The direct-message conversation with this user.
    Im { user: String },
}

/// One Socket Mode envelope, from creation until acked or given up.
#[derive(Debug)]
pub struct Envelope {
    pub id: String,
    /// `events_api` or `slash_commands`.
    pub kind: &'static str,
    pub payload: Value,
    /// How many times it was sent on a connection.
    pub sends: u32,
    pub retry_reason: &'static str,
    /// The connection it was last sent on and the ack deadline, while unacked.
    pub in_flight: Option<(u64, Instant)>,
    /// When it was first sent on a connection.
    pub first_sent: Option<Instant>,
}

/// The wait one `chat.postMessage` may have to honour.
#[derive(Clone, Copy, Debug)]
pub struct Throttle {
    pub remaining: usize,
    pub retry_after: Duration,
}

/// Whether a post is accepted, and if not, what Slack answers.
#[derive(Debug, PartialEq, Eq)]
pub enum PostVerdict {
    Accept,
    /// HTTP 429 with this `Retry-After` (seconds).
    RateLimited {
        retry_after_secs: u64,
    },
}

pub struct State {
    pub options: FakeSlackOptions,
    next_micros: u64,
    next_serial: u64,
    pub users: BTreeMap<String, FakeUser>,
    pub conversations: BTreeMap<String, Conversation>,
    pub sent: Vec<SentMessage>,
    recent_posts: HashMap<String, VecDeque<Instant>>,
    pub throttle: Option<Throttle>,
    not_before: HashMap<String, Instant>,
    pub violations: Vec<String>,
    /// Web API calls by method name, in order.
    pub calls: Vec<String>,
    pub tickets: Vec<String>,
    pub connections: BTreeMap<u64, mpsc::UnboundedSender<Frame>>,
    next_connection: u64,
    /// The fewest connections open at any moment since a test began
    /// watching (`FakeSlack::watch_open_connections`).
    pub fewest_open: Option<usize>,
    pub envelopes: VecDeque<Envelope>,
    pub acked: Vec<String>,
    /// How long each acknowledged envelope waited for its ack, from its
    /// first send.
    pub ack_waits: Vec<Duration>,
    /// How long `users.info` takes to answer.
    pub users_info_delay: Duration,
    /// Envelopes given up after the last retry, by payload.
    pub dropped: Vec<Value>,
    /// Where the Events API pushes; `None` means Socket Mode.
    pub events_url: Option<String>,
    pub push_log: Vec<PushAttempt>,
    /// User messages as they were handed over (pushed, or enveloped for Socket Mode).
    pub delivered_stamps: Vec<Stamped>,
    /// Uploaded files' bytes by file id, served at `url_private`.
    pub files: BTreeMap<String, Vec<u8>>,
    /// Each `url_private` fetch: the file id and whether it carried the bot token.
    pub file_downloads: Vec<(String, bool)>,
    /// Files announced by `files.getUploadURLExternal`, by file id.
    pub pending_uploads: std::collections::HashMap<String, super::uploads::PendingUpload>,
    /// Files the bot shared with `files.completeUploadExternal`.
    pub uploads: Vec<crate::platform::Upload>,
    /// Accepted `chat.postMessage`s, stamped when their request arrived.
    pub sent_stamps: Vec<Stamped>,
    /// Web API calls answered with a fault instead (by method name).
    pub faults: crate::faults::Faults,
    /// Every message in the workspace (people's and the bot's), in order.
    pub(crate) messages: Vec<StoredMessage>,
    /// Where each `(channel, ts)` is in `messages`.
    pub message_index: HashMap<(String, String), usize>,
    pub edits: Vec<Edit>,
    /// Escaping mistakes in the texts the bot wrote (see `mrkdwn`).
    pub format_findings: Vec<String>,
    /// Who the bot's texts would notify.
    pub mentions: Vec<String>,
    /// `chat.update`s accepted in the last `update_rate` window (workspace-wide).
    recent_updates: VecDeque<Instant>,
    /// Until when a 429 told the client to leave `chat.update` alone.
    updates_not_before: Option<Instant>,
    /// The wait the next `chat.update`s must honour, set by a test.
    pub update_throttle: Option<Throttle>,
}

/// One Events API request the fake made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushAttempt {
    pub event_id: String,
    /// `X-Slack-Retry-Num`: 0 for the first try.
    pub retry_num: u32,
    /// The HTTP status Herald answered, or `None` for a timeout or refused connection.
    pub status: Option<u16>,
}

/// A Slack timestamp (`1700000000.000100`) of a moment in microseconds.
pub fn format_ts(micros: u64) -> String {
    format!("{}.{:06}", micros / 1_000_000, micros % 1_000_000)
}

pub fn unix_seconds() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Slack answers a 429 in whole seconds; a shorter wait is rounded up.
fn retry_after_secs(wait: Duration) -> u64 {
    wait.as_millis().div_ceil(1000).max(1) as u64
}

impl State {
    pub fn new(options: FakeSlackOptions) -> Self {
        let now_micros = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1_700_000_000_000_000, |d| d.as_micros() as u64);
        Self {
            options,
            next_micros: now_micros,
            next_serial: 0,
            users: BTreeMap::new(),
            conversations: BTreeMap::new(),
            sent: Vec::new(),
            recent_posts: HashMap::new(),
            throttle: None,
            not_before: HashMap::new(),
            violations: Vec::new(),
            calls: Vec::new(),
            tickets: Vec::new(),
            connections: BTreeMap::new(),
            next_connection: 0,
            fewest_open: None,
            envelopes: VecDeque::new(),
            acked: Vec::new(),
            ack_waits: Vec::new(),
            users_info_delay: Duration::ZERO,
            dropped: Vec::new(),
            events_url: None,
            push_log: Vec::new(),
            delivered_stamps: Vec::new(),
            files: BTreeMap::new(),
            file_downloads: Vec::new(),
            pending_uploads: Default::default(),
            uploads: Vec::new(),
            sent_stamps: Vec::new(),
            faults: Default::default(),
            messages: Vec::new(),
            message_index: HashMap::new(),
            edits: Vec::new(),
            format_findings: Vec::new(),
            mentions: Vec::new(),
            recent_updates: VecDeque::new(),
            updates_not_before: None,
            update_throttle: None,
        }
    }

    /// A new message timestamp, later than every earlier one.
    pub fn next_ts(&mut self) -> String {
        self.next_micros += 1;
        format_ts(self.next_micros)
    }

    fn serial(&mut self) -> u64 {
        self.next_serial += 1;
        self.next_serial
    }

    /// An event id like Slack's `Ev0PV52K25`.
    pub fn next_event_id(&mut self) -> String {
        format!("Ev{:08X}", self.serial())
    }

    /// A uuid-shaped id, for envelopes, tickets and `client_msg_id`s.
    pub fn next_uuid(&mut self) -> String {
        let n = self.serial();
        format!("{:08x}-5a1c-4d0b-b6aa-{:012x}", n.wrapping_mul(2_654_435_761) as u32, n)
    }

    pub fn add_user(&mut self, user: &FakeUser) {
        self.users.insert(user.id.clone(), user.clone());
    }

    /// The DM conversation id with `user`: `D` and the rest of the user id.
    pub fn dm_channel(&mut self, user: &str) -> String {
        let id = format!("D{}", user.get(1..).unwrap_or(user));
        self.conversations
            .insert(id.clone(), Conversation::Im { user: user.to_owned() });
        id
    }

    /// Where a post to `channel` lands: a user id opens the DM with that user.
    pub fn resolve_channel(&mut self, channel: &str) -> Option<String> {
        if self.conversations.contains_key(channel) {
            return Some(channel.to_owned());
        }
        if channel.starts_with('U') && self.users.contains_key(channel) {
            return Some(self.dm_channel(channel));
        }
        // A DM conversation of a known user exists even before anyone wrote in it.
        let user = self.users.keys().find(|u| format!("D{}", &u[1..]) == channel).cloned();
        user.map(|u| self.dm_channel(&u))
    }

    /// Applies the throttle, the last `Retry-After` and the per-channel rate
    /// to one `chat.postMessage` arriving now.
    pub fn judge_post(&mut self, channel: &str, now: Instant) -> PostVerdict {
        if let Some(until) = self.not_before.get(channel) {
            // A few milliseconds of slack for the two clocks reading the same instant.
            if now + Duration::from_millis(5) < *until {
                let early = *until - now;
                self.violations.push(format!(
                    "chat.postMessage to {channel} {} ms before the Retry-After passed",
                    early.as_millis()
                ));
            }
        }
        if let Some(throttle) = self.throttle.as_mut()
            && throttle.remaining > 0
        {
            throttle.remaining -= 1;
            let secs = retry_after_secs(throttle.retry_after);
            if throttle.remaining == 0 {
                self.throttle = None;
            }
            self.not_before
                .insert(channel.to_owned(), now + Duration::from_secs(secs));
            return PostVerdict::RateLimited { retry_after_secs: secs };
        }
        if let Some((count, per)) = self.options.channel_rate {
            // The window exactly as documented: Herald counts a post from
            // when its request came back, so it never arrives early here.
            let window = per;
            let posts = self.recent_posts.entry(channel.to_owned()).or_default();
            while posts.front().is_some_and(|at| now.duration_since(*at) >= window) {
                posts.pop_front();
            }
            if posts.len() >= count as usize {
                self.violations.push(format!(
                    "chat.postMessage to {channel}: more than {count} within {} ms",
                    window.as_millis()
                ));
                self.not_before.insert(channel.to_owned(), now + Duration::from_secs(1));
                return PostVerdict::RateLimited { retry_after_secs: 1 };
            }
            posts.push_back(now);
        }
        PostVerdict::Accept
    }

    /// Applies the test's throttle, the last `Retry-After` and the
    /// method's tier to one `chat.update` arriving now. Slack rate-limits
    /// `chat.update` per workspace (Tier 3, about 50 a minute), not per
    /// channel, so one window covers every channel.
    pub fn judge_update(&mut self, now: Instant) -> PostVerdict {
        if let Some(until) = self.updates_not_before
            && now + Duration::from_millis(5) < until
        {
            self.violations.push(format!(
                "chat.update {} ms before the Retry-After passed",
                (until - now).as_millis()
            ));
        }
        if let Some(throttle) = self.update_throttle.as_mut()
            && throttle.remaining > 0
        {
            throttle.remaining -= 1;
            let secs = retry_after_secs(throttle.retry_after);
            if throttle.remaining == 0 {
                self.update_throttle = None;
            }
            self.updates_not_before = Some(now + Duration::from_secs(secs));
            return PostVerdict::RateLimited { retry_after_secs: secs };
        }
        if let Some((count, window)) = self.options.update_rate {
            let recent = &mut self.recent_updates;
            while recent.front().is_some_and(|at| now.duration_since(*at) >= window) {
                recent.pop_front();
            }
            if recent.len() >= count as usize {
                // Until the oldest update in the window leaves it.
                let oldest = *recent.front().expect("a full window");
                let secs = retry_after_secs((oldest + window).saturating_duration_since(now));
                self.violations.push(format!(
                    "chat.update: more than {count} within {} s (Tier 3, per workspace)",
                    window.as_secs()
                ));
                self.updates_not_before = Some(now + Duration::from_secs(secs));
                return PostVerdict::RateLimited { retry_after_secs: secs };
            }
            recent.push_back(now);
        }
        PostVerdict::Accept
    }

    pub fn add_connection(&mut self, writer: mpsc::UnboundedSender<Frame>) -> u64 {
        self.next_connection += 1;
        let id = self.next_connection;
        let hello = wire::hello(self.connections.len() + 1).to_string();
        let _ = writer.send(Frame::Text(hello));
        self.connections.insert(id, writer);
        id
    }

    /// A connection closed: what was in flight on it is sent again elsewhere.
    /// An envelope in flight on a closed connection is not sent again at
    /// once: like Slack, the fake waits for its ack deadline and then
    /// retries it (on another connection).
    pub fn remove_connection(&mut self, id: u64, now: Instant) {
        self.connections.remove(&id);
        if let Some(fewest) = &mut self.fewest_open {
            *fewest = (*fewest).min(self.connections.len());
        }
        self.pump(now);
    }

    /// Queues an event callback for Socket Mode delivery.
    pub fn enqueue_envelope(&mut self, kind: &'static str, payload: Value, now: Instant) {
        let id = self.next_uuid();
        self.envelopes.push_back(Envelope {
            id,
            kind,
            payload,
            sends: 0,
            retry_reason: "",
            in_flight: None,
            first_sent: None,
        });
        self.pump(now);
    }

    /// Sends every envelope not in flight on the oldest open connection, in
    /// order. Without a connection they wait; waiting uses up no retries.
    pub fn pump(&mut self, now: Instant) {
        let ack_timeout = self.options.ack_timeout;
        let Some((&connection, writer)) = self.connections.iter().next() else {
            return;
        };
        for envelope in self.envelopes.iter_mut().filter(|e| e.in_flight.is_none()) {
            let frame = match envelope.kind {
                "slash_commands" => wire::slash_commands_envelope(&envelope.id, &envelope.payload),
                _ => wire::events_api_envelope(&envelope.id, &envelope.payload, envelope.sends, envelope.retry_reason),
            };
            if writer.send(Frame::Text(frame.to_string())).is_err() {
                return;
            }
            envelope.sends += 1;
            envelope.in_flight = Some((connection, now + ack_timeout));
            envelope.first_sent.get_or_insert(now);
        }
    }

    pub fn ack(&mut self, envelope_id: &str) {
        if let Some(index) = self.envelopes.iter().position(|e| e.id == envelope_id) {
            let envelope = self.envelopes.remove(index).expect("an envelope at the index");
            if let Some(sent) = envelope.first_sent {
                self.ack_waits.push(sent.elapsed());
            }
            self.acked.push(envelope_id.to_owned());
        }
    }

    /// Envelopes whose ack did not come in time are sent again, with
    /// `retry_attempt` counting up, until the retries are spent. A slash
    /// command is not sent again: the user sees it fail.
    pub fn expire(&mut self, now: Instant) {
        let max_sends = self.options.max_retries + 1;
        let mut kept = VecDeque::with_capacity(self.envelopes.len());
        for mut envelope in self.envelopes.drain(..) {
            match envelope.in_flight {
                Some((_, deadline)) if deadline <= now => {
                    if envelope.sends >= max_sends || envelope.kind == "slash_commands" {
                        self.dropped.push(envelope.payload);
                        continue;
                    }
                    envelope.in_flight = None;
                    envelope.retry_reason = "timeout";
                    kept.push_back(envelope);
                }
                _ => kept.push_back(envelope),
            }
        }
        self.envelopes = kept;
        self.pump(now);
    }

    /// The earliest ack deadline of an envelope in flight.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.envelopes
            .iter()
            .filter_map(|e| e.in_flight.map(|(_, deadline)| deadline))
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(rate: Option<(u32, Duration)>) -> State {
        State::new(FakeSlackOptions {
            channel_rate: rate,
            ..FakeSlackOptions::default()
        })
    }

    #[test]
    fn timestamps_look_like_slacks_and_increase() {
        assert_eq!(format_ts(1_515_449_522_000_016), "1515449522.000016");
        let mut state = state(None);
        let (a, b) = (state.next_ts(), state.next_ts());
        assert!(b > a, "{b} after {a}");
        assert_eq!(a.split('.').nth(1).unwrap().len(), 6);
    }

    #[test]
    fn a_post_above_the_channel_rate_is_a_violation_and_a_429() {
        let mut state = state(Some((1, Duration::from_secs(1))));
        let start = Instant::now();
        assert_eq!(state.judge_post("C1", start), PostVerdict::Accept);
        // Another channel has its own budget.
        assert_eq!(state.judge_post("C2", start), PostVerdict::Accept);
        assert_eq!(
            state.judge_post("C1", start + Duration::from_millis(300)),
            PostVerdict::RateLimited { retry_after_secs: 1 }
        );
        assert_eq!(state.violations.len(), 1, "{:?}", state.violations);
        assert_eq!(
            state.judge_post("C1", start + Duration::from_millis(1400)),
            PostVerdict::Accept
        );
        assert_eq!(state.violations.len(), 1, "{:?}", state.violations);
    }

    #[test]
    fn a_post_before_retry_after_passed_is_a_violation() {
        let mut state = state(None);
        state.throttle = Some(Throttle {
            remaining: 1,
            retry_after: Duration::from_millis(1500),
        });
        let start = Instant::now();
        assert_eq!(
            state.judge_post("C1", start),
            PostVerdict::RateLimited { retry_after_secs: 2 }
        );
        assert_eq!(
            state.judge_post("C1", start + Duration::from_secs(1)),
            PostVerdict::Accept
        );
        assert_eq!(state.violations.len(), 1);
        assert_eq!(
            state.judge_post("C1", start + Duration::from_secs(3)),
            PostVerdict::Accept
        );
        assert_eq!(state.violations.len(), 1);
    }

    #[test]
    fn updates_are_limited_per_workspace_and_an_early_retry_is_a_violation() {
        let mut state = State::new(FakeSlackOptions {
            update_rate: Some((2, Duration::from_secs(60))),
            ..FakeSlackOptions::default()
        });
        let start = Instant::now();
        assert_eq!(state.judge_update(start), PostVerdict::Accept);
        assert_eq!(state.judge_update(start + Duration::from_secs(10)), PostVerdict::Accept);
        assert_eq!(
            state.judge_update(start + Duration::from_secs(20)),
            PostVerdict::RateLimited { retry_after_secs: 40 },
            "the window is full until the first update leaves it"
        );
        assert_eq!(state.violations.len(), 1, "{:?}", state.violations);
        state.judge_update(start + Duration::from_secs(30));
        assert_eq!(
            state.violations.len(),
            3,
            "early and over the rate: {:?}",
            state.violations
        );
        assert_eq!(state.judge_update(start + Duration::from_secs(71)), PostVerdict::Accept);
        assert_eq!(state.violations.len(), 3, "{:?}", state.violations);
    }

    #[test]
    fn unacked_envelopes_are_resent_until_the_retries_are_spent() {
        let mut state = state(None);
        state.options.ack_timeout = Duration::from_secs(3);
        state.options.max_retries = 1;
        let (tx, mut rx) = mpsc::unbounded_channel();
        let start = Instant::now();
        state.add_connection(tx);
        state.enqueue_envelope("events_api", serde_json::json!({"event_id": "Ev1"}), start);
        let mut frames = Vec::new();
        while let Ok(Frame::Text(text)) = rx.try_recv() {
            frames.push(serde_json::from_str::<Value>(&text).unwrap());
        }
        assert_eq!(frames[0]["type"], "hello");
        assert_eq!(frames[1]["retry_attempt"], 0);
        state.expire(start + Duration::from_secs(3));
        let Ok(Frame::Text(retry)) = rx.try_recv() else {
            panic!("no retry")
        };
        let retry: Value = serde_json::from_str(&retry).unwrap();
        assert_eq!(retry["retry_attempt"], 1);
        assert_eq!(retry["retry_reason"], "timeout");
        assert_eq!(retry["envelope_id"], frames[1]["envelope_id"]);
        state.expire(start + Duration::from_secs(6));
        assert!(rx.try_recv().is_err(), "no third send with one retry");
        assert_eq!(state.dropped.len(), 1);
    }

    #[test]
    fn without_a_connection_envelopes_wait_and_keep_their_retries() {
        let mut state = state(None);
        let start = Instant::now();
        state.enqueue_envelope("events_api", serde_json::json!({"event_id": "Ev1"}), start);
        state.expire(start + Duration::from_secs(60));
        assert!(state.dropped.is_empty());
        let (tx, mut rx) = mpsc::unbounded_channel();
        state.add_connection(tx);
        state.pump(start + Duration::from_secs(61));
        let _hello = rx.try_recv().unwrap();
        let Ok(Frame::Text(first)) = rx.try_recv() else {
            panic!("not delivered")
        };
        assert!(first.contains("\"retry_attempt\":0"));
    }
}
