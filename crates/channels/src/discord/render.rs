//! Replies to Discord requests. Pure: which channel a reply is posted to and
//! the JSON body of `POST /channels/{id}/messages`. Chunking to Discord's
//! 2000 characters happens before, in the shared outbound path.

use herald_core::{ChannelError, ConversationRef};
use serde_json::{Value, json};

/// The channel to post in: the thread when the conversation is one (a
/// Discord thread is a channel of its own), else the chat.
pub fn target_channel(conversation: &ConversationRef) -> Result<u64, ChannelError> {
    let id = conversation.thread.as_deref().unwrap_or(&conversation.chat);
    id.parse()
        .map_err(|_| ChannelError::Fatal(format!("`{id}` is not a Discord channel id")))
}

/// The create-message body. A reply references the triggering message but
/// does not fail when it was deleted meanwhile; mentions in Herald's text
/// never ping `@everyone`, `@here` or roles.
pub fn message_body(text: &str, reply_to: Option<&str>) -> Value {
    let mut body = json!({
        "content": text,
        "allowed_mentions": { "parse": ["users"], "replied_user": true },
    });
    if let Some(message_id) = reply_to {
        body["message_reference"] = json!({ "message_id": message_id, "fail_if_not_exists": false });
    }
    body
}

#[cfg(test)]
mod tests {
    use herald_core::{ChannelName, ConversationId, ConversationKind};

    use super::*;

    fn conversation(chat: &str, thread: Option<&str>) -> ConversationRef {
        ConversationRef {
            id: ConversationId::new("discord:x"),
            channel: ChannelName::new("discord"),
            kind: ConversationKind::Group,
            chat: chat.into(),
            thread: thread.map(str::to_owned),
        }
    }

    #[test]
    fn replies_go_to_the_thread_when_there_is_one() {
        assert_eq!(target_channel(&conversation("10", None)).unwrap(), 10);
        assert_eq!(target_channel(&conversation("10", Some("11"))).unwrap(), 11);
        assert!(matches!(
            target_channel(&conversation("general", None)),
            Err(ChannelError::Fatal(_))
        ));
    }

    #[test]
    fn bodies_reply_to_the_trigger_without_mass_mentions() {
        assert_eq!(
            message_body("hi", Some("42")),
            json!({
                "content": "hi",
                "allowed_mentions": { "parse": ["users"], "replied_user": true },
                "message_reference": { "message_id": "42", "fail_if_not_exists": false },
            })
        );
        assert!(message_body("hi", None).get("message_reference").is_none());
    }
}
