//! The fake Bot API's state: users, chats and topics, the update queue with
//! `getUpdates` offset semantics, the messages the bot sent and edited
//! (the methods that send and edit text are in `messages`), and the send
//! rules it enforces. Everything here is synchronous and runs under one
//! lock; the HTTP handlers in `server` call into it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::FakeTelegramOptions;
use super::messages::Edit;
use super::wire::{self, ChatInfo, UserInfo};
use crate::platform::{SentMessage, Stamped};

/// One update waiting to be confirmed.
#[derive(Clone, Debug)]
pub struct PendingUpdate {
    pub id: u32,
    /// The update's field name: `message`, `edited_message`, `my_chat_member`...
    pub kind: String,
    pub body: Value,
}

/// A `sendChatAction` the bot made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatAction {
    pub chat: String,
    pub thread: Option<String>,
    pub action: String,
}

/// The webhook Herald registered with `setWebhook`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Webhook {
    pub url: String,
    pub secret: Option<String>,
}

/// One POST the fake made to a webhook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookAttempt {
    pub update_id: u32,
    /// The HTTP status the webhook answered, or `None` when it could not be reached.
    pub status: Option<u16>,
}

#[derive(Clone, Copy, Debug)]
struct Throttle {
    remaining: usize,
    retry_after: u64,
}

/// A request the fake refuses: HTTP status and the error envelope.
pub type Refusal = (u16, Value);

pub(super) fn bad_request(description: &str) -> Refusal {
    (400, wire::error(400, &format!("Bad Request: {description}")))
}

pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

pub struct State {
    pub options: FakeTelegramOptions,
    pub bot: UserInfo,
    pub users: BTreeMap<i64, UserInfo>,
    pub chats: BTreeMap<i64, ChatInfo>,
    /// Forum topics by chat and thread id, with their names.
    pub topics: BTreeMap<(i64, i32), String>,
    /// Every message in every chat (without its nested reply), to answer replies.
    messages: HashMap<(i64, i32), Value>,
    next_message_id: HashMap<i64, i32>,
    next_update_id: u32,
    updates: VecDeque<PendingUpdate>,
    /// How many times each update was handed out (by `getUpdates` or webhook).
    pub deliveries: BTreeMap<u32, u32>,
    /// Update types the bot asked for; `None` means the default set.
    pub allowed_updates: Option<Vec<String>>,
    /// Bumped by each `getUpdates`: an older poll still waiting is terminated.
    pub poll_generation: u64,
    pub webhook: Option<Webhook>,
    pub webhook_log: Vec<WebhookAttempt>,
    pub webhook_last_error: Option<(i64, String)>,
    pub sent: Vec<SentMessage>,
    /// The bot's text messages, by chat and id, in the order they were sent.
    pub bot_texts: Vec<(i64, i32)>,
    /// Accepted `editMessageText`s, in order.
    pub edits: Vec<Edit>,
    /// The `Message` objects returned for each accepted send.
    pub sent_json: Vec<Value>,
    pub chat_actions: Vec<ChatAction>,
    recent_by_chat: HashMap<i64, VecDeque<Instant>>,
    recent_by_bot: VecDeque<Instant>,
    throttle: Option<Throttle>,
    not_before: HashMap<i64, Instant>,
    pub violations: Vec<String>,
    /// Methods called, lower-cased, in order.
    pub calls: Vec<String>,
    /// User messages as they were queued for the bot.
    pub delivered_stamps: Vec<Stamped>,
    /// Accepted `sendMessage`s, stamped when their request arrived.
    pub sent_stamps: Vec<Stamped>,
    /// Faults for the next calls of a method (lower-cased name).
    pub faults: crate::faults::Faults,
    /// Files the bot sent (`sendDocument`), in order.
    pub uploads: Vec<crate::platform::Upload>,
}

/// Update types delivered when `allowed_updates` was never given or was empty.
fn default_update_kind(kind: &str) -> bool {
    !matches!(kind, "chat_member" | "message_reaction" | "message_reaction_count")
}

impl State {
    pub fn new(options: FakeTelegramOptions) -> Self {
        let bot = UserInfo {
            id: options.bot_id,
            first_name: options.bot_name.clone(),
            username: Some(options.bot_username.clone()),
            is_bot: true,
        };
        Self {
            options,
            bot,
            users: BTreeMap::new(),
            chats: BTreeMap::new(),
            topics: BTreeMap::new(),
            messages: HashMap::new(),
            next_message_id: HashMap::new(),
            next_update_id: 700_000_001,
            updates: VecDeque::new(),
            deliveries: BTreeMap::new(),
            allowed_updates: None,
            poll_generation: 0,
            webhook: None,
            webhook_log: Vec::new(),
            webhook_last_error: None,
            sent: Vec::new(),
            bot_texts: Vec::new(),
            edits: Vec::new(),
            sent_json: Vec::new(),
            chat_actions: Vec::new(),
            recent_by_chat: HashMap::new(),
            recent_by_bot: VecDeque::new(),
            throttle: None,
            not_before: HashMap::new(),
            violations: Vec::new(),
            calls: Vec::new(),
            delivered_stamps: Vec::new(),
            sent_stamps: Vec::new(),
            faults: Default::default(),
            uploads: Vec::new(),
        }
    }

    pub fn me(&self) -> Value {
        let mut me = match self.bot.json() {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        me.insert("can_join_groups".into(), json!(true));
        me.insert("can_read_all_group_messages".into(), json!(false));
        me.insert("supports_inline_queries".into(), json!(false));
        me.insert("can_connect_to_business".into(), json!(false));
        me.insert("has_main_web_app".into(), json!(false));
        Value::Object(me)
    }

    pub fn next_message_id(&mut self, chat: i64) -> i32 {
        let next = self.next_message_id.entry(chat).or_insert(1);
        let id = *next;
        *next += 1;
        id
    }

    /// Stores a message so later replies to it can be checked and quoted.
    pub fn remember(&mut self, chat: i64, message_id: i32, message: &Value) {
        let mut stored = message.clone();
        if let Some(map) = stored.as_object_mut() {
            map.remove("reply_to_message");
        }
        self.messages.insert((chat, message_id), stored);
    }

    pub fn message(&self, chat: i64, message_id: i32) -> Option<&Value> {
        self.messages.get(&(chat, message_id))
    }

    /// The stored message, to change it in place (an edit).
    pub fn message_mut(&mut self, chat: i64, message_id: i32) -> Option<&mut Value> {
        self.messages.get_mut(&(chat, message_id))
    }

    /// Adds an update of `kind` (`message`, `edited_message`, ...) to the queue.
    pub fn push_update(&mut self, kind: &str, payload: Value) -> u32 {
        let id = self.next_update_id;
        self.next_update_id += 1;
        let body = json!({ "update_id": id, kind: payload });
        self.updates.push_back(PendingUpdate {
            id,
            kind: kind.to_owned(),
            body,
        });
        id
    }

    fn wanted(&self, kind: &str) -> bool {
        match &self.allowed_updates {
            Some(allowed) if !allowed.is_empty() => allowed.iter().any(|a| a == kind),
            _ => default_update_kind(kind),
        }
    }

    /// Confirms what `offset` confirms, drops updates the bot does not want,
    /// and returns up to `limit` of the rest, as `getUpdates` does.
    pub fn take_updates(&mut self, offset: Option<i64>, limit: usize) -> Vec<Value> {
        match offset {
            Some(offset) if offset > 0 => self.updates.retain(|u| i64::from(u.id) >= offset),
            Some(offset) if offset < 0 => {
                let keep = offset.unsigned_abs() as usize;
                while self.updates.len() > keep {
                    self.updates.pop_front();
                }
            }
            _ => {}
        }
        let unwanted: Vec<u32> = self
            .updates
            .iter()
            .filter(|u| !self.wanted(&u.kind))
            .map(|u| u.id)
            .collect();
        self.updates.retain(|u| !unwanted.contains(&u.id));
        let batch: Vec<PendingUpdate> = self.updates.iter().take(limit).cloned().collect();
        for update in &batch {
            *self.deliveries.entry(update.id).or_default() += 1;
        }
        batch.into_iter().map(|u| u.body).collect()
    }

    pub fn pending_count(&self) -> usize {
        self.updates.len()
    }

    /// The oldest update a webhook should receive next, counted as delivered.
    pub fn next_for_webhook(&mut self) -> Option<PendingUpdate> {
        while let Some(first) = self.updates.front() {
            if self.wanted(&first.kind) {
                let update = first.clone();
                *self.deliveries.entry(update.id).or_default() += 1;
                return Some(update);
            }
            self.updates.pop_front();
        }
        None
    }

    /// The webhook answered 2xx: the update is confirmed.
    pub fn confirm(&mut self, update_id: u32) {
        self.updates.retain(|u| u.id != update_id);
    }

    pub fn clear_updates(&mut self) {
        self.updates.clear();
    }

    pub fn throttle_next(&mut self, count: usize, retry_after: Duration) {
        let seconds = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
        self.throttle = Some(Throttle {
            remaining: count,
            retry_after: seconds.max(1),
        });
    }

    pub(super) fn chat(&self, params: &Map<String, Value>) -> Result<ChatInfo, Refusal> {
        let Some(chat_id) = params.get("chat_id").filter(|v| !v.is_null()) else {
            return Err(bad_request("chat_id is empty"));
        };
        let id = integer(chat_id).ok_or_else(|| bad_request("chat not found"))?;
        self.chats
            .get(&id)
            .cloned()
            .ok_or_else(|| bad_request("chat not found"))
    }

    pub(super) fn thread(&self, chat: &ChatInfo, params: &Map<String, Value>) -> Result<Option<i32>, Refusal> {
        let Some(value) = params.get("message_thread_id").filter(|v| !v.is_null()) else {
            return Ok(None);
        };
        let thread = integer(value)
            .and_then(|t| i32::try_from(t).ok())
            .ok_or_else(|| bad_request("message thread not found"))?;
        if chat.is_forum() && self.topics.contains_key(&(chat.id, thread)) {
            Ok(Some(thread))
        } else {
            Err(bad_request("message thread not found"))
        }
    }

    /// The message to reply to, from `reply_parameters` or the older
    /// `reply_to_message_id`; `None` when the reply may be dropped.
    pub(super) fn reply_target(&self, chat: &ChatInfo, params: &Map<String, Value>) -> Result<Option<Value>, Refusal> {
        let (message_id, allow_without) = match params.get("reply_parameters").filter(|v| !v.is_null()) {
            Some(reply) => {
                let reply = structured(reply).ok_or_else(|| bad_request("can't parse reply parameters JSON object"))?;
                if let Some(other_chat) = reply.get("chat_id").and_then(integer)
                    && other_chat != chat.id
                {
                    return Err(bad_request("message to be replied not found"));
                }
                (
                    reply.get("message_id").and_then(integer),
                    reply
                        .get("allow_sending_without_reply")
                        .and_then(boolean)
                        .unwrap_or(false),
                )
            }
            None => (
                params.get("reply_to_message_id").and_then(integer),
                params
                    .get("allow_sending_without_reply")
                    .and_then(boolean)
                    .unwrap_or(false),
            ),
        };
        let Some(message_id) = message_id else { return Ok(None) };
        let found = i32::try_from(message_id)
            .ok()
            .and_then(|id| self.message(chat.id, id))
            .cloned();
        match found {
            Some(message) => Ok(Some(message)),
            None if allow_without => Ok(None),
            None => Err(bad_request("message to be replied not found")),
        }
    }

    /// Applies the send rules; a refused send gets a 429 to wait out.
    pub(super) fn admit_send(&mut self, chat: &ChatInfo, now: Instant) -> Result<(), Refusal> {
        if let Some(throttle) = self.throttle.as_mut()
            && throttle.remaining > 0
        {
            throttle.remaining -= 1;
            let retry_after = throttle.retry_after;
            self.not_before.insert(chat.id, now + Duration::from_secs(retry_after));
            return Err((429, wire::too_many_requests(retry_after)));
        }
        if let Some(not_before) = self.not_before.get(&chat.id).copied()
            && now < not_before
        {
            let early = not_before - now;
            self.violations.push(format!(
                "sent to chat {} {} ms before the retry_after it was given had passed",
                chat.id,
                early.as_millis()
            ));
            return Err((429, wire::too_many_requests(ceil_seconds(early))));
        }
        let mut rules = vec![("chat", self.options.per_chat)];
        if chat.is_group() {
            rules.push(("group", self.options.per_group));
        }
        let recent = self.recent_by_chat.entry(chat.id).or_default();
        for (scope, rule) in rules {
            if let Some(wait) = rule.and_then(|rule| over_rate(recent, rule, now)) {
                let (count, per) = rule.unwrap_or_default();
                self.violations.push(format!(
                    "chat {} got more than {count} messages within {per:?} (the {scope} rate)",
                    chat.id
                ));
                let retry_after = ceil_seconds(wait);
                self.not_before.insert(chat.id, now + Duration::from_secs(retry_after));
                return Err((429, wire::too_many_requests(retry_after)));
            }
        }
        if let Some(rule) = self.options.per_bot
            && let Some(wait) = over_rate(&self.recent_by_bot, rule, now)
        {
            self.violations.push(format!(
                "the bot sent more than {} messages within {:?}",
                rule.0, rule.1
            ));
            return Err((429, wire::too_many_requests(ceil_seconds(wait))));
        }
        let keep = [self.options.per_chat, self.options.per_group, self.options.per_bot]
            .iter()
            .flatten()
            .map(|(_, per)| *per)
            .max()
            .unwrap_or_default();
        for sends in [self.recent_by_chat.entry(chat.id).or_default(), &mut self.recent_by_bot] {
            sends.push_back(now);
            while sends.front().is_some_and(|t| now.duration_since(*t) > keep) {
                sends.pop_front();
            }
        }
        Ok(())
    }

    /// `sendChatAction`: validates the chat, topic and action.
    pub fn send_chat_action(&mut self, params: &Map<String, Value>) -> Result<Value, Refusal> {
        let chat = self.chat(params)?;
        let thread = self.thread(&chat, params)?;
        const ACTIONS: &[&str] = &[
            "typing",
            "upload_photo",
            "record_video",
            "upload_video",
            "record_voice",
            "upload_voice",
            "upload_document",
            "choose_sticker",
            "find_location",
            "record_video_note",
            "upload_video_note",
        ];
        let action = params.get("action").and_then(Value::as_str).unwrap_or_default();
        if !ACTIONS.contains(&action) {
            return Err(bad_request("wrong parameter action in request"));
        }
        self.chat_actions.push(ChatAction {
            chat: chat.id.to_string(),
            thread: thread.map(|t| t.to_string()),
            action: action.to_owned(),
        });
        Ok(json!(true))
    }

    pub fn webhook_info(&self) -> Value {
        let mut info = Map::new();
        info.insert(
            "url".into(),
            json!(self.webhook.as_ref().map(|w| w.url.as_str()).unwrap_or("")),
        );
        info.insert("has_custom_certificate".into(), json!(false));
        info.insert("pending_update_count".into(), json!(self.updates.len()));
        if self.webhook.is_some() {
            info.insert("max_connections".into(), json!(40));
            info.insert("ip_address".into(), json!("127.0.0.1"));
            if let Some((date, message)) = &self.webhook_last_error {
                info.insert("last_error_date".into(), json!(date));
                info.insert("last_error_message".into(), json!(message));
            }
        }
        if let Some(allowed) = &self.allowed_updates {
            info.insert("allowed_updates".into(), json!(allowed));
        }
        Value::Object(info)
    }
}

/// When one more send would exceed `(count, per)`, how long until it would not.
///
/// The window is four fifths of `per`: a client that spaces its sends evenly
/// at exactly the rate still sees jitter on the way here (a busy machine can
/// hold one request back a hundred milliseconds and not the next), and the
/// fake must not call that a violation. A client with no limiter at all is
/// still caught at once.
/// Whether a send at `now` would make `count` + 1 sends within one span of
/// `per` (the window exactly as documented, no tolerance); if so, how long
/// until the oldest that counts leaves it.
fn over_rate(sends: &VecDeque<Instant>, (count, per): (u32, Duration), now: Instant) -> Option<Duration> {
    let inside: Vec<&Instant> = sends.iter().filter(|t| now.duration_since(**t) < per).collect();
    if inside.len() < count as usize {
        return None;
    }
    let oldest_counted = inside[inside.len() - count as usize];
    Some(per.saturating_sub(now.duration_since(*oldest_counted)))
}

fn ceil_seconds(duration: Duration) -> u64 {
    (duration.as_secs() + u64::from(duration.subsec_nanos() > 0)).max(1)
}

/// A Bot API integer parameter: a JSON number or a numeric string.
pub fn integer(value: &Value) -> Option<i64> {
    match value {
        Value::Number(number) => number.as_i64(),
        Value::String(text) => text.trim().parse().ok(),
        _ => None,
    }
}

pub fn boolean(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(flag) => Some(*flag),
        Value::String(text) => text.parse().ok(),
        _ => None,
    }
}

/// A Bot API object parameter: JSON, or JSON text in a form field.
pub fn structured(value: &Value) -> Option<Map<String, Value>> {
    match value {
        Value::Object(map) => Some(map.clone()),
        Value::String(text) => serde_json::from_str(text).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_window_is_exactly_the_documented_one() {
        let start = Instant::now();
        let rule = (2, Duration::from_secs(1));
        let at = |ms: u64| start + Duration::from_millis(ms);
        for (sends, now, wait) in [
            // A burst up to the count is fine.
            (vec![], 0, None),
            (vec![0], 0, None),
            // The third within the second is refused until the first leaves.
            (vec![0, 100], 200, Some(800)),
            (vec![0, 500], 999, Some(1)),
            // The first left the window exactly at 1000 ms.
            (vec![0, 500], 1000, None),
            (vec![10, 500], 1009, Some(1)),
        ] {
            let sends: VecDeque<Instant> = sends.into_iter().map(at).collect();
            assert_eq!(
                over_rate(&sends, rule, at(now)),
                wait.map(Duration::from_millis),
                "{sends:?} at {now}"
            );
        }
        // Telegram's group rule: twenty at once, the 21st a minute after the first.
        let group = (20, Duration::from_secs(60));
        let burst: VecDeque<Instant> = (0..20).map(|n| at(n * 10)).collect();
        assert_eq!(over_rate(&burst, group, at(30_000)), Some(Duration::from_secs(30)));
        assert_eq!(over_rate(&burst, group, at(60_000)), None);
    }

    #[test]
    fn parameters_are_read_as_the_bot_api_reads_them() {
        assert_eq!(integer(&json!(-100)), Some(-100));
        assert_eq!(integer(&json!("42")), Some(42));
        assert_eq!(integer(&json!("x")), None);
        assert_eq!(boolean(&json!("true")), Some(true));
        assert_eq!(
            structured(&json!("{\"message_id\":3}")).and_then(|m| m.get("message_id").cloned()),
            Some(json!(3))
        );
    }
}
