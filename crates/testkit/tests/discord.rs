//! The fake Discord seen from the outside: REST through plain HTTP (status
//! codes, headers, error bodies) and the gateway through a raw websocket, so
//! the tests see exactly what a bot library would.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use herald_testkit::discord::FakeDiscord;
use herald_testkit::{FakePlatform, GroupTarget};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

const GUILD_MESSAGES: u64 = 1 << 9;
const DIRECT_MESSAGES: u64 = 1 << 12;
const MESSAGE_CONTENT: u64 = 1 << 15;
const HERALD_INTENTS: u64 = GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT;

fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

async fn rest(fake: &FakeDiscord, method: reqwest::Method, path: &str, body: Option<Value>) -> reqwest::Response {
    let mut request = http()
        .request(method, format!("{}/api/v10{path}", fake.api_url()))
        .header("authorization", format!("Bot {}", fake.token()));
    if let Some(body) = body {
        request = request.json(&body);
    }
    request.send().await.expect("the fake answers")
}

async fn post_message(fake: &FakeDiscord, channel: &str, body: Value) -> reqwest::Response {
    rest(
        fake,
        reqwest::Method::POST,
        &format!("/channels/{channel}/messages"),
        Some(body),
    )
    .await
}

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

async fn connect(fake: &FakeDiscord) -> Socket {
    let (socket, _) = tokio_tungstenite::connect_async(format!("{}/?v=10&encoding=json", fake.gateway_url()))
        .await
        .expect("the gateway accepts a websocket");
    socket
}

/// The next JSON payload, or the close code when the server closed.
async fn next(socket: &mut Socket) -> Result<Value, u16> {
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(5), socket.next())
            .await
            .expect("the gateway says something within 5 s");
        match frame {
            Some(Ok(Message::Text(text))) => return Ok(serde_json::from_str(text.as_str()).expect("JSON payloads")),
            Some(Ok(Message::Close(frame))) => return Err(frame.map_or(1005, |f| u16::from(f.code))),
            Some(Ok(_)) => continue,
            None | Some(Err(_)) => return Err(1006),
        }
    }
}

async fn send(socket: &mut Socket, payload: Value) {
    socket
        .send(Message::text(payload.to_string()))
        .await
        .expect("send a payload");
}

fn identify(token: &str, intents: u64) -> Value {
    json!({ "op": 2, "d": {
        "token": token, "intents": intents, "shard": [0, 1], "compress": false, "large_threshold": 250,
        "properties": { "os": "linux", "browser": "herald-test", "device": "herald-test" },
    }})
}

/// Connects and identifies; returns the socket and READY's `d`.
async fn ready_session(fake: &FakeDiscord, intents: u64) -> (Socket, Value) {
    let mut socket = connect(fake).await;
    let hello = next(&mut socket).await.expect("HELLO");
    assert_eq!(hello["op"], 10);
    send(&mut socket, identify(&format!("Bot {}", fake.token()), intents)).await;
    let ready = next(&mut socket).await.expect("READY");
    assert_eq!(
        (ready["op"].as_u64(), ready["t"].as_str(), ready["s"].as_u64()),
        (Some(0), Some("READY"), Some(1))
    );
    (socket, ready["d"].clone())
}

#[tokio::test]
async fn rest_answers_gateway_and_identity_and_refuses_a_wrong_token() {
    let fake = FakeDiscord::start().await;
    let gateway: Value = rest(&fake, reqwest::Method::GET, "/gateway", None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(gateway, json!({ "url": fake.gateway_url() }));
    assert!(!fake.gateway_url().contains('?'), "a client appends ?v=10 itself");

    let me = rest(&fake, reqwest::Method::GET, "/users/@me", None).await;
    assert_eq!(me.status(), 200);
    assert!(me.headers().contains_key("x-ratelimit-bucket"));
    let me: Value = me.json().await.unwrap();
    assert_eq!(
        (me["id"].as_str(), me["bot"].as_bool()),
        (Some(fake.bot_id().as_str()), Some(true))
    );

    let refused = http()
        .get(format!("{}/api/v10/users/@me", fake.api_url()))
        .header("authorization", "Bot wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    assert_eq!(
        refused.json::<Value>().await.unwrap(),
        json!({ "message": "401: Unauthorized", "code": 0 })
    );

    let thread: Value = rest(
        &fake,
        reqwest::Method::GET,
        &format!("/channels/{}", fake.group().thread.unwrap()),
        None,
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(
        (thread["type"].as_u64(), thread["parent_id"].as_str()),
        (Some(11), Some(fake.group().chat.as_str()))
    );
    let unknown = rest(&fake, reqwest::Method::GET, "/channels/1", None).await;
    assert_eq!(unknown.status(), 404);
    assert_eq!(unknown.json::<Value>().await.unwrap()["code"], 10003);
}

#[tokio::test]
async fn messages_are_validated_as_discord_validates_them() {
    let fake = FakeDiscord::start().await;
    // Refused requests count against the bucket too; this test sends many.
    fake.set_message_bucket(20, Duration::from_secs(1));
    let (_socket, _) = ready_session(&fake, HERALD_INTENTS).await;
    let alice = fake.admin();
    let dm = fake.dm_chat(&alice);
    let question = fake.send_dm(&alice, "hello?").await;

    let too_long = post_message(&fake, &dm, json!({ "content": "x".repeat(2001) })).await;
    assert_eq!(too_long.status(), 400);
    let body: Value = too_long.json().await.unwrap();
    assert_eq!(body["code"], 50035);
    assert_eq!(body["errors"]["content"]["_errors"][0]["code"], "BASE_TYPE_MAX_LENGTH");
    let empty = post_message(&fake, &dm, json!({ "content": "" })).await;
    assert_eq!(empty.json::<Value>().await.unwrap()["code"], 50006);
    let unknown_reference = post_message(
        &fake,
        &dm,
        json!({ "content": "hi", "message_reference": { "message_id": "1" } }),
    )
    .await;
    assert_eq!(unknown_reference.status(), 400);
    assert_eq!(
        fake.violations().len(),
        2,
        "over-long and empty messages break the rules"
    );

    let exactly_2000 = post_message(&fake, &dm, json!({ "content": "é".repeat(2000) })).await;
    assert_eq!(exactly_2000.status(), 200, "Discord counts characters, not bytes");
    let reply = post_message(
        &fake,
        &dm,
        json!({ "content": "an answer", "message_reference": { "message_id": question, "fail_if_not_exists": false } }),
    )
    .await;
    assert_eq!(reply.status(), 200);
    let reply: Value = reply.json().await.unwrap();
    assert_eq!(reply["type"], 19);
    assert_eq!(reply["referenced_message"]["content"], "hello?");
    assert_eq!(reply["author"]["id"], fake.bot_id());
    let lenient = post_message(
        &fake,
        &dm,
        json!({ "content": "no trigger", "message_reference": { "message_id": "1", "fail_if_not_exists": false } }),
    )
    .await;
    assert_eq!(
        lenient.status(),
        200,
        "fail_if_not_exists: false sends without the reference"
    );

    let sent = fake.sent();
    assert_eq!(sent.len(), 3);
    assert_eq!(
        (sent[1].chat.as_str(), sent[1].reply_to.as_deref()),
        (dm.as_str(), Some(question.as_str()))
    );
    assert_eq!(sent[2].reply_to, None);
}

#[tokio::test]
async fn buckets_are_announced_enforced_and_recorded() {
    let fake = FakeDiscord::start().await;
    fake.set_message_bucket(2, Duration::from_secs(30));
    let channel = fake.text_channel().chat;
    let first = post_message(&fake, &channel, json!({ "content": "1" })).await;
    let headers = first.headers();
    assert_eq!(headers["x-ratelimit-limit"], "2");
    assert_eq!(headers["x-ratelimit-remaining"], "1");
    let reset_after: f64 = headers["x-ratelimit-reset-after"].to_str().unwrap().parse().unwrap();
    assert!(reset_after > 29.0 && reset_after <= 30.0, "{reset_after}");
    assert!(headers.contains_key("x-ratelimit-reset"));
    post_message(&fake, &channel, json!({ "content": "2" })).await;
    assert!(fake.violations().is_empty());

    let over = post_message(&fake, &channel, json!({ "content": "3" })).await;
    assert_eq!(over.status(), 429);
    assert_eq!(over.headers()["x-ratelimit-scope"], "user");
    assert!(over.headers().contains_key("retry-after"));
    let body: Value = over.json().await.unwrap();
    assert_eq!(
        (body["message"].as_str(), body["global"].as_bool()),
        (Some("You are being rate limited."), Some(false))
    );
    assert!(body["retry_after"].as_f64().unwrap() > 29.0);
    assert_eq!(fake.violations().len(), 1, "{:?}", fake.violations());
    assert_eq!(fake.sent().len(), 2, "a refused message is not posted");

    // Another channel has its own bucket.
    let dm = fake.dm_chat(&fake.admin());
    assert_eq!(
        post_message(&fake, &dm, json!({ "content": "elsewhere" }))
            .await
            .status(),
        200
    );
}

#[tokio::test]
async fn a_forced_429_asks_for_retry_after_and_an_early_retry_is_a_violation() {
    let fake = FakeDiscord::start().await;
    let channel = fake.text_channel().chat;
    fake.throttle_next(1, Duration::from_millis(300));
    let limited = post_message(&fake, &channel, json!({ "content": "1" })).await;
    assert_eq!(limited.status(), 429);
    assert_eq!(limited.json::<Value>().await.unwrap()["retry_after"], 0.3);
    assert!(fake.violations().is_empty());
    assert_eq!(
        post_message(&fake, &channel, json!({ "content": "1" })).await.status(),
        429
    );
    assert_eq!(fake.violations().len(), 1, "sent before retry_after passed");
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_eq!(
        post_message(&fake, &channel, json!({ "content": "1" })).await.status(),
        200
    );
    assert_eq!(fake.violations().len(), 1);
}

#[tokio::test]
async fn the_gateway_says_hello_acknowledges_heartbeats_and_is_ready_after_identify() {
    let fake = FakeDiscord::start().await;
    fake.set_heartbeat_interval(Duration::from_millis(45_000));
    let mut socket = connect(&fake).await;
    let hello = next(&mut socket).await.unwrap();
    assert_eq!(
        hello,
        json!({ "op": 10, "d": { "heartbeat_interval": 45_000 }, "s": null, "t": null })
    );
    send(&mut socket, json!({ "op": 1, "d": null })).await;
    assert_eq!(next(&mut socket).await.unwrap()["op"], 11);
    assert_eq!(fake.heartbeats(), 1);
    send(&mut socket, identify(&fake.token(), HERALD_INTENTS)).await;
    let ready = next(&mut socket).await.unwrap();
    let data = &ready["d"];
    assert_eq!(data["v"], 10);
    assert_eq!(data["user"]["id"], fake.bot_id());
    assert_eq!(data["guilds"][0]["id"], fake.guild_id());
    assert_eq!(data["resume_gateway_url"], fake.gateway_url());
    assert_eq!(data["shard"], json!([0, 1]));
    assert!(data["session_id"].is_string() && data["application"]["id"].is_string());
    assert_eq!(fake.identifies()[0].intents, HERALD_INTENTS);
    send(&mut socket, identify(&fake.token(), HERALD_INTENTS)).await;
    assert_eq!(next(&mut socket).await, Err(4005), "identifying twice is refused");
}

#[tokio::test]
async fn identify_is_refused_for_a_wrong_token_or_a_disallowed_intent() {
    let fake = FakeDiscord::start().await;
    let cases = [
        ("Bot wrong", HERALD_INTENTS, true, 4004),
        ("Bot fake-discord-bot-token", 1 << 40, true, 4013),
        ("Bot fake-discord-bot-token", HERALD_INTENTS, false, 4014),
    ];
    for (token, intents, content_allowed, code) in cases {
        fake.allow_message_content(content_allowed);
        let mut socket = connect(&fake).await;
        next(&mut socket).await.expect("HELLO");
        send(&mut socket, identify(token, intents)).await;
        assert_eq!(next(&mut socket).await, Err(code), "{token} {intents}");
    }
    let (mut socket, _) = tokio_tungstenite::connect_async(format!("{}/", fake.gateway_url()))
        .await
        .unwrap();
    assert_eq!(next(&mut socket).await, Err(4012), "no ?v=10");
    let mut early = connect(&fake).await;
    next(&mut early).await.expect("HELLO");
    send(&mut early, json!({ "op": 3, "d": {} })).await;
    assert_eq!(next(&mut early).await, Err(4003), "presence before identify");
}

#[tokio::test]
async fn messages_are_dispatched_in_order_with_sequence_numbers() {
    let fake = FakeDiscord::start().await;
    let (mut socket, _) = ready_session(&fake, HERALD_INTENTS).await;
    let alice = fake.admin();
    let dm_id = fake.send_dm(&alice, "in a DM").await;
    let group = fake.group();
    let mention_id = fake.send_group(&alice, &group, "in the thread", true).await;

    let dm = next(&mut socket).await.unwrap();
    assert_eq!((dm["t"].as_str(), dm["s"].as_u64()), (Some("MESSAGE_CREATE"), Some(2)));
    let message = &dm["d"];
    assert_eq!(message["id"], dm_id);
    assert_eq!(message["channel_id"], fake.dm_chat(&alice));
    assert!(message.get("guild_id").is_none(), "a DM has no guild");
    for field in [
        "author",
        "content",
        "timestamp",
        "tts",
        "mention_everyone",
        "mentions",
        "mention_roles",
        "attachments",
        "embeds",
        "pinned",
        "type",
    ] {
        assert!(message.get(field).is_some(), "MESSAGE_CREATE lacks {field}");
    }
    let in_thread = next(&mut socket).await.unwrap();
    assert_eq!(in_thread["s"], 3);
    let message = &in_thread["d"];
    assert_eq!(message["id"], mention_id);
    assert_eq!(message["channel_id"], group.thread.clone().unwrap());
    assert_eq!(message["guild_id"], fake.guild_id());
    assert_eq!(message["content"], format!("<@{}> in the thread", fake.bot_id()));
    assert_eq!(message["mentions"][0]["id"], fake.bot_id());
    assert!(message["member"].is_object());

    // What the bot posts comes back to it as its own MESSAGE_CREATE.
    post_message(&fake, group.thread.as_deref().unwrap(), json!({ "content": "answer" })).await;
    let own = next(&mut socket).await.unwrap();
    assert_eq!(own["d"]["author"]["id"], fake.bot_id());
    let sent = fake.sent();
    assert_eq!(
        (sent[0].chat.as_str(), sent[0].thread.as_deref()),
        (group.chat.as_str(), group.thread.as_deref()),
        "a thread's message is reported under its parent channel"
    );
}

#[tokio::test]
async fn without_the_content_intent_guild_content_is_blank_except_mentions() {
    let fake = FakeDiscord::start().await;
    let (mut socket, _) = ready_session(&fake, GUILD_MESSAGES | DIRECT_MESSAGES).await;
    let alice = fake.admin();
    let channel = GroupTarget {
        chat: fake.text_channel().chat,
        thread: None,
    };
    fake.send_group(&alice, &channel, "not for the bot", false).await;
    fake.send_group(&alice, &channel, "for the bot", true).await;
    fake.send_dm(&alice, "direct").await;
    let contents: Vec<Value> = [
        next(&mut socket).await.unwrap(),
        next(&mut socket).await.unwrap(),
        next(&mut socket).await.unwrap(),
    ]
    .iter()
    .map(|event| event["d"]["content"].clone())
    .collect();
    assert_eq!(
        contents,
        [
            json!(""),
            json!(format!("<@{}> for the bot", fake.bot_id())),
            json!("direct")
        ]
    );
}

#[tokio::test]
async fn a_resumed_session_gets_what_it_missed() {
    let fake = FakeDiscord::start().await;
    let (mut socket, ready) = ready_session(&fake, HERALD_INTENTS).await;
    let alice = fake.admin();
    fake.send_dm(&alice, "one").await;
    let first = next(&mut socket).await.unwrap();
    assert_eq!(first["s"], 2);
    fake.close_connections(4000);
    assert_eq!(next(&mut socket).await, Err(4000));
    // Written while the bot is away: the fake waits for a session, which
    // the RESUME below brings back.
    let pending = {
        let fake = &fake;
        let alice = alice.clone();
        async move { fake.send_dm(&alice, "two").await }
    };
    let resume = async {
        let mut socket = connect(&fake).await;
        next(&mut socket).await.expect("HELLO");
        send(
            &mut socket,
            json!({ "op": 6, "d": { "token": fake.token(), "session_id": ready["session_id"], "seq": 2 } }),
        )
        .await;
        socket
    };
    let (_, mut socket) = tokio::join!(pending, resume);
    // "two" is replayed or sent live, depending on when it was written;
    // either way it arrives once, with RESUMED.
    let seen = [next(&mut socket).await.unwrap(), next(&mut socket).await.unwrap()];
    let kinds: Vec<_> = seen
        .iter()
        .map(|e| (e["t"].clone(), e["d"]["content"].clone()))
        .collect();
    assert!(kinds.contains(&(json!("RESUMED"), Value::Null)), "{kinds:?}");
    assert!(kinds.contains(&(json!("MESSAGE_CREATE"), json!("two"))), "{kinds:?}");
    assert_eq!(fake.resumes(), 1);

    let mut stale = connect(&fake).await;
    next(&mut stale).await.expect("HELLO");
    send(
        &mut stale,
        json!({ "op": 6, "d": { "token": fake.token(), "session_id": "nope", "seq": 1 } }),
    )
    .await;
    assert_eq!(
        next(&mut stale).await.unwrap(),
        json!({ "op": 9, "d": false, "s": null, "t": null })
    );
}

async fn edit_message(fake: &FakeDiscord, channel: &str, message: &str, body: Value) -> reqwest::Response {
    rest(
        fake,
        reqwest::Method::PATCH,
        &format!("/channels/{channel}/messages/{message}"),
        Some(body),
    )
    .await
}

async fn posted_id(fake: &FakeDiscord, channel: &str, body: Value) -> String {
    let response = post_message(fake, channel, body).await;
    assert_eq!(response.status(), 200);
    let message: Value = response.json().await.unwrap();
    message["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn an_edit_changes_the_bots_message_and_is_dispatched_as_message_update() {
    let fake = FakeDiscord::start().await;
    let (mut socket, _) = ready_session(&fake, HERALD_INTENTS).await;
    let channel = fake.text_channel().chat;
    let id = posted_id(&fake, &channel, json!({ "content": "Thinking" })).await;
    next(&mut socket).await.expect("the bot's MESSAGE_CREATE");

    let edited = edit_message(&fake, &channel, &id, json!({ "content": "Thinking… done" })).await;
    assert_eq!(edited.status(), 200);
    assert!(edited.headers().contains_key("x-ratelimit-bucket"));
    let message: Value = edited.json().await.unwrap();
    assert_eq!(
        (message["id"].as_str(), message["content"].as_str()),
        (Some(id.as_str()), Some("Thinking… done"))
    );
    assert!(message["edited_timestamp"].is_string(), "{message}");
    let update = next(&mut socket).await.unwrap();
    assert_eq!(update["t"], "MESSAGE_UPDATE");
    assert_eq!(update["d"]["content"], "Thinking… done");

    let now: Vec<_> = fake
        .bot_messages()
        .into_iter()
        .map(|m| (m.message_id, m.content, m.edits))
        .collect();
    assert_eq!(now, [(id.clone(), "Thinking… done".to_owned(), 1)]);
    let edits = fake.edits();
    assert_eq!(
        (edits[0].channel.as_str(), edits[0].message_id.as_str()),
        (channel.as_str(), id.as_str())
    );
    assert_eq!(fake.sent()[0].text, "Thinking", "what was created stays as created");
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

#[tokio::test]
async fn edits_are_refused_as_discord_refuses_them() {
    let fake = FakeDiscord::start().await;
    let (_socket, _) = ready_session(&fake, HERALD_INTENTS).await;
    let channel = fake.text_channel().chat;
    let mine = posted_id(&fake, &channel, json!({ "content": "mine" })).await;
    let theirs = fake
        .send_group(&fake.admin(), &fake.text_channel(), "a person's words", false)
        .await;

    let unknown = edit_message(&fake, &channel, "1", json!({ "content": "x" })).await;
    assert_eq!(unknown.status(), 404);
    assert_eq!(
        unknown.json::<Value>().await.unwrap(),
        json!({ "message": "Unknown Message", "code": 10008 })
    );
    let not_own = edit_message(&fake, &channel, &theirs, json!({ "content": "x" })).await;
    assert_eq!(not_own.status(), 403);
    assert_eq!(
        not_own.json::<Value>().await.unwrap(),
        json!({ "message": "Cannot edit a message authored by another user", "code": 50005 })
    );
    let too_long = edit_message(&fake, &channel, &mine, json!({ "content": "x".repeat(2001) })).await;
    assert_eq!(too_long.status(), 400);
    let body: Value = too_long.json().await.unwrap();
    assert_eq!(body["code"], 50035);
    assert_eq!(body["errors"]["content"]["_errors"][0]["code"], "BASE_TYPE_MAX_LENGTH");
    let emptied = edit_message(&fake, &channel, &mine, json!({ "content": "" })).await;
    assert_eq!(emptied.status(), 400);
    assert_eq!(emptied.json::<Value>().await.unwrap()["code"], 50006);
    assert_eq!(fake.bot_messages()[0].content, "mine");
    assert!(fake.edits().is_empty());
}

#[tokio::test]
async fn edits_have_their_own_bucket_per_channel() {
    let fake = FakeDiscord::start().await;
    fake.set_edit_bucket(1, Duration::from_secs(30));
    let channel = fake.text_channel().chat;
    let id = posted_id(&fake, &channel, json!({ "content": "0" })).await;
    let first = edit_message(&fake, &channel, &id, json!({ "content": "1" })).await;
    assert_eq!(first.status(), 200);
    assert_eq!(first.headers()["x-ratelimit-remaining"], "0");
    let bucket = first.headers()["x-ratelimit-bucket"].clone();
    let over = edit_message(&fake, &channel, &id, json!({ "content": "2" })).await;
    assert_eq!(over.status(), 429);
    assert_eq!(over.headers()["x-ratelimit-bucket"], bucket);
    assert!(over.json::<Value>().await.unwrap()["retry_after"].as_f64().unwrap() > 29.0);
    assert_eq!(fake.violations().len(), 1, "told 0 remaining: {:?}", fake.violations());
    assert_eq!(fake.bot_messages()[0].content, "1");
    // Creating messages is another route with its own bucket.
    let created = post_message(&fake, &channel, json!({ "content": "new" })).await;
    assert_eq!(created.status(), 200);
    assert_ne!(created.headers()["x-ratelimit-bucket"], bucket);
}

#[tokio::test]
async fn pings_follow_allowed_mentions_on_create_and_edit() {
    let fake = FakeDiscord::start().await;
    let channel = fake.text_channel().chat;
    let loud = "@everyone look <@&987> <@123>";
    let id = posted_id(&fake, &channel, json!({ "content": loud })).await;
    assert_eq!(fake.pings(), ["everyone", "role:987", "user:123"]);

    let users_only = json!({ "content": loud, "allowed_mentions": { "parse": ["users"] } });
    posted_id(&fake, &channel, users_only).await;
    assert_eq!(fake.pings().len(), 4);
    assert_eq!(fake.pings()[3], "user:123");

    let silent = json!({ "content": format!("{loud} @here"), "allowed_mentions": { "parse": [] } });
    assert_eq!(edit_message(&fake, &channel, &id, silent).await.status(), 200);
    assert_eq!(fake.pings().len(), 4, "nothing allowed, nothing pinged");
    let exclusive = json!({ "content": "x", "allowed_mentions": { "parse": ["users"], "users": ["123"] } });
    let refused = post_message(&fake, &channel, exclusive).await;
    assert_eq!(refused.status(), 400);
    assert_eq!(refused.json::<Value>().await.unwrap()["code"], 50035);
}
