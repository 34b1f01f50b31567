//! The bot's text messages: `sendMessage` and `editMessageText`, their
//! `parse_mode` applied by [`entities`](super::entities), and the record of
//! what a person reading the chat sees after every edit.
//!
//! It exists because Herald formats its replies and streams answers by
//! editing them: tests need to know both what was sent and what the chat
//! shows now. Edits obey the same send rules (rates, `retry_after`) as
//! sends, as they do on Telegram.

use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::FakeTelegram;
use super::entities::{self, Parsed};
use super::state::{Refusal, State, bad_request, integer, unix_now};
use super::wire::{self, ChatInfo, MessageFields};
use crate::platform::SentMessage;

/// An accepted `editMessageText`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edit {
    pub chat: String,
    pub message_id: i32,
    /// The new visible text (markup removed).
    pub text: String,
    /// The new text exactly as the bot sent it.
    pub raw: String,
    pub parse_mode: Option<String>,
    /// The new `MessageEntity` objects.
    pub entities: Vec<Value>,
    /// When the request arrived.
    pub at: std::time::Instant,
}

/// One of the bot's text messages as the chat shows it now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BotMessage {
    pub chat: String,
    pub thread: Option<String>,
    pub message_id: i32,
    /// The current visible text, after all edits.
    pub text: String,
    pub entities: Vec<Value>,
    /// Whether it was edited (Telegram shows "edited").
    pub edited: bool,
}

/// A text parameter: the Bot API takes a number as its digits.
fn text_param(params: &Map<String, Value>, key: &str) -> String {
    match params.get(key) {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Number(number)) => number.to_string(),
        _ => String::new(),
    }
}

fn parse_mode(params: &Map<String, Value>) -> Option<String> {
    params
        .get("parse_mode")
        .and_then(Value::as_str)
        .filter(|mode| !mode.is_empty())
        .map(str::to_owned)
}

/// Parses a formatted text (`text` or `caption`) as the Bot API does.
pub(super) fn formatted(raw: &str, parse_mode: Option<&str>) -> Result<Parsed, Refusal> {
    entities::parse(raw, parse_mode).map_err(|description| (400, wire::error(400, &description)))
}

impl State {
    /// The text of a send or an edit: present, parsed, not too long.
    fn message_text(&self, raw: &str, parse_mode: Option<&str>) -> Result<Parsed, Refusal> {
        if raw.trim().is_empty() {
            return Err(bad_request("message text is empty"));
        }
        let parsed = formatted(raw, parse_mode)?;
        if parsed.text.trim().is_empty() {
            return Err(bad_request("message text is empty"));
        }
        if wire::utf16_len(&parsed.text) > self.options.message_limit {
            return Err(bad_request("message is too long"));
        }
        Ok(parsed)
    }

    /// `sendMessage`: validates like the Bot API, enforces the send rules,
    /// records the message and returns it.
    pub fn send_message(&mut self, params: &Map<String, Value>, now: Instant) -> Result<Value, Refusal> {
        let chat = self.chat(params)?;
        let raw = text_param(params, "text");
        let parse_mode = parse_mode(params);
        let parsed = self.message_text(&raw, parse_mode.as_deref())?;
        let mut thread = self.thread(&chat, params)?;
        let reply = self.reply_target(&chat, params)?;
        // A reply without a topic goes to the topic of the message it answers.
        if thread.is_none()
            && let Some(reply) = &reply
            && reply.get("is_topic_message").and_then(Value::as_bool) == Some(true)
        {
            thread = reply
                .get("message_thread_id")
                .and_then(Value::as_i64)
                .and_then(|t| i32::try_from(t).ok());
        }
        self.admit_send(&chat, now)?;
        let message_id = self.next_message_id(chat.id);
        let bot = self.bot.clone();
        let message = MessageFields {
            message_id,
            from: &bot,
            chat: &chat,
            date: unix_now(),
            text: &parsed.text,
            entities: parsed.entities.clone(),
            thread,
            reply_to: reply.clone(),
        }
        .json();
        self.remember(chat.id, message_id, &message);
        self.bot_texts.push((chat.id, message_id));
        self.sent.push(SentMessage {
            chat: chat.id.to_string(),
            thread: thread.map(|t| t.to_string()),
            text: parsed.text,
            reply_to: reply
                .as_ref()
                .and_then(|r| r.get("message_id"))
                .and_then(Value::as_i64)
                .map(|id| id.to_string()),
            parse_mode,
            entities: parsed.entities,
            raw,
        });
        self.sent_json.push(message.clone());
        Ok(message)
    }

    /// `editMessageText` of a message in a chat: validates like the Bot
    /// API, enforces the send rules, changes the stored message (replies
    /// to it quote the new text), records the edit and returns the message.
    pub fn edit_message_text(
        &mut self,
        params: &Map<String, Value>,
        now: Instant,
        arrived: std::time::Instant,
    ) -> Result<Value, Refusal> {
        let raw = text_param(params, "text");
        let parse_mode = parse_mode(params);
        if raw.trim().is_empty() {
            return Err(bad_request("message text is empty"));
        }
        let parsed = formatted(&raw, parse_mode.as_deref())?;
        if parsed.text.trim().is_empty() {
            return Err(bad_request("message text is empty"));
        }
        let chat = self.chat(params)?;
        let message_id = params
            .get("message_id")
            .and_then(integer)
            .ok_or_else(|| bad_request("message identifier is not specified"))?;
        let message_id = i32::try_from(message_id).map_err(|_| bad_request("message to edit not found"))?;
        let stored = self
            .message(chat.id, message_id)
            .ok_or_else(|| bad_request("message to edit not found"))?;
        if stored["from"]["id"].as_i64() != Some(self.bot.id) {
            return Err(bad_request("message can't be edited"));
        }
        let Some(old_text) = stored.get("text").and_then(Value::as_str) else {
            return Err(bad_request("there is no text in the message to edit"));
        };
        if wire::utf16_len(&parsed.text) > self.options.message_limit {
            return Err(bad_request("message is too long"));
        }
        let old_entities = stored
            .get("entities")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if old_text == parsed.text && old_entities == parsed.entities {
            return Err(bad_request(
                "message is not modified: specified new message content and reply markup are exactly the same as a specified content and reply markup of the message",
            ));
        }
        self.admit_send(&chat, now)?;
        let edited = self.apply_edit(&chat, message_id, &parsed);
        self.edits.push(Edit {
            chat: chat.id.to_string(),
            message_id,
            text: parsed.text,
            raw,
            parse_mode,
            entities: parsed.entities,
            at: arrived,
        });
        Ok(edited)
    }

    fn apply_edit(&mut self, chat: &ChatInfo, message_id: i32, parsed: &Parsed) -> Value {
        let message = self
            .message_mut(chat.id, message_id)
            .and_then(Value::as_object_mut)
            .expect("the edited message was found");
        message.insert("text".into(), json!(parsed.text));
        if parsed.entities.is_empty() {
            message.remove("entities");
        } else {
            message.insert("entities".into(), Value::Array(parsed.entities.clone()));
        }
        message.insert("edit_date".into(), json!(unix_now()));
        Value::Object(message.clone())
    }

    /// The bot's text messages as the chats show them now.
    pub fn bot_messages(&self) -> Vec<BotMessage> {
        self.bot_texts
            .iter()
            .filter_map(|&(chat, message_id)| {
                let message = self.message(chat, message_id)?;
                Some(BotMessage {
                    chat: chat.to_string(),
                    thread: message
                        .get("message_thread_id")
                        .and_then(Value::as_i64)
                        .map(|t| t.to_string()),
                    message_id,
                    text: message.get("text").and_then(Value::as_str)?.to_owned(),
                    entities: message
                        .get("entities")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                    edited: message.get("edit_date").is_some(),
                })
            })
            .collect()
    }
}

impl FakeTelegram {
    /// Every accepted `editMessageText`, in order.
    pub fn edits(&self) -> Vec<Edit> {
        self.shared.lock().edits.clone()
    }

    /// Each text message the bot sent, in send order, with its current
    /// visible text: what a person sees in the chat after all edits.
    pub fn bot_messages(&self) -> Vec<BotMessage> {
        self.shared.lock().bot_messages()
    }

    /// Waits until the bot made at least `count` edits, or `timeout` passes.
    pub async fn wait_for_edits(&self, count: usize, timeout: Duration) -> Vec<Edit> {
        let mut edited = self.shared.edit_count.subscribe();
        let _ = tokio::time::timeout(timeout, edited.wait_for(|n| *n >= count)).await;
        self.edits()
    }
}
