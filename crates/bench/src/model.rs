//! A model that takes its time: how many replies Herald gets through, and
//! how long each user waits, when every model call takes as long as a real
//! model's does (0.5 s, 2 s) and many conversations write at once.
//!
//! One `herald run` with the fake Telegram (rate limits off) and the
//! scripted model; the model answers at once during the warm-up (one message
//! per chat), then with the run's delay. The load is open-loop, as in the
//! gateway runs: a Herald that serves fewer turns at once than the load needs
//! shows it as replies per second below the offered rate and as waiting time.

use std::time::Duration;

use anyhow::{Context, Result};
use herald_testkit::telegram::{FakeTelegram, FakeTelegramOptions};
use herald_testkit::{FakePlatform, Reply, ScriptedModel};
use serde::Serialize;

use crate::gateway::{self, Channel, LoadSpec};
use crate::process::{Herald, write_config};
use crate::stats::Summary;

/// One load against a model with one delay.
#[derive(Clone, Copy, Debug)]
pub struct ModelSpec {
    pub delay: Duration,
    pub rate: f64,
    pub chats: usize,
    pub duration: Duration,
}

/// What one load measured.
#[derive(Clone, Debug, Serialize)]
pub struct ModelRun {
    pub model_delay_ms: f64,
    pub offered_rate: f64,
    pub chats: usize,
    pub messages: usize,
    pub replied: usize,
    pub missing: usize,
    pub duplicates: usize,
    /// Replies per second, first message to last reply.
    pub throughput: f64,
    /// Platform event to the bot's send request: the model's delay included.
    pub latency: Summary,
}

/// The scripted model answering `echo: TEXT`, after `delay`.
fn answer_after(model: &ScriptedModel, delay: Duration) {
    model.set_fallback(move |request| {
        let text = herald_testkit::openai::last_user_text(request).unwrap_or_default();
        let echo = Reply::Text(format!("echo: {text}"));
        if delay.is_zero() {
            echo
        } else {
            Reply::Delayed(delay, Box::new(echo))
        }
    });
}

/// Runs every spec against one Herald configured with `extra` top-level keys.
pub async fn run(binary: &std::path::Path, extra: &str, specs: &[ModelSpec]) -> Result<Vec<ModelRun>> {
    let telegram = FakeTelegram::start_with(FakeTelegramOptions::unthrottled()).await;
    let model = ScriptedModel::start().await;
    model.keep_request_bodies(false);
    let dir = tempfile::tempdir()?;
    let channels = format!("  {}:\n{}", telegram.channel(), telegram.channel_yaml());
    let config = write_config(dir.path(), &model.base_url(), &channels, extra)?;
    let herald = Herald::start(binary, &config, Duration::from_secs(60)).await?;
    let mut runs = Vec::new();
    for (group, spec) in specs.iter().enumerate() {
        let users = gateway::users(Channel::Telegram, 40 + group as u64, spec.chats);
        answer_after(&model, Duration::ZERO);
        crate::progress(format!("model: warm-up of {} chats", users.len()));
        gateway::warm_up(&telegram, &users, &format!("tg-mwarm{group}"), &herald)
            .await
            .context("warming up")?;
        answer_after(&model, spec.delay);
        crate::progress(format!(
            "model: {:?} per call, {} msg/s for {:?} over {} chats",
            spec.delay, spec.rate, spec.duration, spec.chats
        ));
        let load = LoadSpec {
            rate: spec.rate,
            chats: spec.chats,
            duration: spec.duration,
            // A Herald that serves a few turns at once needs long to drain.
            drain: Duration::from_secs(600),
        };
        let result = gateway::run_load(
            Channel::Telegram,
            &telegram,
            &herald,
            &users,
            &load,
            &format!("m{group}"),
            None,
        )
        .await?;
        crate::progress(format!(
            "model: {}/{} replies, {:.1} msg/s, p50 {:.0} ms, p99 {:.0} ms",
            result.replied, result.messages, result.throughput, result.latency.p50_ms, result.latency.p99_ms
        ));
        runs.push(ModelRun {
            model_delay_ms: spec.delay.as_secs_f64() * 1000.0,
            offered_rate: spec.rate,
            chats: spec.chats,
            messages: result.messages,
            replied: result.replied,
            missing: result.missing,
            duplicates: result.duplicates,
            throughput: result.throughput,
            latency: result.latency,
        });
    }
    herald.stop().await;
    Ok(runs)
}
