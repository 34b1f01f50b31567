//! Crash recovery: two `herald run` processes share one PostgreSQL
//! database, the fake Telegram and a model that takes `--recovery-delay`
//! per call; while users write at a steady rate, each process in turn is
//! killed with `SIGKILL` and started again. What a user notices is how long
//! the messages the dead process held wait before the other process (or the
//! restarted one) answers them, so the measure is the reply latency of the
//! whole run: its p99 and its maximum, beside lost and doubled replies.
//!
//! A killed process also held Telegram's polling (one process polls at a
//! time); the other takes it over within its lock interval, which is part of
//! what the users wait.

use std::time::Duration;

use anyhow::{Context, Result};
use herald_testkit::postgres::TestDatabase;
use herald_testkit::telegram::{FakeTelegram, FakeTelegramOptions};
use herald_testkit::{FakePlatform, Reply, ScriptedModel};
use serde::Serialize;

use crate::gateway::{self, Channel};
use crate::process::{Herald, write_config};
use crate::stats::Summary;

#[derive(Clone, Copy, Debug)]
pub struct RecoverySpec {
    pub rate: f64,
    pub chats: usize,
    pub duration: Duration,
    pub model_delay: Duration,
}

#[derive(Clone, Debug, Serialize)]
pub struct RecoveryRun {
    pub processes: usize,
    pub kills: usize,
    pub offered_rate: f64,
    pub chats: usize,
    pub model_delay_ms: f64,
    pub messages: usize,
    pub replied: usize,
    pub missing: usize,
    /// Messages answered twice: a kill between the platform accepting a
    /// reply and its receipt being stored (no chat API lets a client close
    /// that gap but Discord's).
    pub duplicates: usize,
    pub latency: Summary,
}

/// How many processes share the database.
const PROCESSES: usize = 2;

pub async fn run(binary: &std::path::Path, server: &str, extra: &str, spec: RecoverySpec) -> Result<RecoveryRun> {
    let database = TestDatabase::create(server, "herald_bench")
        .await
        .context("creating the recovery database (--postgres-url)")?;
    let telegram = FakeTelegram::start_with(FakeTelegramOptions::unthrottled()).await;
    let model = ScriptedModel::start().await;
    model.keep_request_bodies(false);
    let delay = spec.model_delay;
    model.set_fallback(move |request| {
        let text = herald_testkit::openai::last_user_text(request).unwrap_or_default();
        Reply::Delayed(delay, Box::new(Reply::Text(format!("echo: {text}"))))
    });
    let dir = tempfile::tempdir()?;
    let channels = format!("  {}:\n{}", telegram.channel(), telegram.channel_yaml());
    let extra = format!("storage:\n  url: {}\n{extra}", database.url);
    let config = write_config(dir.path(), &model.base_url(), &channels, &extra)?;
    let mut running = Vec::new();
    for _ in 0..PROCESSES {
        running.push(Herald::start(binary, &config, Duration::from_secs(60)).await?);
    }
    let users = gateway::users(Channel::Telegram, 60, spec.chats);
    crate::progress(format!("recovery: warm-up of {} chats", users.len()));
    gateway::warm_up(&telegram, &users, "tg-rwarm", &running[0]).await?;

    let count = (spec.rate * spec.duration.as_secs_f64()).round().max(1.0) as usize;
    let base = telegram.sent_stamps().len();
    crate::progress(format!(
        "recovery: {} msg/s for {:?} over {} chats, model {:?} per call, each of {PROCESSES} processes killed once",
        spec.rate, spec.duration, spec.chats, spec.model_delay
    ));
    let sending = gateway::inject(&telegram, &users, "tg-rec", count, spec.rate);
    let killing = async {
        let start = tokio::time::Instant::now();
        let mut kills = 0;
        for victim in 0..PROCESSES {
            // Kills at a quarter and at three fifths of the run, so each
            // process's tasks are taken over while messages keep coming.
            let at = spec.duration.mul_f64(if victim == 0 { 0.25 } else { 0.6 });
            tokio::time::sleep_until(start + at).await;
            let process = running.remove(victim);
            process.stop().await;
            kills += 1;
            crate::progress(format!("recovery: killed process {victim}"));
            running.insert(victim, Herald::start(binary, &config, Duration::from_secs(60)).await?);
        }
        Ok::<_, anyhow::Error>(kills)
    };
    let (_, kills) = tokio::join!(sending, killing);
    let kills = kills?;
    // A held task that nothing takes over waits for its lease (60 s by default).
    telegram.wait_for_sent(base + count, Duration::from_secs(180)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let matched = gateway::match_replies(&telegram.delivered_stamps(), &telegram.sent_stamps(), "tg-rec");
    let replied = matched.latencies.len();
    let latency = Summary::of(&matched.latencies);
    crate::progress(format!(
        "recovery: {replied}/{count} replies, {} doubled, p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        matched.duplicates, latency.p50_ms, latency.p99_ms, latency.max_ms
    ));
    for herald in running {
        herald.stop().await;
    }
    Ok(RecoveryRun {
        processes: PROCESSES,
        kills,
        offered_rate: spec.rate,
        chats: spec.chats,
        model_delay_ms: spec.model_delay.as_secs_f64() * 1000.0,
        messages: count,
        replied,
        missing: count - replied.min(count),
        duplicates: matched.duplicates,
        latency,
    })
}
