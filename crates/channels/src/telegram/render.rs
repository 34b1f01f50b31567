//! Reply -> Bot API request bodies. Pure: a reply's Markdown as Telegram's
//! HTML cut into messages ([`chunks`], [`crate::markdown::telegram`]), and
//! each chunk in the right chat and topic, replying to the message that
//! asked.

use super::model::{EditMessageText, ReplyParameters, SendChatAction, SendMessage};
use crate::chunk::Limit;
use crate::markdown::{self, Format};
use crate::outbound::Chunk;
use herald_core::{ChannelError, ConversationRef};

/// A reply's messages: HTML with its plain text to fall back on, or, with
/// `format: plain`, the text as written.
pub fn chunks(text: &str, format: Format) -> Vec<Chunk> {
    match format {
        Format::Plain => Chunk::verbatim(text, Limit::TELEGRAM),
        Format::Markdown => markdown::telegram::chunks(text, Limit::TELEGRAM.max)
            .into_iter()
            .map(|chunk| Chunk {
                text: chunk.html,
                plain: Some(chunk.text),
            })
            .collect(),
    }
}

/// Whether Telegram refused a message for its markup (then it goes again
/// as plain text).
pub fn refused_markup(err: &ChannelError) -> bool {
    matches!(err, ChannelError::Fatal(text) if text.contains("can't parse entities"))
}

fn chat_id(conversation: &ConversationRef) -> Result<i64, ChannelError> {
    conversation
        .chat
        .parse()
        .map_err(|_| ChannelError::Fatal(format!("`{}` is not a Telegram chat id", conversation.chat)))
}

fn thread_id(conversation: &ConversationRef) -> Result<Option<i64>, ChannelError> {
    conversation
        .thread
        .as_deref()
        .map(|thread| {
            thread
                .parse()
                .map_err(|_| ChannelError::Fatal(format!("`{thread}` is not a Telegram topic id")))
        })
        .transpose()
}

/// The message id in Herald's `<chat_id>:<message_id>[:edit:<date>]`, or a bare id.
pub fn message_id(platform_id: &str) -> Option<i64> {
    let mut parts = platform_id.split(':');
    let first = parts.next()?;
    let id = parts.next().unwrap_or(first);
    id.parse().ok()
}

/// `sendMessage` for one chunk: `html` says whether `text` is Telegram's
/// HTML or plain text.
pub fn send_message(
    conversation: &ConversationRef,
    text: &str,
    html: bool,
    reply_to: Option<&str>,
) -> Result<SendMessage, ChannelError> {
    Ok(SendMessage {
        chat_id: chat_id(conversation)?,
        text: text.to_owned(),
        parse_mode: html.then_some("HTML"),
        message_thread_id: thread_id(conversation)?,
        // If the message was deleted meanwhile, the answer still arrives.
        reply_parameters: reply_to.and_then(message_id).map(|message_id| ReplyParameters {
            message_id,
            allow_sending_without_reply: true,
        }),
    })
}

/// `editMessageText` of the bot's message `platform_id` (`<chat>:<id>`).
pub fn edit_message(platform_id: &str, text: &str, html: bool) -> Result<EditMessageText, ChannelError> {
    let invalid = || ChannelError::Fatal(format!("`{platform_id}` is not a Telegram message id"));
    let (chat, id) = platform_id.split_once(':').ok_or_else(invalid)?;
    Ok(EditMessageText {
        chat_id: chat.parse().map_err(|_| invalid())?,
        message_id: message_id(id).ok_or_else(invalid)?,
        text: text.to_owned(),
        parse_mode: html.then_some("HTML"),
    })
}

/// Whether Telegram refused an edit only because the message already says
/// that (a retried edit, or a partial answer that did not change).
pub fn not_modified(err: &ChannelError) -> bool {
    matches!(err, ChannelError::Fatal(text) if text.contains("message is not modified"))
}

/// The form fields of `sendDocument` beside the file: the chat, topic and
/// reply as `sendMessage` has them (objects as JSON text), and the caption.
pub fn document_fields(
    conversation: &ConversationRef,
    caption: Option<&str>,
    reply_to: Option<&str>,
) -> Result<Vec<(String, String)>, ChannelError> {
    let payload = send_message(conversation, caption.unwrap_or_default(), false, reply_to)?;
    let serde_json::Value::Object(fields) = serde_json::to_value(&payload)
        .map_err(|err| ChannelError::Fatal(format!("cannot write sendDocument: {err}")))?
    else {
        return Err(ChannelError::Fatal("cannot write sendDocument".into()));
    };
    Ok(fields
        .into_iter()
        .filter_map(|(name, value)| match (name.as_str(), value) {
            ("text", serde_json::Value::String(text)) => (!text.is_empty()).then(|| ("caption".to_owned(), text)),
            (_, serde_json::Value::Null) => None,
            (_, serde_json::Value::String(text)) => Some((name, text)),
            (_, value) => Some((name, value.to_string())),
        })
        .collect())
}

/// `sendChatAction` "typing" in the conversation's chat and topic.
pub fn typing(conversation: &ConversationRef) -> Result<SendChatAction, ChannelError> {
    Ok(SendChatAction {
        chat_id: chat_id(conversation)?,
        action: "typing",
        message_thread_id: thread_id(conversation)?,
    })
}

#[cfg(test)]
mod tests {
    use herald_core::{ChannelName, ConversationId, ConversationKind};
    use serde_json::json;

    use super::*;

    fn conversation(chat: &str, thread: Option<&str>) -> ConversationRef {
        ConversationRef {
            id: ConversationId::new(format!("telegram:{chat}")),
            channel: ChannelName::new("telegram"),
            kind: ConversationKind::Group,
            chat: chat.into(),
            thread: thread.map(str::to_owned),
        }
    }

    #[test]
    fn a_document_goes_to_the_chat_and_topic_as_form_fields() {
        let fields = document_fields(
            &conversation("-100200", Some("7")),
            Some("the report"),
            Some("-100200:42"),
        )
        .unwrap();
        let fields: std::collections::BTreeMap<_, _> = fields.into_iter().collect();
        assert_eq!(fields["chat_id"], "-100200");
        assert_eq!(fields["message_thread_id"], "7");
        assert_eq!(fields["caption"], "the report");
        let reply: serde_json::Value = serde_json::from_str(&fields["reply_parameters"]).unwrap();
        assert_eq!(reply["message_id"], 42);
        let bare = document_fields(&conversation("5", None), None, None).unwrap();
        assert_eq!(bare, [("chat_id".to_owned(), "5".to_owned())]);
    }

    #[test]
    fn chunks_go_to_the_chat_and_topic_replying_to_the_asker() {
        for (chat, thread, reply_to, expected) in [
            ("1001", None, None, json!({"chat_id": 1001, "text": "hi"})),
            (
                "1001",
                None,
                Some("1001:42"),
                json!({"chat_id": 1001, "text": "hi",
                       "reply_parameters": {"message_id": 42, "allow_sending_without_reply": true}}),
            ),
            (
                "-1001500000001",
                Some("6"),
                Some("-1001500000001:77:edit:1735689700"),
                json!({"chat_id": -1001500000001_i64, "text": "hi", "message_thread_id": 6,
                       "reply_parameters": {"message_id": 77, "allow_sending_without_reply": true}}),
            ),
        ] {
            let payload = send_message(&conversation(chat, thread), "hi", false, reply_to).unwrap();
            assert_eq!(serde_json::to_value(&payload).unwrap(), expected);
        }
    }

    #[test]
    fn typing_goes_to_the_topic() {
        let payload = typing(&conversation("-1001500000001", Some("6"))).unwrap();
        assert_eq!(
            serde_json::to_value(&payload).unwrap(),
            json!({"chat_id": -1001500000001_i64, "action": "typing", "message_thread_id": 6})
        );
    }

    #[test]
    fn conversations_that_are_not_telegrams_are_refused() {
        assert!(matches!(
            send_message(&conversation("general", None), "hi", false, None),
            Err(ChannelError::Fatal(_))
        ));
        assert!(matches!(
            typing(&conversation("1", Some("x"))),
            Err(ChannelError::Fatal(_))
        ));
        assert_eq!(message_id("5"), Some(5));
        assert_eq!(message_id("nope"), None);
    }
}
