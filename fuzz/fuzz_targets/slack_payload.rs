//! A Slack Events API request body, as Herald's events endpoint reads it
//! (Socket Mode hands over the same callback): bytes deserialised as
//! slack-morphism's `SlackPushEvent`, then `slack::payload::inbound` for an
//! event callback, with and without the channel listed in `respond_in`.
//!
//! Asserts that nothing panics, and that an accepted message follows the
//! Slack id scheme (`slack:<channel>[/<thread_ts>]`, `<channel>:<ts>`), is
//! never the bot's own, has trimmed text that is not empty, and survives the
//! queue (`assert_normalized`).

#![no_main]

use chrono::DateTime;
use herald_channels::slack::CHANNEL;
use herald_channels::slack::payload::{Addressing, BotIdentity, inbound};
use herald_fuzz::assert_normalized;
use libfuzzer_sys::fuzz_target;
use slack_morphism::events::SlackPushEvent;

const BOT_USER: &str = "U0LAN0Z89";

fuzz_target!(|data: &[u8]| {
    let Ok(SlackPushEvent::EventCallback(callback)) = serde_json::from_slice::<SlackPushEvent>(data) else {
        return;
    };
    let bot = BotIdentity {
        user_id: BOT_USER.into(),
        bot_id: Some("B0LAN0Z89".into()),
    };
    let now = DateTime::from_timestamp(1_735_689_600, 0).expect("a valid time");
    let listing = Addressing {
        respond_in: vec!["C0LAN2Q65".into()],
    };
    for addressing in [Addressing::default(), listing] {
        let Some(message) = inbound(&callback, &bot, &addressing, now) else {
            continue;
        };
        assert_normalized(&message, CHANNEL);
        let chat = &message.conversation.chat;
        let expected_id = match &message.conversation.thread {
            Some(thread) => format!("{CHANNEL}:{chat}/{thread}"),
            None => format!("{CHANNEL}:{chat}"),
        };
        assert_eq!(message.conversation.id.as_str(), expected_id);
        assert!(message.platform_message_id.starts_with(&format!("{chat}:")));
        assert_ne!(message.sender.id.as_str(), format!("{CHANNEL}:{BOT_USER}"));
        assert!(!message.text.is_empty());
        assert_eq!(message.text, message.text.trim());
    }
});
