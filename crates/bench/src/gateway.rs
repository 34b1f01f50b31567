//! End-to-end gateway overhead: users on the testkit fakes write to Herald
//! at a fixed rate across many direct chats; the scripted model answers at
//! once (`echo: TEXT`); the fake stamps each message when it makes it
//! available to the bot and each reply when its send request arrives.
//!
//! Every message carries a unique token (`tg-lat-0000042`) that the echo
//! reply repeats, so each reply is matched to its message whatever order
//! replies come in. The load is open-loop: message `k` is written at
//! `k / rate` seconds whether or not Herald kept up, so a Herald that falls
//! behind shows it as growing latency, not as a slower generator.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use herald_testkit::discord::FakeDiscord;
use herald_testkit::mailserver::MailServers;
use herald_testkit::slack::{FakeSlack, FakeSlackOptions};
use herald_testkit::telegram::{FakeTelegram, FakeTelegramOptions};
use herald_testkit::{FakePlatform, FakeUser, Stamped};
use serde::Serialize;

use crate::process::{Herald, cpu_seconds};
use crate::statements::{self, PerMessage};
use crate::stats::Summary;

/// The chat platforms the gateway benchmark drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Channel {
    Telegram,
    Discord,
    Slack,
}

impl Channel {
    pub fn name(self) -> &'static str {
        match self {
            Channel::Telegram => "telegram",
            Channel::Discord => "discord",
            Channel::Slack => "slack",
        }
    }

    fn short(self) -> &'static str {
        match self {
            Channel::Telegram => "tg",
            Channel::Discord => "dc",
            Channel::Slack => "sl",
        }
    }
}

/// Every fake, started with its platform rate enforcement off, and the mail
/// servers when email is benchmarked too.
pub struct Platforms {
    pub telegram: FakeTelegram,
    pub discord: FakeDiscord,
    pub slack: FakeSlack,
    pub mail: Option<MailServers>,
}

/// A rate no benchmark reaches: the fakes' way of saying "no limit".
const UNLIMITED: u32 = 1_000_000_000;

impl Platforms {
    pub async fn start(with_email: bool) -> Result<Self> {
        let telegram = FakeTelegram::start_with(FakeTelegramOptions::unthrottled()).await;
        let discord = FakeDiscord::start().await;
        discord.set_message_bucket(UNLIMITED, Duration::from_secs(1));
        discord.set_typing_bucket(UNLIMITED, Duration::from_secs(1));
        discord.set_global_limit(UNLIMITED);
        let slack = FakeSlack::start_with(FakeSlackOptions {
            channel_rate: None,
            ..FakeSlackOptions::default()
        })
        .await;
        let mail = if with_email {
            Some(start_mail_servers().await?)
        } else {
            None
        };
        Ok(Self {
            telegram,
            discord,
            slack,
            mail,
        })
    }

    /// The `channels:` entries pointing Herald at the fakes, with Herald's
    /// own rate limits off (`off` for Telegram's defaults; an empty map
    /// replaces Discord's and Slack's defaults).
    pub fn channels_yaml(&self) -> String {
        let mut yaml = String::new();
        for (platform, extra) in [
            (&self.telegram as &dyn FakePlatform, ""),
            (&self.discord, "    rate_limits: {}\n"),
            (&self.slack, "    rate_limits: {}\n"),
        ] {
            yaml.push_str(&format!(
                "  {}:\n{}{extra}",
                platform.channel(),
                platform.channel_yaml()
            ));
        }
        if let Some(mail) = &self.mail {
            yaml.push_str(&mail.channel_yaml());
        }
        yaml
    }

    pub fn get(&self, channel: Channel) -> &dyn FakePlatform {
        match channel {
            Channel::Telegram => &self.telegram,
            Channel::Discord => &self.discord,
            Channel::Slack => &self.slack,
        }
    }

    /// Waits until Herald polls Telegram, holds a Discord gateway session,
    /// has a Slack Socket Mode connection and (with email) reads the mailbox.
    pub async fn wait_connected(&self, herald: &Herald, timeout: Duration) -> Result<()> {
        let deadline = tokio::time::Instant::now() + timeout;
        let polling = self
            .telegram
            .wait_until(timeout, |t| t.calls().iter().any(|c| c == "getupdates"))
            .await;
        let discord = self.discord.wait_for_sessions(1, remaining(deadline)).await;
        let slack = self
            .slack
            .wait_until(remaining(deadline), |s| s.connections() > 0)
            .await;
        let mut email = true;
        if self.mail.is_some() {
            email = false;
            while tokio::time::Instant::now() < deadline {
                if !herald.log_lines_with("reading mail").is_empty() {
                    email = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        if !(polling && discord && slack && email) {
            bail!(
                "Herald did not connect every channel within {timeout:?} (telegram {polling}, discord {discord}, slack {slack}, email {email}):\n{}",
                herald.log_tail()
            );
        }
        Ok(())
    }
}

fn remaining(deadline: tokio::time::Instant) -> Duration {
    deadline.saturating_duration_since(tokio::time::Instant::now())
}

/// Dovecot and Postfix need root and their packages; without them the
/// benchmark goes on without email.
async fn start_mail_servers() -> Result<MailServers> {
    let started = tokio::spawn(MailServers::start()).await;
    started.map_err(|err| anyhow::anyhow!("the mail servers did not start: {err}"))
}

/// `count` users of `channel`, distinct for each `group` so every run
/// starts with fresh conversations.
pub fn users(channel: Channel, group: u64, count: usize) -> Vec<FakeUser> {
    (0..count as u64)
        .map(|i| {
            let id = match channel {
                Channel::Telegram => (6_100_000_000 + group * 100_000 + i).to_string(),
                Channel::Discord => (1_390_000_000_000_000_000 + group * 100_000 + i).to_string(),
                Channel::Slack => format!("U9{group:02}{i:06}"),
            };
            FakeUser {
                id,
                name: format!("Bench User {i}"),
            }
        })
        .collect()
}

/// One open-loop load.
#[derive(Clone, Debug)]
pub struct LoadSpec {
    /// Messages per second, over all chats.
    pub rate: f64,
    pub chats: usize,
    pub duration: Duration,
    /// How long replies may take to arrive after the last message.
    pub drain: Duration,
}

/// What one load run measured.
#[derive(Clone, Debug, Serialize)]
pub struct LoadResult {
    pub channel: Channel,
    pub label: String,
    pub offered_rate: f64,
    pub chats: usize,
    pub messages: usize,
    pub replied: usize,
    pub missing: usize,
    pub duplicates: usize,
    /// The rate the generator actually wrote at.
    pub injected_rate: f64,
    /// Replies per second from the first message to the last reply.
    pub throughput: f64,
    /// Platform event to the bot's send request, per message.
    pub latency: Summary,
    pub herald_cpu_seconds: f64,
    /// Herald's CPU time per message, in milliseconds.
    pub herald_cpu_ms_per_message: f64,
    /// This process's CPU time (the fakes, the model, the generator).
    pub bench_cpu_seconds: f64,
    /// Round trips to the database per message, in all.
    pub statements_per_message: f64,
    /// The same, by statement, most first.
    pub statements: Vec<PerMessage>,
}

/// Writes `count` messages (`{tag}-{k}`) round-robin over `users` at `rate`.
pub async fn inject(platform: &dyn FakePlatform, users: &[FakeUser], tag: &str, count: usize, rate: f64) -> Duration {
    let start = tokio::time::Instant::now();
    let interval = Duration::from_secs_f64(1.0 / rate);
    for k in 0..count {
        tokio::time::sleep_until(start + interval.mul_f64(k as f64)).await;
        let user = &users[k % users.len()];
        platform.send_dm(user, &format!("{tag}-{k:07}")).await;
    }
    start.elapsed()
}

/// The token of `tag` in `text`: from the tag to the next space.
fn token<'a>(text: &'a str, tag: &str) -> Option<&'a str> {
    let start = text.find(&format!("{tag}-"))?;
    text[start..].split_whitespace().next()
}

/// Latencies of the messages tagged `tag`: matched replies, missing, duplicates,
/// the first event and the last reply.
pub struct Matched {
    pub latencies: Vec<Duration>,
    pub duplicates: usize,
    pub first_event: Option<Instant>,
    pub last_reply: Option<Instant>,
}

impl Matched {
    /// Replies per second from the first event to the last reply.
    pub fn throughput(&self) -> f64 {
        let span = match (self.first_event, self.last_reply) {
            (Some(first), Some(last)) => last.saturating_duration_since(first).as_secs_f64(),
            _ => 0.0,
        };
        if span > 0.0 {
            self.latencies.len() as f64 / span
        } else {
            0.0
        }
    }
}

pub fn match_replies(delivered: &[Stamped], sent: &[Stamped], tag: &str) -> Matched {
    let events: HashMap<&str, Instant> = delivered
        .iter()
        .filter_map(|stamp| token(&stamp.text, tag).map(|t| (t, stamp.at)))
        .collect();
    let mut answered: HashMap<&str, ()> = HashMap::new();
    let mut matched = Matched {
        latencies: Vec::new(),
        duplicates: 0,
        first_event: events.values().min().copied(),
        last_reply: None,
    };
    for stamp in sent {
        let Some(token) = token(&stamp.text, tag) else { continue };
        let Some(event) = events.get(token) else { continue };
        if answered.insert(token, ()).is_some() {
            matched.duplicates += 1;
            continue;
        }
        matched.latencies.push(stamp.at.saturating_duration_since(*event));
        matched.last_reply = Some(matched.last_reply.map_or(stamp.at, |last| last.max(stamp.at)));
    }
    matched
}

/// One message to each user, answered before the measurement starts, so
/// first-contact work (a new DM channel, a display-name lookup, a new
/// conversation row) is not in the numbers.
pub async fn warm_up(platform: &dyn FakePlatform, users: &[FakeUser], tag: &str, herald: &Herald) -> Result<()> {
    let base = platform.sent_stamps().len();
    inject(platform, users, tag, users.len(), 200.0).await;
    let sent = platform
        .wait_for_sent(base + users.len(), Duration::from_secs(120))
        .await;
    if sent.len() < base + users.len() {
        bail!(
            "{}: warm-up got {} of {} replies:\n{}",
            platform.channel(),
            sent.len() - base,
            users.len(),
            herald.log_tail()
        );
    }
    Ok(())
}

/// Runs one load against `platform` and measures it; with `metrics` (the
/// address of Herald's `/metrics`), also the round trips to the database.
pub async fn run_load(
    channel: Channel,
    platform: &dyn FakePlatform,
    herald: &Herald,
    users: &[FakeUser],
    spec: &LoadSpec,
    label: &str,
    metrics: Option<SocketAddr>,
) -> Result<LoadResult> {
    let tag = format!("{}-{label}", channel.short());
    let count = (spec.rate * spec.duration.as_secs_f64()).round().max(1.0) as usize;
    let base = platform.sent_stamps().len();
    let counted_before = match metrics {
        Some(address) => Some(statements::scrape(address).await?),
        None => None,
    };
    let herald_cpu = herald.cpu_seconds()?;
    let bench_cpu = cpu_seconds(None)?;
    let injected = inject(platform, &users[..spec.chats.min(users.len())], &tag, count, spec.rate).await;
    platform.wait_for_sent(base + count, spec.drain).await;
    // A moment for late duplicates, which would otherwise go unseen.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let herald_cpu = herald.cpu_seconds()? - herald_cpu;
    let bench_cpu = cpu_seconds(None)? - bench_cpu;
    let statements = match (metrics, counted_before) {
        (Some(address), Some(before)) => statements::per_message(&before, &statements::scrape(address).await?, count),
        _ => Vec::new(),
    };
    let matched = match_replies(&platform.delivered_stamps(), &platform.sent_stamps(), &tag);
    let replied = matched.latencies.len();
    Ok(LoadResult {
        channel,
        label: label.to_owned(),
        offered_rate: spec.rate,
        chats: spec.chats,
        messages: count,
        replied,
        missing: count - replied.min(count),
        duplicates: matched.duplicates,
        injected_rate: count as f64 / injected.as_secs_f64().max(1e-9),
        throughput: matched.throughput(),
        latency: Summary::of(&matched.latencies),
        herald_cpu_seconds: herald_cpu,
        herald_cpu_ms_per_message: herald_cpu * 1000.0 / count as f64,
        bench_cpu_seconds: bench_cpu,
        statements_per_message: statements.iter().map(|s| s.per_message).sum(),
        statements,
    })
}

/// Sends `text` followed by the token `{tag}-0000000` and returns how long
/// the reply took, platform event to send request.
pub async fn one_reply(
    platform: &dyn FakePlatform,
    user: &FakeUser,
    text: &str,
    tag: &str,
    timeout: Duration,
) -> Result<Duration> {
    let base = platform.sent_stamps().len();
    platform.send_dm(user, &format!("{text} {tag}-0000000")).await;
    platform.wait_for_sent(base + 1, timeout).await;
    let matched = match_replies(&platform.delivered_stamps(), &platform.sent_stamps(), tag);
    matched
        .latencies
        .last()
        .copied()
        .with_context(|| format!("no reply to {text:?} within {timeout:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_matched_to_their_messages_by_token() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let stamp = |ms, text: &str| Stamped {
            at: at(ms),
            chat: "1".into(),
            text: text.into(),
        };
        let delivered = [
            stamp(0, "tg-lat-0000000"),
            stamp(10, "tg-lat-0000001"),
            stamp(20, "other-1"),
        ];
        let sent = [
            stamp(15, "echo: tg-lat-0000001"),
            stamp(30, "echo: tg-lat-0000000"),
            stamp(31, "echo: tg-lat-0000000"),
            stamp(40, "echo: other-1"),
        ];
        let matched = match_replies(&delivered, &sent, "tg-lat");
        assert_eq!(matched.latencies, [Duration::from_millis(5), Duration::from_millis(30)]);
        assert_eq!(matched.duplicates, 1);
        assert_eq!(matched.first_event, Some(at(0)));
        assert_eq!(matched.last_reply, Some(at(30)));
        assert_eq!(token("@bot tg-lat-0000001 please", "tg-lat"), Some("tg-lat-0000001"));
    }
}
