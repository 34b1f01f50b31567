//! The Bot API's JSON shapes, as the real server writes them: the response
//! envelope, `User`, `Chat` and `Message` objects. Everything the fake sends
//! is built here so the shapes live in one place.

use serde_json::{Map, Value, json};

/// `{"ok":true,"result":...}`
pub fn ok(result: Value) -> Value {
    json!({ "ok": true, "result": result })
}

/// `{"ok":false,"error_code":N,"description":"..."}`
pub fn error(code: u16, description: &str) -> Value {
    json!({ "ok": false, "error_code": code, "description": description })
}

/// The 429 envelope with `parameters.retry_after` in whole seconds.
pub fn too_many_requests(retry_after: u64) -> Value {
    json!({
        "ok": false,
        "error_code": 429,
        "description": format!("Too Many Requests: retry after {retry_after}"),
        "parameters": { "retry_after": retry_after },
    })
}

/// A person or a bot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserInfo {
    pub id: i64,
    pub first_name: String,
    pub username: Option<String>,
    pub is_bot: bool,
}

impl UserInfo {
    pub fn json(&self) -> Value {
        let mut user = Map::new();
        user.insert("id".into(), json!(self.id));
        user.insert("is_bot".into(), json!(self.is_bot));
        user.insert("first_name".into(), json!(self.first_name));
        if let Some(username) = &self.username {
            user.insert("username".into(), json!(username));
        }
        if !self.is_bot {
            user.insert("language_code".into(), json!("en"));
        }
        Value::Object(user)
    }
}

/// What kind of chat, with what `Chat` JSON needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChatKind {
    /// The private chat between the bot and this user (its id is the user's).
    Private(UserInfo),
    Group {
        title: String,
    },
    Supergroup {
        title: String,
        forum: bool,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatInfo {
    pub id: i64,
    pub kind: ChatKind,
}

impl ChatInfo {
    pub fn is_group(&self) -> bool {
        !matches!(self.kind, ChatKind::Private(_))
    }

    pub fn is_forum(&self) -> bool {
        matches!(self.kind, ChatKind::Supergroup { forum: true, .. })
    }

    pub fn json(&self) -> Value {
        match &self.kind {
            ChatKind::Private(user) => {
                let mut chat = Map::new();
                chat.insert("id".into(), json!(self.id));
                chat.insert("first_name".into(), json!(user.first_name));
                if let Some(username) = &user.username {
                    chat.insert("username".into(), json!(username));
                }
                chat.insert("type".into(), json!("private"));
                Value::Object(chat)
            }
            ChatKind::Group { title } => json!({ "id": self.id, "title": title, "type": "group" }),
            ChatKind::Supergroup { title, forum: true } => {
                json!({ "id": self.id, "title": title, "type": "supergroup", "is_forum": true })
            }
            ChatKind::Supergroup { title, forum: false } => {
                json!({ "id": self.id, "title": title, "type": "supergroup" })
            }
        }
    }
}

/// Length in the unit Telegram counts: UTF-16 code units.
pub fn utf16_len(text: &str) -> usize {
    text.encode_utf16().count()
}

/// The parts of a `Message` the fake writes.
pub struct MessageFields<'a> {
    pub message_id: i32,
    pub from: &'a UserInfo,
    pub chat: &'a ChatInfo,
    pub date: i64,
    pub text: &'a str,
    /// `(offset, length, type)` in UTF-16 units.
    pub entities: Vec<Value>,
    /// The forum topic, when the message is in one.
    pub thread: Option<i32>,
    /// The message replied to, in full (Telegram nests one level).
    pub reply_to: Option<Value>,
}

impl MessageFields<'_> {
    pub fn json(&self) -> Value {
        let mut message = Map::new();
        message.insert("message_id".into(), json!(self.message_id));
        if let Some(thread) = self.thread {
            message.insert("message_thread_id".into(), json!(thread));
        }
        message.insert("from".into(), self.from.json());
        message.insert("chat".into(), self.chat.json());
        message.insert("date".into(), json!(self.date));
        if let Some(reply) = &self.reply_to {
            message.insert("reply_to_message".into(), reply.clone());
        }
        if self.thread.is_some() {
            message.insert("is_topic_message".into(), json!(true));
        }
        message.insert("text".into(), json!(self.text));
        if !self.entities.is_empty() {
            message.insert("entities".into(), Value::Array(self.entities.clone()));
        }
        Value::Object(message)
    }
}

/// The service message that opens a forum topic; every message in the topic
/// replies to it, which is how Telegram clients thread them.
pub fn topic_created(chat: &ChatInfo, thread: i32, creator: &UserInfo, date: i64, name: &str) -> Value {
    json!({
        "message_id": thread,
        "message_thread_id": thread,
        "from": creator.json(),
        "chat": chat.json(),
        "date": date,
        "forum_topic_created": { "name": name, "icon_color": 7322096 },
        "is_topic_message": true,
    })
}

/// A service message: `user` joined `chat`.
pub fn new_chat_member(message_id: i32, chat: &ChatInfo, user: &UserInfo, date: i64) -> Value {
    json!({
        "message_id": message_id,
        "from": user.json(),
        "chat": chat.json(),
        "date": date,
        "new_chat_participant": user.json(),
        "new_chat_member": user.json(),
        "new_chat_members": [user.json()],
    })
}

/// An entity of `kind` covering `text` at `offset` (UTF-16 units).
pub fn entity(kind: &str, offset: usize, text: &str) -> Value {
    json!({ "offset": offset, "length": utf16_len(text), "type": kind })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chats_serialise_like_the_bot_api() {
        let user = UserInfo {
            id: 5,
            first_name: "Ann".into(),
            username: Some("ann".into()),
            is_bot: false,
        };
        for (chat, expected) in [
            (
                ChatInfo {
                    id: 5,
                    kind: ChatKind::Private(user.clone()),
                },
                json!({"id": 5, "first_name": "Ann", "username": "ann", "type": "private"}),
            ),
            (
                ChatInfo {
                    id: -7,
                    kind: ChatKind::Group { title: "G".into() },
                },
                json!({"id": -7, "title": "G", "type": "group"}),
            ),
            (
                ChatInfo {
                    id: -1007,
                    kind: ChatKind::Supergroup {
                        title: "S".into(),
                        forum: true,
                    },
                },
                json!({"id": -1007, "title": "S", "type": "supergroup", "is_forum": true}),
            ),
        ] {
            assert_eq!(chat.json(), expected);
        }
    }

    #[test]
    fn lengths_count_utf16_units() {
        assert_eq!(utf16_len("abc"), 3);
        assert_eq!(utf16_len("é"), 1);
        assert_eq!(utf16_len("😀"), 2);
    }
}
