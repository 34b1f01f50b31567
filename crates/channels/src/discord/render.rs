//! Replies to Discord requests. Pure: a reply's Markdown in the subset
//! Discord shows ([`crate::markdown::discord`]) cut to Discord's 2,000
//! characters (a code block cut in two is closed and opened again with its
//! language), which channel a reply is posted to, and the JSON body of
//! `POST /channels/{id}/messages`.

use crate::chunk::Limit;
use crate::markdown::{self, Format};
use crate::outbound::Chunk;
use herald_core::{ChannelError, ConversationRef};

/// A reply's messages, each as Discord's message content.
pub fn chunks(text: &str, format: Format) -> Vec<Chunk> {
    match format {
        Format::Markdown => Chunk::verbatim(&markdown::discord::render(text), Limit::DISCORD),
        Format::Plain => Chunk::verbatim(text, Limit::DISCORD),
    }
}
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
/// ping nobody (`@everyone`, `@here`, roles, and users a model names,
/// which a prompt injection could turn into spam): only the person a reply
/// answers is notified. With a `key` (the same for
/// every try of this chunk) the body carries an enforced nonce: Discord
/// then creates the message once, and a try whose answer was lost gets the
/// message the first try created.
pub fn message_body(text: &str, reply_to: Option<&str>, key: Option<&str>) -> Value {
    let mut body = json!({
        "content": text,
        "allowed_mentions": { "parse": [], "replied_user": true },
    });
    if let Some(message_id) = reply_to {
        body["message_reference"] = json!({ "message_id": message_id, "fail_if_not_exists": false });
    }
    if let Some(key) = key {
        body["nonce"] = json!(nonce(key));
        body["enforce_nonce"] = json!(true);
    }
    body
}

/// The edit-message body: the new content, and again no mention pings
/// (an edit is read for mentions anew).
pub fn edit_body(text: &str) -> Value {
    json!({
        "content": text,
        "allowed_mentions": { "parse": [] },
    })
}

/// The create-message body with `attachments` naming each uploaded file by
/// its index in the form (`files[n]` is attachment `n`).
pub fn with_attachments(body: &Value, files: &[herald_core::OutboundFile]) -> Value {
    let mut body = body.clone();
    body["attachments"] = files
        .iter()
        .enumerate()
        .map(|(index, file)| json!({ "id": index, "filename": file.name }))
        .collect();
    body
}

/// Discord's nonce is at most 25 characters: the key's SHA-256, in hex, cut.
pub fn nonce(key: &str) -> String {
    use sha2::Digest;
    let digest = hex::encode(sha2::Sha256::digest(key.as_bytes()));
    digest[..25].to_owned()
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
    fn a_long_code_block_keeps_its_fence_and_language_in_every_message() {
        let code: String = (0..300).map(|n| format!("print({n})\n")).collect();
        let chunks = chunks(&format!("Run this:\n\n```python\n{code}```\n\nDone."), Format::Markdown);
        assert!(chunks.len() >= 2);
        for chunk in &chunks {
            assert!(chunk.text.chars().count() <= Limit::DISCORD.max);
            assert_eq!(chunk.text.matches("```").count() % 2, 0, "{}", chunk.text);
        }
        assert!(chunks[1].text.starts_with("```python\n"), "{}", chunks[1].text);
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
            message_body("hi", Some("42"), None),
            json!({
                "content": "hi",
                "allowed_mentions": { "parse": [], "replied_user": true },
                "message_reference": { "message_id": "42", "fail_if_not_exists": false },
            })
        );
        assert!(message_body("hi", None, None).get("message_reference").is_none());
        assert!(message_body("hi", None, None).get("nonce").is_none());
    }

    #[test]
    fn a_keyed_chunk_carries_an_enforced_nonce_stable_across_tries() {
        let first = message_body("hi", None, Some("task:7:reply:0"));
        let again = message_body("hi", None, Some("task:7:reply:0"));
        let next = message_body("hi", None, Some("task:7:reply:1"));
        assert_eq!(first["enforce_nonce"], json!(true));
        assert_eq!(first["nonce"], again["nonce"]);
        assert_ne!(first["nonce"], next["nonce"]);
        assert_eq!(first["nonce"].as_str().unwrap().len(), 25, "Discord's limit");
    }
}
