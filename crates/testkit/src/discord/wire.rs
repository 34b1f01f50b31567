//! The JSON shapes the fake Discord sends: users, channels, messages, gateway
//! payloads and error bodies, as the Discord API v10 documentation writes
//! them. Kept in one place so every handler answers with the same shapes.

use serde_json::{Value, json};

/// Channel types used by the fake (Discord's `type` numbers).
pub const GUILD_TEXT: u8 = 0;
pub const DM: u8 = 1;
pub const PUBLIC_THREAD: u8 = 11;

/// Gateway opcodes.
pub const OP_DISPATCH: u64 = 0;
pub const OP_HEARTBEAT: u64 = 1;
pub const OP_IDENTIFY: u64 = 2;
pub const OP_PRESENCE_UPDATE: u64 = 3;
pub const OP_RESUME: u64 = 6;
pub const OP_RECONNECT: u64 = 7;
pub const OP_INVALID_SESSION: u64 = 9;
pub const OP_HELLO: u64 = 10;
pub const OP_HEARTBEAT_ACK: u64 = 11;

/// Gateway intents the fake knows (bit numbers from the documentation).
pub const INTENT_GUILDS: u64 = 1 << 0;
pub const INTENT_GUILD_MESSAGES: u64 = 1 << 9;
pub const INTENT_DIRECT_MESSAGES: u64 = 1 << 12;
pub const INTENT_MESSAGE_CONTENT: u64 = 1 << 15;
/// Every intent bit Discord defines (0–25, with 26–27 unused gaps ignored).
pub const ALL_INTENTS: u64 = (1 << 26) - 1;

/// A user as the fake stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserRecord {
    pub id: String,
    pub username: String,
    pub bot: bool,
}

pub fn user(user: &UserRecord) -> Value {
    let mut value = json!({
        "id": user.id,
        "username": user.username,
        "discriminator": "0",
        "global_name": if user.bot { Value::Null } else { Value::String(capitalized(&user.username)) },
        "avatar": null,
        "public_flags": 0,
        "flags": 0,
        "banner": null,
        "accent_color": null,
        "avatar_decoration_data": null,
    });
    if user.bot {
        value["bot"] = Value::Bool(true);
    }
    value
}

/// `GET /users/@me` for a bot: the user object with the fields only the
/// owner sees.
pub fn current_user(bot: &UserRecord) -> Value {
    let mut value = user(bot);
    value["verified"] = Value::Bool(true);
    value["mfa_enabled"] = Value::Bool(false);
    value["locale"] = Value::String("en-US".into());
    value["email"] = Value::Null;
    value
}

fn capitalized(name: &str) -> String {
    let mut chars = name.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// A channel as the fake stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelRecord {
    pub id: String,
    pub kind: u8,
    pub name: String,
    pub guild_id: Option<String>,
    pub parent_id: Option<String>,
    /// The other person of a DM channel.
    pub recipient: Option<UserRecord>,
}

pub fn channel(channel: &ChannelRecord, last_message_id: Option<&str>) -> Value {
    match channel.kind {
        DM => json!({
            "id": channel.id,
            "type": DM,
            "last_message_id": last_message_id,
            "flags": 0,
            "recipients": channel.recipient.iter().map(user).collect::<Vec<_>>(),
        }),
        PUBLIC_THREAD => json!({
            "id": channel.id,
            "type": PUBLIC_THREAD,
            "guild_id": channel.guild_id,
            "parent_id": channel.parent_id,
            "owner_id": null,
            "name": channel.name,
            "last_message_id": last_message_id,
            "rate_limit_per_user": 0,
            "message_count": 0,
            "member_count": 1,
            "flags": 0,
            "thread_metadata": {
                "archived": false,
                "auto_archive_duration": 1440,
                "archive_timestamp": "2026-01-01T00:00:00.000000+00:00",
                "locked": false,
            },
            "total_message_sent": 0,
        }),
        _ => json!({
            "id": channel.id,
            "type": channel.kind,
            "guild_id": channel.guild_id,
            "name": channel.name,
            "position": 0,
            "permission_overwrites": [],
            "parent_id": channel.parent_id,
            "nsfw": false,
            "topic": null,
            "last_message_id": last_message_id,
            "rate_limit_per_user": 0,
            "flags": 0,
        }),
    }
}

/// A message as the fake stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageRecord {
    pub id: String,
    pub channel_id: String,
    pub guild_id: Option<String>,
    pub author: UserRecord,
    pub content: String,
    pub mentions: Vec<UserRecord>,
    /// The message this one replies to.
    pub reference: Option<String>,
    /// ISO 8601, as Discord writes it.
    pub timestamp: String,
    /// Attachment objects, with their CDN `url`s.
    pub attachments: Vec<Value>,
    /// ISO 8601, once the message was edited.
    pub edited_timestamp: Option<String>,
}

/// The message object. `referenced` is the full message replied to, which
/// Discord embeds as `referenced_message` in replies.
pub fn message(message: &MessageRecord, referenced: Option<&MessageRecord>) -> Value {
    let mut value = json!({
        "id": message.id,
        "channel_id": message.channel_id,
        "author": user(&message.author),
        "content": message.content,
        "timestamp": message.timestamp,
        "edited_timestamp": message.edited_timestamp,
        "tts": false,
        "mention_everyone": false,
        "mentions": message.mentions.iter().map(user).collect::<Vec<_>>(),
        "mention_roles": [],
        "attachments": message.attachments,
        "embeds": [],
        "pinned": false,
        "type": if message.reference.is_some() { 19 } else { 0 },
        "flags": 0,
        "components": [],
    });
    if let Some(reference) = &message.reference {
        value["message_reference"] = json!({
            "type": 0,
            "message_id": reference,
            "channel_id": message.channel_id,
            "guild_id": message.guild_id,
        });
        value["referenced_message"] = referenced.map_or(Value::Null, |r| self::message(r, None));
    }
    value
}

/// The `MESSAGE_CREATE` dispatch body: the message plus the gateway-only
/// `guild_id` and `member` fields.
pub fn message_create(record: &MessageRecord, referenced: Option<&MessageRecord>) -> Value {
    let mut value = message(record, referenced);
    if let Some(guild_id) = &record.guild_id {
        value["guild_id"] = Value::String(guild_id.clone());
        value["member"] = json!({
            "roles": [],
            "nick": null,
            "joined_at": "2026-01-01T00:00:00.000000+00:00",
            "deaf": false,
            "mute": false,
            "flags": 0,
            "pending": false,
            "premium_since": null,
            "communication_disabled_until": null,
        });
    }
    value
}

pub fn hello(heartbeat_interval_ms: u64) -> Value {
    json!({ "op": OP_HELLO, "d": { "heartbeat_interval": heartbeat_interval_ms }, "s": null, "t": null })
}

pub fn heartbeat_ack() -> Value {
    json!({ "op": OP_HEARTBEAT_ACK, "d": null, "s": null, "t": null })
}

pub fn invalid_session(resumable: bool) -> Value {
    json!({ "op": OP_INVALID_SESSION, "d": resumable, "s": null, "t": null })
}

pub fn reconnect() -> Value {
    json!({ "op": OP_RECONNECT, "d": null, "s": null, "t": null })
}

pub fn dispatch(seq: u64, event: &str, data: Value) -> Value {
    json!({ "op": OP_DISPATCH, "s": seq, "t": event, "d": data })
}

pub struct ReadyInfo<'a> {
    pub bot: &'a UserRecord,
    pub application_id: &'a str,
    pub guild_ids: &'a [String],
    pub session_id: &'a str,
    pub resume_gateway_url: &'a str,
    pub shard: [u64; 2],
}

pub fn ready(info: &ReadyInfo<'_>) -> Value {
    json!({
        "v": 10,
        "user": current_user(info.bot),
        "guilds": info.guild_ids.iter().map(|id| json!({ "id": id, "unavailable": true })).collect::<Vec<_>>(),
        "session_id": info.session_id,
        "session_type": "normal",
        "resume_gateway_url": info.resume_gateway_url,
        "shard": info.shard,
        "application": { "id": info.application_id, "flags": 0 },
        "private_channels": [],
        "presences": [],
        "relationships": [],
        "guild_join_requests": [],
        "geo_ordered_rtc_regions": [],
        "user_settings": {},
        "_trace": ["[\"fake-discord-gateway\",{\"micros\":0}]"],
    })
}

/// Discord's JSON error body: `{"message": ..., "code": ...}`.
pub fn error(code: u32, message: &str) -> Value {
    json!({ "message": message, "code": code })
}

/// A 50035 "Invalid Form Body" with one field error, as Discord nests it.
pub fn invalid_form_body(field: &str, code: &str, message: &str) -> Value {
    json!({
        "message": "Invalid Form Body",
        "code": 50035,
        "errors": { field: { "_errors": [ { "code": code, "message": message } ] } },
    })
}

/// The 429 body; `retry_after` in seconds.
pub fn rate_limited(retry_after_seconds: f64, global: bool) -> Value {
    json!({ "message": "You are being rate limited.", "retry_after": retry_after_seconds, "global": global })
}
