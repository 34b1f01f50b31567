//! The part of Discord's objects Herald reads, decoded straight from the
//! gateway's and the REST API's JSON.
//!
//! Only the fields [`super::payload`] looks at are named; the rest of a
//! message (embeds, reactions, components, …) is skipped while parsing
//! instead of being built into a full model and dropped. Fields Discord
//! documents as optional or nullable default to empty, so a message Discord
//! adds fields to, or sends without some, still decodes. Snowflakes come as
//! strings and are kept as numbers.

use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer};

/// `MESSAGE_CREATE`'s payload: a message object, with `guild_id` and
/// `member` in guilds.
#[derive(Clone, Debug, Deserialize)]
pub struct Message {
    #[serde(deserialize_with = "id_from_string")]
    pub id: u64,
    #[serde(deserialize_with = "id_from_string")]
    pub channel_id: u64,
    #[serde(default, deserialize_with = "optional_id_from_string")]
    pub guild_id: Option<u64>,
    pub author: Author,
    #[serde(default)]
    pub member: Option<Member>,
    /// Empty without the MESSAGE_CONTENT intent (except where Herald is
    /// mentioned, and in DMs).
    #[serde(default)]
    pub content: String,
    /// ISO 8601, as Discord writes it.
    #[serde(default)]
    pub timestamp: String,
    /// The message type: 0 is a plain message, 19 a reply; the others are
    /// system messages (joins, pins, boosts, …).
    #[serde(rename = "type", default)]
    pub kind: u8,
    #[serde(default)]
    pub webhook_id: Option<String>,
    #[serde(default)]
    pub mentions: Vec<UserId>,
    /// The message replied to; `null` when it was deleted.
    #[serde(default)]
    pub referenced_message: Option<Box<Replied>>,
    #[serde(default)]
    pub message_reference: Option<Reference>,
    #[serde(default)]
    pub attachments: Vec<FileObject>,
}

/// Discord's message types Herald answers.
pub const REGULAR: u8 = 0;
pub const INLINE_REPLY: u8 = 19;

/// A message's author: a user object.
#[derive(Clone, Debug, Deserialize)]
pub struct Author {
    #[serde(deserialize_with = "id_from_string")]
    pub id: u64,
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub global_name: Option<String>,
    #[serde(default)]
    pub bot: bool,
    #[serde(default)]
    pub system: bool,
}

/// The author as a member of the guild (`MESSAGE_CREATE` in guilds).
#[derive(Clone, Debug, Deserialize)]
pub struct Member {
    #[serde(default)]
    pub nick: Option<String>,
}

/// A user object of which only the id is read (a mention, the author of
/// the message replied to).
#[derive(Clone, Debug, Deserialize)]
pub struct UserId {
    #[serde(deserialize_with = "id_from_string")]
    pub id: u64,
}

/// The message a reply answers; only who wrote it matters.
#[derive(Clone, Debug, Deserialize)]
pub struct Replied {
    pub author: UserId,
}

/// `message_reference`: which message this one replies to.
#[derive(Clone, Debug, Deserialize)]
pub struct Reference {
    #[serde(default, deserialize_with = "optional_id_from_string")]
    pub message_id: Option<u64>,
}

/// An attachment object.
#[derive(Clone, Debug, Deserialize)]
pub struct FileObject {
    pub filename: String,
    #[serde(default)]
    pub content_type: Option<String>,
    #[serde(default)]
    pub size: u64,
    pub url: String,
}

/// The part of a channel object (`GET /channels/{id}`) Herald reads.
#[derive(Debug, Deserialize)]
pub struct ChannelObject {
    #[serde(deserialize_with = "id_from_string")]
    pub id: u64,
    #[serde(rename = "type")]
    pub kind: u8,
    #[serde(default, deserialize_with = "optional_id_from_string")]
    pub parent_id: Option<u64>,
}

/// A snowflake, which Discord sends as a string; read without copying it.
pub fn id_from_string<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    deserializer.deserialize_str(Snowflake)
}

/// A snowflake that may be absent or `null`.
pub fn optional_id_from_string<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    deserializer.deserialize_option(OptionalSnowflake)
}

struct Snowflake;

impl Visitor<'_> for Snowflake {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a snowflake (an id as a string of digits)")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<u64, E> {
        text.parse()
            .map_err(|_| E::invalid_value(de::Unexpected::Str(text), &self))
    }
}

struct OptionalSnowflake;

impl<'de> Visitor<'de> for OptionalSnowflake {
    type Value = Option<u64>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a snowflake or null")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        id_from_string(deserializer).map(Some)
    }
}
