//! What a test sets and reads on the fake Discord: its addresses and
//! token, the rate-limit buckets and gateway timing it enforces, what Herald
//! sent it (identifies, heartbeats, requests, typing), and the connection
//! faults a test provokes. Kept apart from the server itself (`mod.rs`,
//! `rest.rs`, `gateway.rs`) so each file stays one concern.

use std::time::Duration;

use super::*;

impl FakeDiscord {
    /// `http://127.0.0.1:PORT`: what `channels.discord.api_url` takes (the
    /// fake serves `/api/v10/...` under it, as discord.com does).
    pub fn api_url(&self) -> String {
        format!("http://{}", self.rest_addr)
    }

    /// `ws://127.0.0.1:PORT`, as `GET /gateway` answers it.
    pub fn gateway_url(&self) -> String {
        format!("ws://{}", self.gateway_addr)
    }

    pub fn token(&self) -> String {
        self.shared.lock().token.clone()
    }

    /// Accepts only this bot token from now on.
    pub fn set_token(&self, token: impl Into<String>) {
        self.shared.lock().token = token.into();
    }

    /// The bot's user id (what a mention `<@ID>` names).
    pub fn bot_id(&self) -> String {
        BOT_ID.into()
    }

    pub fn guild_id(&self) -> String {
        GUILD_ID.into()
    }

    /// The guild text channel (the thread's parent).
    pub fn text_channel(&self) -> GroupTarget {
        GroupTarget {
            chat: TEXT_CHANNEL_ID.into(),
            thread: None,
        }
    }

    /// The limit and window of every channel's message-create bucket.
    pub fn set_message_bucket(&self, limit: u32, window: Duration) {
        let mut state = self.shared.lock();
        state.message_rule.limit = limit;
        state.message_rule.window = window;
    }

    /// The limit and window of every channel's typing bucket.
    pub fn set_typing_bucket(&self, limit: u32, window: Duration) {
        let mut state = self.shared.lock();
        state.typing_rule.limit = limit;
        state.typing_rule.window = window;
    }

    /// Requests per second the whole bot may make (Discord: 50).
    pub fn set_global_limit(&self, limit: u32) {
        self.shared.lock().buckets.set_global_limit(limit);
    }

    /// The heartbeat interval HELLO announces to new connections.
    pub fn set_heartbeat_interval(&self, interval: Duration) {
        self.shared.lock().heartbeat_interval_ms = interval.as_millis() as u64;
    }

    /// The developer portal's "Message Content Intent" switch: when off, an
    /// IDENTIFY asking for the intent is closed with 4014.
    pub fn allow_message_content(&self, allowed: bool) {
        self.shared.lock().message_content_allowed = allowed;
    }

    /// The second guild's text channel: on shard 0 of two, where the
    /// first guild's channels are on shard 1.
    pub fn second_guild_channel(&self) -> GroupTarget {
        GroupTarget {
            chat: SECOND_CHANNEL_ID.into(),
            thread: None,
        }
    }

    /// The shard count `GET /gateway/bot` recommends (1 unless set).
    pub fn set_recommended_shards(&self, shards: u32) {
        self.shared.lock().recommended_shards = shards;
    }

    /// `session_start_limit`: `remaining` of `total` IDENTIFYs left until
    /// `reset_after` from now, and `max_concurrency` identify buckets. An
    /// IDENTIFY with none left resets the bot's token (every later request
    /// fails with 4004 or 401), as Discord does, and is a violation; so is a
    /// second IDENTIFY in one bucket within 5 seconds, which is answered
    /// with an invalid session.
    pub fn set_session_start_limit(&self, total: u32, remaining: u32, reset_after: Duration, max_concurrency: u32) {
        let mut state = self.shared.lock();
        state.session_start.total = total;
        state.session_start.remaining = remaining;
        state.session_start.reset_after = reset_after;
        state.session_start.resets_at = std::time::Instant::now() + reset_after;
        state.session_start.max_concurrency = max_concurrency;
    }

    /// How many IDENTIFYs the budget has left.
    pub fn session_starts_remaining(&self) -> u32 {
        let mut state = self.shared.lock();
        state.session_start.refresh(std::time::Instant::now());
        state.session_start.remaining
    }

    /// Answers the next `count` IDENTIFYs with op 9 INVALID_SESSION
    /// (`false`) instead of READY: an invalid-session storm.
    pub fn refuse_next_identifies(&self, count: usize) {
        self.shared.lock().refuse_identifies = count;
    }

    /// When each IDENTIFY arrived, in the order of [`Self::identifies`].
    pub fn identify_times(&self) -> Vec<std::time::Instant> {
        self.shared.lock().identify_times.clone()
    }

    /// How many connections asked for `zlib-stream` transport compression
    /// (and got every frame compressed).
    pub fn compressed_connections(&self) -> usize {
        self.shared.lock().compressed_connections
    }

    /// The shards (`[id, count]`) with a live connection.
    pub fn connected_shards(&self) -> Vec<[u64; 2]> {
        let state = self.shared.lock();
        let mut shards: Vec<[u64; 2]> = state
            .sessions
            .values()
            .filter(|s| s.connection.is_some())
            .map(|s| s.shard)
            .collect();
        shards.sort_unstable();
        shards
    }

    /// Every IDENTIFY received, in order.
    pub fn identifies(&self) -> Vec<Identify> {
        self.shared.lock().identifies.clone()
    }

    /// How many heartbeats (op 1) the fake acknowledged.
    pub fn heartbeats(&self) -> usize {
        self.shared.lock().heartbeats
    }

    /// Stops (`false`) or resumes acknowledging heartbeats: the gateway
    /// side of a connection that is open but no longer carries anything.
    pub fn answer_heartbeats(&self, answer: bool) {
        self.shared.lock().heartbeats_unanswered = !answer;
    }

    /// How many RESUMEs succeeded.
    pub fn resumes(&self) -> usize {
        self.shared.lock().resumes
    }

    /// Every REST request with the status it got, in order.
    pub fn requests(&self) -> Vec<RestRequest> {
        self.shared.lock().requests.clone()
    }

    /// Channel ids the bot showed typing in, in order.
    pub fn typing(&self) -> Vec<String> {
        self.shared.lock().typing.clone()
    }

    /// Waits until `count` gateway sessions are connected and identified.
    pub async fn wait_for_sessions(&self, count: usize, timeout: Duration) -> bool {
        let mut online = self.shared.online.subscribe();
        tokio::time::timeout(timeout, online.wait_for(|n| *n >= count))
            .await
            .is_ok()
    }

    /// Closes every live gateway connection with `code` (4000 lets the bot
    /// resume; 4004 tells it its token is bad). Sessions stay resumable.
    pub fn close_connections(&self, code: u16) {
        let state = self.shared.lock();
        for session in state.sessions.values() {
            if let Some((_, connection)) = &session.connection {
                let _ = connection.send(Outgoing::Close(code, "closed by the test"));
            }
        }
    }

    /// Forgets every session and closes its connection with 4000, as
    /// Discord does with a session it has dropped: a RESUME of it is then
    /// answered with op 9 INVALID_SESSION (`false`).
    pub fn expire_sessions(&self) {
        let mut state = self.shared.lock();
        for (_, session) in state.sessions.drain() {
            if let Some((_, connection)) = &session.connection {
                let _ = connection.send(Outgoing::Close(4000, "closed by the test"));
            }
        }
        drop(state);
        self.shared.publish_online();
    }

    /// Sends `text` as one frame to every live connection, as it is (a
    /// hostile or broken gateway's frame).
    pub fn send_raw_frame(&self, text: &str) {
        let state = self.shared.lock();
        for session in state.sessions.values() {
            if let Some((_, connection)) = &session.connection {
                let _ = connection.send(Outgoing::Frame(text.to_owned()));
            }
        }
    }

    /// Sends op 7 RECONNECT to every live connection.
    pub fn request_reconnect(&self) {
        let state = self.shared.lock();
        let frame = wire::reconnect().to_string();
        for session in state.sessions.values() {
            if let Some((_, connection)) = &session.connection {
                let _ = connection.send(Outgoing::Frame(frame.clone()));
            }
        }
    }
}
