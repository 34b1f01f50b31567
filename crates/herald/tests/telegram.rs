//! Telegram end to end: the conformance suite against the fake Bot API, and
//! what only Telegram has (updates kept for a bot that is down, forum
//! topics, `/start`).

#[macro_use]
mod conformance;

use std::time::Duration;

use conformance::{REPLY, Setup};
use herald_testkit::telegram::FakeTelegram;
use herald_testkit::{FakePlatform, Reply};

conformance_suite!(telegram, FakeTelegram::start);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_sent_while_herald_is_down_are_answered_after_it_starts() {
    let setup = Setup::new(FakeTelegram::start().await).await;
    let mut herald = setup.start().await;
    let admin = setup.platform.admin();
    setup.platform.send_dm(&admin, "before").await;
    setup.sent(1, REPLY, &herald).await;
    // Killed once the receipt is stored: a kill between the send and the
    // receipt would send that reply again (Telegram has no idempotency key).
    herald.wait_for_log("delivered", 1, REPLY).await;
    herald.kill().await;

    // Telegram keeps unconfirmed updates for a day; the stored offset says
    // where this bot stopped.
    for text in ["while down 1", "while down 2"] {
        setup.platform.send_dm(&admin, text).await;
    }
    let herald = setup.start().await;
    let sent = setup.sent(3, REPLY, &herald).await;
    let texts: Vec<&str> = sent.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(texts, ["echo: before", "echo: while down 1", "echo: while down 2"]);
    assert!(
        setup.platform.deliveries().values().all(|n| *n == 1),
        "each update was fetched once: {:?}",
        setup.platform.deliveries()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_is_answered_without_the_model_and_typing_shows_in_the_topic() {
    let setup = Setup::new(FakeTelegram::start().await).await;
    let herald = setup.start().await;
    let admin = setup.platform.admin();
    setup.platform.send_dm(&admin, "/start").await;
    let sent = setup.sent(1, REPLY, &herald).await;
    assert!(sent[0].text.starts_with("Hello, I'm Herald."), "{}", sent[0].text);
    assert!(setup.model.requests().is_empty(), "/start costs no model call");

    // The model thinks until released: the indicator shows in the topic
    // meanwhile, and is renewed before Telegram lets it fade (5 s).
    setup.model.push(Reply::Hang);
    let group = setup.platform.group();
    let asked = setup.platform.send_group(&admin, &group, "in the topic", true).await;
    let typing_in_topic = |fake: &FakeTelegram| {
        fake.chat_actions()
            .iter()
            .filter(|a| a.chat == group.chat && a.thread == group.thread && a.action == "typing")
            .count()
    };
    assert!(
        setup
            .platform
            .wait_until(REPLY, |fake| typing_in_topic(fake) >= 2)
            .await,
        "{:?}",
        setup.platform.chat_actions()
    );
    assert_eq!(setup.platform.sent().len(), 1, "no reply before the model answered");
    setup.model.release();
    let sent = setup.sent(2, REPLY, &herald).await;
    assert_eq!(
        sent[1].text, "echo: in the topic",
        "the @mention is not part of what Herald read"
    );
    assert_eq!(sent[1].thread, group.thread);
    assert_eq!(sent[1].reply_to.as_deref(), Some(asked.as_str()));
    let shown = typing_in_topic(&setup.platform);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(typing_in_topic(&setup.platform), shown, "no indicator after the reply");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_to_the_bot_in_a_plain_group_is_answered_there() {
    let setup = Setup::new(FakeTelegram::start().await).await;
    let herald = setup.start().await;
    let admin = setup.platform.admin();
    let plain = setup.platform.plain_group();
    setup
        .platform
        .send_group(&admin, &plain, "first, addressed", true)
        .await;
    setup.sent(1, REPLY, &herald).await;
    let bot_message = setup.platform.sent_json()[0]["message_id"].as_i64().unwrap() as i32;
    setup
        .platform
        .send_group_reply(&admin, &plain, "a reply without a mention", bot_message);
    let sent = setup.sent(2, Duration::from_secs(30), &herald).await;
    assert_eq!(sent[1].text, "echo: a reply without a mention");
    assert_eq!(sent[1].chat, plain.chat);
    assert_eq!(sent[1].thread, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_checks_the_token_with_get_me_and_never_prints_it() {
    let doctor = |config: std::path::PathBuf| async move {
        let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_herald"))
            .arg("--config")
            .arg(config)
            .arg("doctor")
            .env_remove("RUST_LOG")
            .output()
            .await
            .expect("herald doctor runs");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let setup = Setup::new(FakeTelegram::start().await).await;
    let report = doctor(setup.config.clone()).await;
    assert!(
        report.contains("ok   channel telegram: @herald_test_bot (id 7100200300)"),
        "{report}"
    );

    let token = setup.platform.token();
    let wrong = std::fs::read_to_string(&setup.config)
        .unwrap()
        .replace(&token, "7100200300:AAE-wrong-secret");
    let path = setup.dir.path().join("wrong.yaml");
    std::fs::write(&path, wrong).unwrap();
    let report = doctor(path).await;
    assert!(report.contains("FAIL channel telegram"), "{report}");
    assert!(!report.contains("wrong-secret"), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_approves_a_pairing_code_from_the_command_line() {
    let setup = Setup::new(FakeTelegram::start().await).await;
    let herald = setup.start().await;
    let stranger = setup.platform.stranger();
    setup.platform.send_dm(&stranger, "let me in").await;
    let sent = setup.sent(1, REPLY, &herald).await;
    let code = sent[0]
        .text
        .split("/pair approve ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no pairing code in {:?}", sent[0].text))
        .to_owned();

    let pair = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_herald"))
            .arg("--config")
            .arg(&setup.config)
            .arg("pair")
            .args(args)
            .output()
            .expect("run herald pair")
    };
    let listed = pair(&["list"]);
    let listed_text = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.status.success(), "{listed:?}");
    assert!(listed_text.contains(&code), "{listed_text}");
    assert!(
        listed_text.contains(&format!("telegram:{}", stranger.id)),
        "{listed_text}"
    );

    let wrong = pair(&["approve", "ZZZZZZ"]);
    assert!(!wrong.status.success(), "an unknown code is an error");
    let approved = pair(&["approve", &code.to_lowercase()]);
    assert!(approved.status.success(), "{approved:?}");

    setup.platform.send_dm(&stranger, "thanks").await;
    let sent = setup.sent(2, REPLY, &herald).await;
    assert_eq!(sent[1].text, "echo: thanks");
    // The code was used up.
    assert!(!pair(&["approve", &code]).status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_dropped_connections_and_429_storms_are_waited_out() {
    use herald_testkit::faults::Fault;

    let setup = Setup::new(FakeTelegram::start().await).await;
    let internal = Fault::Status(
        500,
        r#"{"ok":false,"error_code":500,"description":"Internal Server Error"}"#.into(),
    );
    // Polling meets a bad gateway, a dropped connection and a Bot API 500;
    // sending meets the same.
    conformance::faults_and_a_429_storm_are_waited_out(
        setup,
        |telegram| {
            telegram.inject_faults("getUpdates", [Fault::bad_gateway(), Fault::Drop, internal.clone()]);
            telegram.inject_faults("sendMessage", [Fault::Drop, Fault::bad_gateway(), internal]);
        },
        FakeTelegram::faults_pending,
    )
    .await;
}
