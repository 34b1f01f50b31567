//! Real event payloads (the samples in Slack's Events API documentation,
//! and payloads of the same shape with threads, blocks and bots) through
//! [`inbound`].

use chrono::Utc;
use herald_core::ConversationKind;
use serde_json::{Value, json};

use super::*;

const BOT: &str = "U0LAN0Z89";

fn bot() -> BotIdentity {
    BotIdentity {
        user_id: BOT.into(),
        bot_id: Some("B0LAN0Z89".into()),
    }
}

fn callback(event: Value) -> SlackPushEventCallback {
    let body = json!({
        "token": "ZZZZZZWSxiZZZ2yIvs3peJ",
        "team_id": "T061EG9R6",
        "api_app_id": "A0MDYCDME",
        "event": event,
        "type": "event_callback",
        "event_id": "Ev0MDYHUEL",
        "event_time": 1515449483,
        "authed_users": ["U0LAN0Z89"]
    });
    serde_json::from_value(body).expect("a Slack event callback")
}

/// What a test expects: conversation id, kind, text, mentions_bot, platform id, thread.
type Expected = Option<(
    &'static str,
    ConversationKind,
    &'static str,
    bool,
    &'static str,
    Option<&'static str>,
)>;

fn cases() -> Vec<(&'static str, Value, Expected)> {
    use ConversationKind::{Direct, Group};
    vec![
        (
            "message.im from the documentation",
            json!({
                "type": "message",
                "channel": "D024BE91L",
                "user": "U2147483697",
                "text": "Hello hello can you hear me?",
                "ts": "1355517523.000005",
                "event_ts": "1355517523.000005",
                "channel_type": "im"
            }),
            Some((
                "slack:D024BE91L",
                Direct,
                "Hello hello can you hear me?",
                true,
                "D024BE91L:1355517523.000005",
                None,
            )),
        ),
        (
            "app_mention from the documentation starts a thread under it",
            json!({
                "type": "app_mention",
                "user": "U061F7AUR",
                "text": "<@U0LAN0Z89> is it everything a river should be?",
                "ts": "1515449522.000016",
                "channel": "C0LAN2Q65",
                "event_ts": "1515449522000016"
            }),
            Some((
                "slack:C0LAN2Q65/1515449522.000016",
                Group,
                "is it everything a river should be?",
                true,
                "C0LAN2Q65:1515449522.000016",
                Some("1515449522.000016"),
            )),
        ),
        (
            "message.channels with a mention, in a thread, with rich text blocks",
            json!({
                "client_msg_id": "5b1a1f6e-2b5c-4b0a-9c57-1f7c0d2f8e11",
                "type": "message",
                "text": "<@U0LAN0Z89> and what about &lt;this&gt; &amp; that?",
                "user": "W021FGA1Z",
                "ts": "1515449600.000200",
                "blocks": [{
                    "type": "rich_text",
                    "block_id": "Xb3v",
                    "elements": [{"type": "rich_text_section", "elements": [
                        {"type": "user", "user_id": "U0LAN0Z89"},
                        {"type": "text", "text": " and what about <this> & that?"}
                    ]}]
                }],
                "team": "T061EG9R6",
                "thread_ts": "1515449483.000108",
                "parent_user_id": "U061F7AUR",
                "channel": "C0LAN2Q65",
                "event_ts": "1515449600.000200",
                "channel_type": "channel"
            }),
            Some((
                "slack:C0LAN2Q65/1515449483.000108",
                Group,
                "and what about <this> & that?",
                true,
                "C0LAN2Q65:1515449600.000200",
                Some("1515449483.000108"),
            )),
        ),
        (
            "a channel message without a mention is seen but not addressed",
            json!({
                "type": "message",
                "text": "lunch anyone?",
                "user": "W021FGA1Z",
                "ts": "1515449700.000300",
                "channel": "C0LAN2Q65",
                "event_ts": "1515449700.000300",
                "channel_type": "channel"
            }),
            Some((
                "slack:C0LAN2Q65/1515449700.000300",
                Group,
                "lunch anyone?",
                false,
                "C0LAN2Q65:1515449700.000300",
                Some("1515449700.000300"),
            )),
        ),
        (
            "a channel in respond_in is answered without a mention",
            json!({
                "type": "message",
                "text": "deploy status?",
                "user": "W021FGA1Z",
                "ts": "1515449800.000400",
                "channel": "C0OPS0001",
                "event_ts": "1515449800.000400",
                "channel_type": "group"
            }),
            Some((
                "slack:C0OPS0001/1515449800.000400",
                Group,
                "deploy status?",
                true,
                "C0OPS0001:1515449800.000400",
                Some("1515449800.000400"),
            )),
        ),
        (
            "the bot's own post is ignored",
            json!({
                "bot_id": "B0LAN0Z89",
                "type": "message",
                "text": "Here is the answer",
                "user": "U0LAN0Z89",
                "ts": "1515449900.000500",
                "app_id": "A0MDYCDME",
                "team": "T061EG9R6",
                "bot_profile": {"id": "B0LAN0Z89", "deleted": false, "name": "herald", "updated": 1515449000,
                    "app_id": "A0MDYCDME", "icons": {"image_36": "https://a.slack-edge.com/bot_36.png"},
                    "team_id": "T061EG9R6"},
                "channel": "C0LAN2Q65",
                "event_ts": "1515449900.000500",
                "channel_type": "channel"
            }),
            None,
        ),
        (
            "another integration's bot_message is ignored",
            json!({
                "type": "message",
                "subtype": "bot_message",
                "text": "<@U0LAN0Z89> build 42 passed",
                "ts": "1515450000.000600",
                "username": "ci",
                "bot_id": "B0CI00001",
                "channel": "C0LAN2Q65",
                "event_ts": "1515450000.000600",
                "channel_type": "channel"
            }),
            None,
        ),
        (
            "an edit is ignored",
            json!({
                "type": "message",
                "subtype": "message_changed",
                "hidden": true,
                "message": {"type": "message", "user": "W021FGA1Z", "text": "<@U0LAN0Z89> fixed", "ts": "1515449700.000300",
                    "edited": {"user": "W021FGA1Z", "ts": "1515450100.000000"}},
                "channel": "C0LAN2Q65",
                "previous_message": {"type": "message", "user": "W021FGA1Z", "text": "lunch anyone?", "ts": "1515449700.000300"},
                "event_ts": "1515450100.000700",
                "ts": "1515450100.000700",
                "channel_type": "channel"
            }),
            None,
        ),
        (
            "a join is ignored",
            json!({
                "type": "member_joined_channel",
                "user": "W06GH7XHN",
                "channel": "C0698JE0H",
                "channel_type": "C",
                "team": "T024BE7LD",
                "inviter": "U123456789"
            }),
            None,
        ),
        (
            "a message that was only a mention has nothing to answer",
            json!({
                "type": "app_mention",
                "user": "U061F7AUR",
                "text": "<@U0LAN0Z89>",
                "ts": "1515450200.000800",
                "channel": "C0LAN2Q65",
                "event_ts": "1515450200.000800"
            }),
            None,
        ),
    ]
}

#[test]
fn events_become_normalized_messages_or_nothing() {
    let addressing = Addressing {
        respond_in: vec!["C0OPS0001".into()],
    };
    for (name, event, expected) in cases() {
        let message = inbound(&callback(event), &bot(), &addressing, Utc::now());
        let got = message.as_ref().map(|m| {
            (
                m.conversation.id.as_str(),
                m.conversation.kind,
                m.text.as_str(),
                m.mentions_bot,
                m.platform_message_id.as_str(),
                m.conversation.thread.as_deref(),
            )
        });
        assert_eq!(got, expected, "{name}");
    }
}

#[test]
fn the_sender_and_the_time_come_from_the_event() {
    let event = json!({
        "type": "message",
        "channel": "D024BE91L",
        "user": "U2147483697",
        "text": "hi",
        "ts": "1355517523.000005",
        "channel_type": "im"
    });
    let message = inbound(&callback(event), &bot(), &Addressing::default(), Utc::now()).unwrap();
    assert_eq!(message.sender.id.as_str(), "slack:U2147483697");
    assert_eq!(message.conversation.chat, "D024BE91L");
    assert_eq!(message.received_at.timestamp_micros(), 1_355_517_523_000_005);
    assert_eq!(message.dedup_key(), "slack:D024BE91L:1355517523.000005");
}

#[test]
fn a_ts_too_large_for_a_time_is_received_now() {
    let now = Utc::now();
    for ts in [
        "15154497000030.00",
        "9223372036854775807.999999",
        "9223372036854.775808",
    ] {
        let event = json!({
            "type": "message", "channel": "D024BE91L", "user": "U2147483697", "text": "hi",
            "ts": ts, "channel_type": "im"
        });
        let message = inbound(&callback(event), &bot(), &Addressing::default(), now).unwrap();
        assert_eq!(message.received_at, now, "{ts}");
        assert_eq!(message.platform_message_id, format!("D024BE91L:{ts}"));
    }
}

#[test]
fn a_mention_and_its_message_event_share_one_dedup_key() {
    let mention = json!({
        "type": "app_mention", "user": "U061F7AUR", "text": "<@U0LAN0Z89> hi",
        "ts": "1515449522.000016", "channel": "C0LAN2Q65", "event_ts": "1515449522.000016"
    });
    let message = json!({
        "type": "message", "user": "U061F7AUR", "text": "<@U0LAN0Z89> hi",
        "ts": "1515449522.000016", "channel": "C0LAN2Q65", "event_ts": "1515449522.000016",
        "channel_type": "channel"
    });
    let keys: Vec<_> = [mention, message]
        .into_iter()
        .map(|event| {
            inbound(&callback(event), &bot(), &Addressing::default(), Utc::now())
                .unwrap()
                .dedup_key()
        })
        .collect();
    assert_eq!(keys[0], keys[1]);
}

#[test]
fn legacy_mentions_with_a_name_are_recognised_and_removed() {
    assert!(mentions("<@U0LAN0Z89|herald> hi", BOT));
    assert!(!mentions("<@U0OTHER> hi", BOT));
    assert_eq!(clean_text("<@U0LAN0Z89|herald> hi <@U0OTHER>", BOT), "hi <@U0OTHER>");
}
