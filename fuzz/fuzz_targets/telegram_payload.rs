//! A Telegram webhook body, as Herald's webhook route reads it: bytes
//! deserialised as Herald's `telegram::model::Update`, then `telegram::payload::classify`
//! under two sets of rules (the defaults, and edits handled with chats and a
//! forum topic listed in `respond_in`).
//!
//! Asserts that neither step panics, and that an accepted message follows the
//! Telegram id scheme (`telegram:<chat>[/<topic>]`, `<chat>:<message id>`),
//! is never the bot's own, and survives the queue (`assert_normalized`).

#![no_main]

use herald_channels::telegram::config::ChatSelector;
use herald_channels::telegram::payload::{BotIdentity, CHANNEL, Classified, PayloadRules, classify};
use herald_fuzz::assert_normalized;
use libfuzzer_sys::fuzz_target;
use herald_channels::telegram::model::Update;

const BOT_ID: u64 = 7_100_200_300;

fuzz_target!(|data: &[u8]| {
    let Ok(update) = serde_json::from_slice::<Update>(data) else {
        return;
    };
    let bot = BotIdentity {
        id: BOT_ID,
        username: "herald_test_bot".into(),
    };
    let listing = PayloadRules {
        respond_in: vec![
            ChatSelector {
                chat: "-4001".into(),
                thread: None,
            },
            ChatSelector {
                chat: "-1001500000001".into(),
                thread: Some("7".into()),
            },
        ],
        handle_edits: true,
    };
    for rules in [PayloadRules::default(), listing] {
        let Classified::Message(message) = classify(&update, &bot, &rules) else {
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
        if let Some(reply_to) = &message.reply_to {
            assert!(reply_to.starts_with(&format!("{chat}:")));
        }
        assert_ne!(message.sender.id.as_str(), format!("{CHANNEL}:{BOT_ID}"));
    }
});
