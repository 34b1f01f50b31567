//! Replies as people read them: every answer of the corpus
//! (`crates/testkit/corpus/answers`, model answers with code, lists,
//! tables, links, nested emphasis, hostile mentions and answers that need
//! several messages) goes through the real `herald run` binary to each
//! platform's fake, which reads the markup as the platform does: Telegram's
//! entity parser refuses HTML the Bot API refuses, Slack's reader reports
//! unescaped control characters and notifying mentions, Discord's reports
//! whom a message pings.

#[macro_use]
mod conformance;

use std::collections::BTreeSet;
use std::time::Duration;

use conformance::{REPLY, Running, Setup};
use herald_testkit::discord::FakeDiscord;
use herald_testkit::faults::Fault;
use herald_testkit::slack::FakeSlack;
use herald_testkit::telegram::FakeTelegram;
use herald_testkit::{FakePlatform, Reply, SentMessage};

/// Each answer's messages, as the platform recorded them, by answer name.
/// After each answer a marker message is echoed, so the chunks between two
/// markers are one reply's, however many there are.
async fn send_corpus<P: FakePlatform>(setup: &Setup<P>, herald: &Running) -> Vec<(String, String, Vec<SentMessage>)> {
    let admin = setup.platform.admin();
    let mut replies = Vec::new();
    for (name, answer) in herald_testkit::corpus::answers() {
        let before = setup.platform.sent().len();
        setup.model.push(Reply::text(answer.clone()));
        setup.platform.send_dm(&admin, &format!("question {name}")).await;
        let marker = format!("echo: after {name}");
        setup.platform.send_dm(&admin, &format!("after {name}")).await;
        let deadline = tokio::time::Instant::now() + REPLY;
        let sent = loop {
            let sent = setup.platform.sent();
            if sent[before..].iter().any(|message| message.text == marker) {
                break sent;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no reply to {name}:\n{}",
                herald.stderr()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let chunks: Vec<SentMessage> = sent[before..]
            .iter()
            .take_while(|message| message.text != marker)
            .cloned()
            .collect();
        assert!(!chunks.is_empty() || answer.trim().is_empty(), "{name} got no reply");
        replies.push((name, answer, chunks));
    }
    replies
}

/// The text without its whitespace, which cuts between messages drop.
fn squeezed(text: &str) -> String {
    text.split_whitespace().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_corpus_answer_reaches_telegram_as_html_it_accepts_within_its_limit() {
    let setup = Setup::new(FakeTelegram::start().await).await;
    let herald = setup.start().await;
    let replies = send_corpus(&setup, &herald).await;
    assert!(replies.len() >= 50);
    let mut kinds = BTreeSet::new();
    let mut several = 0;
    for (name, answer, chunks) in &replies {
        several += usize::from(chunks.len() > 1);
        for chunk in chunks {
            // No chunk needed the plain fallback: Telegram read every one as HTML.
            assert_eq!(chunk.parse_mode.as_deref(), Some("HTML"), "{name}: {}", chunk.raw);
            assert!(
                chunk.text.encode_utf16().count() <= 4096,
                "{name}: a chunk of {} units",
                chunk.text.encode_utf16().count()
            );
            kinds.extend(
                chunk
                    .entities
                    .iter()
                    .filter_map(|entity| entity["type"].as_str().map(str::to_owned)),
            );
        }
        // What the person sees, chunk after chunk, is the whole rendered answer.
        // (A cut inside a word too long for one message splits that word.)
        let seen: String = chunks.iter().map(|chunk| format!("{} ", chunk.text)).collect();
        let rendered = herald_channels::markdown::telegram::render(answer).text;
        assert!(
            squeezed(&seen) == squeezed(&rendered),
            "{name}: seen {} characters, rendered {}",
            seen.len(),
            rendered.len()
        );
        // No Markdown syntax is left for the reader to decode.
        if answer.contains("**") && !answer.contains("`") && !answer.contains("**not closed") {
            assert!(!seen.contains("**"), "{name}: {seen}");
        }
    }
    for kind in [
        "bold",
        "italic",
        "strikethrough",
        "code",
        "pre",
        "text_link",
        "blockquote",
    ] {
        assert!(
            kinds.contains(kind),
            "no {kind} entity in the corpus's replies: {kinds:?}"
        );
    }
    assert!(several >= 12, "long answers arrive in several messages ({several})");
    assert!(
        setup.platform.violations().is_empty(),
        "{:?}",
        setup.platform.violations()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunk_telegram_refuses_for_its_markup_goes_again_as_plain_text_once() {
    let setup = Setup::new(FakeTelegram::start().await).await;
    let herald = setup.start().await;
    let refusal = r#"{"ok":false,"error_code":400,"description":"Bad Request: can't parse entities: Unsupported start tag \"b\" at byte offset 0"}"#;
    setup
        .platform
        .inject_faults("sendMessage", [Fault::Status(400, refusal.to_owned())]);
    setup
        .model
        .push(Reply::text("**Ready:** the report is in `reports/2026.csv`."));
    let admin = setup.platform.admin();
    setup.platform.send_dm(&admin, "is it done?").await;
    let sent = setup.sent(1, REPLY, &herald).await;
    assert_eq!(sent[0].parse_mode, None, "{sent:?}");
    assert_eq!(sent[0].text, "Ready: the report is in reports/2026.csv.");
    // The next reply is formatted again, and nothing was sent twice.
    setup.platform.send_dm(&admin, "thanks").await;
    let sent = setup.sent(2, REPLY, &herald).await;
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(sent[1].parse_mode.as_deref(), Some("HTML"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn format_plain_sends_the_text_as_the_model_wrote_it() {
    let setup = Setup::with_extra(FakeTelegram::start().await, "    format: plain\n").await;
    let herald = setup.start().await;
    setup.model.push(Reply::text("**bold** and `code`"));
    setup.platform.send_dm(&setup.platform.admin(), "hi").await;
    let sent = setup.sent(1, REPLY, &herald).await;
    assert_eq!(sent[0].parse_mode, None);
    assert_eq!(sent[0].text, "**bold** and `code`");
}

/// The code fences of a chunk pair up: a block cut in two is closed in one
/// message and opened again in the next.
fn fences_pair_up(text: &str) -> bool {
    text.lines().filter(|line| line.trim_start().starts_with("```")).count() % 2 == 0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_corpus_answer_reaches_slack_as_escaped_mrkdwn_that_pings_nobody() {
    let setup = Setup::new(FakeSlack::start_quick().await).await;
    let herald = setup.start().await;
    let replies = send_corpus(&setup, &herald).await;
    for (name, _, chunks) in &replies {
        for chunk in chunks {
            assert!(
                setup.platform.measure(&chunk.raw) <= setup.platform.message_limit(),
                "{name}"
            );
            assert!(fences_pair_up(&chunk.raw), "{name}: {}", chunk.raw);
        }
    }
    assert!(
        setup.platform.format_findings().is_empty(),
        "{:#?}",
        setup.platform.format_findings()
    );
    assert!(setup.platform.mentions().is_empty(), "{:?}", setup.platform.mentions());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_corpus_answer_reaches_discord_in_its_limit_with_fences_closed_and_no_ping() {
    let setup = Setup::new(FakeDiscord::start().await).await;
    let herald = setup.start().await;
    let replies = send_corpus(&setup, &herald).await;
    let mut several = 0;
    for (name, _, chunks) in &replies {
        several += usize::from(chunks.len() > 1);
        for chunk in chunks {
            assert!(chunk.raw.chars().count() <= 2000, "{name}");
            assert!(fences_pair_up(&chunk.raw), "{name}: {}", chunk.raw);
        }
    }
    assert!(several >= 12, "{several}");
    // A reply pings the person it answers, and nobody else: not the
    // `@everyone`, `@here` and role mentions the answers are full of.
    let asker = format!("user:{}", setup.platform.admin().id);
    let others: Vec<String> = setup
        .platform
        .pings()
        .into_iter()
        .filter(|ping| *ping != asker)
        .collect();
    assert!(others.is_empty(), "{others:?}");
}
