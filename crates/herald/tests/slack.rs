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

/// The Bot Token Scopes docs/channels.md tells people to grant, as written
/// there (every backticked word of that step).
fn documented_scopes() -> Vec<String> {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/channels.md")).unwrap();
    let step = docs
        .split("\n2. **OAuth & Permissions → Bot Token Scopes**")
        .nth(1)
        .and_then(|rest| rest.split("\n3. ").next())
        .expect("docs/channels.md lists the Slack bot scopes");
    step.split('`')
        .skip(1)
        .step_by(2)
        .filter(|word| word.contains(':'))
        .map(str::to_owned)
        .collect()
}

fn person(n: u64) -> herald_testkit::FakeUser {
    herald_testkit::FakeUser {
        id: format!("U0NEW{n:05}"),
        name: format!("Person {n}"),
    }
}

/// A hundred people Herald has never seen write at once while `users.info`
/// takes a quarter of a second: every envelope is acknowledged within a
/// second (names are looked up after, off the acknowledgement's way), none
/// comes back as a retry, each is answered once, and each new sender is
/// looked up once. The bot token has exactly the scopes docs/channels.md
/// lists, so a lookup those scopes do not allow would show here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_new_senders_at_once_are_acknowledged_within_a_second_with_the_documented_scopes() {
    let scopes = documented_scopes();
    assert!(scopes.iter().any(|s| s == "users:read"), "{scopes:?}");
    let slack = FakeSlack::start_with(herald_testkit::slack::FakeSlackOptions {
        scopes: Some(scopes),
        ..herald_testkit::slack::FakeSlackOptions::quick()
    })
    .await;
    slack.set_users_info_delay(Duration::from_millis(250));
    let setup = Setup::with_options(
        slack,
        conformance::Options {
            access_unknown: "allow",
            ..conformance::Options::default()
        },
    )
    .await;
    let herald = setup.start().await;
    let slack = &setup.platform;
    for n in 0..100 {
        slack.send_dm(&person(n), &format!("hello {n}")).await;
    }
    let acked = tokio::time::timeout(REPLY, async {
        while slack.acked().len() < 100 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        acked.is_ok(),
        "{} acknowledged:\n{}",
        slack.acked().len(),
        herald.stderr()
    );
    let waits = slack.ack_waits();
    let slowest = waits.iter().max().copied().unwrap_or_default();
    assert!(slowest < Duration::from_secs(1), "the slowest ack took {slowest:?}");
    let sent = setup.sent(100, Duration::from_secs(60), &herald).await;
    assert_eq!(sent.len(), 100);
    for n in 0..100 {
        let answers = sent.iter().filter(|m| m.text == format!("echo: hello {n}")).count();
        assert_eq!(answers, 1, "hello {n} answered {answers} times");
    }
    assert!(slack.dropped().is_empty());
    // The lookups go on after the answers, eight at a time.
    let lookups = || slack.calls().iter().filter(|m| *m == "users.info").count();
    let looked_up = tokio::time::timeout(REPLY, async {
        while lookups() < 100 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(looked_up.is_ok(), "{} looked up", lookups());
    // Messages from people already named wait for no lookup.
    slack.send_dm(&person(7), "again").await;
    let sent = setup.sent(101, REPLY, &herald).await;
    assert_eq!(sent[100].text, "echo: again");
    assert_eq!(lookups(), 100, "each new sender looked up once");
    assert!(
        !herald.stderr().contains("missing_scope"),
        "a call the documented scopes do not allow:\n{}",
        herald.stderr()
    );
}

/// A mention at the top of a channel is answered in a thread under it, and
/// a reply in that thread continues the same conversation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_top_level_channel_mention_is_answered_in_a_thread_under_it() {
    let setup = Setup::new(FakeSlack::start_quick().await).await;
    let herald = setup.start().await;
    let slack = &setup.platform;
    let admin = slack.admin();
    let top = herald_testkit::GroupTarget {
        chat: herald_testkit::slack::GENERAL.into(),
        thread: None,
    };
    let ts = slack.send_group(&admin, &top, "where is atlas?", true).await;
    let sent = setup.sent(1, REPLY, &herald).await;
    assert_eq!(sent[0].text, "echo: where is atlas?");
    assert_eq!(sent[0].chat, herald_testkit::slack::GENERAL);
    assert_eq!(
        sent[0].thread.as_deref(),
        Some(ts.as_str()),
        "answered in the thread under it"
    );

    let thread = herald_testkit::GroupTarget {
        chat: herald_testkit::slack::GENERAL.into(),
        thread: Some(ts.clone()),
    };
    slack.send_group(&admin, &thread, "and its address?", true).await;
    let sent = setup.sent(2, REPLY, &herald).await;
    assert_eq!(sent[1].thread.as_deref(), Some(ts.as_str()));
    let second = setup.model.requests()[1].to_string();
    assert!(second.contains("where is atlas?"), "the thread's history: {second}");
}
