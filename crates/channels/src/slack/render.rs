//! A reply to `chat.postMessage` requests. Pure.
//!
//! Slack reads `&`, `<` and `>` in message text as the start of an entity,
//! link or mention, so they are always escaped. With `format: markdown`
//! the reply is written in Slack's `mrkdwn` first
//! ([`crate::markdown::mrkdwn`]), then cut to Slack's limit (a code block
//! cut in two is closed and opened again); with `plain` it is cut as it
//! is, then escaped.

use crate::chunk::Limit;
use crate::markdown::{self, Format};
use crate::outbound::Chunk;
use herald_core::ChannelError;
use herald_core::ConversationRef;
use slack_morphism::api::{SlackApiChatPostMessageRequest, SlackApiChatUpdateRequest};
use slack_morphism::{SlackChannelId, SlackMessageContent, SlackTs};

/// A reply's messages, each as Slack's message text.
pub fn chunks(text: &str, format: Format) -> Vec<Chunk> {
    match format {
        Format::Markdown => Chunk::verbatim(&markdown::mrkdwn::render(text), Limit::SLACK),
        Format::Plain => Chunk::verbatim(text, Limit::SLACK)
            .into_iter()
            .map(|chunk| Chunk {
                text: markdown::mrkdwn::escape(&chunk.text),
                plain: None,
            })
            .collect(),
    }
}

/// The request that posts `text` (Slack's message text, escaped) in
/// `conversation`, in its thread if it is one.
pub fn post_message(conversation: &ConversationRef, text: &str) -> SlackApiChatPostMessageRequest {
    SlackApiChatPostMessageRequest::new(
        SlackChannelId::new(conversation.chat.clone()),
        SlackMessageContent::new().with_text(text.to_owned()),
    )
    .opt_thread_ts(conversation.thread.clone().map(SlackTs::new))
}

/// The `chat.update` that replaces the text of the bot's message
/// `<channel>:<ts>` with `text` (Slack's message text, escaped).
pub fn update_message(message_id: &str, text: &str) -> Result<SlackApiChatUpdateRequest, ChannelError> {
    let (channel, ts) = message_id
        .split_once(':')
        .filter(|(channel, ts)| !channel.is_empty() && !ts.is_empty())
        .ok_or_else(|| ChannelError::Fatal(format!("`{message_id}` is not a Slack message id")))?;
    Ok(SlackApiChatUpdateRequest::new(
        SlackChannelId::new(channel.to_owned()),
        SlackMessageContent::new().with_text(text.to_owned()),
        SlackTs::new(ts.to_owned()),
    ))
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
        for (thread, text, format, expected) in [
            (
                None,
                "hello",
                Format::Markdown,
                json!({"channel": "C0LAN2Q65", "text": "hello"}),
            ),
            (
                Some("1515449483.000108"),
                "a < b && c > d",
                Format::Plain,
                json!({"channel": "C0LAN2Q65", "text": "a &lt; b &amp;&amp; c &gt; d", "thread_ts": "1515449483.000108"}),
            ),
        ] {
            let chunks = chunks(text, format);
            let request = post_message(&conversation(thread), &chunks[0].text);
            assert_eq!(serde_json::to_value(&request).unwrap(), expected, "{text}");
        }
    }

    #[test]
    fn markdown_becomes_mrkdwn_and_plain_stays_as_written() {
        let text = "**bold** `code`\n```rust\nfn main() {}\n```";
        let body: Value = serde_json::to_value(post_message(
            &conversation(None),
            &chunks(text, Format::Markdown)[0].text,
        ))
        .unwrap();
        assert_eq!(body["text"], "*bold* `code`\n\n```\nfn main() {}\n```");
        assert_eq!(chunks(text, Format::Plain)[0].text, text);
    }

    #[test]
    fn a_long_code_block_is_closed_and_opened_again_across_messages() {
        let code: String = (0..600).map(|n| format!("line {n}\n")).collect();
        let chunks = chunks(&format!("```\n{code}```"), Format::Markdown);
        assert!(chunks.len() >= 2);
        for chunk in &chunks {
            assert!(chunk.text.chars().count() <= Limit::SLACK.max);
            assert_eq!(chunk.text.matches("```").count(), 2, "{}", chunk.text);
        }
    }
}
