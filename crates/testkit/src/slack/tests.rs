//! The fake against a plain HTTP and WebSocket client: what it accepts, what
//! it refuses, and how it delivers.

use std::sync::Mutex as StdMutex;

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use futures::{SinkExt, StreamExt};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

use super::*;

const WAIT: Duration = Duration::from_secs(5);

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

async fn call(slack: &FakeSlack, method: &str, token: Option<&str>, body: Value) -> (u16, HeaderMap, Value) {
    let mut request = client()
        .post(format!("{}/{method}", slack.api_url()))
        .header("content-type", "application/json; charset=utf-8")
        .body(body.to_string());
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("the fake answers");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.json().await.expect("a JSON answer"))
}

fn fast() -> FakeSlackOptions {
    FakeSlackOptions {
        channel_rate: None,
        ack_timeout: Duration::from_millis(300),
        ..FakeSlackOptions::default()
    }
}

#[tokio::test]
async fn tokens_are_checked_like_slack_checks_them() {
    let slack = FakeSlack::start().await;
    let (_, _, body) = call(&slack, "auth.test", Some(BOT_TOKEN), json!({})).await;
    assert_eq!(body["ok"], true);
    assert_eq!(body["user_id"], BOT_USER_ID);
    assert_eq!(body["bot_id"], BOT_ID);
    for (token, error) in [(None, "not_authed"), (Some("xoxb-wrong"), "invalid_auth")] {
        let (status, _, body) = call(&slack, "auth.test", token, json!({})).await;
        assert_eq!(
            (status, body["ok"].clone(), body["error"].clone()),
            (200, json!(false), json!(error))
        );
    }
    let (_, _, body) = call(&slack, "apps.connections.open", Some(BOT_TOKEN), json!({})).await;
    assert_eq!(body["error"], "not_allowed_token_type");
    let (_, _, body) = call(
        &slack,
        "chat.postMessage",
        Some(APP_TOKEN),
        json!({"channel": GENERAL, "text": "x"}),
    )
    .await;
    assert_eq!(body["error"], "not_allowed_token_type");
}

#[tokio::test]
async fn posts_are_recorded_from_json_and_form_bodies() {
    let slack = FakeSlack::start_with(fast()).await;
    let thread = slack.group().thread;
    let (_, _, body) = call(
        &slack,
        "chat.postMessage",
        Some(BOT_TOKEN),
        json!({"channel": GENERAL, "text": "in the thread", "thread_ts": thread}),
    )
    .await;
    assert_eq!(body["ok"], true, "{body}");
    assert_eq!(body["channel"], GENERAL);
    assert_eq!(body["message"]["thread_ts"], json!(thread));
    assert_eq!(body["message"]["bot_id"], BOT_ID);
    let form = client()
        .post(format!("{}/chat.postMessage", slack.api_url()))
        .form(&[("token", BOT_TOKEN), ("channel", "U0ADMIN001"), ("text", "by form")])
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(form["ok"], true, "{form}");
    assert_eq!(form["channel"], "D0ADMIN001", "posting to a user id opens the DM");
    let sent = slack.sent();
    assert_eq!(sent.len(), 2);
    assert_eq!((sent[0].chat.as_str(), sent[0].thread.clone()), (GENERAL, thread));
    assert_eq!(
        (sent[1].chat.as_str(), sent[1].text.as_str()),
        ("D0ADMIN001", "by form")
    );
    for (body, error) in [
        (json!({"channel": "C0NOWHERE", "text": "x"}), "channel_not_found"),
        (json!({"text": "x"}), "channel_not_found"),
        (json!({"channel": GENERAL}), "no_text"),
    ] {
        let (_, _, answer) = call(&slack, "chat.postMessage", Some(BOT_TOKEN), body).await;
        assert_eq!(answer["error"], error);
    }
    let (_, _, answer) = call(&slack, "chat.scheduleMessage", Some(BOT_TOKEN), json!({})).await;
    assert_eq!(answer["error"], "unknown_method");
}

#[tokio::test]
async fn a_throttled_post_is_a_429_and_an_early_retry_a_violation() {
    let slack = FakeSlack::start_with(fast()).await;
    slack.throttle_next(1, Duration::from_secs(2));
    let post = json!({"channel": GENERAL, "text": "hi"});
    let (status, headers, body) = call(&slack, "chat.postMessage", Some(BOT_TOKEN), post.clone()).await;
    assert_eq!(status, 429);
    assert_eq!(headers["retry-after"], "2");
    assert_eq!(body, json!({"ok": false, "error": "ratelimited"}));
    let (status, _, _) = call(&slack, "chat.postMessage", Some(BOT_TOKEN), post).await;
    assert_eq!(status, 200, "the throttle covered one request");
    assert_eq!(slack.violations().len(), 1, "{:?}", slack.violations());
}

#[tokio::test]
async fn posting_faster_than_the_channel_rate_is_a_violation() {
    let slack = FakeSlack::start().await;
    let post = json!({"channel": GENERAL, "text": "hi"});
    let (first, _, _) = call(&slack, "chat.postMessage", Some(BOT_TOKEN), post.clone()).await;
    let (second, headers, _) = call(&slack, "chat.postMessage", Some(BOT_TOKEN), post).await;
    assert_eq!((first, second), (200, 429));
    assert_eq!(headers["retry-after"], "1");
    assert_eq!(slack.violations().len(), 1);
}

async fn open_socket(
    slack: &FakeSlack,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    let (_, _, body) = call(slack, "apps.connections.open", Some(APP_TOKEN), json!({})).await;
    let url = body["url"].as_str().expect("a url").to_owned();
    assert!(url.starts_with("ws://127.0.0.1:"), "{url}");
    let (socket, _) = tokio_tungstenite::connect_async(url).await.expect("the socket opens");
    socket
}

async fn next_frame(
    socket: &mut tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
) -> Value {
    loop {
        let message = tokio::time::timeout(WAIT, socket.next())
            .await
            .expect("a frame in time")
            .expect("the socket is open")
            .expect("a good frame");
        if let Message::Text(text) = message {
            return serde_json::from_str(&text).expect("JSON frames");
        }
    }
}

#[tokio::test]
async fn socket_mode_says_hello_delivers_envelopes_and_resends_unacked_ones() {
    let slack = FakeSlack::start_with(fast()).await;
    let mut socket = open_socket(&slack).await;
    assert_eq!(next_frame(&mut socket).await["type"], "hello");
    let admin = slack.admin();
    let ts = slack.send_dm(&admin, "hello bot").await;
    let first = next_frame(&mut socket).await;
    assert_eq!(first["type"], "events_api");
    assert_eq!(first["retry_attempt"], 0);
    let event = &first["payload"]["event"];
    assert_eq!(first["payload"]["type"], "event_callback");
    assert_eq!(
        (
            event["type"].clone(),
            event["channel_type"].clone(),
            event["ts"].clone()
        ),
        (json!("message"), json!("im"), json!(ts))
    );
    assert_eq!(event["user"], admin.id);
    // No ack: Slack sends the same envelope again.
    let again = next_frame(&mut socket).await;
    assert_eq!(again["envelope_id"], first["envelope_id"]);
    assert_eq!(again["retry_attempt"], 1);
    assert_eq!(again["retry_reason"], "timeout");
    let ack = json!({"envelope_id": again["envelope_id"]}).to_string();
    socket.send(Message::Text(ack.into())).await.unwrap();
    assert!(slack.wait_until(WAIT, |s| s.unacked() == 0).await);
    assert_eq!(slack.acked().len(), 1);
}

#[tokio::test]
async fn a_mention_in_a_channel_arrives_as_app_mention_and_message() {
    let slack = FakeSlack::start_with(fast()).await;
    let mut socket = open_socket(&slack).await;
    next_frame(&mut socket).await;
    let target = slack.group();
    let ts = slack.send_group(&slack.stranger(), &target, "what's up", true).await;
    let mention = next_frame(&mut socket).await;
    let message = next_frame(&mut socket).await;
    assert_eq!(mention["payload"]["event"]["type"], "app_mention");
    assert_eq!(message["payload"]["event"]["type"], "message");
    for frame in [&mention, &message] {
        let event = &frame["payload"]["event"];
        assert_eq!(event["ts"], json!(ts));
        assert_eq!(event["thread_ts"], json!(target.thread));
        assert_eq!(event["text"], format!("<@{BOT_USER_ID}> what's up"));
    }
    assert_ne!(mention["payload"]["event_id"], message["payload"]["event_id"]);
}

#[tokio::test]
async fn the_bots_own_posts_come_back_as_events_and_tickets_open_one_socket() {
    let slack = FakeSlack::start_with(fast()).await;
    let (_, _, body) = call(&slack, "apps.connections.open", Some(APP_TOKEN), json!({})).await;
    let url = body["url"].as_str().unwrap().to_owned();
    let (mut socket, _) = tokio_tungstenite::connect_async(url.clone()).await.unwrap();
    assert!(
        tokio_tungstenite::connect_async(url).await.is_err(),
        "a used ticket is refused"
    );
    next_frame(&mut socket).await;
    call(
        &slack,
        "chat.postMessage",
        Some(BOT_TOKEN),
        json!({"channel": GENERAL, "text": "mine"}),
    )
    .await;
    let echo = next_frame(&mut socket).await;
    let event = &echo["payload"]["event"];
    assert_eq!(
        (event["bot_id"].clone(), event["user"].clone()),
        (json!(BOT_ID), json!(BOT_USER_ID))
    );
}

#[derive(Default)]
struct Received {
    requests: StdMutex<Vec<(HeaderMap, String)>>,
}

#[tokio::test]
async fn pushes_are_signed_and_retried_with_their_retry_number() {
    let received = Arc::new(Received::default());
    let recorder = received.clone();
    let app = Router::new().route(
        "/slack/events",
        post(move |headers: HeaderMap, body: String| {
            let recorder = recorder.clone();
            async move {
                let mut requests = recorder.requests.lock().unwrap();
                requests.push((headers, body));
                if requests.len() == 1 {
                    StatusCode::INTERNAL_SERVER_ERROR
                } else {
                    StatusCode::OK
                }
            }
        }),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let slack = FakeSlack::start_with(FakeSlackOptions {
        push_retry_delays: vec![Duration::from_millis(10)],
        ..fast()
    })
    .await;
    slack.set_events_url(format!("http://{addr}/slack/events"));
    slack.send_dm(&slack.admin(), "over http").await;
    assert!(slack.wait_until(WAIT, |s| s.push_log().len() == 2).await);
    let log = slack.push_log();
    assert_eq!((log[0].retry_num, log[0].status), (0, Some(500)));
    assert_eq!((log[1].retry_num, log[1].status), (1, Some(200)));
    let requests = received.requests.lock().unwrap();
    let (headers, body) = &requests[1];
    assert_eq!(headers["x-slack-retry-num"], "1");
    assert_eq!(headers["x-slack-retry-reason"], "http_error");
    let timestamp: u64 = headers["x-slack-request-timestamp"].to_str().unwrap().parse().unwrap();
    assert_eq!(
        headers["x-slack-signature"],
        signature(SIGNING_SECRET, timestamp, body).as_str()
    );
    assert_eq!(requests[0].1, *body, "a retry carries the same event");
}

async fn post_text(slack: &FakeSlack, text: &str) -> String {
    let (_, _, body) = call(
        slack,
        "chat.postMessage",
        Some(BOT_TOKEN),
        json!({"channel": GENERAL, "text": text}),
    )
    .await;
    assert_eq!(body["ok"], true, "{body}");
    body["ts"].as_str().expect("a ts").to_owned()
}

#[tokio::test]
async fn chat_update_changes_the_bots_message_and_records_the_edit() {
    let slack = FakeSlack::start_with(fast()).await;
    let first = post_text(&slack, "Thinking").await;
    let second = post_text(&slack, "second").await;
    let update = json!({"channel": GENERAL, "ts": first, "text": "Thinking… done"});
    let (status, _, body) = call(&slack, "chat.update", Some(BOT_TOKEN), update).await;
    assert_eq!(status, 200);
    assert_eq!(
        (
            body["ok"].clone(),
            body["channel"].clone(),
            body["ts"].clone(),
            body["text"].clone()
        ),
        (json!(true), json!(GENERAL), json!(first), json!("Thinking… done")),
        "{body}"
    );
    assert_eq!(body["message"]["edited"]["user"], BOT_USER_ID);
    let by_form = client()
        .post(format!("{}/chat.update", slack.api_url()))
        .form(&[
            ("token", BOT_TOKEN),
            ("channel", GENERAL),
            ("ts", &second),
            ("text", "2nd"),
        ])
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(by_form["ok"], true, "{by_form}");

    let now: Vec<_> = slack
        .bot_messages()
        .into_iter()
        .map(|m| (m.ts, m.text, m.edits))
        .collect();
    assert_eq!(
        now,
        [
            (first.clone(), "Thinking… done".to_owned(), 1),
            (second, "2nd".to_owned(), 1)
        ]
    );
    let edits = slack.edits();
    assert_eq!(
        (edits[0].channel.as_str(), edits[0].ts.as_str(), edits[0].text.as_str()),
        (GENERAL, first.as_str(), "Thinking… done")
    );
    assert_eq!(slack.sent()[0].text, "Thinking", "what was posted stays as posted");
    assert!(slack.violations().is_empty(), "{:?}", slack.violations());
}

#[tokio::test]
async fn chat_update_refuses_what_slack_refuses() {
    let slack = FakeSlack::start_with(fast()).await;
    let mine = post_text(&slack, "mine").await;
    let theirs = slack
        .send_group(&slack.admin(), &slack.group(), "a person's words", false)
        .await;
    for (update, error) in [
        (
            json!({"channel": GENERAL, "ts": "1.000001", "text": "x"}),
            "message_not_found",
        ),
        (
            json!({"channel": GENERAL, "ts": theirs, "text": "x"}),
            "cant_update_message",
        ),
        (
            json!({"channel": "C0NOWHERE", "ts": mine, "text": "x"}),
            "channel_not_found",
        ),
        (json!({"channel": GENERAL, "ts": mine, "text": ""}), "no_text"),
        (
            json!({"channel": GENERAL, "ts": mine, "text": "x".repeat(40_001)}),
            "msg_too_long",
        ),
    ] {
        let (status, _, body) = call(&slack, "chat.update", Some(BOT_TOKEN), update).await;
        assert_eq!(
            (status, body["ok"].clone(), body["error"].clone()),
            (200, json!(false), json!(error))
        );
    }
    let (_, _, body) = call(
        &slack,
        "chat.update",
        Some(APP_TOKEN),
        json!({"channel": GENERAL, "ts": mine, "text": "x"}),
    )
    .await;
    assert_eq!(body["error"], "not_allowed_token_type");
    assert!(slack.edits().is_empty());
    assert_eq!(slack.bot_messages()[0].text, "mine");
}

#[tokio::test]
async fn chat_update_is_limited_per_workspace_and_takes_faults() {
    let slack = FakeSlack::start_with(FakeSlackOptions {
        update_rate: Some((2, Duration::from_secs(60))),
        ..fast()
    })
    .await;
    let ts = post_text(&slack, "0").await;
    let update = |text: &str| json!({"channel": GENERAL, "ts": ts, "text": text});
    for text in ["1", "2"] {
        assert_eq!(call(&slack, "chat.update", Some(BOT_TOKEN), update(text)).await.0, 200);
    }
    let (status, headers, body) = call(&slack, "chat.update", Some(BOT_TOKEN), update("3")).await;
    assert_eq!((status, body["error"].as_str()), (429, Some("ratelimited")));
    let retry_after: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((59..=60).contains(&retry_after), "{retry_after}");
    let (status, _, _) = call(&slack, "chat.update", Some(BOT_TOKEN), update("4")).await;
    assert_eq!(status, 429);
    assert!(
        slack.violations().iter().any(|v| v.contains("before the Retry-After")),
        "{:?}",
        slack.violations()
    );
    assert_eq!(slack.bot_messages()[0].text, "2");

    let fatal = r#"{"ok":false,"error":"fatal_error"}"#;
    slack.inject_faults("chat.update", [crate::faults::Fault::Status(500, fatal.into())]);
    let (status, _, _) = call(&slack, "chat.update", Some(BOT_TOKEN), update("5")).await;
    assert_eq!(status, 500);
    assert_eq!(slack.faults_pending(), 0);
}

#[tokio::test]
async fn a_throttled_update_asks_for_its_retry_after() {
    let slack = FakeSlack::start_with(fast()).await;
    let ts = post_text(&slack, "0").await;
    slack.throttle_updates(1, Duration::from_secs(3));
    let update = json!({"channel": GENERAL, "ts": ts, "text": "1"});
    let (status, headers, _) = call(&slack, "chat.update", Some(BOT_TOKEN), update.clone()).await;
    assert_eq!((status, headers["retry-after"].to_str().unwrap()), (429, "3"));
    assert!(slack.violations().is_empty(), "the fake's own 429 is no violation");
    call(&slack, "chat.update", Some(BOT_TOKEN), update).await;
    assert_eq!(slack.violations().len(), 1, "retried at once: {:?}", slack.violations());
}

#[tokio::test]
async fn texts_are_checked_as_slack_reads_mrkdwn() {
    let slack = FakeSlack::start_with(fast()).await;
    let escaped = post_text(&slack, "a &lt; b &amp; c").await;
    assert!(slack.format_findings().is_empty(), "{:?}", slack.format_findings());
    assert_eq!(slack.bot_messages()[0].rendered, "a < b & c");
    assert!(slack.mentions().is_empty());

    let bare = post_text(&slack, "a < b & c").await;
    let findings = slack.format_findings();
    assert_eq!(findings.len(), 2, "{findings:?}");
    assert!(
        findings[0].contains("unescaped `<`") && findings[0].contains(&bare),
        "{findings:?}"
    );
    assert!(findings[1].contains("unescaped `&`"), "{findings:?}");

    let update =
        json!({"channel": GENERAL, "ts": escaped, "text": "heads up <!channel>, see <https://example.com|the docs>"});
    call(&slack, "chat.update", Some(BOT_TOKEN), update).await;
    assert_eq!(slack.mentions(), ["channel"], "an edit that pings is recorded");
    assert_eq!(slack.bot_messages()[0].rendered, "heads up @channel, see the docs");
    assert_eq!(slack.format_findings().len(), 2);
}
