//! What every channel target asserts about the message an adapter hands to
//! the gateway, whatever the platform sent.

use herald_core::{ConversationKind, InboundMessage, TaskPayload};

/// The normalized message obeys the id scheme the queue, access control and
/// delivery rely on, and survives the queue: it is stored as JSON and read
/// back by a worker, so a message that does not read back would be a task no
/// worker can serve.
pub fn assert_normalized(message: &InboundMessage, channel: &str) {
    let conversation = &message.conversation;
    assert_eq!(conversation.channel.as_str(), channel);
    assert_eq!(conversation.id.channel().as_str(), channel, "{}", conversation.id);
    assert!(
        message.sender.id.as_str().starts_with(&format!("{channel}:")),
        "{}",
        message.sender.id
    );
    assert_eq!(
        message.dedup_key(),
        format!("{channel}:{}", message.platform_message_id)
    );
    if conversation.kind == ConversationKind::Direct {
        assert!(message.mentions_bot, "a direct message is always for Herald");
    }
    let payload = TaskPayload::Message(message.clone());
    let stored = serde_json::to_string(&payload).expect("a task payload serializes");
    let read: TaskPayload = serde_json::from_str(&stored).unwrap_or_else(|err| panic!("{err}: {stored}"));
    assert_eq!(read, payload, "the queue reads back what it stored");
}
