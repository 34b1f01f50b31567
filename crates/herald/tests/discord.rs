//! Discord end to end: the conformance suite against the fake Discord REST
//! API and gateway websocket, and what only Discord has (idempotent sends,
//! sessions resumed across restarts, shards shared by processes).

#[macro_use]
mod conformance;

use std::time::Duration;

use conformance::{Options, REPLY, Running, Setup};
use herald_testkit::FakePlatform;
use herald_testkit::discord::FakeDiscord;
use herald_testkit::faults::Fault;
use herald_testkit::postgres::TestDatabase;

conformance_suite!(discord, FakeDiscord::start);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_whose_answer_was_lost_is_posted_once() {
    let setup = Setup::new(FakeDiscord::start().await).await;
    let mut herald = setup.start().await;
    let admin = setup.platform.admin();
    // Discord creates the message but the answer never arrives; the next
    // tries meet a bad gateway and a dropped connection. The enforced nonce
    // makes the try that gets through return the message made at first.
    setup
        .platform
        .inject_message_faults([Fault::LoseAnswer, Fault::bad_gateway(), Fault::Drop]);
    setup.platform.send_dm(&admin, "once").await;
    herald.wait_for_log("delivered", 1, REPLY).await;
    let texts: Vec<String> = setup.platform.sent().into_iter().map(|m| m.text).collect();
    assert_eq!(texts, ["echo: once"], "posted once:\n{}", herald.stderr());
    assert_eq!(setup.model.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_herald_resumes_its_session_and_answers_what_was_written_while_it_was_down() {
    let setup = Setup::new(FakeDiscord::start().await).await;
    let herald = setup.start().await;
    let admin = setup.platform.admin();
    setup.platform.send_dm(&admin, "before").await;
    setup.sent(1, REPLY, &herald).await;
    // Killed: no goodbye to the gateway, the session kept as of READY.
    herald.kill().await;
    setup.platform.send_dm_while_away(&admin, "while down");
    let herald = setup.start().await;
    let sent = setup.sent(2, REPLY, &herald).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let texts: Vec<String> = setup.platform.sent().into_iter().map(|m| m.text).collect();
    assert_eq!(
        texts,
        ["echo: before", "echo: while down"],
        "the replayed message is answered once:\n{}",
        herald.stderr()
    );
    assert_eq!(sent.len(), 2);
    assert_eq!(setup.platform.resumes(), 1, "resumed, not identified anew");
    assert_eq!(setup.platform.identifies().len(), 1);
}

/// How many shards `herald` runs now, by its own log.
fn shards_run(herald: &Running) -> usize {
    let log = herald.stderr();
    let taken = log.matches("running a discord shard").count();
    let given = log.matches("giving a discord shard").count() + log.matches("lost the lock of a discord shard").count();
    taken.saturating_sub(given)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_on_postgres_run_one_shard_each_and_take_over_each_others() {
    let Some(database) = TestDatabase::from_env("herald_discord_shards").await else {
        return;
    };
    let platform = FakeDiscord::start().await;
    platform.set_recommended_shards(2);
    let setup = Setup::with_options(
        platform,
        Options {
            storage_url: Some(database.url.clone()),
            log_level: "warn,herald=info,herald_agent=info,herald_channels=info",
            ..Options::default()
        },
    )
    .await;
    let first = setup.start().await;
    let second = setup.start().await;
    let spread = tokio::time::timeout(Duration::from_secs(40), async {
        while !(shards_run(&first) == 1 && shards_run(&second) == 1 && setup.platform.connected_shards().len() == 2) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(
        spread.is_ok(),
        "one shard each: {:?}\n--- first ---\n{}\n--- second ---\n{}",
        setup.platform.connected_shards(),
        first.stderr(),
        second.stderr()
    );
    // The first guild is on shard 1, the second on shard 0: each process
    // receives one guild's messages, and each is answered once.
    let admin = setup.platform.admin();
    setup
        .platform
        .send_group(&admin, &setup.platform.group(), "guild one", true)
        .await;
    let elsewhere = setup.platform.second_guild_channel();
    setup.platform.send_group(&admin, &elsewhere, "guild two", true).await;
    setup.sent(2, REPLY, &second).await;

    // The first process dies; the second takes its shard over and resumes
    // its session, so what is written meanwhile arrives.
    first.kill().await;
    setup
        .platform
        .send_group(&admin, &elsewhere, "after the kill", true)
        .await;
    setup
        .platform
        .send_group(&admin, &setup.platform.group(), "and here", true)
        .await;
    setup.sent(4, Duration::from_secs(60), &second).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut texts: Vec<String> = setup.platform.sent().into_iter().map(|m| m.text).collect();
    texts.sort();
    assert_eq!(
        texts,
        [
            "echo: after the kill",
            "echo: and here",
            "echo: guild one",
            "echo: guild two"
        ],
        "{}",
        second.stderr()
    );
    assert_eq!(setup.platform.connected_shards(), [[0, 2], [1, 2]]);
    assert!(setup.platform.resumes() >= 1, "the orphaned shard was resumed");
    assert_eq!(setup.platform.violations(), Vec::<String>::new());
}
