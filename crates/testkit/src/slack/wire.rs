//! The JSON shapes the fake Slack sends, as Slack's API documentation shows
//! them: the `event_callback` wrapper, `message` and `app_mention` events,
//! Socket Mode frames, and the message objects `chat.postMessage` returns.

use serde_json::{Value, json};

use super::{APP_ID, BOT_ID, BOT_NAME, BOT_USER_ID, TEAM_ID};

/// Who wrote a message event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Author {
    /// A person, by user id.
    User(String),
    /// Herald's own bot user (a message posted with the bot token).
    OwnBot,
    /// Another integration posting as a legacy bot (`subtype: bot_message`).
    OtherBot { bot_id: String, username: String },
}

/// What a message event describes.
#[derive(Clone, Debug)]
pub struct MessageFields<'a> {
    pub channel: &'a str,
    /// `im`, `channel`, `group` or `mpim`.
    pub channel_type: &'a str,
    pub ts: &'a str,
    pub thread_ts: Option<&'a str>,
    /// The author of the thread's parent, sent with thread replies.
    pub parent_user_id: Option<&'a str>,
    pub text: &'a str,
    pub author: Author,
}

/// A `rich_text` block holding `text` the way Slack's clients send it:
/// `<@U…>` mentions become `user` elements, the rest `text` elements.
pub fn rich_text_blocks(text: &str, block_id: &str) -> Value {
    let mut elements = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("<@") {
        let Some(len) = rest[start..].find('>') else { break };
        if start > 0 {
            elements.push(json!({"type": "text", "text": &rest[..start]}));
        }
        elements.push(json!({"type": "user", "user_id": &rest[start + 2..start + len]}));
        rest = &rest[start + len + 1..];
    }
    if !rest.is_empty() {
        elements.push(json!({"type": "text", "text": rest}));
    }
    json!([{
        "type": "rich_text",
        "block_id": block_id,
        "elements": [{"type": "rich_text_section", "elements": elements}]
    }])
}

fn bot_profile() -> Value {
    json!({
        "id": BOT_ID,
        "deleted": false,
        "name": BOT_NAME,
        "updated": 1_700_000_000,
        "app_id": APP_ID,
        "icons": {
            "image_36": "https://a.slack-edge.com/80588/img/plugins/app/bot_36.png",
            "image_48": "https://a.slack-edge.com/80588/img/plugins/app/bot_48.png",
            "image_72": "https://a.slack-edge.com/80588/img/plugins/app/service_72.png"
        },
        "team_id": TEAM_ID
    })
}

/// A `message` event (the inner `event` object).
pub fn message_event(fields: &MessageFields<'_>, client_msg_id: &str) -> Value {
    let mut event = json!({
        "type": "message",
        "text": fields.text,
        "ts": fields.ts,
        "team": TEAM_ID,
        "channel": fields.channel,
        "event_ts": fields.ts,
        "channel_type": fields.channel_type,
    });
    let object = event.as_object_mut().expect("an object");
    match &fields.author {
        Author::User(user) => {
            object.insert("user".into(), json!(user));
            object.insert("client_msg_id".into(), json!(client_msg_id));
            object.insert("blocks".into(), rich_text_blocks(fields.text, &client_msg_id[..5]));
        }
        Author::OwnBot => {
            object.insert("user".into(), json!(BOT_USER_ID));
            object.insert("bot_id".into(), json!(BOT_ID));
            object.insert("app_id".into(), json!(APP_ID));
            object.insert("bot_profile".into(), bot_profile());
            object.insert("blocks".into(), rich_text_blocks(fields.text, "hrld"));
        }
        Author::OtherBot { bot_id, username } => {
            object.insert("subtype".into(), json!("bot_message"));
            object.insert("bot_id".into(), json!(bot_id));
            object.insert("username".into(), json!(username));
        }
    }
    if let Some(thread_ts) = fields.thread_ts {
        object.insert("thread_ts".into(), json!(thread_ts));
        if let Some(parent) = fields.parent_user_id {
            object.insert("parent_user_id".into(), json!(parent));
        }
    }
    event
}

/// An `app_mention` event: what Slack sends, beside the `message` event, when
/// a person mentions the bot in a channel.
pub fn app_mention_event(fields: &MessageFields<'_>, user: &str, client_msg_id: &str) -> Value {
    let mut event = json!({
        "type": "app_mention",
        "user": user,
        "text": fields.text,
        "ts": fields.ts,
        "client_msg_id": client_msg_id,
        "team": TEAM_ID,
        "blocks": rich_text_blocks(fields.text, &client_msg_id[..5]),
        "channel": fields.channel,
        "event_ts": fields.ts,
    });
    if let Some(thread_ts) = fields.thread_ts {
        event["thread_ts"] = json!(thread_ts);
        if let Some(parent) = fields.parent_user_id {
            event["parent_user_id"] = json!(parent);
        }
    }
    event
}

/// The `event_callback` wrapper around an event, as both the Events API and
/// Socket Mode deliver it.
pub fn event_callback(event: Value, event_id: &str, event_time: u64) -> Value {
    json!({
        "token": "XXYYZZ-verification-token",
        "team_id": TEAM_ID,
        "context_team_id": TEAM_ID,
        "context_enterprise_id": null,
        "api_app_id": APP_ID,
        "event": event,
        "type": "event_callback",
        "event_id": event_id,
        "event_time": event_time,
        "authorizations": [{
            "enterprise_id": null,
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "is_bot": true,
            "is_enterprise_install": false
        }],
        "is_ext_shared_channel": false,
        "event_context": format!("4-eyJldCI6Im1lc3NhZ2UiLCJ0aWQiOiJ{event_id}")
    })
}

/// The `url_verification` request the Events API sends when a Request URL is saved.
pub fn url_verification(challenge: &str) -> Value {
    json!({
        "token": "Jhj5dZrVaK7ZwHHjRyZWjbDl",
        "challenge": challenge,
        "type": "url_verification"
    })
}

/// The first frame on a Socket Mode connection.
pub fn hello(num_connections: usize) -> Value {
    json!({
        "type": "hello",
        "num_connections": num_connections,
        "debug_info": {
            "host": "applink-fake-herald",
            "build_number": 118,
            "approximate_connection_time": 18060
        },
        "connection_info": {"app_id": APP_ID}
    })
}

/// A Socket Mode `events_api` envelope.
pub fn events_api_envelope(envelope_id: &str, payload: &Value, retry_attempt: u32, retry_reason: &str) -> Value {
    json!({
        "envelope_id": envelope_id,
        "payload": payload,
        "type": "events_api",
        "accepts_response_payload": false,
        "retry_attempt": retry_attempt,
        "retry_reason": retry_reason
    })
}

/// A slash command's payload, as Socket Mode carries it (the fields of the
/// form Slack would otherwise POST to the command's Request URL).
pub fn slash_command(user: &str, user_name: &str, channel: &str, command: &str, text: &str, trigger: &str) -> Value {
    json!({
        "token": "Jhj5dZrVaK7ZwHHjRyZWjbDl",
        "team_id": TEAM_ID,
        "team_domain": "herald-fake",
        "channel_id": channel,
        "channel_name": "general",
        "user_id": user,
        "user_name": user_name,
        "command": command,
        "text": text,
        "api_app_id": APP_ID,
        "is_enterprise_install": "false",
        "response_url": format!("https://hooks.slack.com/commands/{TEAM_ID}/1/{trigger}"),
        "trigger_id": format!("1.{trigger}")
    })
}

/// A Socket Mode `slash_commands` envelope: no retry fields, and Slack
/// accepts a response payload in the ack.
pub fn slash_commands_envelope(envelope_id: &str, payload: &Value) -> Value {
    json!({
        "payload": payload,
        "envelope_id": envelope_id,
        "type": "slash_commands",
        "accepts_response_payload": true
    })
}

/// The frame Slack sends before it closes a Socket Mode connection.
pub fn disconnect(reason: &str) -> Value {
    json!({
        "type": "disconnect",
        "reason": reason,
        "debug_info": {"host": "applink-fake-herald"}
    })
}

/// The `message` object in a `chat.postMessage` answer.
pub fn posted_message(text: &str, ts: &str, thread_ts: Option<&str>) -> Value {
    let mut message = json!({
        "user": BOT_USER_ID,
        "type": "message",
        "ts": ts,
        "bot_id": BOT_ID,
        "app_id": APP_ID,
        "text": text,
        "team": TEAM_ID,
        "bot_profile": bot_profile(),
        "blocks": rich_text_blocks(text, "hrld"),
    });
    if let Some(thread_ts) = thread_ts {
        message["thread_ts"] = json!(thread_ts);
    }
    message
}

/// The `user` object of `users.info`.
pub fn user_object(id: &str, name: &str) -> Value {
    let handle = name.to_lowercase().replace(' ', ".");
    json!({
        "id": id,
        "team_id": TEAM_ID,
        "name": handle,
        "deleted": false,
        "color": "9f69e7",
        "real_name": name,
        "tz": "Europe/Amsterdam",
        "tz_label": "Central European Time",
        "tz_offset": 3600,
        "profile": {
            "avatar_hash": "ge3b51ca72de",
            "real_name": name,
            "display_name": name,
            "real_name_normalized": name,
            "display_name_normalized": name,
            "team": TEAM_ID
        },
        "is_admin": false,
        "is_owner": false,
        "is_primary_owner": false,
        "is_restricted": false,
        "is_ultra_restricted": false,
        "is_bot": false,
        "is_app_user": false,
        "updated": 1_700_000_000
    })
}

/// The `message` event with `subtype: message_changed` that Slack sends to
/// a channel's subscribers when a message in it is edited: the message as
/// it is now (with `edited`) and as it was.
pub fn message_changed_event(fields: &MessageFields<'_>, previous_text: &str, event_ts: &str) -> Value {
    // The inner messages carry no conversation fields; the event does.
    let inner = |text: &str| {
        let mut message = message_event(&MessageFields { text, ..fields.clone() }, "");
        let map = message.as_object_mut().expect("an object");
        for field in ["channel", "event_ts", "channel_type"] {
            map.remove(field);
        }
        message
    };
    let mut message = inner(fields.text);
    message["edited"] = json!({"user": BOT_USER_ID, "ts": event_ts});
    json!({
        "type": "message",
        "subtype": "message_changed",
        "hidden": true,
        "message": message,
        "channel": fields.channel,
        "previous_message": inner(previous_text),
        "event_ts": event_ts,
        "ts": event_ts,
        "channel_type": fields.channel_type,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_become_user_elements_in_rich_text() {
        let blocks = rich_text_blocks("<@U0HERALD01> hi <@U2> there", "abcde");
        let elements = &blocks[0]["elements"][0]["elements"];
        assert_eq!(
            elements,
            &json!([
                {"type": "user", "user_id": "U0HERALD01"},
                {"type": "text", "text": " hi "},
                {"type": "user", "user_id": "U2"},
                {"type": "text", "text": " there"}
            ])
        );
    }

    #[test]
    fn thread_replies_name_their_thread_and_its_author() {
        let fields = MessageFields {
            channel: "C1",
            channel_type: "channel",
            ts: "2.000002",
            thread_ts: Some("1.000001"),
            parent_user_id: Some("U1"),
            text: "hi",
            author: Author::User("U2".into()),
        };
        let event = message_event(&fields, "5b1a1f6e-0000");
        assert_eq!(event["thread_ts"], "1.000001");
        assert_eq!(event["parent_user_id"], "U1");
        assert_eq!(event["user"], "U2");
        assert!(event.get("bot_id").is_none());
    }
}
