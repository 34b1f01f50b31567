//! Payload tests on message and channel objects shaped as the Discord API
//! documentation's examples ("Supa Hot" is its example message), varied the
//! way `MESSAGE_CREATE` delivers them (guild id, member, mentions, replies).

use serde_json::{Value, json};

use super::*;

const BOT: u64 = 1_100_000_000_000_000_001;
const CHANNEL_ID: u64 = 290_926_798_999_357_250;

/// The documentation's example message.
fn example() -> Value {
    json!({
        "reactions": [{
            "count": 1,
            "count_details": { "burst": 0, "normal": 1 },
            "me": false,
            "me_burst": false,
            "emoji": { "id": null, "name": "🔥" },
            "burst_colors": []
        }],
        "attachments": [],
        "tts": false,
        "embeds": [],
        "timestamp": "2017-07-11T17:27:07.299000+00:00",
        "mention_everyone": false,
        "id": "334385199974967042",
        "pinned": false,
        "edited_timestamp": null,
        "author": {
            "username": "Mason",
            "discriminator": "9999",
            "id": "53908099506183680",
            "avatar": "a_bab14f271d565501444b2ca3be944b25"
        },
        "mention_roles": [],
        "content": "Supa Hot",
        "channel_id": "290926798999357250",
        "mentions": [],
        "type": 0
    })
}

fn bot_user() -> Value {
    json!({ "id": BOT.to_string(), "username": "herald", "discriminator": "0", "avatar": null, "bot": true })
}

/// The example as a guild `MESSAGE_CREATE` carries it.
fn in_guild(mut message: Value) -> Value {
    message["guild_id"] = json!("41771983423143937");
    message["member"] = json!({
        "roles": [], "nick": "Mace", "joined_at": "2016-01-01T00:00:00.000000+00:00",
        "deaf": false, "mute": false, "flags": 0
    });
    message
}

fn mentioning_bot(mut message: Value) -> Value {
    message["content"] = json!(format!("<@{BOT}> Supa   Hot"));
    message["mentions"] = json!([bot_user()]);
    message
}

fn replying_to_bot(mut message: Value) -> Value {
    let mut replied = example();
    replied["id"] = json!("334385199974967000");
    replied["author"] = bot_user();
    replied["content"] = json!("an earlier answer");
    message["type"] = json!(19);
    message["message_reference"] = json!({
        "type": 0, "message_id": "334385199974967000", "channel_id": "290926798999357250",
        "guild_id": "41771983423143937"
    });
    message["referenced_message"] = replied;
    message
}

fn parse(message: Value) -> Message {
    serde_json::from_str(&message.to_string()).expect("the documented message shape decodes")
}

const DIRECT: Place = Place::Direct { channel: CHANNEL_ID };
const IN_CHANNEL: Place = Place::Channel { channel: CHANNEL_ID };
const IN_THREAD: Place = Place::Thread {
    parent: 41_771_983_423_143_937,
    thread: CHANNEL_ID,
};

#[test]
fn a_dm_becomes_a_direct_conversation_with_the_author_as_sender() {
    let message = inbound(&parse(example()), DIRECT, BOT, &HashSet::new()).expect("a DM is for Herald");
    assert_eq!(message.conversation.id.as_str(), "discord:290926798999357250");
    assert_eq!(message.conversation.kind, ConversationKind::Direct);
    assert_eq!(message.conversation.chat, "290926798999357250");
    assert_eq!(message.conversation.thread, None);
    assert_eq!(message.sender.id.as_str(), "discord:53908099506183680");
    assert_eq!(message.sender.display_name, "Mason");
    assert_eq!(message.text, "Supa Hot");
    assert_eq!(message.platform_message_id, "334385199974967042");
    assert_eq!(message.dedup_key(), "discord:334385199974967042");
    assert_eq!(message.received_at.to_rfc3339(), "2017-07-11T17:27:07.299+00:00");
    assert!(message.mentions_bot, "a DM is always addressed to Herald");
    assert!(is_direct(&parse(example())));
    assert!(!is_direct(&parse(in_guild(example()))));
}

#[test]
fn guild_messages_are_addressed_by_mention_reply_or_configuration() {
    let listed = HashSet::from([CHANNEL_ID]);
    let listed_parent = HashSet::from([41_771_983_423_143_937]);
    let none = HashSet::new();
    let cases: [(&str, Value, Place, &HashSet<u64>, bool); 6] = [
        ("plain", in_guild(example()), IN_CHANNEL, &none, false),
        ("mention", mentioning_bot(in_guild(example())), IN_CHANNEL, &none, true),
        (
            "reply to the bot",
            replying_to_bot(in_guild(example())),
            IN_CHANNEL,
            &none,
            true,
        ),
        ("listed channel", in_guild(example()), IN_CHANNEL, &listed, true),
        (
            "thread of a listed channel",
            in_guild(example()),
            IN_THREAD,
            &listed_parent,
            true,
        ),
        ("listed thread", in_guild(example()), IN_THREAD, &listed, true),
    ];
    for (name, raw, place, respond_in, addressed) in cases {
        let message = inbound(&parse(raw), place, BOT, respond_in).expect(name);
        assert_eq!(message.mentions_bot, addressed, "{name}");
        assert_eq!(message.conversation.kind, ConversationKind::Group, "{name}");
    }
}

#[test]
fn the_bots_mention_is_taken_out_of_the_text() {
    let message = inbound(
        &parse(mentioning_bot(in_guild(example()))),
        IN_CHANNEL,
        BOT,
        &HashSet::new(),
    )
    .unwrap();
    assert_eq!(message.text, "Supa Hot");
    assert_eq!(message.sender.display_name, "Mace", "the guild nickname wins");
    for (content, expected) in [
        (format!("<@{BOT}> hi"), "hi"),
        (format!("hi <@!{BOT}>"), "hi"),
        ("hi <@53908099506183680>".to_owned(), "hi <@53908099506183680>"),
    ] {
        assert_eq!(without_bot_mention(&content, BOT), expected);
    }
}

#[test]
fn a_reply_keeps_the_message_it_replies_to() {
    let message = inbound(
        &parse(replying_to_bot(in_guild(example()))),
        IN_CHANNEL,
        BOT,
        &HashSet::new(),
    )
    .unwrap();
    assert_eq!(message.reply_to.as_deref(), Some("334385199974967000"));
}

#[test]
fn a_thread_is_its_own_conversation_under_its_parent() {
    let conversation = IN_THREAD.conversation();
    assert_eq!(conversation.id.as_str(), "discord:41771983423143937/290926798999357250");
    assert_eq!(conversation.chat, "41771983423143937");
    assert_eq!(conversation.thread.as_deref(), Some("290926798999357250"));
}

#[test]
fn messages_not_from_people_are_not_for_herald() {
    let mut own = example();
    own["author"] = bot_user();
    let mut other_bot = example();
    other_bot["author"]["bot"] = json!(true);
    let mut webhook = example();
    webhook["webhook_id"] = json!("223704706495545344");
    let mut join = example();
    join["type"] = json!(7);
    let mut pin = example();
    pin["type"] = json!(6);
    let mut empty = example();
    empty["content"] = json!("");
    let mut only_mention = mentioning_bot(in_guild(example()));
    only_mention["content"] = json!(format!("<@{BOT}>"));
    for (name, raw) in [
        ("own", own),
        ("another bot", other_bot),
        ("webhook", webhook),
        ("member join", join),
        ("pin notice", pin),
        ("no content (message content intent missing)", empty),
        ("a bare mention", only_mention),
    ] {
        assert_eq!(inbound(&parse(raw), DIRECT, BOT, &HashSet::new()), None, "{name}");
    }
}

#[test]
fn attachments_are_recorded_and_carry_a_message_without_text() {
    let mut raw = example();
    raw["content"] = json!("");
    raw["attachments"] = json!([{
        "id": "1100000000000000100", "filename": "notes.txt", "size": 120,
        "url": "https://cdn.discordapp.com/attachments/1/2/notes.txt",
        "proxy_url": "https://media.discordapp.net/attachments/1/2/notes.txt",
        "content_type": "text/plain; charset=utf-8"
    }]);
    let message = inbound(&parse(raw), DIRECT, BOT, &HashSet::new()).expect("an attachment is a message");
    assert_eq!(message.attachments.len(), 1);
    assert_eq!(message.attachments[0].name, "notes.txt");
    assert_eq!(message.attachments[0].size, 120);
}

#[test]
fn channel_objects_say_where_a_message_was_posted() {
    let cases = [
        // The documentation's example guild text channel: its parent is a category.
        (
            json!({ "id": "41771983423143937", "guild_id": "41771983423143937", "name": "general", "type": 0,
                     "position": 6, "permission_overwrites": [], "rate_limit_per_user": 2, "nsfw": true,
                     "topic": "24/7 chat about how to gank Mike #2", "last_message_id": "155117677105512449",
                     "parent_id": "399942396007890945", "default_auto_archive_duration": 60 }),
            Place::Channel {
                channel: 41_771_983_423_143_937,
            },
        ),
        // The example thread.
        (
            json!({ "id": "41771983423143937", "guild_id": "41771983423143937", "parent_id": "41771983423143938",
                     "owner_id": "41771983423143937", "name": "don't buy dota-2", "type": 11,
                     "last_message_id": "155117677105512449", "message_count": 1, "member_count": 5,
                     "rate_limit_per_user": 2, "total_message_sent": 1,
                     "thread_metadata": { "archived": false, "auto_archive_duration": 1440,
                                          "archive_timestamp": "2021-04-12T23:40:39.855793+00:00", "locked": false } }),
            Place::Thread {
                parent: 41_771_983_423_143_938,
                thread: 41_771_983_423_143_937,
            },
        ),
        // The example DM channel.
        (
            json!({ "last_message_id": "3343820033257021450", "type": 1, "id": "319674150115610528",
                     "recipients": [{ "username": "test", "discriminator": "9999", "id": "82198898841029460",
                                      "avatar": "33ecab261d4681afa4d85a04691c4a01" }] }),
            Place::Direct {
                channel: 319_674_150_115_610_528,
            },
        ),
    ];
    for (raw, expected) in cases {
        let channel: ChannelObject = serde_json::from_value(raw).expect("a channel object");
        assert_eq!(channel.place(), expected);
    }
}

#[test]
fn fields_herald_does_not_read_cannot_break_a_message() {
    // serenity 0.12.5 panicked on this avatar hash (32 bytes after `a_`, not
    // ASCII) while decoding the gateway event; Herald's model reads no image
    // hash. Fields Discord may add, nulls where the documentation allows
    // them, and a deleted replied-to message decode too.
    let mut raw = in_guild(example());
    raw["author"]["avatar"] = json!("a_bab14f271d565501444b2ca\u{355}e944b25");
    raw["author"]["avatar_decoration_data"] = json!({ "asset": "x", "sku_id": "1" });
    raw["member"]["nick"] = Value::Null;
    raw["referenced_message"] = Value::Null;
    raw["poll"] = json!({ "question": { "text": "?" } });
    let message = inbound(&parse(raw), IN_CHANNEL, BOT, &HashSet::from([CHANNEL_ID])).expect("still a message");
    assert_eq!(message.text, "Supa Hot");
    assert_eq!(message.sender.display_name, "Mason", "no nickname: the user name");
}
