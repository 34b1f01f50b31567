//! Herald in production shape: several `herald run` processes on one
//! database, killed at random and restarted, split by role, watched through
//! `/metrics` and `/readyz`. Every scenario runs the real binary against the
//! fake Telegram and the scripted model.

mod conformance;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use conformance::{BURST, Options, REPLY, Running, Setup};
use herald_core::TaskPayload;
use herald_testkit::postgres::TestDatabase;
use herald_testkit::telegram::FakeTelegram;
use herald_testkit::{FakePlatform, FakeUser};
use rand::Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn free_address() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address")
}

/// `GET path` over plain HTTP/1.0: the status code and the body.
async fn get(address: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_owned()))
}

/// Asks `path` until it answers `status`, for at most `within`.
async fn wait_for_status(address: SocketAddr, path: &str, status: u16, within: Duration) -> (u16, String) {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let answer = get(address, path).await;
        match answer {
            Some((code, body)) if code == status => return (code, body),
            other if tokio::time::Instant::now() >= deadline => {
                panic!("{path} never answered {status}; last answer: {other:?}")
            }
            // The endpoint is another process: there is nothing to await
            // but its answer changing.
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// The value of the sample `series` (name and labels exactly as rendered).
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_health_and_readiness_report_what_happened() {
    let listen = free_address();
    let setup = Setup::with_extra(
        FakeTelegram::start().await,
        &format!("observability:\n  listen: {listen}\n"),
    )
    .await;
    let herald = setup.start().await;
    assert_eq!(get(listen, "/healthz").await, Some((200, "ok\n".into())));
    wait_for_status(listen, "/readyz", 200, REPLY).await;

    let admin = setup.platform.admin();
    setup.platform.send_dm(&admin, "count me").await;
    setup.sent(1, REPLY, &herald).await;
    let stranger = setup.platform.stranger();
    setup.platform.send_dm(&stranger, "who am I").await;
    setup.sent(2, REPLY, &herald).await;

    let expected = [
        (r#"herald_turns_total{channel="telegram",outcome="completed"}"#, 1.0),
        (r#"herald_messages_sent_total{channel="telegram"}"#, 2.0),
        (
            r#"herald_inbound_messages_total{channel="telegram",outcome="queued"}"#,
            1.0,
        ),
        (
            r#"herald_inbound_messages_total{channel="telegram",outcome="denied"}"#,
            1.0,
        ),
        (r#"herald_model_requests_total{outcome="ok"}"#, 1.0),
        (r#"herald_queue_tasks{state="queued"}"#, 0.0),
        (r#"herald_channel_connected{channel="telegram"}"#, 1.0),
    ];
    // Counters move just after what the fake saw (a send is counted when
    // its answer is back, a turn when its task completed): scrape until
    // they caught up.
    let deadline = tokio::time::Instant::now() + REPLY;
    let metrics = loop {
        let (_, metrics) = get(listen, "/metrics").await.expect("/metrics answers");
        let caught_up = expected
            .iter()
            .all(|(series, value)| sample(&metrics, series) == Some(*value));
        if caught_up || tokio::time::Instant::now() >= deadline {
            break metrics;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    for (series, value) in expected {
        assert_eq!(sample(&metrics, series), Some(value), "{series} in:\n{metrics}");
    }
    assert!(
        metrics.contains("# TYPE herald_turn_duration_seconds histogram"),
        "{metrics}"
    );
    assert!(
        sample(
            &metrics,
            r#"herald_turn_duration_seconds_count{channel="telegram",outcome="completed"}"#
        ) == Some(1.0),
        "{metrics}"
    );
    // No message text and no user ids in what operators scrape.
    for private in ["count me", "who am I", &admin.id, &stranger.id] {
        assert!(!metrics.contains(private), "{private:?} leaked into /metrics");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_names_a_channel_that_cannot_connect() {
    let listen = free_address();
    let platform = FakeTelegram::start().await;
    let setup = Setup::with_extra(platform, &format!("observability:\n  listen: {listen}\n")).await;
    // The same bot with a token Telegram does not know.
    let config = std::fs::read_to_string(&setup.config).unwrap();
    let token = config
        .lines()
        .find_map(|line| line.trim().strip_prefix("token: "))
        .expect("a token line")
        .to_owned();
    std::fs::write(&setup.config, config.replace(&token, "\"1:not-the-token\"")).unwrap();
    let herald = setup.start().await;
    let (_, body) = wait_for_status(listen, "/readyz", 503, REPLY).await;
    assert!(body.contains("telegram: not connected"), "{body}");
    assert_eq!(get(listen, "/healthz").await.map(|(code, _)| code), Some(200));
    drop(herald);
}

/// Ten users writing to the bot in turn.
fn users() -> Vec<FakeUser> {
    (0..10)
        .map(|n| FakeUser {
            id: format!("70000{n:02}"),
            name: format!("user{n}"),
        })
        .collect()
}

/// One kill of `crash_and_restart`: how many replies the platform had, and
/// the messages whose task had no delivery receipt, just after it.
#[derive(Debug)]
struct Kill {
    sent: usize,
    unreceipted: BTreeSet<usize>,
}

/// The `n` of every message `m{n}` whose task has no delivery receipt, read
/// from the database itself.
async fn unreceipted(storage_url: &str) -> BTreeSet<usize> {
    let query = "SELECT payload FROM tasks t WHERE NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.task_id = t.id)";
    let payloads: Vec<String> = if storage_url.starts_with("sqlite:") {
        let pool = sqlx::SqlitePool::connect(storage_url).await.expect("open the database");
        let payloads = sqlx::query_scalar(query).fetch_all(&pool).await.expect("read tasks");
        pool.close().await;
        payloads
    } else {
        let pool = sqlx::PgPool::connect(storage_url).await.expect("open the database");
        let payloads = sqlx::query_scalar(query).fetch_all(&pool).await.expect("read tasks");
        pool.close().await;
        payloads
    };
    payloads
        .iter()
        .filter_map(|payload| match serde_json::from_str(payload).expect("a task payload") {
            TaskPayload::Message(message) => message.text.strip_prefix('m')?.parse().ok(),
            TaskPayload::Instruction { .. } => None,
        })
        .collect()
}

/// Messages still to be served, read from the database itself.
async fn unfinished_tasks(storage_url: &str) -> i64 {
    let query = "SELECT COUNT(*) FROM tasks WHERE state IN ('queued', 'leased')";
    if storage_url.starts_with("sqlite:") {
        let pool = sqlx::SqlitePool::connect(storage_url).await.expect("open the database");
        let count = sqlx::query_scalar(query).fetch_one(&pool).await.expect("count tasks");
        pool.close().await;
        count
    } else {
        let pool = sqlx::PgPool::connect(storage_url).await.expect("open the database");
        let count = sqlx::query_scalar(query).fetch_one(&pool).await.expect("count tasks");
        pool.close().await;
        count
    }
}

/// Drives `total` messages from ten users through `processes` copies of
/// `herald run` sharing one database, killing one of them with SIGKILL at
/// random moments and starting it again, then checks that every message got
/// exactly one reply, in order per user.
///
/// One gap no chat API lets a client close is allowed and checked: a process
/// killed after Telegram accepted a reply and before Herald stored its
/// receipt sends that reply again. Such a duplicate must have its first copy
/// sent before a kill that left its task without a receipt, and its second
/// after it. (How many replies the process sent between the first copy and
/// its death depends on how many turns it had in flight, so it is not a
/// bound.)
async fn crash_and_restart(setup: Setup<FakeTelegram>, storage_url: &str, processes: usize, total: usize) {
    let mut running: Vec<Running> = Vec::new();
    for _ in 0..processes {
        running.push(setup.start().await);
    }
    let users = users();
    let platform = &setup.platform;
    let sending = async {
        for n in 0..total {
            platform.send_dm(&users[n % users.len()], &format!("m{n}")).await;
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
    };
    let killing = async {
        let mut kills: Vec<Kill> = Vec::new();
        let mut deadline = tokio::time::Instant::now();
        let sending_time = Duration::from_millis(40) * total as u32;
        let end = deadline + sending_time;
        while deadline < end {
            let pause = rand::thread_rng().gen_range(500..2000);
            deadline += Duration::from_millis(pause);
            tokio::time::sleep_until(deadline).await;
            let victim = rand::thread_rng().gen_range(0..running.len());
            let process = running.swap_remove(victim);
            process.kill().await;
            // What the killed process left: the replies it sent without a
            // receipt may go out again. The count is read after the
            // database, so it includes every reply the dead process sent.
            let open = unreceipted(storage_url).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
            kills.push(Kill {
                sent: platform.sent().len(),
                unreceipted: open,
            });
            running.push(setup.start().await);
        }
        kills
    };
    let ((), kills) = tokio::join!(sending, killing);
    assert!(kills.len() >= 3, "only {} kills happened", kills.len());

    let stderr = || running.iter().map(Running::stderr).collect::<Vec<_>>().join("\n---\n");
    let sent = platform.wait_for_sent(total, BURST).await;
    assert!(sent.len() >= total, "{} of {total} replies:\n{}", sent.len(), stderr());
    let drained = tokio::time::timeout(BURST, async {
        while unfinished_tasks(storage_url).await > 0 {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    assert!(drained.is_ok(), "the queue never drained:\n{}", stderr());
    let sent = platform.sent();

    let mut copies: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (index, message) in sent.iter().enumerate() {
        let n: usize = message
            .text
            .strip_prefix("echo: m")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("an unexpected message: {message:?}"));
        copies.entry(n).or_default().push(index);
    }
    let missing: Vec<usize> = (0..total).filter(|n| !copies.contains_key(n)).collect();
    assert!(
        missing.is_empty(),
        "messages without a reply: {missing:?}\n{}",
        stderr()
    );
    let mut explained = 0;
    for (n, indexes) in &copies {
        if indexes.len() == 1 {
            continue;
        }
        assert_eq!(
            indexes.len(),
            2,
            "m{n} was answered {} times (sends {indexes:?}; kills: {kills:?})\n{}",
            indexes.len(),
            stderr()
        );
        let (first, second) = (indexes[0], indexes[1]);
        let in_the_gap = kills
            .iter()
            .any(|kill| first < kill.sent && second >= kill.sent && kill.unreceipted.contains(n));
        assert!(
            in_the_gap,
            "m{n} was answered twice (sends {first} and {second}), not sent again after a kill that left it without a receipt (kills: {kills:?})"
        );
        explained += 1;
    }
    for user in &users {
        let chat = platform.dm_chat(user);
        let order: Vec<usize> = sent
            .iter()
            .filter(|m| m.chat == chat)
            .filter_map(|m| m.text.strip_prefix("echo: m")?.parse().ok())
            .collect();
        let mut seen = order.clone();
        seen.dedup();
        assert!(
            seen.windows(2).all(|w| w[0] < w[1]),
            "{} was answered out of order: {order:?}",
            user.name
        );
    }
    assert!(platform.violations().is_empty(), "{:?}", platform.violations());
    eprintln!(
        "{total} messages, {} kills, {} replies, {explained} sent again in the send-to-receipt gap",
        kills.len(),
        sent.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_at_random_and_restarted_every_message_is_answered_once_on_sqlite() {
    let platform = FakeTelegram::start().await;
    let setup = Setup::with_options(
        platform,
        Options {
            access_unknown: "allow",
            ..Options::default()
        },
    )
    .await;
    let url = format!("sqlite://{}", setup.dir.path().join("herald.db").display());
    crash_and_restart(setup, &url, 1, 300).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_on_postgres_killed_at_random_answer_every_message_once() {
    let Some(database) = TestDatabase::from_env("herald_e2e").await else {
        return;
    };
    let setup = Setup::with_options(
        FakeTelegram::start().await,
        Options {
            storage_url: Some(database.url.clone()),
            access_unknown: "allow",
            ..Options::default()
        },
    )
    .await;
    crash_and_restart(setup, &database.url, 2, 300).await;
}

/// A process killed in the middle of a turn leaves its task to the other
/// process at once, not after its lease: the lease here is an hour, so only
/// the takeover of a dead holder's tasks can answer within the test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_held_by_a_killed_process_is_taken_over_long_before_its_lease() {
    let Some(database) = TestDatabase::from_env("herald_e2e").await else {
        return;
    };
    let setup = Setup::with_options(
        FakeTelegram::start().await,
        Options {
            storage_url: Some(database.url.clone()),
            ..Options::default()
        },
    )
    .await;
    let config = std::fs::read_to_string(&setup.config).unwrap();
    assert!(config.contains("lease: 2s"), "{config}");
    std::fs::write(&setup.config, config.replace("lease: 2s", "lease: 1h")).unwrap();

    let first = setup.start().await;
    setup.model.push(herald_testkit::Reply::Hang);
    let admin = setup.platform.admin();
    setup.platform.send_dm(&admin, "still there?").await;
    tokio::time::timeout(REPLY, setup.model.wait_for_requests(1))
        .await
        .expect("the turn reached the model");
    first.kill().await;

    let second = setup.start().await;
    let sent = setup.sent(1, REPLY, &second).await;
    let texts: Vec<&str> = sent.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(texts, ["echo: still there?"]);
    assert_eq!(
        setup.model.requests().len(),
        2,
        "the killed turn and the one taken over"
    );
    assert_eq!(unfinished_tasks(&database.url).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_process_takes_over_polling_when_the_holder_dies() {
    let setup = Setup::new(FakeTelegram::start().await).await;
    let mut first = setup.start().await;
    first.wait_for_log("polling Telegram for updates", 1, REPLY).await;
    let mut second = setup.start().await;
    second.wait_for_log("standing by", 1, REPLY).await;
    let admin = setup.platform.admin();
    setup.platform.send_dm(&admin, "one").await;
    setup.sent(1, REPLY, &second).await;
    // Either process may have served it; killed only once its receipt is
    // stored (a kill between send and receipt would send it again).
    let stored = tokio::time::timeout(REPLY, async {
        while !(first.stderr().contains("delivered") || second.stderr().contains("delivered")) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        stored.is_ok(),
        "no receipt stored:\n{}\n---\n{}",
        first.stderr(),
        second.stderr()
    );

    first.kill().await;
    // The standby takes the lock on its next try and polls from the stored offset.
    second.wait_for_log("polling Telegram for updates", 1, REPLY).await;
    setup.platform.send_dm(&admin, "two").await;
    let sent = setup.sent(2, REPLY, &second).await;
    let texts: Vec<&str> = sent.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(texts, ["echo: one", "echo: two"]);
    assert!(
        setup.platform.deliveries().values().all(|n| *n == 1),
        "one poller at a time: {:?}",
        setup.platform.deliveries()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ingress_process_queues_and_a_worker_process_answers() {
    let Some(database) = TestDatabase::from_env("herald_e2e").await else {
        return;
    };
    let setup = Setup::with_options(
        FakeTelegram::start().await,
        Options {
            storage_url: Some(database.url.clone()),
            ..Options::default()
        },
    )
    .await;
    let mut ingress = setup.start_with(&["--role", "ingress"]).await;
    ingress.wait_for_log("polling Telegram for updates", 1, REPLY).await;
    let admin = setup.platform.admin();
    setup.platform.send_dm(&admin, "queued first").await;
    let queued = tokio::time::timeout(REPLY, async {
        while unfinished_tasks(&database.url).await == 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(
        queued.is_ok(),
        "the ingress process queued nothing:\n{}",
        ingress.stderr()
    );
    assert!(setup.model.requests().is_empty(), "an ingress process runs no turns");
    assert!(setup.platform.sent().is_empty());

    let worker = setup.start_with(&["--role", "worker"]).await;
    let sent = setup.sent(1, REPLY, &worker).await;
    assert_eq!(sent[0].text, "echo: queued first");
    assert!(
        !worker.stderr().contains("polling Telegram"),
        "a worker process does not receive:\n{}",
        worker.stderr()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_the_turn_in_flight_and_hands_back_the_one_past_the_deadline() {
    let setup = Setup::with_options(
        FakeTelegram::start().await,
        Options {
            access_unknown: "allow",
            extra: "agent:\n  drain_timeout: 2s\n".into(),
            ..Options::default()
        },
    )
    .await;
    setup.model.set_fallback(|request| {
        let text = herald_testkit::openai::last_user_text(request).unwrap_or_default();
        match text.as_str() {
            "slow" => herald_testkit::Reply::Delayed(
                Duration::from_millis(800),
                Box::new(herald_testkit::Reply::Text("echo: slow".into())),
            ),
            "stuck" => herald_testkit::Reply::Hang,
            _ => herald_testkit::Reply::Text(format!("echo: {text}")),
        }
    });
    let herald = setup.start().await;
    let [ann, bob] = [users()[0].clone(), users()[1].clone()];
    setup.platform.send_dm(&ann, "slow").await;
    setup.platform.send_dm(&bob, "stuck").await;
    tokio::time::timeout(REPLY, setup.model.wait_for_requests(2))
        .await
        .expect("both turns reached the model");

    let status = herald.terminate(REPLY).await;
    assert!(status.success(), "exit status {status:?}");
    let sent = setup.platform.sent();
    let texts: Vec<&str> = sent.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(texts, ["echo: slow"], "the turn that could finish did, before the exit");
    // A message sent after the stop waits at Telegram.
    setup.platform.send_dm(&ann, "after").await;

    // The stuck turn was handed back, not lost: the next process serves it.
    setup.model.set_fallback(|request| {
        let text = herald_testkit::openai::last_user_text(request).unwrap_or_default();
        herald_testkit::Reply::Text(format!("echo: {text}"))
    });
    let herald = setup.start().await;
    let sent = setup.sent(3, REPLY, &herald).await;
    let mut texts: Vec<&str> = sent.iter().map(|m| m.text.as_str()).collect();
    texts.sort_unstable();
    assert_eq!(texts, ["echo: after", "echo: slow", "echo: stuck"]);
}
