//! What a person feels of a slow model: the time from their message to the
//! first text they can read, with answers streamed into place and without.
//!
//! One `herald run` per mode with `llm.stream` on, the fake Telegram
//! enforcing Telegram's documented windows exactly (1 a second per chat, 20
//! a minute per group, 30 a second for the bot), and the scripted model
//! writing each answer one word per `gap` (20 a second by default: a small
//! local model). Direct chats ask at once, then a group where several people
//! ask together. Per answer: message to first visible text, message to the
//! final text, and the edits it took; for the platform, every 429 it had to
//! give (a send or edit over a window).

use std::time::Duration;

use anyhow::{Result, bail};
use herald_testkit::telegram::{FakeTelegram, FakeTelegramOptions};
use herald_testkit::{FakePlatform, Reply, ScriptedModel};
use serde::Serialize;
use tokio::time::Instant;

use crate::gateway::{self, Channel};
use crate::process::{Herald, write_config};
use crate::stats::Summary;

#[derive(Clone, Copy, Debug)]
pub struct StreamingSpec {
    /// Words of each answer (a word is about a token).
    pub words: usize,
    /// Time between two words the model writes.
    pub gap: Duration,
    /// Direct chats asking at once.
    pub chats: usize,
    /// People asking at once in one group.
    pub group_askers: usize,
}

/// One mode's numbers.
#[derive(Clone, Debug, Serialize)]
pub struct StreamingRun {
    /// `edit` or `off` (`channels.telegram.streaming`).
    pub mode: &'static str,
    pub answers: usize,
    /// Message to the first text a person can read.
    pub first_text: Summary,
    /// Message to the final text in place.
    pub final_text: Summary,
    /// Edits per answer (direct chats), mean and most.
    pub edits_mean: f64,
    pub edits_max: usize,
    /// The same in the group, where the group window (20/min) is shared.
    pub group_first_text: Summary,
    pub group_edits_mean: f64,
    /// Requests the fake refused with 429, and rule breaks it recorded.
    pub rejected_429: usize,
    pub violations: Vec<String>,
}

fn answer(words: usize, tag: &str) -> String {
    let body: Vec<String> = (0..words).map(|n| format!("word{n}")).collect();
    let mut text = format!("**{tag}.** ");
    for (index, chunk) in body.chunks(25).enumerate() {
        if index > 0 {
            text.push_str("\n\n");
        }
        text.push_str(&chunk.join(" "));
        text.push('.');
    }
    text
}

pub async fn run(binary: &std::path::Path, extra: &str, spec: &StreamingSpec) -> Result<Vec<StreamingRun>> {
    let mut runs = Vec::new();
    for (index, mode) in ["edit", "off"].into_iter().enumerate() {
        runs.push(one(binary, extra, spec, mode, index as u64).await?);
    }
    Ok(runs)
}

async fn one(
    binary: &std::path::Path,
    extra: &str,
    spec: &StreamingSpec,
    mode: &'static str,
    group: u64,
) -> Result<StreamingRun> {
    let fake = FakeTelegram::start_with(FakeTelegramOptions::realistic()).await;
    let model = ScriptedModel::start().await;
    model.keep_request_bodies(false);
    let (words, gap) = (spec.words, spec.gap);
    model.set_fallback(move |_| Reply::Slow(gap, answer(words, "Answer")));
    let dir = tempfile::tempdir()?;
    let channels = format!("  telegram:\n{}    streaming: {mode}\n", fake.channel_yaml());
    let config = write_config(dir.path(), &model.base_url(), &channels, extra)?;
    // `llm.stream: true` beside what write_config wrote under `llm:`.
    let text = std::fs::read_to_string(&config)?.replacen("llm:\n", "llm:\n  stream: true\n", 1);
    std::fs::write(&config, text)?;
    let herald = Herald::start(binary, &config, Duration::from_secs(60)).await?;
    let expected = herald_channels::markdown::telegram::render(&answer(words, "Answer")).text;
    let writing = gap * words as u32;

    // Direct chats, all asking at once.
    crate::progress(format!(
        "streaming ({mode}): {} chats, {} words at one per {:?}",
        spec.chats, words, gap
    ));
    let users = gateway::users(Channel::Telegram, 90 + group, spec.chats);
    let mut asked = Vec::new();
    for user in &users {
        fake.send_dm(user, "tell me about it").await;
        asked.push((fake.dm_chat(user), Instant::now()));
    }
    let chats: Vec<String> = asked.iter().map(|(chat, _)| chat.clone()).collect();
    wait_for_final(&fake, &chats, &expected, writing + Duration::from_secs(60), &herald).await?;
    let (first_text, final_text, edits) = measure(&fake, &asked);

    // One group, several people asking together.
    let target = fake.group();
    let askers = gateway::users(Channel::Telegram, 95 + group, spec.group_askers);
    let before = fake.bot_messages().len();
    let group_asked = Instant::now();
    for user in &askers {
        fake.send_group(user, &target, "and you?", true).await;
    }
    let deadline = group_asked + writing * spec.group_askers as u32 + Duration::from_secs(120);
    loop {
        let done = fake
            .bot_messages()
            .iter()
            .skip(before)
            .filter(|message| message.chat == target.chat && message.text == expected)
            .count();
        if done >= spec.group_askers {
            break;
        }
        if Instant::now() > deadline {
            bail!("the group's answers did not all arrive:\n{}", herald.log_tail());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let group_messages: Vec<_> = fake
        .sent_stamps()
        .into_iter()
        .filter(|stamp| stamp.chat == target.chat)
        .collect();
    let group_first: Vec<Duration> = group_messages
        .iter()
        .map(|stamp| stamp.at.duration_since(group_asked.into_std()))
        .collect();
    let group_edits = fake.edits().iter().filter(|edit| edit.chat == target.chat).count();
    // The fake refuses every request over a window with a 429 and records it.
    let violations = fake.violations();
    let rejected_429 = violations.len();
    herald.stop().await;
    Ok(StreamingRun {
        mode,
        answers: asked.len(),
        first_text: Summary::of(&first_text),
        final_text: Summary::of(&final_text),
        edits_mean: edits.iter().sum::<usize>() as f64 / edits.len().max(1) as f64,
        edits_max: edits.iter().copied().max().unwrap_or(0),
        group_first_text: Summary::of(&group_first),
        group_edits_mean: group_edits as f64 / spec.group_askers.max(1) as f64,
        rejected_429,
        violations,
    })
}

async fn wait_for_final(
    fake: &FakeTelegram,
    chats: &[String],
    expected: &str,
    within: Duration,
    herald: &Herald,
) -> Result<()> {
    let deadline = Instant::now() + within;
    loop {
        let messages = fake.bot_messages();
        let done = chats
            .iter()
            .filter(|chat| messages.iter().any(|m| &m.chat == *chat && m.text == expected))
            .count();
        if done == chats.len() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "{done} of {} answers arrived whole:\n{}",
                chats.len(),
                herald.log_tail()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Per chat: message to its first bot message, to its last edit (or the
/// send, when it was not edited), and how many edits it took.
fn measure(fake: &FakeTelegram, asked: &[(String, Instant)]) -> (Vec<Duration>, Vec<Duration>, Vec<usize>) {
    let sends = fake.sent_stamps();
    let edits = fake.edits();
    let mut first = Vec::new();
    let mut last = Vec::new();
    let mut counts = Vec::new();
    for (chat, at) in asked {
        let at = at.into_std();
        let Some(sent) = sends.iter().find(|stamp| &stamp.chat == chat) else {
            continue;
        };
        let chat_edits: Vec<_> = edits.iter().filter(|edit| &edit.chat == chat).collect();
        first.push(sent.at.duration_since(at));
        let end = chat_edits.last().map_or(sent.at, |edit| edit.at);
        last.push(end.duration_since(at));
        counts.push(chat_edits.len());
    }
    (first, last, counts)
}
