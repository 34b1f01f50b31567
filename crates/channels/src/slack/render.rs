//! One reply chunk to a `chat.postMessage` request. Pure.
//!
//! Slack reads `&`, `<` and `>` in message text as the start of an entity,
//! link or mention, so they are escaped; everything else (Markdown-ish
//! `*bold*`, code fences) is left to Slack's `mrkdwn`.

use herald_core::ConversationRef;
use slack_morphism::api::SlackApiChatPostMessageRequest;
use slack_morphism::{SlackChannelId, SlackMessageContent, SlackTs};

/// The request that posts `text` in `conversation`, in its thread if it is one.
pub fn post_message(conversation: &ConversationRef, text: &str) -> SlackApiChatPostMessageRequest {
    SlackApiChatPostMessageRequest::new(
        SlackChannelId::new(conversation.chat.clone()),
        SlackMessageContent::new().with_text(escape(text)),
    )
    .opt_thread_ts(conversation.thread.clone().map(SlackTs::new))
}

/// Slack's three escapes for message text.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use herald_core::{ChannelName, ConversationId, ConversationKind};
    use serde_json::{Value, json};

    use super::*;

    fn conversation(thread: Option<&str>) -> ConversationRef {
        ConversationRef {
            id: ConversationId::new("slack:C0LAN2Q65"),
            channel: ChannelName::new("slack"),
            kind: ConversationKind::Group,
            chat: "C0LAN2Q65".into(),
            thread: thread.map(str::to_owned),
        }
    }

    #[test]
    fn requests_carry_channel_text_and_thread() {
        for (thread, text, expected) in [
            (None, "hello", json!({"channel": "C0LAN2Q65", "text": "hello"})),
            (
                Some("1515449483.000108"),
                "a < b && c > d",
                json!({"channel": "C0LAN2Q65", "text": "a &lt; b &amp;&amp; c &gt; d", "thread_ts": "1515449483.000108"}),
            ),
        ] {
            let request = post_message(&conversation(thread), text);
            assert_eq!(serde_json::to_value(&request).unwrap(), expected, "{text}");
        }
    }

    #[test]
    fn code_and_formatting_pass_through() {
        let text = "*bold* `code`\n```\nfn main() {}\n```";
        let body: Value = serde_json::to_value(post_message(&conversation(None), text)).unwrap();
        assert_eq!(body["text"], text);
    }
}
