//! Answers streamed into place, through the real `herald run` binary with
//! `llm.stream` on and the scripted model writing slowly (one word per
//! gap, as a local model does): the first part shows early, the same
//! message is edited as the answer grows and ends as the exact final text,
//! the platforms' send rules hold, and a worker killed mid-answer leaves
//! one reply, edited, not two.

#[macro_use]
mod conformance;

use std::time::Duration;

use conformance::{Options, REPLY, Setup};
use herald_testkit::discord::FakeDiscord;
use herald_testkit::slack::FakeSlack;
use herald_testkit::telegram::{FakeTelegram, FakeTelegramOptions};
use herald_testkit::{FakePlatform, Reply};

const WORDS: usize = 60;

/// An answer of `WORDS` words in Markdown, with a list and bold.
fn answer(tag: &str) -> String {
    let words: Vec<String> = (0..WORDS).map(|n| format!("w{n}")).collect();
    format!(
        "**{tag}:** {}.\n\n- {}\n- last item",
        words[..WORDS / 2].join(" "),
        words[WORDS / 2..].join(" ")
    )
}

fn streaming() -> Options {
    Options {
        llm: "  stream: true\n".into(),
        ..Options::default()
    }
}

fn visible(markdown: &str) -> String {
    herald_channels::markdown::telegram::render(markdown).text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_answer_shows_early_and_is_edited_into_the_exact_final_text() {
    let setup = Setup::with_options(FakeTelegram::start().await, streaming()).await;
    let herald = setup.start().await;
    let final_text = answer("Plan");
    // About six seconds of writing, as a model at ten words a second.
    setup
        .model
        .push(Reply::Slow(Duration::from_millis(100), final_text.clone()));
    setup.platform.send_dm(&setup.platform.admin(), "plan my day").await;
    let done = setup
        .platform
        .wait_until(REPLY, |fake| {
            fake.bot_messages()
                .first()
                .is_some_and(|m| m.text == visible(&final_text))
        })
        .await;
    assert!(done, "{:#?}\n{}", setup.platform.bot_messages(), herald.stderr());
    let sent = setup.platform.sent();
    assert_eq!(sent.len(), 1, "one message, edited in place: {sent:#?}");
    // What showed first was a beginning of the answer, long before its end.
    assert!(
        sent[0].text.len() < visible(&final_text).len() / 2,
        "first shown: {:?}",
        sent[0].text
    );
    let edits = setup.platform.edits();
    assert!(edits.len() >= 3, "the message grew as the answer did: {}", edits.len());
    // Partial edits come at most about once a second; the final one goes
    // as soon as the answer is complete and the send windows allow.
    let partial = &edits[..edits.len() - 1];
    for pair in partial.windows(2) {
        assert!(
            pair[1].at.duration_since(pair[0].at) >= Duration::from_millis(900),
            "edits {:?} apart",
            pair[1].at.duration_since(pair[0].at)
        );
    }
    let last = edits.last().unwrap();
    assert_eq!(last.parse_mode.as_deref(), Some("HTML"), "the final text is rendered");
    assert!(last.entities.iter().any(|entity| entity["type"] == "bold"));
    // Typing stops once text is visible (it would blink over the answer).
    assert!(
        setup.platform.chat_actions().len() <= 1,
        "{:?}",
        setup.platform.chat_actions()
    );
    assert!(
        setup.platform.violations().is_empty(),
        "{:?}",
        setup.platform.violations()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_turn_retried_after_sigkill_edits_the_same_message() {
    let setup = Setup::with_options(FakeTelegram::start().await, streaming()).await;
    let mut herald = setup.start().await;
    setup
        .model
        .push(Reply::Slow(Duration::from_millis(200), answer("First try")));
    setup.platform.send_dm(&setup.platform.admin(), "plan my day").await;
    // Killed while the answer is being written, its first part showing.
    herald
        .wait_for_log("the answer shows while it is written", 1, REPLY)
        .await;
    herald.kill().await;
    assert_eq!(setup.platform.sent().len(), 1);

    let retried = answer("Second try");
    setup
        .model
        .push(Reply::Slow(Duration::from_millis(20), retried.clone()));
    let herald = setup.start().await;
    let done = setup
        .platform
        .wait_until(REPLY, |fake| {
            fake.bot_messages().first().is_some_and(|m| m.text == visible(&retried))
        })
        .await;
    assert!(done, "{:#?}\n{}", setup.platform.bot_messages(), herald.stderr());
    assert_eq!(
        setup.platform.sent().len(),
        1,
        "no second reply: {:#?}",
        setup.platform.sent()
    );
    assert_eq!(setup.platform.bot_messages().len(), 1);
    assert!(
        setup.platform.violations().is_empty(),
        "{:?}",
        setup.platform.violations()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_keeps_telegrams_documented_per_chat_and_per_group_limits() {
    // The fake refuses (429) and records every request over Telegram's own
    // windows: 1 a second per chat, 20 a minute per group.
    let fake = FakeTelegram::start_with(FakeTelegramOptions::realistic()).await;
    let setup = Setup::with_options(fake, streaming()).await;
    let herald = setup.start().await;
    let group = setup.platform.group();
    let admin = setup.platform.admin();
    // A group answer and a direct one written at the same time, then a
    // second group answer: the group's window is shared by all three.
    let answers = [answer("One"), answer("Two"), answer("Three")];
    for text in &answers {
        setup.model.push(Reply::Slow(Duration::from_millis(50), text.clone()));
    }
    setup.platform.send_group(&admin, &group, "first", true).await;
    setup.platform.send_dm(&admin, "meanwhile").await;
    setup.platform.send_group(&admin, &group, "second", true).await;
    let done = setup
        .platform
        .wait_until(Duration::from_secs(60), |fake| {
            answers
                .iter()
                .all(|text| fake.bot_messages().iter().any(|m| m.text == visible(text)))
        })
        .await;
    assert!(done, "{:#?}\n{}", setup.platform.bot_messages(), herald.stderr());
    assert_eq!(setup.platform.sent().len(), 3, "one message per answer");
    assert!(setup.platform.edits().len() >= 3, "the answers were streamed");
    assert!(
        setup.platform.violations().is_empty(),
        "{:?}",
        setup.platform.violations()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_and_discord_edit_a_streamed_answer_into_place_and_no_edit_pings() {
    // A hostile answer: every partial edit of it is read for mentions anew.
    let final_text = format!(
        "@everyone @here <!channel> <@U0123ABC> <@123456789012345678> <@&987654321> listen.\n\n{}",
        answer("Done")
    );
    let slack = Setup::with_options(FakeSlack::start_quick().await, streaming()).await;
    let herald = slack.start().await;
    slack
        .model
        .push(Reply::Slow(Duration::from_millis(60), final_text.clone()));
    slack.platform.send_dm(&slack.platform.admin(), "go").await;
    let expected = herald_testkit::slack::mrkdwn::visible_text(&herald_channels::markdown::mrkdwn::render(&final_text));
    let done = slack
        .platform
        .wait_until(REPLY, |fake| {
            fake.bot_messages().first().is_some_and(|m| m.rendered == expected)
        })
        .await;
    assert!(done, "{:#?}\n{}", slack.platform.bot_messages(), herald.stderr());
    assert_eq!(slack.platform.sent().len(), 1);
    assert!(!slack.platform.edits().is_empty());
    assert!(slack.platform.mentions().is_empty(), "{:?}", slack.platform.mentions());
    assert!(
        slack.platform.format_findings().is_empty(),
        "{:?}",
        slack.platform.format_findings()
    );
    assert!(
        slack.platform.violations().is_empty(),
        "{:?}",
        slack.platform.violations()
    );
    drop(herald);

    let discord = Setup::with_options(FakeDiscord::start().await, streaming()).await;
    let herald = discord.start().await;
    discord
        .model
        .push(Reply::Slow(Duration::from_millis(60), final_text.clone()));
    discord.platform.send_dm(&discord.platform.admin(), "go").await;
    let expected = herald_channels::markdown::discord::render(&final_text);
    let deadline = tokio::time::Instant::now() + REPLY;
    while discord
        .platform
        .bot_messages()
        .first()
        .is_none_or(|m| m.content != expected)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:#?}\n{}",
            discord.platform.bot_messages(),
            herald.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(discord.platform.sent().len(), 1);
    assert!(!discord.platform.edits().is_empty());
    // Only the person asked is notified (the reply's reference), by no edit.
    let asker = format!("user:{}", discord.platform.admin().id);
    let others: Vec<String> = discord
        .platform
        .pings()
        .into_iter()
        .filter(|ping| *ping != asker)
        .collect();
    assert!(others.is_empty(), "{others:?}");
    assert!(
        discord.platform.violations().is_empty(),
        "{:?}",
        discord.platform.violations()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_never_streams_so_an_acknowledgement_stays_silent() {
    let dir = tempfile::tempdir().unwrap();
    let checklist = dir.path().join("HEARTBEAT.md");
    std::fs::write(&checklist, "# Checks\n\n- [ ] Is the disk on db-1 full?\n").unwrap();
    let fake = FakeTelegram::start().await;
    let admin = fake.admin();
    let options = Options {
        extra: format!(
            "heartbeat:\n  every: 1s\n  target: telegram:{}\n  file: {}\nschedules:\n  tick: 200ms\n",
            admin.id,
            checklist.display()
        ),
        ..streaming()
    };
    let setup = Setup::with_options(fake, options).await;
    // A heartbeat's answer is written slowly, a sentence first: a streamed
    // turn would show it before the acknowledgement at its end.
    setup.model.set_fallback(|request| {
        let text = herald_testkit::openai::last_user_text(request).unwrap_or_default();
        if text.contains("disk on db-1") {
            Reply::Slow(
                Duration::from_millis(100),
                "All checks pass. Nothing needs attention. HEARTBEAT_OK".into(),
            )
        } else {
            Reply::text(format!("echo: {text}"))
        }
    });
    let herald = setup.start().await;
    // The admin's chat becomes known, so the heartbeat has a conversation.
    setup.platform.send_dm(&admin, "hello").await;
    setup.sent(1, REPLY, &herald).await;
    let asked = setup.model.requests().len();
    tokio::time::timeout(REPLY, setup.model.wait_for_requests(asked + 3))
        .await
        .expect("heartbeats ran");
    // The third heartbeat's answer is written by now: none showed.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        setup.platform.bot_messages().len(),
        1,
        "{:#?}\n{}",
        setup.platform.bot_messages(),
        herald.stderr()
    );
    assert_eq!(setup.platform.sent().len(), 1);
}
