//! A raw RFC 5322 mail, as IMAP fetches it: bytes through
//! `email::payload::classify` (MIME parsing by mail-parser, loop guards,
//! quote and signature stripping), then `thread_root` and `to_inbound`.
//!
//! Asserts that nothing panics, and that an accepted mail is never Herald's
//! own, has its sender as a trimmed lowercase address, keeps no quoted (`>`)
//! line in its text, lands in the conversation `email:<from>/<thread root>`,
//! and survives the queue (`assert_normalized`).

#![no_main]

use chrono::DateTime;
use herald_channels::email::payload::{CHANNEL, Classified, Reading, classify, thread_root, to_inbound};
use herald_fuzz::assert_normalized;
use libfuzzer_sys::fuzz_target;

const OWN: &str = "herald@example.com";

fuzz_target!(|data: &[u8]| {
    let Classified::Mail(mail) = classify(
        data,
        Reading {
            own: OWN,
            trusted_authserv_id: Some("mx.example.com"),
        },
        "1.7@imap",
    ) else {
        return;
    };
    assert_ne!(mail.from, OWN);
    assert_eq!(mail.from, mail.from.trim().to_ascii_lowercase());
    for line in mail.text.lines() {
        assert!(!line.trim().starts_with('>'), "{line:?}");
    }
    let root = thread_root(&mail);
    let received_at = DateTime::from_timestamp(1_735_689_600, 0).expect("a valid time");
    let message = to_inbound(&mail, root, received_at);
    assert_normalized(&message, CHANNEL);
    let sender = if mail.authenticated {
        mail.from.clone()
    } else {
        format!("unverified:{}", mail.from)
    };
    assert_eq!(message.conversation.id.as_str(), format!("{CHANNEL}:{sender}/{root}"));
    assert_eq!(message.sender.id.is_verified(), mail.authenticated);
    assert_eq!(message.conversation.thread.as_deref(), Some(root));
    assert_eq!(message.platform_message_id, mail.message_id);
    assert!(message.mentions_bot);
});
