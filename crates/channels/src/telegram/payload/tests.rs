//! Updates as the Bot API sends them (shapes from core.telegram.org/bots/api
//! and captured from real bots), and what Herald makes of each.

use serde_json::{Value, json};

use super::*;
use crate::telegram::config::ChatSelector;

const BOT: u64 = 7_100_200_300;

fn bot() -> BotIdentity {
    BotIdentity {
        id: BOT,
        username: "herald_test_bot".into(),
    }
}

fn ann() -> Value {
    json!({"id": 1001, "is_bot": false, "first_name": "Ann", "last_name": "Lee", "username": "ann", "language_code": "en"})
}

fn herald() -> Value {
    json!({"id": BOT, "is_bot": true, "first_name": "Herald", "username": "herald_test_bot"})
}

fn private_chat() -> Value {
    json!({"id": 1001, "first_name": "Ann", "last_name": "Lee", "username": "ann", "type": "private"})
}

fn group() -> Value {
    json!({"id": -4001, "title": "Friends", "type": "group"})
}

fn forum() -> Value {
    json!({"id": -1001500000001_i64, "title": "Herald Lab", "type": "supergroup", "is_forum": true})
}

/// Parsed from text, as the Bot API's answers are (an update's message is
/// read from its raw JSON, which a `serde_json::Value` does not keep).
fn parse_update(update: Value) -> Update {
    serde_json::from_str(&update.to_string()).expect("a Bot API update")
}

fn update(kind: &str, message: Value) -> Update {
    parse_update(json!({"update_id": 700000001, kind: message}))
}

fn message(chat: Value, from: Value, text: &str) -> Value {
    json!({"message_id": 42, "from": from, "chat": chat, "date": 1_735_689_600, "text": text})
}

fn rules() -> PayloadRules {
    PayloadRules::default()
}

fn accepted(update: &Update, rules: &PayloadRules) -> InboundMessage {
    match classify(update, &bot(), rules) {
        Classified::Message(message) => *message,
        Classified::Ignored(reason) => panic!("ignored: {reason}"),
    }
}

#[test]
fn a_private_message_is_a_direct_conversation() {
    let inbound = accepted(&update("message", message(private_chat(), ann(), "hello")), &rules());
    assert_eq!(inbound.conversation.id.as_str(), "telegram:1001");
    assert_eq!(inbound.conversation.kind, ConversationKind::Direct);
    assert_eq!(inbound.conversation.chat, "1001");
    assert_eq!(inbound.conversation.thread, None);
    assert_eq!(inbound.sender.id.as_str(), "telegram:1001");
    assert_eq!(inbound.sender.display_name, "Ann Lee");
    assert_eq!(inbound.text, "hello");
    assert_eq!(inbound.platform_message_id, "1001:42");
    assert_eq!(inbound.dedup_key(), "telegram:1001:42");
    assert_eq!(inbound.received_at.timestamp(), 1_735_689_600);
    assert!(inbound.mentions_bot, "a DM is always addressed to the bot");
}

#[test]
fn group_messages_are_addressed_by_mention_reply_command_or_configuration() {
    let mention = json!([{"offset": 0, "length": 16, "type": "mention"}]);
    let other_mention = json!([{"offset": 0, "length": 6, "type": "mention"}]);
    let text_mention = json!([{"offset": 0, "length": 6, "type": "text_mention", "user": herald()}]);
    let command = json!([{"offset": 0, "length": 21, "type": "bot_command"}]);
    let mut reply_to_bot = message(group(), ann(), "and then?");
    reply_to_bot["reply_to_message"] =
        json!({"message_id": 40, "from": herald(), "chat": group(), "date": 1_735_689_500, "text": "Earlier answer"});
    let mut reply_to_ann = message(group(), ann(), "and then?");
    reply_to_ann["reply_to_message"] =
        json!({"message_id": 40, "from": ann(), "chat": group(), "date": 1_735_689_500, "text": "mine"});
    let with = |text: &str, entities: &Value| {
        let mut m = message(group(), ann(), text);
        m["entities"] = entities.clone();
        m
    };
    let listed = PayloadRules {
        respond_in: vec![ChatSelector {
            chat: "-4001".into(),
            thread: None,
        }],
        handle_edits: false,
    };
    for (message, rules, addressed, text) in [
        (
            message(group(), ann(), "just chatting"),
            rules(),
            false,
            "just chatting",
        ),
        (
            with("@herald_test_bot what time is it", &mention),
            rules(),
            true,
            "what time is it",
        ),
        (with("@HERALD_TEST_BOT, hi", &mention), rules(), true, "hi"),
        (with("@other hi", &other_mention), rules(), false, "@other hi"),
        (with("Herald help me", &text_mention), rules(), true, "Herald help me"),
        (with("/help@herald_test_bot", &command), rules(), true, "/help"),
        (reply_to_bot, rules(), true, "and then?"),
        (reply_to_ann, rules(), false, "and then?"),
        (message(group(), ann(), "anything"), listed, true, "anything"),
    ] {
        let inbound = accepted(&update("message", message.clone()), &rules);
        assert_eq!(inbound.conversation.kind, ConversationKind::Group);
        assert_eq!(inbound.mentions_bot, addressed, "{message}");
        assert_eq!(inbound.text, text);
    }
}

#[test]
fn a_forum_topic_keeps_its_thread_and_its_root_is_not_a_reply() {
    let mut in_topic = message(forum(), ann(), "@herald_test_bot in the topic");
    in_topic["message_thread_id"] = json!(6);
    in_topic["is_topic_message"] = json!(true);
    in_topic["entities"] = json!([{"offset": 0, "length": 16, "type": "mention"}]);
    // Telegram sets the topic's creation message as reply_to_message; here
    // the bot created the topic, which must not count as a reply to it.
    in_topic["reply_to_message"] = json!({
        "message_id": 6, "message_thread_id": 6, "from": herald(), "chat": forum(), "date": 1_735_689_000,
        "forum_topic_created": {"name": "Bots", "icon_color": 7322096}, "is_topic_message": true
    });
    let inbound = accepted(&update("message", in_topic.clone()), &rules());
    assert_eq!(inbound.conversation.id.as_str(), "telegram:-1001500000001/6");
    assert_eq!(inbound.conversation.thread.as_deref(), Some("6"));
    assert_eq!(inbound.reply_to, None);
    assert!(inbound.mentions_bot);

    in_topic["text"] = json!("no mention here");
    in_topic.as_object_mut().unwrap().remove("entities");
    let unaddressed = accepted(&update("message", in_topic), &rules());
    assert!(
        !unaddressed.mentions_bot,
        "the topic root written by the bot is not a reply to the bot"
    );

    // A supergroup reply thread outside a forum is not a topic.
    let mut reply_thread = message(json!({"id": -1009, "title": "S", "type": "supergroup"}), ann(), "hm");
    reply_thread["message_thread_id"] = json!(30);
    let inbound = accepted(&update("message", reply_thread), &rules());
    assert_eq!(inbound.conversation.id.as_str(), "telegram:-1009");
    assert_eq!(inbound.conversation.thread, None);
}

#[test]
fn what_is_not_a_persons_message_is_ignored() {
    let other_bot = json!({"id": 600, "is_bot": true, "first_name": "Other", "username": "other_bot"});
    let telegram = json!({"id": 777000, "is_bot": false, "first_name": "Telegram"});
    let join = json!({
        "message_id": 43, "from": ann(), "chat": group(), "date": 1_735_689_600,
        "new_chat_participant": ann(), "new_chat_member": ann(), "new_chat_members": [ann()]
    });
    let channel = json!({"id": -1007, "title": "News", "type": "channel"});
    let sticker = json!({
        "message_id": 44, "from": ann(), "chat": private_chat(), "date": 1_735_689_600,
        "sticker": {"file_id": "CAAC", "file_unique_id": "AgAD", "type": "regular", "width": 512, "height": 512,
                    "is_animated": false, "is_video": false, "file_size": 100}
    });
    let mut edited = message(private_chat(), ann(), "fixed typo");
    edited["edit_date"] = json!(1_735_689_700);
    for (update, reason) in [
        (
            update("message", message(group(), herald(), "@herald_test_bot me")),
            "the bot's own message",
        ),
        (
            update("message", message(group(), other_bot, "@herald_test_bot hi")),
            "another bot's message",
        ),
        (
            update("message", message(group(), telegram, "forwarded")),
            "a message from Telegram's service account",
        ),
        (update("message", join), "a service message"),
        (update("message", sticker), "no text"),
        (update("edited_message", edited), "an edit"),
        (
            update("channel_post", message(channel, ann(), "post")),
            "a channel post",
        ),
        (
            parse_update(json!({"update_id": 9, "my_chat_member": {
                "chat": group(), "from": ann(), "date": 1_735_689_600,
                "old_chat_member": {"user": herald(), "status": "left"},
                "new_chat_member": {"user": herald(), "status": "member"}}})),
            "not a message",
        ),
    ] {
        assert_eq!(classify(&update, &bot(), &rules()), Classified::Ignored(reason));
    }
}

#[test]
fn edits_become_new_messages_when_configured() {
    let mut edited = message(private_chat(), ann(), "fixed typo");
    edited["edit_date"] = json!(1_735_689_700);
    let rules = PayloadRules {
        handle_edits: true,
        ..PayloadRules::default()
    };
    let inbound = accepted(&update("edited_message", edited), &rules);
    assert_eq!(inbound.platform_message_id, "1001:42:edit:1735689700");
    assert_eq!(inbound.text, "fixed typo");
    assert_eq!(inbound.received_at.timestamp(), 1_735_689_700);
}

#[test]
fn anonymous_admins_speak_as_their_group_and_captions_count_as_text() {
    let anonymous = json!({"id": 1087968824, "is_bot": true, "first_name": "Group", "username": "GroupAnonymousBot"});
    let mut by_admin = message(group(), anonymous, "@herald_test_bot status");
    by_admin["sender_chat"] = group();
    by_admin["entities"] = json!([{"offset": 0, "length": 16, "type": "mention"}]);
    let inbound = accepted(&update("message", by_admin), &rules());
    assert_eq!(inbound.sender.id.as_str(), "telegram:-4001");
    assert_eq!(inbound.sender.display_name, "Friends");

    let document = json!({
        "message_id": 45, "from": ann(), "chat": private_chat(), "date": 1_735_689_600,
        "document": {"file_name": "report.pdf", "mime_type": "application/pdf", "file_id": "BQAC",
                     "file_unique_id": "AgAD", "file_size": 12345},
        "caption": "summarise this"
    });
    let inbound = accepted(&update("message", document), &rules());
    assert_eq!(inbound.text, "summarise this");
    assert_eq!(
        inbound.attachments,
        [Attachment {
            name: "report.pdf".into(),
            content_type: "application/pdf".into(),
            size: 12345,
            source: Some("BQAC".into()),
            kind: Some(herald_core::AttachmentKind::Document),
            ..Attachment::default()
        }]
    );
}

#[test]
fn senders_are_judged_by_id_whatever_their_names_say() {
    // The ids of Telegram's anonymous-admin and service accounts, with names
    // those accounts never have (teloxide's `User::is_anonymous` and
    // `User::is_telegram` asserted the names in debug builds).
    let anonymous = json!({"id": 1087968824, "is_bot": false, "first_name": "Group", "username": "GrounpAonymousBot"});
    let mut by_admin = message(group(), anonymous, "@herald_test_bot status");
    by_admin["sender_chat"] = group();
    let inbound = accepted(&update("message", by_admin), &rules());
    assert_eq!(inbound.sender.id.as_str(), "telegram:-4001");

    let telegram = json!({"id": 777000, "is_bot": true, "first_name": "Not Telegram", "username": "x"});
    assert_eq!(
        classify(&update("message", message(group(), telegram, "hi")), &bot(), &rules()),
        Classified::Ignored("a message from Telegram's service account")
    );
}

#[test]
fn entities_are_read_in_utf16_and_bad_ones_mark_nothing() {
    let with_entities = |text: &str, entities: Value| {
        let mut message = message(group(), ann(), text);
        message["entities"] = entities;
        classify(&update("message", message), &bot(), &rules())
    };
    // After an emoji (two UTF-16 units) the mention starts at offset 3.
    let Classified::Message(inbound) = with_entities(
        "👋 @herald_test_bot hi",
        json!([{"offset": 3, "length": 16, "type": "mention"}]),
    ) else {
        panic!("ignored")
    };
    assert!(inbound.mentions_bot);
    // Past the end of the text, inside the emoji's surrogate pair, and an
    // offset that overflows: none of them is a mention, and none panics.
    for entities in [
        json!([{"offset": 0, "length": 51, "type": "bot_command"}]),
        json!([{"offset": 1, "length": 17, "type": "mention"}]),
        json!([{"offset": 0, "length": 1, "type": "mention"}]),
        json!([{"offset": 3, "length": usize::MAX, "type": "mention"}]),
        json!([{"offset": 40, "length": 0, "type": "mention"}]),
    ] {
        let Classified::Message(inbound) = with_entities("👋 @herald_test_bot hi", entities.clone()) else {
            panic!("ignored: {entities}")
        };
        assert!(!inbound.mentions_bot, "{entities}");
    }
}

#[test]
fn the_largest_photo_is_found_whatever_its_size() {
    let photo = json!({
        "message_id": 46, "from": ann(), "chat": private_chat(), "date": 1_735_689_600, "caption": "big",
        "photo": [
            {"file_id": "a", "file_unique_id": "a1", "width": 90, "height": 51, "file_size": 1200},
            {"file_id": "b", "file_unique_id": "b1", "width": 70000, "height": 70000, "file_size": 98000}
        ]
    });
    let inbound = accepted(&update("message", photo), &rules());
    assert_eq!(inbound.attachments.len(), 1);
    assert_eq!(inbound.attachments[0].size, 98000);
}

#[test]
fn the_bot_address_is_dropped_from_what_herald_reads() {
    for (text, expected) in [
        ("@herald_test_bot hello", "hello"),
        ("@herald_test_bot: hello", "hello"),
        ("@herald_test_bot", ""),
        ("@herald_test_botty hello", "@herald_test_botty hello"),
        ("hello @herald_test_bot", "hello @herald_test_bot"),
        ("/start@herald_test_bot", "/start"),
        ("/pair@Herald_Test_Bot approve ABC", "/pair approve ABC"),
        ("/help@other_bot", "/help@other_bot"),
        ("/help", "/help"),
    ] {
        assert_eq!(without_bot_address(text, "herald_test_bot"), expected, "{text}");
    }
}

#[test]
fn a_file_without_a_stated_size_has_an_unknown_size_not_four_gigabytes() {
    // `file_size` is optional in the Bot API's PhotoSize and Document.
    let document = json!({
        "message_id": 47, "from": ann(), "chat": private_chat(), "date": 1_735_689_600,
        "document": {"file_id": "d", "file_unique_id": "d1", "file_name": "notes.txt", "mime_type": "text/plain"}
    });
    let inbound = accepted(&update("message", document), &rules());
    assert_eq!(inbound.attachments[0].size, 0);
    let photo = json!({
        "message_id": 48, "from": ann(), "chat": private_chat(), "date": 1_735_689_600,
        "photo": [{"file_id": "p", "file_unique_id": "p1", "width": 800, "height": 600}]
    });
    assert_eq!(accepted(&update("message", photo), &rules()).attachments[0].size, 0);
}

fn album_part(update_id: u64, message_id: i64, group: &str, caption: Option<&str>) -> Update {
    let mut message = json!({
        "message_id": message_id, "from": ann(), "chat": private_chat(), "date": 1_735_689_600,
        "media_group_id": group,
        "photo": [{"file_id": format!("f{message_id}"), "file_unique_id": format!("u{message_id}"), "width": 800, "height": 600, "file_size": 5000}]
    });
    if let Some(caption) = caption {
        message["caption"] = json!(caption);
    }
    parse_update(json!({"update_id": update_id, "message": message}))
}

fn grouped(updates: &[Update]) -> Vec<InboundMessage> {
    let messages = updates
        .iter()
        .map(|update| (album_of(update).map(str::to_owned), accepted(update, &rules())))
        .collect();
    group_albums(messages)
}

#[test]
fn the_parts_of_an_album_are_one_message_named_by_its_first_part() {
    let text = update("message", message(private_chat(), ann(), "before"));
    let updates = [
        text,
        album_part(2, 51, "A1", None),
        album_part(3, 50, "A1", Some("our trip")),
        album_part(4, 52, "A1", None),
        album_part(5, 60, "B2", None),
    ];
    let messages = grouped(&updates);
    let shapes: Vec<(&str, &str, usize)> = messages
        .iter()
        .map(|m| (m.platform_message_id.as_str(), m.text.as_str(), m.attachments.len()))
        .collect();
    assert_eq!(
        shapes,
        [("1001:42", "before", 0), ("1001:50", "our trip", 3), ("1001:60", "", 1)]
    );
    let sources: Vec<&str> = messages[1]
        .attachments
        .iter()
        .map(|a| a.source.as_deref().unwrap())
        .collect();
    assert_eq!(sources, ["f51", "f50", "f52"], "the files in the order they came");
}

#[test]
fn an_album_at_the_end_of_a_poll_may_still_be_arriving() {
    let text = update("message", message(private_chat(), ann(), "before"));
    let done = [text.clone(), album_part(2, 50, "A1", None), text.clone()];
    assert_eq!(album_tail(&done), 3);
    let arriving = [text, album_part(2, 50, "A1", None), album_part(3, 51, "A1", None)];
    assert_eq!(album_tail(&arriving), 1);
    assert_eq!(album_tail(&[]), 0);
}
