//! Strangers at Herald's public endpoints, against the real `herald run`
//! binary: 150 connections that know no secret each trickle a 2 MB body
//! into the Telegram webhook and the Slack Events API. Herald must hold
//! them at a few megabytes, close every one within its header and body
//! timeouts, and still answer the platform's genuine requests.

#[macro_use]
mod conformance;

use std::net::SocketAddr;
use std::time::Duration;

use conformance::{REPLY, Running, Setup};
use herald_testkit::FakePlatform;
use herald_testkit::attack::{Outcome, Trickle, resident_bytes, trickle};
use herald_testkit::slack::FakeSlack;
use herald_testkit::telegram::FakeTelegram;

/// What the attack may add to Herald's resident memory.
const MAX_GROWTH: u64 = 16 * 1024 * 1024;
/// `herald_net::PublicLimits::WEBHOOK`'s header and body timeouts, and a
/// margin for a loaded machine.
const TIMEOUTS: Duration = Duration::from_secs(5);
const MARGIN: Duration = Duration::from_secs(3);
const CONNECTIONS: usize = 150;
const BODY: usize = 2_000_000;

fn free_address() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address")
}

/// Every connection was closed by Herald, each within `within` of opening.
fn all_closed_within(outcomes: &[Outcome], within: Duration) {
    let open = outcomes.iter().filter(|o| o.closed_after.is_none()).count();
    assert_eq!(open, 0, "{open} of {} connections were still open", outcomes.len());
    let slowest = outcomes.iter().filter_map(|o| o.closed_after).max().unwrap_or_default();
    assert!(slowest <= within, "the slowest connection was closed after {slowest:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crowd_without_the_secret_costs_the_webhook_megabytes_and_seconds() {
    let listen = free_address();
    let fake = FakeTelegram::start().await;
    let extra = format!(
        "    mode: webhook\n    webhook:\n      listen: \"{listen}\"\n      url: \"http://{listen}/telegram/hook\"\n      secret: \"hook-secret_42-long-enough-to-guard-0123\"\n"
    );
    let setup = Setup::with_extra(fake, &extra).await;
    let herald = setup.start().await;
    let admin = setup.platform.admin();
    // A genuine update first: the path is warm, its memory counted in.
    setup.platform.send_dm(&admin, "before").await;
    setup.sent(1, REPLY, &herald).await;

    let head = format!(
        "POST /telegram/hook HTTP/1.1\r\nhost: {listen}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
    );
    let attack = Trickle {
        address: listen,
        head,
        connections: CONNECTIONS,
        step_bytes: 1024,
        pause: Duration::from_millis(100),
        body_bytes: BODY,
        give_up_after: TIMEOUTS * 2 + MARGIN * 2,
        chunked: true,
    };
    let (outcomes, growth) = measured(&herald, attack).await;
    all_closed_within(&outcomes, TIMEOUTS + MARGIN);
    assert!(
        outcomes.iter().filter(|o| o.status == Some(401)).count() > 0,
        "requests without the secret are refused: {:?}",
        &outcomes[..3]
    );
    assert!(outcomes.iter().all(|o| o.status != Some(200)), "nothing was let in");
    assert!(growth <= MAX_GROWTH, "memory grew {} KiB", growth / 1024);

    // The platform's own requests still go through.
    setup.platform.send_dm(&admin, "after").await;
    let sent = setup.sent(2, REPLY, &herald).await;
    assert_eq!(sent[1].text, "echo: after");
    assert_eq!(setup.model_inputs(), ["before", "after"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crowd_with_forged_signatures_costs_the_events_api_megabytes_and_seconds() {
    let listen = free_address();
    let setup = Setup::new(FakeSlack::start_events(listen).await).await;
    let herald = setup.start().await;
    let admin = setup.platform.admin();
    // The endpoint binds after auth.test; the first genuine event that is
    // answered shows it is up.
    wait_until_answered(&setup, &herald, "before").await;

    // A fresh timestamp and a signature of the right form get a stranger
    // past the header checks; the body is what Slack signs, so it is read,
    // and that is what is bounded. Half declare no length (chunked), half
    // declare more than the cap.
    let timestamp = chrono::Utc::now().timestamp();
    let forged = format!("v0={}", "ab".repeat(32));
    let head = |framing: &str| {
        format!(
            "POST /slack/events HTTP/1.1\r\nhost: {listen}\r\ncontent-type: application/json\r\nx-slack-request-timestamp: {timestamp}\r\nx-slack-signature: {forged}\r\n{framing}\r\n"
        )
    };
    let chunked = Trickle {
        address: listen,
        head: head("transfer-encoding: chunked\r\n"),
        connections: CONNECTIONS / 2,
        step_bytes: 8 * 1024,
        pause: Duration::from_millis(50),
        body_bytes: BODY,
        give_up_after: TIMEOUTS * 2 + MARGIN * 2,
        chunked: true,
    };
    let declared = Trickle {
        head: head(&format!("content-length: {BODY}\r\n")),
        chunked: false,
        ..chunked.clone()
    };
    let ((chunked_outcomes, chunked_growth), (declared_outcomes, declared_growth)) =
        tokio::join!(measured(&herald, chunked), measured(&herald, declared));
    all_closed_within(&chunked_outcomes, TIMEOUTS + MARGIN);
    all_closed_within(&declared_outcomes, TIMEOUTS + MARGIN);
    let growth = chunked_growth.max(declared_growth);
    assert!(growth <= MAX_GROWTH, "memory grew {} KiB", growth / 1024);
    assert!(
        declared_outcomes.iter().any(|o| o.status == Some(413)),
        "a declared length over the cap is refused unread: {:?}",
        &declared_outcomes[..3]
    );
    let answered: Vec<Option<u16>> = chunked_outcomes.iter().map(|o| o.status).collect();
    assert!(
        answered
            .iter()
            .all(|status| matches!(status, None | Some(401 | 408 | 413 | 503))),
        "{answered:?}"
    );

    // Slack's own requests still go through.
    setup.platform.send_dm(&admin, "after").await;
    let sent = setup.sent(2, REPLY, &herald).await;
    assert_eq!(sent.last().map(|m| m.text.as_str()), Some("echo: after"));
}

/// Sends `text` as Slack until an answer to it comes (the Events API
/// endpoint binds only after `auth.test`).
async fn wait_until_answered(setup: &Setup<FakeSlack>, herald: &Running, text: &str) {
    let admin = setup.platform.admin();
    let answered = tokio::time::timeout(REPLY, async {
        loop {
            if setup.platform.verify_url("challenge").await.is_some() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(
        answered.is_ok(),
        "the Events API endpoint never answered:\n{}",
        herald.stderr()
    );
    setup.platform.send_dm(&admin, text).await;
    setup.sent(1, REPLY, herald).await;
}

/// Plays `attack` against `herald` while sampling its resident memory;
/// returns each connection's outcome and the most the memory grew.
async fn measured(herald: &Running, attack: Trickle) -> (Vec<Outcome>, u64) {
    let pid = herald.pid();
    let before = resident_bytes(pid).expect("herald's memory");
    let stop = tokio_util::sync::CancellationToken::new();
    let sampler = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut most = before;
            while !stop.is_cancelled() {
                if let Some(now) = resident_bytes(pid) {
                    most = most.max(now);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            most
        })
    };
    let outcomes = trickle(&attack).await;
    stop.cancel();
    let most = sampler.await.expect("the sampler");
    eprintln!("memory: {} KiB before, {} KiB at most", before / 1024, most / 1024);
    (outcomes, most.saturating_sub(before))
}
