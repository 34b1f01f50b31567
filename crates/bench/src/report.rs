//! What one benchmark run found, as JSON (`--json`) or as tables for a
//! person: first every number against its target, then the details.

use std::fmt::Write as _;

use serde::Serialize;

use crate::gateway::LoadResult;
use crate::limits::{GroupsRun, SharedRun};
use crate::model::ModelRun;
use crate::process::Memory;
use crate::queue::QueueResult;
use crate::recovery::RecoveryRun;
use crate::skills::SkillsResult;
use crate::soak::SoakRun;

/// The machine the numbers come from.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub memory_mib: u64,
    pub kernel: String,
}

impl Machine {
    pub fn describe() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|line| line.strip_prefix("model name"))
            .and_then(|rest| rest.split_once(':'))
            .map(|(_, name)| name.trim().to_owned())
            .unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_kib: u64 = meminfo
            .lines()
            .find_map(|line| line.strip_prefix("MemTotal:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0);
        Self {
            cpu,
            cores: std::thread::available_parallelism().map_or(0, usize::from),
            memory_mib: memory_kib / 1024,
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim()
                .to_owned(),
        }
    }
}

/// Start to ready, over several starts of the same configuration.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Startup {
    /// Channels configured (each pointed at its fake).
    pub channels: Vec<String>,
    /// The first start, which creates and migrates the SQLite file.
    pub fresh_database_ms: f64,
    /// Every later start on the existing file.
    pub restart_ms: Vec<f64>,
    pub restart_median_ms: f64,
}

/// The gateway process: memory around the loads, and the loads.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Gateway {
    pub channels: Vec<String>,
    pub email_connected: bool,
    pub workers: String,
    pub log_level: String,
    pub idle: Memory,
    /// CPU Herald used while idle with every channel connected, in percent of one core.
    pub idle_cpu_percent: f64,
    pub after_load: Memory,
    pub runs: Vec<LoadResult>,
    /// Warnings and errors Herald logged during the loads (a sample).
    pub warnings: Vec<String>,
    pub warning_count: usize,
}

/// One comparison of a result with its target.
#[derive(Clone, Debug, Serialize)]
pub struct Verdict {
    pub metric: String,
    pub result: String,
    pub target: String,
    pub met: bool,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    pub machine: Machine,
    pub herald: String,
    pub startup: Option<Startup>,
    pub gateway: Option<Gateway>,
    pub model: Vec<ModelRun>,
    pub streaming: Vec<crate::streaming::StreamingRun>,
    pub recovery: Option<RecoveryRun>,
    pub limits_groups: Option<GroupsRun>,
    pub limits_shared: Option<SharedRun>,
    pub queue: Vec<QueueResult>,
    pub skills: Option<SkillsResult>,
    pub soak: Option<SoakRun>,
    /// Warnings Herald logged during the soak.
    pub soak_warnings: usize,
    /// Parts that could not run, and why.
    pub skipped: Vec<String>,
    pub verdicts: Vec<Verdict>,
}

fn verdict(metric: impl Into<String>, result: String, target: &str, met: bool) -> Verdict {
    Verdict {
        metric: metric.into(),
        result,
        target: target.to_owned(),
        met,
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

impl Report {
    /// Compares what was measured with the targets Herald is designed for.
    pub fn judge(&mut self) {
        let mut verdicts = Vec::new();
        for run in self.streaming.iter().filter(|run| run.mode == "edit") {
            verdicts.push(verdict(
                "first visible text p50, a model writing 20 words/s, streamed",
                format!("{:.0} ms", run.first_text.p50_ms),
                "<= 1500 ms",
                run.first_text.p50_ms <= 1500.0,
            ));
            verdicts.push(verdict(
                "requests over Telegram's windows while streaming",
                run.rejected_429.to_string(),
                "0",
                run.rejected_429 == 0,
            ));
        }
        if let Some(gateway) = &self.gateway {
            for run in gateway.runs.iter().filter(|r| r.label == "lat") {
                verdicts.push(verdict(
                    format!("{} p99 overhead at {} msg/s", run.channel.name(), run.offered_rate),
                    format!("{:.1} ms", run.latency.p99_ms),
                    "< 25 ms",
                    run.latency.p99_ms < 25.0 && run.missing == 0,
                ));
            }
            for run in gateway.runs.iter().filter(|r| r.label == "tput") {
                verdicts.push(verdict(
                    format!("{} sustained throughput, rate limits off", run.channel.name()),
                    format!("{:.0} msg/s", run.throughput),
                    ">= 1000 msg/s",
                    run.throughput >= 1000.0 * 0.98 && run.missing == 0,
                ));
            }
            for run in gateway
                .runs
                .iter()
                .filter(|r| r.label == "lat" && !r.statements.is_empty())
            {
                verdicts.push(verdict(
                    format!("{} database round trips per message", run.channel.name()),
                    format!("{:.1}", run.statements_per_message),
                    "<= 6",
                    run.statements_per_message <= 6.0,
                ));
            }
            verdicts.push(verdict(
                "idle RSS, all channels connected",
                format!("{:.1} MiB", mib(gateway.idle.rss_kib)),
                "< 20 MB",
                gateway.idle.rss_kib * 1024 < 20_000_000,
            ));
        }
        if let Some(soak) = &self.soak {
            verdicts.push(verdict(
                format!("RSS growth over a {:.0}-minute soak", soak.minutes),
                format!("{:+.1} %", soak.rss_growth_percent),
                "<= 10 %",
                soak.rss_growth_percent <= 10.0 && soak.missing == 0,
            ));
        }
        if let Some(recovery) = &self.recovery {
            verdicts.push(verdict(
                format!(
                    "reply p99 across {} SIGKILLs of {} processes",
                    recovery.kills, recovery.processes
                ),
                format!("{:.1} s", recovery.latency.p99_ms / 1000.0),
                "<= 5 s",
                recovery.latency.p99_ms <= 5_000.0 && recovery.missing == 0,
            ));
        }
        if let Some(run) = &self.limits_groups {
            verdicts.push(verdict(
                "429s with DMs and two busy groups, limits enforced",
                run.rejected_429.to_string(),
                "0",
                run.rejected_429 == 0,
            ));
        }
        if let Some(run) = &self.limits_shared {
            verdicts.push(verdict(
                format!(
                    "sends over the per-chat limit, {} processes on {}",
                    run.processes, run.storage
                ),
                run.over_limit_sends.to_string(),
                "0",
                run.over_limit_sends == 0,
            ));
        }
        if let Some(startup) = &self.startup {
            verdicts.push(verdict(
                "start to ready (restart, median)",
                format!("{:.0} ms", startup.restart_median_ms),
                "< 200 ms",
                startup.restart_median_ms < 200.0,
            ));
            verdicts.push(verdict(
                "start to ready (fresh database)",
                format!("{:.0} ms", startup.fresh_database_ms),
                "< 200 ms",
                startup.fresh_database_ms < 200.0,
            ));
        }
        if let Some(skills) = &self.skills {
            verdicts.push(verdict(
                "catalog overhead per skill beyond name+description",
                format!("{:.1} chars", skills.catalog_overhead_per_skill),
                "< 20 chars",
                skills.catalog_overhead_per_skill < 20.0,
            ));
            if let Some(activation) = &skills.activation {
                verdicts.push(verdict(
                    format!("${} activation with {} skills", activation.skill, skills.skills),
                    if activation.body_reached_model {
                        "body reached the model".to_owned()
                    } else {
                        "body missing".to_owned()
                    },
                    "works",
                    activation.body_reached_model,
                ));
            }
        }
        self.verdicts = verdicts;
    }

    /// Tables for a terminal (and for docs/benchmarks.md).
    pub fn render(&self) -> String {
        let mut out = String::new();
        let m = &self.machine;
        let _ = writeln!(
            out,
            "machine: {} ({} cores, {} MiB, Linux {})\nherald: {}\n",
            m.cpu, m.cores, m.memory_mib, m.kernel, self.herald
        );
        table(
            &mut out,
            "Results against targets",
            &["metric", "result", "target", "met"],
            self.verdicts
                .iter()
                .map(|v| {
                    vec![
                        v.metric.clone(),
                        v.result.clone(),
                        v.target.clone(),
                        if v.met { "yes" } else { "NO" }.to_owned(),
                    ]
                })
                .collect(),
        );
        if let Some(gateway) = &self.gateway {
            let _ = writeln!(
                out,
                "Gateway: channels {} (email connected: {}), agent.workers {}, log.level {}",
                gateway.channels.join(", "),
                gateway.email_connected,
                gateway.workers,
                gateway.log_level
            );
            let _ = writeln!(
                out,
                "Herald RSS idle {:.1} MiB (anonymous {:.1}, files {:.1}; peak {:.1}), idle CPU {:.2}% of a core; \
                 after the loads {:.1} MiB (anonymous {:.1}, files {:.1}; peak {:.1})\n",
                mib(gateway.idle.rss_kib),
                mib(gateway.idle.anon_kib),
                mib(gateway.idle.file_kib),
                mib(gateway.idle.hwm_kib),
                gateway.idle_cpu_percent,
                mib(gateway.after_load.rss_kib),
                mib(gateway.after_load.anon_kib),
                mib(gateway.after_load.file_kib),
                mib(gateway.after_load.hwm_kib)
            );
            table(
                &mut out,
                "Gateway runs (platform event to the bot's send request)",
                &[
                    "channel",
                    "run",
                    "offered/s",
                    "chats",
                    "msgs",
                    "replied",
                    "dup",
                    "msg/s",
                    "p50 ms",
                    "p90 ms",
                    "p99 ms",
                    "max ms",
                    "herald cpu ms/msg",
                    "bench cpu s",
                ],
                gateway
                    .runs
                    .iter()
                    .map(|r| {
                        vec![
                            r.channel.name().to_owned(),
                            r.label.clone(),
                            format!("{:.0}", r.offered_rate),
                            r.chats.to_string(),
                            r.messages.to_string(),
                            r.replied.to_string(),
                            r.duplicates.to_string(),
                            format!("{:.0}", r.throughput),
                            format!("{:.1}", r.latency.p50_ms),
                            format!("{:.1}", r.latency.p90_ms),
                            format!("{:.1}", r.latency.p99_ms),
                            format!("{:.1}", r.latency.max_ms),
                            format!("{:.2}", r.herald_cpu_ms_per_message),
                            format!("{:.1}", r.bench_cpu_seconds),
                        ]
                    })
                    .collect(),
            );
            for run in gateway.runs.iter().filter(|r| !r.statements.is_empty()) {
                table(
                    &mut out,
                    &format!(
                        "Database round trips per message, {} {} run: {:.2} in all",
                        run.channel.name(),
                        run.label,
                        run.statements_per_message
                    ),
                    &["statement (first line)", "per message"],
                    run.statements
                        .iter()
                        .map(|s| vec![s.statement.clone(), format!("{:.2}", s.per_message)])
                        .collect(),
                );
            }
            if gateway.warning_count > 0 {
                let _ = writeln!(
                    out,
                    "Herald logged {} warnings/errors; a sample:",
                    gateway.warning_count
                );
                for line in &gateway.warnings {
                    let _ = writeln!(out, "  {line}");
                }
                out.push('\n');
            }
        }
        if !self.model.is_empty() {
            table(
                &mut out,
                "A model that takes its time (Telegram, open loop)",
                &[
                    "model delay ms",
                    "offered/s",
                    "chats",
                    "msgs",
                    "replied",
                    "dup",
                    "replies/s",
                    "p50 ms",
                    "p90 ms",
                    "p99 ms",
                    "max ms",
                ],
                self.model
                    .iter()
                    .map(|r| {
                        vec![
                            format!("{:.0}", r.model_delay_ms),
                            format!("{:.0}", r.offered_rate),
                            r.chats.to_string(),
                            r.messages.to_string(),
                            r.replied.to_string(),
                            r.duplicates.to_string(),
                            format!("{:.1}", r.throughput),
                            format!("{:.0}", r.latency.p50_ms),
                            format!("{:.0}", r.latency.p90_ms),
                            format!("{:.0}", r.latency.p99_ms),
                            format!("{:.0}", r.latency.max_ms),
                        ]
                    })
                    .collect(),
            );
        }
        if !self.streaming.is_empty() {
            table(
                &mut out,
                "A slow model streamed into place (Telegram's documented windows enforced)",
                &[
                    "streaming",
                    "answers",
                    "first text p50 ms",
                    "p90 ms",
                    "final p50 ms",
                    "edits/answer",
                    "most",
                    "group first p50 ms",
                    "group edits/answer",
                    "429s",
                ],
                self.streaming
                    .iter()
                    .map(|r| {
                        vec![
                            r.mode.to_owned(),
                            r.answers.to_string(),
                            format!("{:.0}", r.first_text.p50_ms),
                            format!("{:.0}", r.first_text.p90_ms),
                            format!("{:.0}", r.final_text.p50_ms),
                            format!("{:.1}", r.edits_mean),
                            r.edits_max.to_string(),
                            format!("{:.0}", r.group_first_text.p50_ms),
                            format!("{:.1}", r.group_edits_mean),
                            r.rejected_429.to_string(),
                        ]
                    })
                    .collect(),
            );
        }
        if let Some(soak) = &self.soak {
            table(
                &mut out,
                &format!(
                    "Soak: {:.0} msg/s over Telegram, Discord and Slack, {} chats each, {:.0} minutes \
                     (RSS {:+.1} %, p99 {:+.1} %, {} missing, {} duplicates, {} warnings)",
                    soak.rate,
                    soak.chats,
                    soak.minutes,
                    soak.rss_growth_percent,
                    soak.p99_drift_percent,
                    soak.missing,
                    soak.duplicates,
                    self.soak_warnings
                ),
                &["minute", "msgs", "replied", "p50 ms", "p99 ms", "RSS MiB", "anon MiB"],
                soak.slices
                    .iter()
                    .map(|s| {
                        vec![
                            format!("{:.0}", s.minute),
                            s.messages.to_string(),
                            s.replied.to_string(),
                            format!("{:.1}", s.p50_ms),
                            format!("{:.1}", s.p99_ms),
                            format!("{:.1}", mib(s.memory.rss_kib)),
                            format!("{:.1}", mib(s.memory.anon_kib)),
                        ]
                    })
                    .collect(),
            );
        }
        if let Some(r) = &self.recovery {
            table(
                &mut out,
                "Crash recovery (PostgreSQL, Telegram, SIGKILLs)",
                &[
                    "processes",
                    "kills",
                    "offered/s",
                    "chats",
                    "model delay ms",
                    "msgs",
                    "replied",
                    "dup",
                    "p50 ms",
                    "p90 ms",
                    "p99 ms",
                    "max ms",
                ],
                vec![vec![
                    r.processes.to_string(),
                    r.kills.to_string(),
                    format!("{:.0}", r.offered_rate),
                    r.chats.to_string(),
                    format!("{:.0}", r.model_delay_ms),
                    r.messages.to_string(),
                    r.replied.to_string(),
                    r.duplicates.to_string(),
                    format!("{:.0}", r.latency.p50_ms),
                    format!("{:.0}", r.latency.p90_ms),
                    format!("{:.0}", r.latency.p99_ms),
                    format!("{:.0}", r.latency.max_ms),
                ]],
            );
        }
        if let Some(r) = &self.limits_groups {
            table(
                &mut out,
                &format!("Platform limits: DMs and two busy groups ({})", r.rates),
                &[
                    "msgs (dm+group)",
                    "replied",
                    "dup",
                    "all p50/p99 ms",
                    "groups p50/p99 ms",
                    "DMs p50/p99 ms",
                    "429s",
                ],
                vec![vec![
                    format!("{}+{}", r.dm_messages, r.group_messages),
                    r.replied.to_string(),
                    r.duplicates.to_string(),
                    format!("{:.0} / {:.0}", r.all.p50_ms, r.all.p99_ms),
                    format!("{:.0} / {:.0}", r.groups.p50_ms, r.groups.p99_ms),
                    format!("{:.0} / {:.0}", r.direct.p50_ms, r.direct.p99_ms),
                    r.rejected_429.to_string(),
                ]],
            );
        }
        if let Some(r) = &self.limits_shared {
            table(
                &mut out,
                &format!(
                    "Platform limits: {} processes on {} ({})",
                    r.processes, r.storage, r.rates
                ),
                &["msgs", "replied", "p50 ms", "p99 ms", "sends over the limit (429s)"],
                vec![vec![
                    r.messages.to_string(),
                    r.replied.to_string(),
                    format!("{:.0}", r.latency.p50_ms),
                    format!("{:.0}", r.latency.p99_ms),
                    r.over_limit_sends.to_string(),
                ]],
            );
        }
        if let Some(startup) = &self.startup {
            let restarts: Vec<String> = startup.restart_ms.iter().map(|ms| format!("{ms:.0}")).collect();
            let _ = writeln!(
                out,
                "Start to ready ({}): fresh database {:.0} ms; restarts {} ms (median {:.0})\n",
                startup.channels.join(", "),
                startup.fresh_database_ms,
                restarts.join(", "),
                startup.restart_median_ms
            );
        }
        if !self.queue.is_empty() {
            table(
                &mut out,
                "Queue alone (herald-store Storage)",
                &[
                    "backend",
                    "tasks",
                    "convs",
                    "workers",
                    "enqueue/s",
                    "claim+complete/s",
                    "claim p50 ms",
                    "claim p99 ms",
                    "complete p50 ms",
                    "complete p99 ms",
                    "empty claims",
                ],
                self.queue
                    .iter()
                    .map(|q| {
                        vec![
                            q.backend.clone(),
                            q.tasks.to_string(),
                            q.conversations.to_string(),
                            q.workers.to_string(),
                            format!("{:.0}", q.enqueue_per_second),
                            format!("{:.0}", q.claim_complete_per_second),
                            format!("{:.2}", q.claim.p50_ms),
                            format!("{:.2}", q.claim.p99_ms),
                            format!("{:.2}", q.complete.p50_ms),
                            format!("{:.2}", q.complete.p99_ms),
                            q.empty_claims.to_string(),
                        ]
                    })
                    .collect(),
            );
        }
        if let Some(s) = &self.skills {
            let mut rows = vec![
                vec![
                    "skills generated / loaded".to_owned(),
                    format!("{} / {}", s.skills, s.loaded),
                ],
                vec!["discovery (first scan)".to_owned(), format!("{:.0} ms", s.discovery_ms)],
                vec!["rescan, nothing changed".to_owned(), format!("{:.0} ms", s.rescan_ms)],
                vec![
                    "rescan, one skill changed".to_owned(),
                    format!("{:.0} ms", s.rescan_one_changed_ms),
                ],
                vec![
                    format!("catalog per turn (budget {})", s.catalog_budget),
                    format!(
                        "{} chars, {} listed, {} left out",
                        s.catalog_chars, s.catalog_listed, s.catalog_left_out
                    ),
                ],
                vec![
                    "catalog render time per turn".to_owned(),
                    format!("{:.1} ms", s.catalog_render_ms),
                ],
                vec![
                    "full catalog (no budget)".to_owned(),
                    format!(
                        "{} chars, {:.1} chars/skill beyond name+description",
                        s.full_catalog_chars, s.catalog_overhead_per_skill
                    ),
                ],
                vec![
                    "SkillToolbox::prepare per turn".to_owned(),
                    format!("{:.1} ms", s.prepare_ms),
                ],
                vec![
                    "prompt sections / tool schemas per turn".to_owned(),
                    format!("{} / {} chars", s.prepare_section_chars, s.tools_json_chars),
                ],
            ];
            if let Some(a) = &s.activation {
                rows.push(vec![
                    format!("${} through herald run", a.skill),
                    format!(
                        "body reached model: {}; ready {:.0} ms; reply {:.0} ms; model request {} bytes",
                        a.body_reached_model, a.ready_ms, a.reply_ms, a.model_request_bytes
                    ),
                ]);
            }
            table(&mut out, "Skills at scale", &["measure", "result"], rows);
        }
        for skipped in &self.skipped {
            let _ = writeln!(out, "skipped: {skipped}");
        }
        out
    }
}

/// A Markdown-compatible table with a title line.
fn table(out: &mut String, title: &str, header: &[&str], rows: Vec<Vec<String>>) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        format!("| {} |\n", padded.join(" | "))
    };
    let _ = writeln!(out, "{title}\n");
    out.push_str(&line(header.iter().map(|h| (*h).to_owned()).collect()));
    out.push_str(&line(widths.iter().map(|w| "-".repeat(*w)).collect()));
    for row in rows {
        out.push_str(&line(row));
    }
    out.push('\n');
}
