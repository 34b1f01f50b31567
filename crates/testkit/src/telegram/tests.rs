//! The fake against the Bot API's documented behaviour, spoken to over HTTP
//! the way clients do (teloxide's PascalCase method names included).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::*;

pub(super) async fn call(fake: &FakeTelegram, method: &str, body: Value) -> (u16, Value) {
    call_with_token(fake, &fake.token(), method, body).await
}

pub(super) fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

async fn call_with_token(fake: &FakeTelegram, token: &str, method: &str, body: Value) -> (u16, Value) {
    let response = client()
        .post(format!("{}/bot{token}/{method}", fake.api_url()))
        .json(&body)
        .send()
        .await
        .expect("fake answers");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON envelope"))
}

fn ids(updates: &Value) -> Vec<i64> {
    updates["result"]
        .as_array()
        .expect("result list")
        .iter()
        .map(|u| u["update_id"].as_i64().unwrap())
        .collect()
}

#[tokio::test]
async fn a_wrong_token_is_unauthorized_and_method_names_ignore_case() {
    let fake = FakeTelegram::start().await;
    let (status, body) = call_with_token(&fake, "1:wrong", "getMe", json!({})).await;
    assert_eq!(status, 401);
    assert_eq!(
        body,
        json!({"ok": false, "error_code": 401, "description": "Unauthorized"})
    );
    for method in ["getMe", "GetMe", "getme"] {
        let (status, body) = call(&fake, method, json!({})).await;
        assert_eq!(status, 200, "{method}");
        let me = &body["result"];
        assert_eq!(me["username"], BOT_USERNAME);
        for field in [
            "can_join_groups",
            "can_read_all_group_messages",
            "supports_inline_queries",
            "has_main_web_app",
        ] {
            assert!(me[field].is_boolean(), "getMe lacks {field}");
        }
    }
    let (status, body) = call(&fake, "noSuchMethod", json!({})).await;
    assert_eq!((status, body["description"].as_str()), (404, Some("Not Found")));
}

#[tokio::test]
async fn updates_stay_until_a_higher_offset_confirms_them() {
    let fake = FakeTelegram::start().await;
    let ann = fake.admin();
    for text in ["one", "two", "three"] {
        fake.send_dm(&ann, text).await;
    }
    let (_, first) = call(&fake, "GetUpdates", json!({"timeout": 0})).await;
    let first_ids = ids(&first);
    assert_eq!(first_ids.len(), 3);
    assert_eq!(first["result"][0]["message"]["text"], "one");

    // Not confirmed yet: asked again, the same updates come back.
    let (_, again) = call(&fake, "GetUpdates", json!({"timeout": 0})).await;
    assert_eq!(ids(&again), first_ids);

    // An offset one above the second confirms the first two.
    let (_, rest) = call(&fake, "GetUpdates", json!({"offset": first_ids[1] + 1, "limit": 10})).await;
    assert_eq!(ids(&rest), [first_ids[2]]);
    let (_, none) = call(&fake, "GetUpdates", json!({"offset": first_ids[2] + 1})).await;
    assert_eq!(ids(&none), Vec::<i64>::new());
    assert_eq!(fake.pending_updates(), 0);
    assert_eq!(fake.deliveries()[&(first_ids[0] as u32)], 2);
}

#[tokio::test]
async fn a_long_poll_answers_when_an_update_arrives_and_a_newer_poll_ends_it() {
    let fake = Arc::new(FakeTelegram::start().await);
    let poller = {
        let fake = fake.clone();
        tokio::spawn(async move { call(&fake, "getUpdates", json!({"timeout": 10})).await })
    };
    fake.wait_until(Duration::from_secs(5), |f| f.calls().contains(&"getupdates".to_owned()))
        .await;
    let started = tokio::time::Instant::now();
    fake.send_dm(&fake.admin(), "wake up").await;
    let (status, body) = poller.await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(body["result"][0]["message"]["text"], "wake up");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "answered at once, not at the timeout"
    );

    // A second poller terminates the first, as when two bot instances run.
    let (_, first) = call(&fake, "getUpdates", json!({})).await;
    let offset = ids(&first)[0] + 1;
    let older = {
        let fake = fake.clone();
        tokio::spawn(async move { call(&fake, "getUpdates", json!({"offset": offset, "timeout": 10})).await })
    };
    fake.wait_until(Duration::from_secs(5), |f| {
        f.calls().iter().filter(|c| *c == "getupdates").count() == 3
    })
    .await;
    let (_, newer) = call(&fake, "getUpdates", json!({"offset": offset, "timeout": 0})).await;
    assert_eq!(newer["ok"], true);
    let (status, body) = older.await.unwrap();
    assert_eq!(status, 409);
    assert!(
        body["description"]
            .as_str()
            .unwrap()
            .contains("terminated by other getUpdates")
    );

    // timeout 1 with nothing to deliver answers an empty list after a second.
    let started = tokio::time::Instant::now();
    let (_, empty) = call(&fake, "getUpdates", json!({"offset": offset, "timeout": 1})).await;
    assert_eq!(ids(&empty), Vec::<i64>::new());
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[tokio::test]
async fn send_message_is_validated_like_the_bot_api() {
    let fake = FakeTelegram::start().await;
    let ann = fake.admin();
    let dm_id: i64 = fake.send_dm(&ann, "hi").await.parse().unwrap();
    let topic = fake.forum_topic();
    let long = "😀".repeat(2049);
    for (body, expected) in [
        (json!({"chat_id": 999, "text": "x"}), "Bad Request: chat not found"),
        (json!({"text": "x"}), "Bad Request: chat_id is empty"),
        (
            json!({"chat_id": 1001, "text": "  "}),
            "Bad Request: message text is empty",
        ),
        (
            json!({"chat_id": 1001, "text": long}),
            "Bad Request: message is too long",
        ),
        (
            json!({"chat_id": 1001, "text": "x", "message_thread_id": 3}),
            "Bad Request: message thread not found",
        ),
        (
            json!({"chat_id": FORUM_CHAT, "text": "x", "message_thread_id": topic + 100}),
            "Bad Request: message thread not found",
        ),
        (
            json!({"chat_id": 1001, "text": "x", "reply_parameters": {"message_id": 555}}),
            "Bad Request: message to be replied not found",
        ),
        (
            json!({"chat_id": 1001, "text": "x", "reply_to_message_id": 555}),
            "Bad Request: message to be replied not found",
        ),
    ] {
        let (status, answer) = call(&fake, "sendMessage", body.clone()).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(answer["ok"], false);
        assert_eq!(answer["error_code"], 400);
        assert_eq!(answer["description"], expected, "{body}");
    }
    assert!(fake.sent().is_empty(), "nothing refused was recorded");

    let exactly_the_limit = "😀".repeat(2048);
    let (status, answer) = call(
        &fake,
        "SendMessage",
        json!({"chat_id": 1001, "text": exactly_the_limit, "reply_parameters": {"message_id": dm_id}}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let message = &answer["result"];
    assert_eq!(message["from"]["id"], BOT_ID);
    assert_eq!(message["chat"]["type"], "private");
    assert_eq!(message["reply_to_message"]["text"], "hi");

    let (_, dropped_reply) = call(
        &fake,
        "sendMessage",
        json!({"chat_id": 1001, "text": "x",
               "reply_parameters": {"message_id": 555, "allow_sending_without_reply": true}}),
    )
    .await;
    assert_eq!(dropped_reply["ok"], true);
    assert!(dropped_reply["result"].get("reply_to_message").is_none());

    let (_, in_topic) = call(
        &fake,
        "sendMessage",
        json!({"chat_id": FORUM_CHAT, "text": "in the topic", "message_thread_id": topic}),
    )
    .await;
    assert_eq!(in_topic["result"]["message_thread_id"], topic);
    assert_eq!(in_topic["result"]["is_topic_message"], true);

    let sent = fake.sent();
    assert_eq!(sent.len(), 3);
    assert_eq!(sent[0].reply_to.as_deref(), Some(dm_id.to_string().as_str()));
    assert_eq!(sent[1].reply_to, None);
    assert_eq!(sent[2].thread, Some(topic.to_string()));
    assert_eq!(sent[2].chat, FORUM_CHAT.to_string());
}

#[tokio::test]
async fn sends_above_the_rate_get_429_and_are_recorded() {
    let fake = FakeTelegram::start_with(FakeTelegramOptions {
        // A window long enough that three sends always fall in it, however
        // slow the machine running the test.
        per_chat: Some((2, Duration::from_secs(30))),
        ..FakeTelegramOptions::default()
    })
    .await;
    fake.send_dm(&fake.admin(), "hi").await;
    let mut statuses = Vec::new();
    for n in 0..3 {
        let (status, body) = call(&fake, "sendMessage", json!({"chat_id": 1001, "text": format!("m{n}")})).await;
        statuses.push(status);
        if status == 429 {
            assert_eq!(body["error_code"], 429);
            let retry_after = body["parameters"]["retry_after"]
                .as_u64()
                .expect("retry_after is a number");
            assert!((1..=30).contains(&retry_after), "{body}");
            assert_eq!(
                body["description"],
                format!("Too Many Requests: retry after {retry_after}")
            );
        }
    }
    assert_eq!(statuses, [200, 200, 429]);
    assert_eq!(fake.violations().len(), 1, "{:?}", fake.violations());
    assert_eq!(fake.sent().len(), 2);
}

#[tokio::test]
async fn a_send_before_retry_after_passed_is_a_violation() {
    let fake = FakeTelegram::start().await;
    fake.send_dm(&fake.admin(), "hi").await;
    fake.throttle_next(1, Duration::from_secs(1));
    let (status, body) = call(&fake, "sendMessage", json!({"chat_id": 1001, "text": "a"})).await;
    assert_eq!((status, body["parameters"]["retry_after"].as_u64()), (429, Some(1)));
    assert!(fake.violations().is_empty(), "a throttled send is not a violation");

    let (status, _) = call(&fake, "sendMessage", json!({"chat_id": 1001, "text": "b"})).await;
    assert_eq!(status, 429);
    assert_eq!(fake.violations().len(), 1, "retrying at once breaks the rule");

    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (status, _) = call(&fake, "sendMessage", json!({"chat_id": 1001, "text": "c"})).await;
    assert_eq!(status, 200);
    assert_eq!(fake.sent().len(), 1);
}

#[tokio::test]
async fn allowed_updates_filters_what_is_delivered() {
    let fake = FakeTelegram::start().await;
    let ann = fake.admin();
    let id: i32 = fake.send_dm(&ann, "original").await.parse().unwrap();
    fake.edit_dm(&ann, id, "edited");
    fake.join(&fake.stranger(), &fake.plain_group());
    let (_, body) = call(&fake, "getUpdates", json!({"allowed_updates": ["message"]})).await;
    let kinds: Vec<bool> = body["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.get("message").is_some())
        .collect();
    assert_eq!(kinds, [true, true], "the edit is dropped, the join is a message");
    assert_eq!(fake.allowed_updates(), Some(vec!["message".to_owned()]));
}

#[tokio::test]
async fn chat_actions_are_checked_and_recorded() {
    let fake = FakeTelegram::start().await;
    let topic = fake.forum_topic();
    let (status, _) = call(
        &fake,
        "sendChatAction",
        json!({"chat_id": FORUM_CHAT, "action": "typing", "message_thread_id": topic}),
    )
    .await;
    assert_eq!(status, 200);
    let (status, body) = call(
        &fake,
        "sendChatAction",
        json!({"chat_id": FORUM_CHAT, "action": "dancing"}),
    )
    .await;
    assert_eq!((status, body["ok"].as_bool()), (400, Some(false)));
    assert_eq!(
        fake.chat_actions(),
        [ChatAction {
            chat: FORUM_CHAT.to_string(),
            thread: Some(topic.to_string()),
            action: "typing".into()
        }]
    );
}

/// What a webhook receiver saw: the secret header and the body, per request.
type Seen = Arc<Mutex<Vec<(Option<String>, Value)>>>;

/// A webhook receiver that answers 500 to its first request, then 200.
async fn flaky_webhook() -> (String, Seen) {
    use axum::http::{HeaderMap, StatusCode};
    let seen: Seen = Arc::default();
    let record = seen.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap, body: axum::Json<Value>| {
            let record = record.clone();
            async move {
                let secret = headers
                    .get("x-telegram-bot-api-secret-token")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                let mut seen = record.lock().unwrap();
                seen.push((secret, body.0));
                if seen.len() == 1 {
                    StatusCode::INTERNAL_SERVER_ERROR
                } else {
                    StatusCode::OK
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, seen)
}

#[tokio::test]
async fn a_webhook_gets_each_update_until_it_answers_2xx() {
    let fake = FakeTelegram::start().await;
    let (url, seen) = flaky_webhook().await;
    let form = reqwest::multipart::Form::new()
        .text("url", url.clone())
        .text("secret_token", "s3cret-token_1")
        .text("allowed_updates", "[\"message\"]");
    let response = client()
        .post(format!("{}/bot{}/SetWebhook", fake.api_url(), fake.token()))
        .multipart(form)
        .send()
        .await
        .unwrap();
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["result"], true, "{body}");
    let (_, info) = call(&fake, "getWebhookInfo", json!({})).await;
    assert_eq!(info["result"]["url"], url);

    let (status, _) = call(&fake, "getUpdates", json!({})).await;
    assert_eq!(status, 409, "no polling while a webhook is set");

    fake.send_dm(&fake.admin(), "pushed").await;
    assert!(
        fake.wait_until(Duration::from_secs(10), |f| f.pending_updates() == 0)
            .await
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "sent again after the 500");
    assert_eq!(seen[0], seen[1]);
    assert_eq!(seen[0].0.as_deref(), Some("s3cret-token_1"));
    assert_eq!(seen[0].1["message"]["text"], "pushed");
    let log: Vec<Option<u16>> = fake.webhook_log().iter().map(|a| a.status).collect();
    assert_eq!(log, [Some(500), Some(200)]);

    let (_, bad) = call(&fake, "setWebhook", json!({"url": "http://example.com/hook"})).await;
    assert_eq!(
        bad["description"],
        "Bad Request: bad webhook: HTTPS url must be provided for webhook"
    );
    let (_, deleted) = call(&fake, "deleteWebhook", json!({})).await;
    assert_eq!(deleted["result"], true);
    assert_eq!(fake.webhook(), None);
}

#[test]
fn channel_yaml_points_herald_at_the_fake_with_its_rates() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let fake = FakeTelegram::start().await;
        let yaml = fake.channel_yaml();
        assert!(yaml.lines().all(|l| l.starts_with("    ")), "{yaml}");
        assert!(yaml.contains(&format!("api_url: \"{}\"", fake.api_url())));
        assert!(yaml.contains("per_chat: 20/s"), "{yaml}");
        assert!(yaml.contains("per_bot: 60/s"), "{yaml}");
        assert_eq!(rate_text((20, Duration::from_secs(60))), "20/m");
    });
}

#[tokio::test]
async fn injected_faults_answer_at_once_and_change_nothing() {
    use crate::faults::Fault;
    let fake = FakeTelegram::start().await;
    fake.inject_faults("sendMessage", [Fault::bad_gateway(), Fault::Drop]);
    let admin = fake.admin();
    fake.send_dm(&admin, "hi").await;
    let url = format!("{}/bot{}/SendMessage", fake.api_url(), fake.token());
    let body = json!({ "chat_id": fake.dm_chat(&admin), "text": "hello" });
    let started = tokio::time::Instant::now();

    let gateway = client().post(&url).json(&body).send().await.expect("an answer");
    assert_eq!(gateway.status().as_u16(), 502);
    assert!(gateway.text().await.unwrap().contains("Bad Gateway"));

    let dropped = async { client().post(&url).json(&body).send().await?.bytes().await };
    assert!(
        dropped.await.is_err(),
        "a dropped connection is an error, not an answer"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "faults answer at once, not at a client timeout: {:?}",
        started.elapsed()
    );
    assert!(fake.sent().is_empty(), "a faulted request had no effect");
    assert_eq!(fake.faults_pending(), 0);

    let (status, _) = call(&fake, "sendMessage", body).await;
    assert_eq!(status, 200, "after the faults the API works");
    assert_eq!(fake.sent().len(), 1);
}
