//! The part of the Bot API's objects Herald reads, and the bodies of the
//! methods it calls, decoded and written straight from and to JSON
//! (core.telegram.org/bots/api).
//!
//! Herald's own model rather than teloxide's: teloxide compiled a framework
//! (dptree, aquamarine, a second reqwest) for its types alone, read a
//! missing `file_size` as 4 GB, and asserted account names in debug builds.
//! Only the fields [`super::payload`] looks at are named; everything else
//! an update carries is skipped while parsing. Fields the Bot API documents
//! as optional default to empty, so an update Telegram adds fields to still
//! decodes; an update whose message does not decode at all is kept as
//! [`UpdateKind::Undecodable`] with its `update_id`, so one odd update
//! cannot stop a poll's offset from moving past it.

use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;

/// One update, as `getUpdates` and the webhook deliver it.
#[derive(Clone, Debug)]
pub struct Update {
    pub update_id: u64,
    pub kind: UpdateKind,
}

/// What an update carries, as far as Herald cares.
#[derive(Clone, Debug)]
pub enum UpdateKind {
    Message(Box<Message>),
    EditedMessage(Box<Message>),
    /// A post (or an edited post) in a channel Herald is an admin of.
    ChannelPost,
    /// Anything else: callback queries, reactions, member changes, …
    Other,
    /// A message that did not decode, with why.
    Undecodable(String),
}

impl<'de> Deserialize<'de> for Update {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Wire {
            update_id: u64,
            #[serde(default)]
            message: Option<Box<RawValue>>,
            #[serde(default)]
            edited_message: Option<Box<RawValue>>,
            #[serde(default)]
            channel_post: Option<IgnoredAny>,
            #[serde(default)]
            edited_channel_post: Option<IgnoredAny>,
        }
        let wire = Wire::deserialize(deserializer)?;
        let read =
            |raw: &RawValue, wrap: fn(Box<Message>) -> UpdateKind| match serde_json::from_str::<Message>(raw.get()) {
                Ok(message) => wrap(Box::new(message)),
                Err(err) => UpdateKind::Undecodable(err.to_string()),
            };
        let kind = if let Some(raw) = &wire.message {
            read(raw, UpdateKind::Message)
        } else if let Some(raw) = &wire.edited_message {
            read(raw, UpdateKind::EditedMessage)
        } else if wire.channel_post.is_some() || wire.edited_channel_post.is_some() {
            UpdateKind::ChannelPost
        } else {
            UpdateKind::Other
        };
        Ok(Update {
            update_id: wire.update_id,
            kind,
        })
    }
}

/// A message object, with the fields that make it a service message
/// (someone joined, the title changed, a topic was created, …): those are
/// only looked at for being there ([`Message::is_service`]), and are named
/// one by one rather than gathered by `#[serde(flatten)]`, which would
/// buffer every field of every message.
macro_rules! message {
    ($($service:ident),* $(,)?) => {
        #[derive(Clone, Debug, Deserialize)]
        pub struct Message {
            pub message_id: i64,
            #[serde(default)]
            pub message_thread_id: Option<i64>,
            #[serde(default)]
            pub from: Option<User>,
            /// The chat a message was sent on behalf of (an anonymous group admin
            /// writes as the group).
            #[serde(default)]
            pub sender_chat: Option<Chat>,
            /// Unix time.
            pub date: i64,
            pub chat: Chat,
            #[serde(default)]
            pub is_topic_message: bool,
            #[serde(default)]
            pub reply_to_message: Option<Box<Message>>,
            #[serde(default)]
            pub edit_date: Option<i64>,
            #[serde(default)]
            pub media_group_id: Option<String>,
            #[serde(default)]
            pub text: Option<String>,
            #[serde(default)]
            pub entities: Vec<MessageEntity>,
            #[serde(default)]
            pub caption: Option<String>,
            #[serde(default)]
            pub caption_entities: Vec<MessageEntity>,
            #[serde(default)]
            pub photo: Vec<PhotoSize>,
            #[serde(default)]
            pub document: Option<FileObject>,
            #[serde(default)]
            pub voice: Option<FileObject>,
            #[serde(default)]
            pub audio: Option<FileObject>,
            #[serde(default)]
            pub video: Option<FileObject>,
            #[serde(default)]
            pub video_note: Option<FileObject>,
$(
                #[serde(default)]
                $service: Option<IgnoredAny>,
            )*
        }

        impl Message {
            /// Whether this is a service message rather than something a
            /// person wrote.
            pub fn is_service(&self) -> bool {
                false $(|| self.$service.is_some())*
            }
        }
    };
}

message!(
    new_chat_members,
    left_chat_member,
    new_chat_title,
    new_chat_photo,
    delete_chat_photo,
    group_chat_created,
    supergroup_chat_created,
    channel_chat_created,
    message_auto_delete_timer_changed,
    migrate_to_chat_id,
    migrate_from_chat_id,
    pinned_message,
    successful_payment,
    refunded_payment,
    users_shared,
    chat_shared,
    connected_website,
    write_access_allowed,
    proximity_alert_triggered,
    boost_added,
    chat_background_set,
    forum_topic_created,
    forum_topic_edited,
    forum_topic_closed,
    forum_topic_reopened,
    general_forum_topic_hidden,
    general_forum_topic_unhidden,
    giveaway_created,
    giveaway_completed,
    video_chat_scheduled,
    video_chat_started,
    video_chat_ended,
    video_chat_participants_invited,
    web_app_data,
);

/// The user id of Telegram's service account (notifications, channel
/// posts forwarded to a discussion group).
pub const TELEGRAM_SERVICE_ID: u64 = 777_000;

/// The user id anonymous group admins write as (`@GroupAnonymousBot`).
pub const GROUP_ANONYMOUS_ID: u64 = 1_087_968_824;

#[derive(Clone, Debug, Deserialize)]
pub struct User {
    pub id: u64,
    #[serde(default)]
    pub is_bot: bool,
    #[serde(default)]
    pub first_name: String,
    #[serde(default)]
    pub last_name: Option<String>,
    #[serde(default)]
    pub username: Option<String>,
}

impl User {
    /// First and last name, as Telegram shows them.
    pub fn full_name(&self) -> String {
        match &self.last_name {
            Some(last) => format!("{} {last}", self.first_name),
            None => self.first_name.clone(),
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
pub struct Chat {
    pub id: i64,
    /// `private`, `group`, `supergroup` or `channel`.
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub title: Option<String>,
}

impl Chat {
    pub fn is_private(&self) -> bool {
        self.kind == "private"
    }

    pub fn is_group(&self) -> bool {
        self.kind == "group" || self.kind == "supergroup"
    }
}

/// A marked part of a text: its kind, and where it is in UTF-16 code units.
#[derive(Clone, Debug, Deserialize)]
pub struct MessageEntity {
    #[serde(rename = "type")]
    pub kind: String,
    pub offset: usize,
    pub length: usize,
    /// The person a `text_mention` names.
    #[serde(default)]
    pub user: Option<User>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct PhotoSize {
    pub file_id: String,
    #[serde(default)]
    pub width: u32,
    #[serde(default)]
    pub height: u32,
    #[serde(default)]
    pub file_size: Option<u64>,
}

/// A document, voice note, audio file, video or video note: what Herald
/// reads of each is the same.
#[derive(Clone, Debug, Deserialize)]
pub struct FileObject {
    pub file_id: String,
    #[serde(default)]
    pub file_name: Option<String>,
    #[serde(default)]
    pub mime_type: Option<String>,
    #[serde(default)]
    pub file_size: Option<u64>,
}

/// `getFile`'s answer: where the file is served, and its size.
#[derive(Clone, Debug, Deserialize)]
pub struct File {
    #[serde(default)]
    pub file_size: Option<u64>,
    #[serde(default)]
    pub file_path: Option<String>,
}

/// `getWebhookInfo`'s answer: an empty `url` means no webhook is set.
#[derive(Clone, Debug, Deserialize)]
pub struct WebhookInfo {
    #[serde(default)]
    pub url: String,
}

/// A Bot API method: its name, its JSON body (the value itself), and what
/// its `result` is.
pub trait Method: Serialize {
    const NAME: &'static str;
    type Output: serde::de::DeserializeOwned;
}

/// The update kinds Herald asks for.
pub const MESSAGES: &str = "message";
pub const EDITED_MESSAGES: &str = "edited_message";

#[derive(Serialize)]
pub struct GetMe {}

impl Method for GetMe {
    const NAME: &'static str = "getMe";
    type Output = User;
}

#[derive(Serialize)]
pub struct GetWebhookInfo {}

impl Method for GetWebhookInfo {
    const NAME: &'static str = "getWebhookInfo";
    type Output = WebhookInfo;
}

/// Removes the webhook; pending updates are kept.
#[derive(Serialize)]
pub struct DeleteWebhook {}

impl Method for DeleteWebhook {
    const NAME: &'static str = "deleteWebhook";
    type Output = bool;
}

#[derive(Serialize)]
pub struct SetWebhook {
    pub url: String,
    pub secret_token: String,
    pub allowed_updates: Vec<&'static str>,
}

impl Method for SetWebhook {
    const NAME: &'static str = "setWebhook";
    type Output = bool;
}

#[derive(Serialize)]
pub struct GetUpdates {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<i64>,
    pub timeout: u64,
    pub limit: u8,
    pub allowed_updates: Vec<&'static str>,
}

impl Method for GetUpdates {
    const NAME: &'static str = "getUpdates";
    type Output = Vec<Update>;
}

#[derive(Serialize)]
pub struct GetFile {
    pub file_id: String,
}

impl Method for GetFile {
    const NAME: &'static str = "getFile";
    type Output = File;
}

/// Where a reply goes: the message it answers, and sent even if that
/// message was deleted meanwhile.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ReplyParameters {
    pub message_id: i64,
    pub allow_sending_without_reply: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct SendMessage {
    pub chat_id: i64,
    pub text: String,
    /// `HTML` for a rendered reply; absent for plain text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parse_mode: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_thread_id: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_parameters: Option<ReplyParameters>,
}

/// What `sendMessage` and `sendDocument` answer: the message sent.
#[derive(Clone, Debug, Deserialize)]
pub struct Sent {
    pub message_id: i64,
    pub chat: SentChat,
}

#[derive(Clone, Debug, Deserialize)]
pub struct SentChat {
    pub id: i64,
}

impl Method for SendMessage {
    const NAME: &'static str = "sendMessage";
    type Output = Sent;
}

/// `editMessageText` of a message the bot sent.
#[derive(Serialize)]
pub struct EditMessageText {
    pub chat_id: i64,
    pub message_id: i64,
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parse_mode: Option<&'static str>,
}

impl Method for EditMessageText {
    const NAME: &'static str = "editMessageText";
    type Output = Sent;
}

#[derive(Serialize)]
pub struct SendChatAction {
    pub chat_id: i64,
    pub action: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_thread_id: Option<i64>,
}

impl Method for SendChatAction {
    const NAME: &'static str = "sendChatAction";
    type Output = bool;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_update_whose_message_does_not_decode_keeps_its_id() {
        let updates: Vec<Update> = serde_json::from_str(
            r#"[{"update_id": 5, "message": {"message_id": "not a number"}},
                {"update_id": 6, "callback_query": {"id": "x"}},
                {"update_id": 7, "channel_post": {"message_id": 1}},
                {"update_id": 8, "message": {"message_id": 3, "date": 1, "chat": {"id": 1, "type": "private"}, "text": "hi",
                  "some_field_of_tomorrow": {"a": [1, 2]}}}]"#,
        )
        .unwrap();
        assert_eq!(updates.iter().map(|u| u.update_id).collect::<Vec<_>>(), [5, 6, 7, 8]);
        assert!(matches!(updates[0].kind, UpdateKind::Undecodable(_)));
        assert!(matches!(updates[1].kind, UpdateKind::Other));
        assert!(matches!(updates[2].kind, UpdateKind::ChannelPost));
        let UpdateKind::Message(message) = &updates[3].kind else {
            panic!("a message");
        };
        assert_eq!(message.text.as_deref(), Some("hi"));
        assert!(!message.is_service());
    }

    #[test]
    fn service_messages_are_told_apart() {
        let joined: Message = serde_json::from_str(
            r#"{"message_id": 1, "date": 1, "chat": {"id": -1, "type": "group"},
                "new_chat_members": [{"id": 2, "is_bot": false, "first_name": "B"}]}"#,
        )
        .unwrap();
        assert!(joined.is_service());
    }

    #[test]
    fn request_bodies_are_what_the_bot_api_documents() {
        let body = serde_json::to_value(GetUpdates {
            offset: None,
            timeout: 30,
            limit: 100,
            allowed_updates: vec![MESSAGES],
        })
        .unwrap();
        assert_eq!(
            body,
            serde_json::json!({"timeout": 30, "limit": 100, "allowed_updates": ["message"]})
        );
        assert_eq!(GetUpdates::NAME, "getUpdates");
    }
}
