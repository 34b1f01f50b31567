//! Socket Mode frames as Slack's documentation shows them.

use serde_json::{Value, json};

use super::*;

fn frame(value: Value) -> Frame {
    read_frame(&value.to_string())
}

#[test]
fn hello_says_how_many_connections_are_open() {
    let hello = json!({
        "type": "hello",
        "num_connections": 2,
        "debug_info": {"host": "applink-7fc4fdbb64-4x5xq", "build_number": 10, "approximate_connection_time": 18060},
        "connection_info": {"app_id": "A01K58AR4RF"}
    });
    assert!(matches!(frame(hello), Frame::Hello { connections: 2 }));
}

#[test]
fn an_events_api_envelope_carries_its_event_and_id() {
    let envelope = json!({
        "envelope_id": "dbdd0ef3-1543-4f94-bfb4-133d0e6c1545",
        "type": "events_api",
        "accepts_response_payload": false,
        "retry_attempt": 0,
        "retry_reason": "",
        "payload": {
            "token": "XXYYZZ",
            "team_id": "T123ABC456",
            "api_app_id": "A123ABC456",
            "event": {
                "type": "app_mention",
                "user": "U123ABC456",
                "text": "<@U0LAN0Z89> is it everything a river should be?",
                "ts": "1515449522.000016",
                "channel": "C123ABC456",
                "event_ts": "1515449522000016"
            },
            "type": "event_callback",
            "event_id": "Ev123ABC456",
            "event_time": 1515449522,
            "authed_users": ["U0LAN0Z89"]
        }
    });
    match frame(envelope) {
        Frame::Event { envelope, callback } => {
            assert_eq!(envelope, "dbdd0ef3-1543-4f94-bfb4-133d0e6c1545");
            assert_eq!(callback.event_id.0, "Ev123ABC456");
        }
        other => panic!("expected an event, got {other:?}"),
    }
}

#[test]
fn slash_commands_interactions_and_undecodable_envelopes_are_acknowledged() {
    let command = json!({
        "payload": {
            "token": "bHKJ2n9AW6Ju3MjciOHfbA1b",
            "team_id": "T123ABC456",
            "team_domain": "example",
            "channel_id": "C123ABC456",
            "channel_name": "test",
            "user_id": "U123ABC456",
            "user_name": "example",
            "command": "/example",
            "text": "",
            "api_app_id": "A123ABC456",
            "response_url": "https://hooks.slack.com/commands/T123ABC456/1/xyz",
            "trigger_id": "1.2.abc"
        },
        "envelope_id": "1d3c79ab-0ffb-41f3-a080-d19e85f53649",
        "type": "slash_commands",
        "accepts_response_payload": true
    });
    assert!(matches!(
        frame(command),
        Frame::Acknowledge { envelope, what: "a slash command" } if envelope == "1d3c79ab-0ffb-41f3-a080-d19e85f53649"
    ));
    let unknown = json!({"type": "something_new", "envelope_id": "e-1", "payload": {"x": 1}});
    assert!(matches!(
        frame(unknown),
        Frame::Acknowledge { envelope, what: "an envelope of a kind Herald does not know" } if envelope == "e-1"
    ));
    let broken = json!({"type": "events_api", "envelope_id": "e-2", "accepts_response_payload": false, "payload": {"type": "event_callback"}});
    assert!(matches!(
        frame(broken),
        Frame::Acknowledge { envelope, what: "an event that did not decode" } if envelope == "e-2"
    ));
}

#[test]
fn disconnect_asks_for_a_new_connection_and_noise_is_ignored() {
    let disconnect = json!({
        "type": "disconnect",
        "reason": "refresh_requested",
        "debug_info": {"host": "applink-7fc4fdbb64-4x5xq"}
    });
    assert!(matches!(frame(disconnect), Frame::Disconnect { reason } if reason == "refresh_requested"));
    assert!(matches!(read_frame("not json"), Frame::Ignore));
    assert!(matches!(frame(json!({"type": "hello"})), Frame::Ignore));
}

#[test]
fn an_acknowledgement_names_the_envelope_and_nothing_else() {
    let ack: Value = serde_json::from_str(&acknowledgement("dbdd0ef3")).unwrap();
    assert_eq!(ack, json!({"envelope_id": "dbdd0ef3"}));
}

#[test]
fn a_batch_stops_at_a_disconnect_or_when_full() {
    let mut batch = Batch::default();
    for n in 0..MAX_BATCH - 1 {
        batch.add(Ok(Message::Text(
            json!({"type": "x", "envelope_id": format!("e-{n}")}).to_string().into(),
        )));
        assert!(!batch.is_full());
    }
    batch.add(Ok(Message::Text(
        json!({"type": "x", "envelope_id": "last"}).to_string().into(),
    )));
    assert!(batch.is_full());
    let mut batch = Batch::default();
    batch.add(Ok(Message::Pong(Default::default())));
    assert!(!batch.is_full() && batch.envelopes.is_empty());
    batch.add(Ok(Message::Text(
        json!({"type": "disconnect", "reason": "warning", "debug_info": {"host": "h"}})
            .to_string()
            .into(),
    )));
    assert!(matches!(batch.end, Some(End::Refresh(ref reason)) if reason == "warning"));
    let mut batch = Batch::default();
    batch.add(Ok(Message::Close(None)));
    assert!(matches!(batch.end, Some(End::Lost(_))));
}
