//! `herald-bench`: Herald's numbers in one run, against the testkit fakes.
//!
//! - **startup**: `herald run` with every channel, start to the ready line.
//! - **gateway**: one `herald run` with Telegram, Discord, Slack (and email
//!   when the mail servers start) connected to their fakes, the scripted
//!   model answering at once; per channel a latency run at `--rate` and a
//!   throughput run at `--throughput-rate`, rate limits off on both sides;
//!   resident memory idle and after the loads.
//! - **model**: a model that takes 0.5 s or 2 s per call and many
//!   conversations at once: replies per second and how long users wait.
//! - **recovery**: two processes on PostgreSQL, each killed with `SIGKILL`
//!   once while users write: reply latency across the kills.
//! - **limits**: the fake Telegram enforcing Telegram's documented send
//!   windows exactly: direct chats beside two busy groups (reply latency
//!   and 429s), and two processes on PostgreSQL sharing the limits (sends
//!   over the per-chat limit).
//! - **queue**: herald-store's queue alone on SQLite and PostgreSQL.
//! - **skills**: thousands of Agent Skills: discovery, rescan, the catalog,
//!   a turn's preparation, and a `$name` activation end to end.
//!
//! It measures and reports; it never fails because a target was missed.
//! See docs/benchmarks.md for how to run it and what each number means.

mod gateway;
mod limits;
mod model;
mod process;
mod queue;
mod recovery;
mod report;
mod skills;
mod soak;
mod statements;
mod stats;
mod streaming;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use herald_testkit::ScriptedModel;

use gateway::{Channel, LoadSpec, Platforms};
use process::{Herald, free_address, write_config};
use report::{Gateway, Machine, Report, Startup};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Part {
    Startup,
    Gateway,
    Model,
    Recovery,
    Limits,
    Queue,
    Skills,
    Soak,
    Streaming,
}

#[derive(Parser, Debug)]
#[command(
    name = "herald-bench",
    about = "Benchmarks Herald against the testkit fakes and reports the numbers"
)]
struct Args {
    /// The herald binary [default: `herald` beside this program].
    #[arg(long)]
    herald: Option<PathBuf>,
    /// Parts to run.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "startup,gateway,model,recovery,queue,skills"
    )]
    only: Vec<Part>,
    /// Channels the gateway runs load.
    #[arg(long, value_delimiter = ',', default_value = "telegram,discord,slack")]
    channels: Vec<Channel>,
    /// Messages per second of each latency run, over all chats.
    #[arg(long, default_value_t = 200.0)]
    rate: f64,
    /// Direct chats the messages are spread over.
    #[arg(long, default_value_t = 100)]
    chats: usize,
    /// Seconds of each latency run.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Messages per second of each throughput run.
    #[arg(long, default_value_t = 1000.0)]
    throughput_rate: f64,
    /// Seconds of each throughput run.
    #[arg(long, default_value_t = 10.0)]
    throughput_duration: f64,
    /// Do not start Dovecot and Postfix for Herald's email channel.
    #[arg(long)]
    no_email: bool,
    /// `agent.workers` for Herald [default: Herald's default].
    #[arg(long)]
    workers: Option<usize>,
    /// More top-level YAML for every Herald started (keys not written otherwise).
    #[arg(long, default_value = "")]
    extra_yaml: String,
    /// Seconds each model call takes in the model runs, one run per value.
    #[arg(long, value_delimiter = ',', default_value = "0.5,2")]
    model_delays: Vec<f64>,
    /// Messages per second of each model run (one per delay, the last repeated).
    #[arg(long, value_delimiter = ',', default_value = "20,10")]
    model_rates: Vec<f64>,
    /// Direct chats of the model runs.
    #[arg(long, default_value_t = 200)]
    model_chats: usize,
    /// Seconds of each model run.
    #[arg(long, default_value_t = 20.0)]
    model_duration: f64,
    /// Words (about tokens) of each streamed answer (`--only streaming`).
    #[arg(long, default_value_t = 300)]
    streaming_words: usize,
    /// Words the streamed model writes per second.
    #[arg(long, default_value_t = 20.0)]
    streaming_words_per_second: f64,
    /// Direct chats asking at once, and people asking at once in a group.
    #[arg(long, default_value_t = 10)]
    streaming_chats: usize,
    #[arg(long, default_value_t = 3)]
    streaming_group: usize,
    /// Messages per second of the recovery run.
    #[arg(long, default_value_t = 10.0)]
    recovery_rate: f64,
    /// Direct chats of the recovery run.
    #[arg(long, default_value_t = 100)]
    recovery_chats: usize,
    /// Seconds of the recovery run.
    #[arg(long, default_value_t = 60.0)]
    recovery_duration: f64,
    /// Minutes of the soak (`--only soak`).
    #[arg(long, default_value_t = 60.0)]
    soak_minutes: f64,
    /// Messages per second of the soak, over Telegram, Discord and Slack.
    #[arg(long, default_value_t = 30.0)]
    soak_rate: f64,
    /// Seconds of each measured slice of the soak.
    #[arg(long, default_value_t = 60.0)]
    soak_slice: f64,
    /// Seconds each model call takes in the recovery run.
    #[arg(long, default_value_t = 0.5)]
    recovery_delay: f64,
    /// Seconds of each platform-limits run.
    #[arg(long, default_value_t = 60.0)]
    limits_duration: f64,
    /// Direct chats beside the busy groups, and their messages per second in all.
    #[arg(long, default_value_t = 50)]
    limits_dm_chats: usize,
    #[arg(long, default_value_t = 2.0)]
    limits_dm_rate: f64,
    /// Mentions per burst in each busy group.
    #[arg(long, default_value_t = 6)]
    limits_burst: usize,
    /// Seconds between bursts in each busy group.
    #[arg(long, default_value_t = 20.0)]
    limits_burst_every: f64,
    /// Chats of the two-process run, and their messages per second in all.
    #[arg(long, default_value_t = 5)]
    limits_shared_chats: usize,
    #[arg(long, default_value_t = 4.0)]
    limits_shared_rate: f64,
    /// Herald's Telegram `rate_limits` for the limits runs, as
    /// `per_chat=1/s,per_group=1/3s` (the fake keeps Telegram's windows).
    #[arg(long)]
    limits_rates: Option<String>,
    /// Runs the two processes of the limits run on one SQLite file, where
    /// each keeps its own send windows (the behaviour before shared windows).
    #[arg(long)]
    limits_shared_sqlite: bool,
    /// `log.level` for Herald (its default is `info`).
    #[arg(long, default_value = "info")]
    log_level: String,
    /// Starts measured for start to ready (the first on a fresh database).
    #[arg(long, default_value_t = 6)]
    ready_runs: usize,
    /// Tasks of each queue run: one run per value and backend.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
    queue_tasks: Vec<usize>,
    /// Conversations the queue's tasks are spread over.
    #[arg(long, default_value_t = 1_000)]
    queue_conversations: usize,
    /// Concurrent producers, then claimers, of each queue run.
    #[arg(long, default_value_t = 4)]
    queue_workers: usize,
    /// The PostgreSQL server the queue run creates its database on.
    #[arg(
        long,
        env = "HERALD_TEST_POSTGRES_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/test"
    )]
    postgres_url: String,
    /// Agent Skills generated for the skills run.
    #[arg(long, default_value_t = 10_000)]
    skills: usize,
    /// Print the report as JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    json_file: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Progress goes to stderr so stdout holds only the report.
fn progress(message: impl AsRef<str>) {
    eprintln!("herald-bench: {}", message.as_ref());
}

async fn run(args: Args) -> Result<()> {
    let binary = process::locate_herald(args.herald.clone())?;
    let mut report = Report {
        machine: Machine::describe(),
        herald: binary.display().to_string(),
        ..Report::default()
    };
    let needs_herald = args
        .only
        .iter()
        .any(|p| matches!(p, Part::Startup | Part::Gateway | Part::Soak));
    let platforms = if needs_herald {
        progress("starting the fakes");
        let platforms = Platforms::start(!args.no_email).await;
        match platforms {
            Ok(platforms) => Some(platforms),
            Err(err) if !args.no_email => {
                report.skipped.push(format!("email: {err:#}"));
                Some(Platforms::start(false).await?)
            }
            Err(err) => return Err(err),
        }
    } else {
        None
    };
    if let Some(platforms) = &platforms {
        let model = ScriptedModel::start().await;
        model.keep_request_bodies(false);
        // The gateway runs first: every Herald started leaves a resumable
        // session in the Discord fake, which would copy the load to it.
        if args.only.contains(&Part::Gateway) {
            report.gateway = Some(gateway_runs(&args, &binary, platforms, &model).await?);
        }
        if args.only.contains(&Part::Startup) {
            progress("start to ready");
            report.startup = Some(startup(&args, &binary, platforms, &model).await?);
        }
        if args.only.contains(&Part::Soak) {
            wait_disconnected(platforms).await;
            let (_dir, config) = herald_config(&args, platforms, &model, "")?;
            progress("starting herald for the soak");
            let herald = Herald::start(&binary, &config, Duration::from_secs(60)).await?;
            platforms.wait_connected(&herald, Duration::from_secs(30)).await?;
            let spec = soak::SoakSpec {
                rate: args.soak_rate,
                chats: args.chats,
                duration: Duration::from_secs_f64(args.soak_minutes * 60.0),
                slice: Duration::from_secs_f64(args.soak_slice),
            };
            report.soak = Some(soak::run(platforms, &herald, spec).await?);
            report.soak_warnings = herald.warnings().0;
            herald.stop().await;
        }
    }
    if args.only.contains(&Part::Model) {
        let specs: Vec<model::ModelSpec> = args
            .model_delays
            .iter()
            .enumerate()
            .map(|(index, &delay)| model::ModelSpec {
                delay: Duration::from_secs_f64(delay),
                rate: args
                    .model_rates
                    .get(index)
                    .or(args.model_rates.last())
                    .copied()
                    .unwrap_or(20.0),
                chats: args.model_chats,
                duration: Duration::from_secs_f64(args.model_duration),
            })
            .collect();
        report.model = model::run(&binary, &herald_extra(&args), &specs).await?;
    }
    if args.only.contains(&Part::Streaming) {
        let spec = streaming::StreamingSpec {
            words: args.streaming_words,
            gap: Duration::from_secs_f64(1.0 / args.streaming_words_per_second.max(0.1)),
            chats: args.streaming_chats,
            group_askers: args.streaming_group,
        };
        report.streaming = streaming::run(&binary, &herald_extra(&args), &spec).await?;
    }
    if args.only.contains(&Part::Recovery) {
        let spec = recovery::RecoverySpec {
            rate: args.recovery_rate,
            chats: args.recovery_chats,
            duration: Duration::from_secs_f64(args.recovery_duration),
            model_delay: Duration::from_secs_f64(args.recovery_delay),
        };
        match recovery::run(&binary, &args.postgres_url, &herald_extra(&args), spec).await {
            Ok(run) => report.recovery = Some(run),
            Err(err) => report.skipped.push(format!("recovery: {err:#}")),
        }
    }
    if args.only.contains(&Part::Limits) {
        let spec = limits::LimitsSpec {
            duration: Duration::from_secs_f64(args.limits_duration),
            dm_chats: args.limits_dm_chats,
            dm_rate: args.limits_dm_rate,
            burst: args.limits_burst,
            burst_every: Duration::from_secs_f64(args.limits_burst_every),
            shared_chats: args.limits_shared_chats,
            shared_rate: args.limits_shared_rate,
            rates: args.limits_rates.clone(),
            shared_on_sqlite: args.limits_shared_sqlite,
        };
        report.limits_groups = Some(limits::groups(&binary, &herald_extra(&args), &spec).await?);
        match limits::shared(&binary, &args.postgres_url, &herald_extra(&args), &spec).await {
            Ok(run) => report.limits_shared = Some(run),
            Err(err) => report.skipped.push(format!("limits, two processes: {err:#}")),
        }
    }
    if args.only.contains(&Part::Queue) {
        for &tasks in &args.queue_tasks {
            let spec = queue::QueueSpec {
                tasks,
                conversations: args.queue_conversations,
                workers: args.queue_workers,
            };
            progress(format!("queue on SQLite, {tasks} tasks"));
            report.queue.push(queue::sqlite(spec).await?);
            progress(format!("queue on PostgreSQL, {tasks} tasks"));
            match queue::postgres(&args.postgres_url, spec).await {
                Ok(result) => report.queue.push(result),
                Err(err) => report.skipped.push(format!("queue on PostgreSQL: {err:#}")),
            }
        }
    }
    if args.only.contains(&Part::Skills) {
        progress(format!("{} skills", args.skills));
        report.skills = Some(skills::run(args.skills, Some(&binary)).await?);
    }
    report.judge();
    if let Some(path) = &args.json_file {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render());
    }
    Ok(())
}

fn channel_names(platforms: &Platforms) -> Vec<String> {
    let mut names = vec!["telegram".to_owned(), "discord".to_owned(), "slack".to_owned()];
    if platforms.mail.is_some() {
        names.push("email".to_owned());
    }
    names
}

/// Top-level keys every Herald of the benchmark gets.
fn herald_extra(args: &Args) -> String {
    let mut extra = format!("access:\n  unknown: allow\nlog:\n  level: \"{}\"\n", args.log_level);
    if let Some(workers) = args.workers {
        extra.push_str(&format!("agent:\n  workers: {workers}\n"));
    }
    extra.push_str(&args.extra_yaml);
    if !extra.ends_with('\n') {
        extra.push('\n');
    }
    extra
}

/// A folder with a `herald.yaml` for every channel's fake and the model,
/// with `more` top-level keys.
fn herald_config(
    args: &Args,
    platforms: &Platforms,
    model: &ScriptedModel,
    more: &str,
) -> Result<(tempfile::TempDir, PathBuf)> {
    let dir = tempfile::tempdir()?;
    let config = write_config(
        dir.path(),
        &model.base_url(),
        &platforms.channels_yaml(),
        &format!("{}{more}", herald_extra(args)),
    )?;
    Ok((dir, config))
}

/// How long Herald is watched doing nothing, for its idle CPU use.
const IDLE_WINDOW: Duration = Duration::from_secs(5);

/// Waits until no gateway session or Socket Mode connection of a stopped
/// Herald is left, so the next one is the only client.
async fn wait_disconnected(platforms: &Platforms) {
    let _ = platforms
        .slack
        .wait_until(Duration::from_secs(5), |s| s.connections() == 0)
        .await;
    for _ in 0..250 {
        if !platforms.discord.wait_for_sessions(1, Duration::from_millis(1)).await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn startup(args: &Args, binary: &Path, platforms: &Platforms, model: &ScriptedModel) -> Result<Startup> {
    let (_dir, config) = herald_config(args, platforms, model, "")?;
    wait_disconnected(platforms).await;
    let mut times = Vec::new();
    for _ in 0..args.ready_runs.max(2) {
        let herald = Herald::start(binary, &config, Duration::from_secs(60)).await?;
        times.push(herald.ready_after);
        herald.stop().await;
        wait_disconnected(platforms).await;
    }
    let restarts = &times[1..];
    Ok(Startup {
        channels: channel_names(platforms),
        fresh_database_ms: times[0].as_secs_f64() * 1000.0,
        restart_ms: restarts.iter().map(|t| t.as_secs_f64() * 1000.0).collect(),
        restart_median_ms: stats::median_ms(restarts),
    })
}

async fn gateway_runs(args: &Args, binary: &Path, platforms: &Platforms, model: &ScriptedModel) -> Result<Gateway> {
    let metrics = free_address()?;
    let (_dir, config) = herald_config(
        args,
        platforms,
        model,
        &format!("observability:\n  listen: {metrics}\n"),
    )?;
    progress("starting herald for the gateway runs");
    let herald = Herald::start(binary, &config, Duration::from_secs(60)).await?;
    platforms.wait_connected(&herald, Duration::from_secs(30)).await?;
    // Let start-up work (first polls, gateway READY, the scheduler's first
    // tick) settle before the idle readings.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle_cpu = herald.cpu_seconds()?;
    tokio::time::sleep(IDLE_WINDOW).await;
    let idle_cpu_percent = (herald.cpu_seconds()? - idle_cpu) * 100.0 / IDLE_WINDOW.as_secs_f64();
    let idle = herald.memory()?;
    let mut runs = Vec::new();
    for (group, &channel) in args.channels.iter().enumerate() {
        let platform = platforms.get(channel);
        let group = group as u64 * 2;
        let latency = LoadSpec {
            rate: args.rate,
            chats: args.chats,
            duration: Duration::from_secs_f64(args.duration),
            drain: Duration::from_secs_f64((args.duration * 6.0).max(60.0)),
        };
        let throughput = LoadSpec {
            rate: args.throughput_rate,
            chats: args.chats,
            duration: Duration::from_secs_f64(args.throughput_duration),
            drain: Duration::from_secs_f64((args.throughput_duration * 12.0).max(120.0)),
        };
        for (label, spec, users) in [
            ("lat", &latency, gateway::users(channel, group, args.chats)),
            ("tput", &throughput, gateway::users(channel, group + 1, args.chats)),
        ] {
            progress(format!("{}: warm-up of {} chats", channel.name(), users.len()));
            gateway::warm_up(platform, &users, &format!("{}-warm{label}", channel.name()), &herald)
                .await
                .with_context(|| format!("warming up {}", channel.name()))?;
            progress(format!(
                "{}: {label} run, {} msg/s for {:?} over {} chats",
                channel.name(),
                spec.rate,
                spec.duration,
                spec.chats
            ));
            let result = gateway::run_load(channel, platform, &herald, &users, spec, label, Some(metrics)).await?;
            progress(format!(
                "{}: {label}: {}/{} replies, {:.0} msg/s, p50 {:.1} ms, p99 {:.1} ms, {:.1} statements/msg",
                channel.name(),
                result.replied,
                result.messages,
                result.throughput,
                result.latency.p50_ms,
                result.latency.p99_ms,
                result.statements_per_message
            ));
            runs.push(result);
        }
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after_load = herald.memory()?;
    let (warning_count, warnings) = herald.warnings();
    let email_connected = platforms.mail.is_some();
    herald.stop().await;
    Ok(Gateway {
        channels: channel_names(platforms),
        email_connected,
        workers: args.workers.map_or_else(|| "default".to_owned(), |w| w.to_string()),
        log_level: args.log_level.clone(),
        idle,
        idle_cpu_percent,
        after_load,
        runs,
        warnings,
        warning_count,
    })
}
