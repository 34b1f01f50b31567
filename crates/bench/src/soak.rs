//! The soak: one `herald run` with every channel connected, a steady load
//! spread over Telegram, Discord and Slack for a long time (an hour by
//! default), measured slice by slice. What it is for: a leak or a slow drift
//! (a cache that only grows, a table scan that grows with history, a backlog
//! that never drains) shows as resident memory or latency rising from one
//! slice to the next, where a ten-second run cannot show it.
//!
//! Each slice is an open-loop load on all three channels at once (a third of
//! the rate each), then a reading of Herald's memory. The first slice is the
//! baseline: it comes after a warm-up, so first-contact work (new
//! conversations, connection pools filling) is not counted as growth.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::Serialize;

use crate::gateway::{self, Channel, LoadSpec, Platforms};
use crate::process::{Herald, Memory};

/// How long and how hard.
#[derive(Clone, Copy, Debug)]
pub struct SoakSpec {
    /// Messages per second over all channels.
    pub rate: f64,
    pub chats: usize,
    pub duration: Duration,
    /// Length of one measured slice.
    pub slice: Duration,
}

/// One slice's readings.
#[derive(Clone, Debug, Serialize)]
pub struct SoakSlice {
    /// Minutes since the soak began, at the slice's end.
    pub minute: f64,
    pub messages: usize,
    pub replied: usize,
    pub duplicates: usize,
    /// The worst channel's p50 and p99 in the slice.
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub memory: Memory,
}

/// The whole soak.
#[derive(Clone, Debug, Serialize)]
pub struct SoakRun {
    pub rate: f64,
    pub chats: usize,
    pub minutes: f64,
    pub slices: Vec<SoakSlice>,
    /// Resident memory at the last slice against the first, in percent.
    pub rss_growth_percent: f64,
    /// The last slice's p99 against the first's, in percent.
    pub p99_drift_percent: f64,
    pub missing: usize,
    pub duplicates: usize,
}

const CHANNELS: [Channel; 3] = [Channel::Telegram, Channel::Discord, Channel::Slack];

/// Runs the soak against a Herald already connected to `platforms`.
pub async fn run(platforms: &Platforms, herald: &Herald, spec: SoakSpec) -> Result<SoakRun> {
    let users: Vec<_> = CHANNELS
        .iter()
        .map(|&channel| gateway::users(channel, 90, spec.chats))
        .collect();
    for (channel, users) in CHANNELS.iter().zip(&users) {
        crate::progress(format!("soak: warm-up of {} {} chats", users.len(), channel.name()));
        gateway::warm_up(
            platforms.get(*channel),
            users,
            &format!("{}-soakwarm", channel.name()),
            herald,
        )
        .await
        .with_context(|| format!("warming up {}", channel.name()))?;
    }
    let started = Instant::now();
    let slices = (spec.duration.as_secs_f64() / spec.slice.as_secs_f64()).ceil().max(1.0) as usize;
    let load = LoadSpec {
        rate: spec.rate / CHANNELS.len() as f64,
        chats: spec.chats,
        duration: spec.slice,
        drain: Duration::from_secs(120),
    };
    let mut readings = Vec::new();
    for slice in 0..slices {
        let label = format!("soak{slice}");
        let one = |index: usize| {
            let channel = CHANNELS[index];
            gateway::run_load(
                channel,
                platforms.get(channel),
                herald,
                &users[index],
                &load,
                &label,
                None,
            )
        };
        let (telegram, discord, slack) = tokio::join!(one(0), one(1), one(2));
        let runs = [telegram?, discord?, slack?];
        let reading = SoakSlice {
            minute: started.elapsed().as_secs_f64() / 60.0,
            messages: runs.iter().map(|r| r.messages).sum(),
            replied: runs.iter().map(|r| r.replied).sum(),
            duplicates: runs.iter().map(|r| r.duplicates).sum(),
            p50_ms: runs.iter().map(|r| r.latency.p50_ms).fold(0.0, f64::max),
            p99_ms: runs.iter().map(|r| r.latency.p99_ms).fold(0.0, f64::max),
            memory: herald.memory()?,
        };
        crate::progress(format!(
            "soak: minute {:.0}: {}/{} replies, p50 {:.1} ms, p99 {:.1} ms, RSS {:.1} MiB (anon {:.1})",
            reading.minute,
            reading.replied,
            reading.messages,
            reading.p50_ms,
            reading.p99_ms,
            reading.memory.rss_kib as f64 / 1024.0,
            reading.memory.anon_kib as f64 / 1024.0
        ));
        readings.push(reading);
    }
    Ok(summarize(spec, started.elapsed(), readings))
}

/// Growth and drift from the first slice to the last.
fn summarize(spec: SoakSpec, took: Duration, slices: Vec<SoakSlice>) -> SoakRun {
    let percent = |first: f64, last: f64| {
        if first > 0.0 {
            (last - first) * 100.0 / first
        } else {
            0.0
        }
    };
    let (first, last) = (slices.first(), slices.last());
    let rss_growth_percent = match (first, last) {
        (Some(first), Some(last)) => percent(first.memory.rss_kib as f64, last.memory.rss_kib as f64),
        _ => 0.0,
    };
    let p99_drift_percent = match (first, last) {
        (Some(first), Some(last)) => percent(first.p99_ms, last.p99_ms),
        _ => 0.0,
    };
    SoakRun {
        rate: spec.rate,
        chats: spec.chats,
        minutes: took.as_secs_f64() / 60.0,
        missing: slices.iter().map(|s| s.messages - s.replied.min(s.messages)).sum(),
        duplicates: slices.iter().map(|s| s.duplicates).sum(),
        rss_growth_percent,
        p99_drift_percent,
        slices,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(minute: f64, rss_kib: u64, p99_ms: f64, replied: usize) -> SoakSlice {
        SoakSlice {
            minute,
            messages: 100,
            replied,
            duplicates: 0,
            p50_ms: 1.0,
            p99_ms,
            memory: Memory {
                rss_kib,
                ..Memory::default()
            },
        }
    }

    #[test]
    fn growth_and_drift_compare_the_last_slice_with_the_first() {
        let spec = SoakSpec {
            rate: 30.0,
            chats: 10,
            duration: Duration::from_secs(180),
            slice: Duration::from_secs(60),
        };
        let run = summarize(
            spec,
            Duration::from_secs(180),
            vec![
                slice(1.0, 20_000, 10.0, 100),
                slice(2.0, 30_000, 5.0, 100),
                slice(3.0, 22_000, 15.0, 98),
            ],
        );
        assert_eq!(run.rss_growth_percent, 10.0);
        assert_eq!(run.p99_drift_percent, 50.0);
        assert_eq!(run.missing, 2);
        assert_eq!(run.minutes, 3.0);
    }
}
