//! What every channel target asserts about the message an adapter hands to
//! the gateway, whatever the platform sent.

use herald_core::{ConversationKind, InboundMessage, TaskPayload};

/// The normalized message obeys the id scheme the queue, access control and
/// delivery rely on, and survives the queue: it is stored as JSON and read
/// back by a worker, so a message that does not read back would be a task no
/// worker can serve. Attachment bytes a channel already holds are not part
/// of it: they are stored before the message is queued.
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
    // A mail's MIME part carries its bytes inline; the gateway stores them
    // content-addressed and the queue keeps only the reference, never the
    // bytes (`Attachment::inline` is not serialized), so that is what must
    // read back.
    let mut queued = message.clone();
    for attachment in &mut queued.attachments {
        attachment.inline = None;
    }
    let payload = TaskPayload::Message(queued);
    let stored = serde_json::to_string(&payload).expect("a task payload serializes");
    let read: TaskPayload = serde_json::from_str(&stored).unwrap_or_else(|err| panic!("{err}: {stored}"));
    assert_eq!(read, payload, "the queue reads back what it stored");
}
