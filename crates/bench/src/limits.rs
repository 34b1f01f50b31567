//! Platform limits, enforced: the fake Telegram refuses, with a 429 and a
//! `retry_after`, every send beyond Telegram's documented windows (1 per
//! second per chat, 20 per minute per group, 30 per second for the bot),
//! exactly, with no tolerance.
//!
//! - **groups**: one `herald run` on SQLite; direct chats at a steady rate
//!   and two busy groups (a forum topic and a plain group) that get bursts
//!   of mentions. What users notice is how long replies take, in the groups
//!   and in the direct chats beside them; what the platform notices is the
//!   429s it had to give.
//! - **shared**: two `herald run` processes on one PostgreSQL database
//!   answer a few chats that write faster than one message a second, so
//!   consecutive replies of one chat come from either process. Every 429 is
//!   a send over the per-chat limit that the two processes made together.
//!
//! `--limits-rates` replaces the rates Herald is configured with (not the
//! fake's), to measure another spacing against the same platform.

use std::time::Duration;

use anyhow::{Context, Result};
use herald_testkit::postgres::TestDatabase;
use herald_testkit::telegram::{FakeTelegram, FakeTelegramOptions};
use herald_testkit::{FakePlatform, FakeUser, GroupTarget, ScriptedModel};
use serde::Serialize;

use crate::gateway::{self, Channel};
use crate::process::{Herald, write_config};
use crate::stats::Summary;

#[derive(Clone, Debug)]
pub struct LimitsSpec {
    pub duration: Duration,
    /// Direct chats of the groups run, and their messages per second in all.
    pub dm_chats: usize,
    pub dm_rate: f64,
    /// Mentions per burst in each group, and the time between bursts.
    pub burst: usize,
    pub burst_every: Duration,
    /// Chats of the shared run, and their messages per second in all.
    pub shared_chats: usize,
    pub shared_rate: f64,
    /// Herald's `rate_limits` for Telegram, instead of the fake's rates.
    pub rates: Option<String>,
    /// Runs the two processes on one SQLite file instead, where each keeps
    /// its own windows: what every engine did before the shared windows.
    pub shared_on_sqlite: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct GroupsRun {
    pub rates: String,
    pub dm_messages: usize,
    pub group_messages: usize,
    pub replied: usize,
    pub missing: usize,
    pub duplicates: usize,
    pub all: Summary,
    pub direct: Summary,
    pub groups: Summary,
    /// Sends the platform refused with 429.
    pub rejected_429: usize,
    pub violations: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct SharedRun {
    pub rates: String,
    pub storage: String,
    pub processes: usize,
    pub messages: usize,
    pub replied: usize,
    pub missing: usize,
    pub latency: Summary,
    /// Sends over the per-chat limit (each refused with 429).
    pub over_limit_sends: usize,
    pub violations: Vec<String>,
}

/// Herald's Telegram channel on `fake`, with `rates` instead of the fake's.
fn channel_yaml(fake: &FakeTelegram, rates: Option<&str>) -> String {
    let yaml = fake.channel_yaml();
    let Some(rates) = rates else {
        return format!("  telegram:\n{yaml}");
    };
    let kept: String = yaml
        .lines()
        .take_while(|line| line.trim() != "rate_limits:")
        .map(|line| format!("{line}\n"))
        .collect();
    let mut out = format!("  telegram:\n{kept}    rate_limits:\n");
    for pair in rates.split(',') {
        if let Some((key, value)) = pair.split_once('=') {
            out.push_str(&format!("      {}: {}\n", key.trim(), value.trim()));
        }
    }
    out
}

fn rates_label(rates: Option<&str>) -> String {
    rates.map_or_else(|| "Telegram's documented windows".to_owned(), str::to_owned)
}

fn group_users(count: usize) -> Vec<FakeUser> {
    gateway::users(Channel::Telegram, 70, count)
}

/// Sends `per_group` mentions to each group, from distinct users, tagged.
async fn burst(
    fake: &FakeTelegram,
    groups: &[GroupTarget],
    users: &[FakeUser],
    tag: &str,
    first: usize,
    per_group: usize,
) {
    let mut k = first;
    for n in 0..per_group {
        for group in groups {
            let user = &users[n % users.len()];
            fake.send_group(user, group, &format!("{tag}-{k:07}"), true).await;
            k += 1;
        }
    }
}

pub async fn groups(binary: &std::path::Path, extra: &str, spec: &LimitsSpec) -> Result<GroupsRun> {
    let fake = FakeTelegram::start_with(FakeTelegramOptions::realistic()).await;
    let model = ScriptedModel::start().await;
    model.keep_request_bodies(false);
    let dir = tempfile::tempdir()?;
    let config = write_config(
        dir.path(),
        &model.base_url(),
        &channel_yaml(&fake, spec.rates.as_deref()),
        extra,
    )?;
    let herald = Herald::start(binary, &config, Duration::from_secs(60)).await?;
    let dm_users = gateway::users(Channel::Telegram, 71, spec.dm_chats);
    let members = group_users(spec.burst.max(1));
    for user in dm_users.iter().chain(&members) {
        fake.add_user(user);
    }
    crate::progress(format!("limits: warm-up of {} direct chats", dm_users.len()));
    gateway::warm_up(&fake, &dm_users, "lim-warm", &herald).await?;
    let groups = [fake.group(), fake.plain_group()];
    let bursts = (spec.duration.as_secs_f64() / spec.burst_every.as_secs_f64())
        .ceil()
        .max(1.0) as usize;
    let dm_count = (spec.dm_rate * spec.duration.as_secs_f64()).round().max(1.0) as usize;
    let group_count = bursts * spec.burst * groups.len();
    let base = fake.sent_stamps().len();
    let before_violations = fake.violations().len();
    crate::progress(format!(
        "limits: {dm_count} direct messages at {} msg/s over {} chats, {bursts} bursts of {} mentions in each of 2 groups, every {:?}",
        spec.dm_rate, spec.dm_chats, spec.burst, spec.burst_every
    ));
    let direct = gateway::inject(&fake, &dm_users, "lim-dm", dm_count, spec.dm_rate);
    let busy = async {
        let start = tokio::time::Instant::now();
        for b in 0..bursts {
            tokio::time::sleep_until(start + spec.burst_every.mul_f64(b as f64)).await;
            burst(
                &fake,
                &groups,
                &members,
                "lim-grp",
                b * spec.burst * groups.len(),
                spec.burst,
            )
            .await;
        }
    };
    tokio::join!(direct, busy);
    // Twenty per minute per group: a backlog drains at that pace.
    let drain = Duration::from_secs(60 + (group_count as u64 / 2) * 3);
    fake.wait_for_sent(base + dm_count + group_count, drain).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let delivered = fake.delivered_stamps();
    let sent = fake.sent_stamps();
    let direct = gateway::match_replies(&delivered, &sent, "lim-dm");
    let grouped = gateway::match_replies(&delivered, &sent, "lim-grp");
    let all: Vec<Duration> = direct.latencies.iter().chain(&grouped.latencies).copied().collect();
    let violations: Vec<String> = fake.violations().into_iter().skip(before_violations).collect();
    let replied = all.len();
    herald.stop().await;
    let run = GroupsRun {
        rates: rates_label(spec.rates.as_deref()),
        dm_messages: dm_count,
        group_messages: group_count,
        replied,
        missing: (dm_count + group_count).saturating_sub(replied),
        duplicates: direct.duplicates + grouped.duplicates,
        all: Summary::of(&all),
        direct: Summary::of(&direct.latencies),
        groups: Summary::of(&grouped.latencies),
        rejected_429: violations.len(),
        violations: violations.into_iter().take(5).collect(),
    };
    crate::progress(format!(
        "limits: groups: {}/{} replies; all p50 {:.0} ms p99 {:.0} ms; groups p50 {:.0} ms p99 {:.0} ms; direct p50 {:.0} ms; {} 429s",
        run.replied,
        dm_count + group_count,
        run.all.p50_ms,
        run.all.p99_ms,
        run.groups.p50_ms,
        run.groups.p99_ms,
        run.direct.p50_ms,
        run.rejected_429
    ));
    Ok(run)
}

/// How many processes share the database in the shared run.
const PROCESSES: usize = 2;

pub async fn shared(binary: &std::path::Path, server: &str, extra: &str, spec: &LimitsSpec) -> Result<SharedRun> {
    let database = if spec.shared_on_sqlite {
        None
    } else {
        Some(
            TestDatabase::create(server, "herald_bench_limits")
                .await
                .context("creating the shared-limits database (--postgres-url)")?,
        )
    };
    let fake = FakeTelegram::start_with(FakeTelegramOptions::realistic()).await;
    let model = ScriptedModel::start().await;
    model.keep_request_bodies(false);
    let dir = tempfile::tempdir()?;
    let url = match &database {
        Some(database) => database.url.clone(),
        None => format!("sqlite://{}", dir.path().join("shared.db").display()),
    };
    let extra = format!("storage:\n  url: {url}\n{extra}");
    let config = write_config(
        dir.path(),
        &model.base_url(),
        &channel_yaml(&fake, spec.rates.as_deref()),
        &extra,
    )?;
    let mut running = Vec::new();
    for _ in 0..PROCESSES {
        running.push(Herald::start(binary, &config, Duration::from_secs(60)).await?);
    }
    let users = gateway::users(Channel::Telegram, 72, spec.shared_chats);
    gateway::warm_up(&fake, &users, "lim-swarm", &running[0]).await?;
    let count = (spec.shared_rate * spec.duration.as_secs_f64()).round().max(1.0) as usize;
    let base = fake.sent_stamps().len();
    let before_violations = fake.violations().len();
    crate::progress(format!(
        "limits: shared: {count} messages at {} msg/s over {} chats, {PROCESSES} processes on {}",
        spec.shared_rate,
        spec.shared_chats,
        if database.is_some() {
            "PostgreSQL"
        } else {
            "one SQLite file"
        }
    ));
    gateway::inject(&fake, &users, "lim-sh", count, spec.shared_rate).await;
    // One reply a second per chat: the backlog drains at that pace.
    let drain = Duration::from_secs(60 + (count / spec.shared_chats.max(1)) as u64);
    fake.wait_for_sent(base + count, drain).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let matched = gateway::match_replies(&fake.delivered_stamps(), &fake.sent_stamps(), "lim-sh");
    let violations: Vec<String> = fake.violations().into_iter().skip(before_violations).collect();
    for herald in running {
        herald.stop().await;
    }
    let run = SharedRun {
        rates: rates_label(spec.rates.as_deref()),
        storage: if database.is_some() {
            "PostgreSQL"
        } else {
            "one SQLite file"
        }
        .to_owned(),
        processes: PROCESSES,
        messages: count,
        replied: matched.latencies.len(),
        missing: count.saturating_sub(matched.latencies.len()),
        latency: Summary::of(&matched.latencies),
        over_limit_sends: violations.len(),
        violations: violations.into_iter().take(5).collect(),
    };
    crate::progress(format!(
        "limits: shared: {}/{} replies, p50 {:.0} ms, p99 {:.0} ms, {} sends over the limit",
        run.replied, count, run.latency.p50_ms, run.latency.p99_ms, run.over_limit_sends
    ));
    Ok(run)
}
