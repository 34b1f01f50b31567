//! The gateway protocol on the payloads Discord's documentation shows
//! (Gateway → "Gateway Events" and "Opcodes and Status Codes").

use serde_json::Value;

use super::*;

#[test]
fn hello_heartbeat_requests_acks_reconnects_and_invalid_sessions_are_read() {
    let cases: [(&str, &str); 6] = [
        (r#"{"op":10,"d":{"heartbeat_interval":45000}}"#, "hello 45000"),
        (r#"{"op":1,"d":null}"#, "heartbeat now"),
        (r#"{"op":11}"#, "ack"),
        (r#"{"op":7,"d":null}"#, "reconnect"),
        (r#"{"op":9,"d":true}"#, "invalid resumable"),
        (r#"{"op":9,"d":false}"#, "invalid"),
    ];
    for (text, expected) in cases {
        let read = match read_frame(text) {
            Frame::Hello { interval } => format!("hello {}", interval.as_millis()),
            Frame::HeartbeatNow => "heartbeat now".into(),
            Frame::HeartbeatAck => "ack".into(),
            Frame::Reconnect => "reconnect".into(),
            Frame::InvalidSession { resumable: true } => "invalid resumable".into(),
            Frame::InvalidSession { resumable: false } => "invalid".into(),
            other => format!("{other:?}"),
        };
        assert_eq!(read, expected, "{text}");
    }
}

#[test]
fn frames_that_are_not_gateway_payloads_are_ignored() {
    for text in [
        "",
        "not json",
        r#"{"d":{}}"#,
        r#"{"op":42,"d":{}}"#,
        r#"{"op":10,"d":{}}"#,
    ] {
        assert!(matches!(read_frame(text), Frame::Ignore), "{text}");
    }
}

#[test]
fn ready_gives_what_a_resume_needs() {
    let text = r#"{"t":"READY","s":1,"op":0,"d":{"v":10,"user":{"id":"1","username":"herald","bot":true},
        "guilds":[{"id":"41771983423143937","unavailable":true}],"session_id":"d2b6a4d3e5f6",
        "resume_gateway_url":"wss://gateway-us-east1-b.discord.gg","shard":[0,1],
        "application":{"id":"1","flags":0},"_trace":["gateway-prd"]}}"#;
    let Frame::Dispatch {
        seq: Some(1),
        event: Event::Ready { session_id, resume_url },
    } = read_frame(text)
    else {
        panic!("READY not read");
    };
    assert_eq!(session_id, "d2b6a4d3e5f6");
    assert_eq!(resume_url, "wss://gateway-us-east1-b.discord.gg");
}

#[test]
fn message_create_is_read_into_a_message_and_other_events_are_passed_over() {
    // The documentation's example message, as MESSAGE_CREATE carries it in
    // a guild, with fields Herald does not read.
    let text = r#"{"op":0,"s":42,"t":"MESSAGE_CREATE","d":{"reactions":[],"attachments":[],"tts":false,
        "embeds":[],"timestamp":"2017-07-11T17:27:07.299000+00:00","mention_everyone":false,
        "id":"334385199974967042","pinned":false,"edited_timestamp":null,
        "author":{"username":"Mason","discriminator":"9999","id":"53908099506183680","avatar":null,
                  "global_name":"Mason \"the\" Mace"},
        "mention_roles":[],"content":"Supa \u00e9 Hot","channel_id":"290926798999357250","mentions":[],
        "type":0,"guild_id":"41771983423143937","member":{"nick":null,"roles":[]},
        "referenced_message":null,"components":[],"nonce":"1234"}}"#;
    let Frame::Dispatch {
        seq: Some(42),
        event: Event::Message(message),
    } = read_frame(text)
    else {
        panic!("MESSAGE_CREATE not read");
    };
    assert_eq!(message.id, 334_385_199_974_967_042);
    assert_eq!(message.channel_id, 290_926_798_999_357_250);
    assert_eq!(message.guild_id, Some(41_771_983_423_143_937));
    assert_eq!(message.author.id, 53_908_099_506_183_680);
    assert_eq!(message.author.global_name.as_deref(), Some("Mason \"the\" Mace"));
    assert_eq!(message.content, "Supa é Hot");
    assert!(message.referenced_message.is_none());

    let typing = r#"{"op":0,"s":43,"t":"TYPING_START","d":{"channel_id":"1","user_id":"2","timestamp":1}}"#;
    assert!(matches!(
        read_frame(typing),
        Frame::Dispatch {
            seq: Some(43),
            event: Event::Other
        }
    ));
    let broken = r#"{"op":0,"s":44,"t":"MESSAGE_CREATE","d":{"id":"not a number"}}"#;
    assert!(matches!(
        read_frame(broken),
        Frame::Dispatch {
            seq: Some(44),
            event: Event::Undecodable(_)
        }
    ));
}

#[test]
fn a_new_session_identifies_and_a_known_one_resumes_where_it_left_off() {
    let mut session = Session::default();
    let shard = ShardId { id: 1, count: 3 };
    let identify: Value = serde_json::from_str(&session.greeting("secret", shard)).unwrap();
    assert_eq!(identify["d"]["shard"], serde_json::json!([1, 3]));
    assert_eq!(identify["op"], 2);
    assert_eq!(identify["d"]["token"], "secret");
    assert_eq!(
        identify["d"]["intents"], 37_376,
        "GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT"
    );
    assert_eq!(identify["d"]["properties"]["browser"], "herald");
    assert_eq!(
        session.url("wss://gateway.discord.gg", false),
        "wss://gateway.discord.gg/?v=10&encoding=json"
    );
    assert_eq!(
        session.url("wss://gateway.discord.gg", true),
        "wss://gateway.discord.gg/?v=10&encoding=json&compress=zlib-stream"
    );

    session.resumable = Some(("abc".into(), "wss://resume.discord.gg/".into()));
    assert!(!session.can_resume(), "no event seen yet: nothing to resume from");
    session.saw(Some(7));
    session.saw(None);
    assert!(session.can_resume());
    let resume: Value = serde_json::from_str(&session.greeting("secret", shard)).unwrap();
    assert_eq!(resume["op"], 6);
    assert_eq!(resume["d"]["session_id"], "abc");
    assert_eq!(resume["d"]["seq"], 7);
    assert_eq!(
        session.url("wss://gateway.discord.gg", false),
        "wss://resume.discord.gg/?v=10&encoding=json"
    );
    // What the store keeps of it reads back the same.
    let kept = serde_json::to_value(&session).unwrap();
    assert_eq!(serde_json::from_value::<Session>(kept).unwrap(), session);

    session.forget();
    assert_eq!(
        serde_json::from_str::<Value>(&session.greeting("secret", shard)).unwrap()["op"],
        2
    );
    let beat: Value = serde_json::from_str(&heartbeat(None)).unwrap();
    assert_eq!(beat, serde_json::json!({ "op": 1, "d": null }));
    assert_eq!(
        connect_url("ws://127.0.0.1:9/?v=9", false),
        "ws://127.0.0.1:9/?v=10&encoding=json"
    );
}

#[test]
fn a_heartbeat_not_acknowledged_before_the_next_marks_a_zombie() {
    let mut heartbeat = Heartbeat::new(Duration::from_millis(41_250));
    assert_eq!(heartbeat.first_after(0.5), Duration::from_millis(20_625));
    assert_eq!(heartbeat.first_after(7.0), heartbeat.interval, "jitter is clamped");
    assert_eq!(heartbeat.due(), Beat::Send);
    heartbeat.acknowledged();
    assert_eq!(heartbeat.due(), Beat::Send);
    assert_eq!(heartbeat.due(), Beat::Zombie);
}

#[test]
fn close_codes_say_whether_to_resume_identify_or_give_up() {
    for code in [1000, 1001, 1006, 4000, 4001, 4002, 4003, 4005, 4008] {
        assert_eq!(after_close(code), AfterClose::Resume, "{code}");
    }
    for code in [4007, 4009] {
        assert_eq!(after_close(code), AfterClose::Identify, "{code}");
    }
    for (code, names) in [
        (4004, "channels.discord.token"),
        (4010, "shard"),
        (4011, "channels.discord.shards"),
        (4012, "version"),
        (4013, "intents"),
        (4014, "MESSAGE CONTENT"),
    ] {
        let AfterClose::Fatal(reason) = after_close(code) else {
            panic!("{code} is fatal");
        };
        assert!(reason.contains(names), "{code}: {reason}");
    }
}
