//! A Discord gateway frame, as the gateway delivers it: bytes read by
//! `discord::gateway::read_frame` (the adapter's own frame reader), and the
//! same bytes as the `MESSAGE_CREATE` message object inside such a frame
//! (`discord::model::Message`), then `discord::payload::inbound` in each kind
//! of place (a DM, a guild channel, a thread). The same bytes are also read
//! as the channel object (`GET /channels/{id}`) the adapter uses to tell
//! those places apart.
//!
//! Asserts that nothing panics, and that an accepted message follows the
//! Discord id scheme, is never the bot's own nor another bot's, carries text
//! with its whitespace collapsed or at least an attachment, and survives the
//! queue (`assert_normalized`).

#![no_main]

use std::collections::HashSet;

use herald_channels::discord::gateway::{Event, Frame, read_frame};
use herald_channels::discord::model::Message;
use herald_channels::discord::payload::{CHANNEL, ChannelObject, Place, inbound, is_for_herald};
use herald_fuzz::assert_normalized;
use libfuzzer_sys::fuzz_target;

const BOT_ID: u64 = 1_100_000_000_000_000_001;
/// The channel of the Discord documentation's example message.
const LISTED_CHANNEL: u64 = 290_926_798_999_357_250;

fuzz_target!(|data: &[u8]| {
    if let Ok(channel) = serde_json::from_slice::<ChannelObject>(data)
        && let Place::Thread { thread, .. } = channel.place()
    {
        assert_eq!(thread, channel.id);
        assert!(channel.parent_id.is_some());
    }
    if let Ok(text) = std::str::from_utf8(data)
        && let Frame::Dispatch {
            event: Event::Message(message),
            ..
        } = read_frame(text)
    {
        check(&message);
    }
    if let Ok(message) = serde_json::from_slice::<Message>(data) {
        check(&message);
    }
});

fn check(message: &Message) {
    let channel = message.channel_id;
    let places = [
        Place::Direct { channel },
        Place::Channel { channel },
        Place::Thread {
            parent: LISTED_CHANNEL,
            thread: channel,
        },
    ];
    let respond_in = HashSet::from([LISTED_CHANNEL]);
    for place in places {
        let Some(normalized) = inbound(message, place, BOT_ID, &respond_in) else {
            continue;
        };
        assert!(is_for_herald(message, BOT_ID));
        assert_normalized(&normalized, CHANNEL);
        assert_eq!(normalized.conversation, place.conversation());
        assert_eq!(normalized.platform_message_id, message.id.to_string());
        assert_ne!(normalized.sender.id.as_str(), format!("{CHANNEL}:{BOT_ID}"));
        let collapsed = normalized.text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert_eq!(normalized.text, collapsed);
        assert!(!normalized.text.is_empty() || !normalized.attachments.is_empty());
    }
}
