//! Slack end to end: the conformance suite against the fake Slack over
//! Socket Mode, and the Events API alternative (signed requests only, each
//! event answered once however often Slack sends it).

#[macro_use]
mod conformance;

use std::net::SocketAddr;
use std::time::Duration;

use conformance::{REPLY, Running, Setup};
use herald_testkit::FakePlatform;
use herald_testkit::slack::{FakeSlack, SIGNING_SECRET, signature};
use serde_json::json;

conformance_suite!(slack, FakeSlack::start_quick);

fn free_address() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address")
}

/// Starts `herald run` in Events API mode and waits until its endpoint
/// answers Slack's `url_verification` challenge.
async fn start_events_mode() -> (Setup<FakeSlack>, Running) {
    let setup = Setup::new(FakeSlack::start_events(free_address()).await).await;
    let herald = setup.start().await;
    let challenge = "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P";
    let answered = tokio::time::timeout(REPLY, async {
        loop {
            if let Some(answer) = setup.platform.verify_url(challenge).await {
                return answer;
            }
            // The endpoint binds after auth.test; there is no signal to await
            // from another process but the port answering.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert_eq!(
        answered.ok(),
        Some((200, challenge.to_owned())),
        "url_verification:\n{}",
        herald.stderr()
    );
    (setup, herald)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_and_stale_events_api_requests_get_401_and_no_answer() {
    let (setup, herald) = start_events_mode().await;
    let slack = &setup.platform;
    let admin = slack.admin();
    let event = json!({
        "type": "message", "channel": slack.dm_chat(&admin), "user": admin.id,
        "text": "forged", "ts": "1700000000.000001", "event_ts": "1700000000.000001", "channel_type": "im"
    });
    let body = slack.event_callback_body(event);
    let now = chrono::Utc::now().timestamp() as u64;
    for (timestamp, secret, what) in [
        (now, "not-the-signing-secret", "a wrong signature"),
        (now - 301, SIGNING_SECRET, "a timestamp older than five minutes"),
        (now + 301, SIGNING_SECRET, "a timestamp from the future"),
    ] {
        let answer = slack
            .push_raw(&body, timestamp, &signature(secret, timestamp, &body))
            .await;
        assert_eq!(answer.map(|(status, _)| status), Some(401), "{what}");
    }
    // A genuine request after them is answered; the forged ones never were.
    slack.send_dm(&admin, "genuine").await;
    let sent = setup.sent(1, REPLY, &herald).await;
    assert_eq!(sent.len(), 1, "{sent:#?}");
    assert_eq!(sent[0].text, "echo: genuine");
    assert_eq!(setup.model_inputs(), ["genuine"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_slack_sends_again_are_answered_once() {
    let (setup, herald) = start_events_mode().await;
    let slack = &setup.platform;
    let admin = slack.admin();
    let chat = slack.dm_chat(&admin);
    let ts = "1700000000.000042";
    let body = slack.event_callback_body(json!({
        "client_msg_id": "0b9c5a8e-1111-4d0b-b6aa-000000000042", "type": "message", "text": "only once",
        "user": admin.id, "ts": ts, "team": "T0HERALD01", "channel": chat, "event_ts": ts, "channel_type": "im"
    }));
    let now = chrono::Utc::now().timestamp() as u64;
    let first = slack.push_raw(&body, now, &signature(SIGNING_SECRET, now, &body)).await;
    assert_eq!(first.map(|(status, _)| status), Some(200));
    // Slack did not see the answer in time and retries, twice.
    for retry in [1, 2] {
        let again = slack.push_again(&body, retry).await;
        assert_eq!(again.map(|(status, _)| status), Some(200), "retry {retry}");
    }
    // A mention in the channel comes as app_mention and as message.
    let group = slack.group();
    slack.send_group(&admin, &group, "mentioned once", true).await;
    // The DM conversation is served in order: a duplicate of the first
    // message would be answered before this one.
    slack.send_dm(&admin, "last").await;
    let sent = setup.sent(3, REPLY, &herald).await;
    let mut texts: Vec<&str> = sent.iter().map(|m| m.text.as_str()).collect();
    texts.sort_unstable();
    assert_eq!(
        texts,
        ["echo: last", "echo: mentioned once", "echo: only once"],
        "{sent:#?}"
    );
    let dm: Vec<&str> = sent
        .iter()
        .filter(|m| m.chat == chat)
        .map(|m| m.text.as_str())
        .collect();
    assert_eq!(dm, ["echo: only once", "echo: last"]);
    assert_eq!(setup.model.requests().len(), 3);
}

/// Web API server errors (a proxy's 502, Slack's `internal_error`), dropped
/// connections, a Socket Mode reconnect whose `apps.connections.open` fails
/// (slack-morphism tries again after its 30 s reconnect timeout), and a run
/// of 429s: every message is answered once, in order, and nothing is sent
/// before `Retry-After`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_dropped_connections_and_429_storms_are_waited_out() {
    use herald_testkit::faults::Fault;

    let setup = Setup::new(FakeSlack::start_quick().await).await;
    let internal = Fault::Status(200, r#"{"ok":false,"error":"internal_error"}"#.into());
    conformance::faults_and_a_429_storm_are_waited_out(
        setup,
        |slack| {
            slack.inject_faults("apps.connections.open", [Fault::bad_gateway()]);
            slack.request_reconnect("refresh_requested");
            slack.inject_faults("chat.postMessage", [Fault::Drop, Fault::bad_gateway(), internal]);
        },
        FakeSlack::faults_pending,
    )
    .await;
}
