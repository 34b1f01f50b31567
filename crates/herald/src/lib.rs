//! Herald, the composition root: command line, configuration, wiring and
//! shutdown. It is the only crate that sees every other one. It is a library
//! as well as the `herald` binary so that benchmarks and fuzz targets drive
//! the same configuration loading and wiring as the binary.

pub mod app;
pub mod channels;
pub mod commands;
pub mod config;
pub mod hardening;
pub mod logging;
pub mod memory;
pub mod observability;
pub mod shutdown;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "herald",
    version,
    about = "A multi-channel chat bot gateway for one LLM agent"
)]
pub struct Cli {
    /// The configuration file.
    #[arg(long, global = true, env = "HERALD_CONFIG", default_value = "herald.yaml")]
    pub config: PathBuf,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Start everything configured: channels, workers, scheduler.
    Run {
        /// `ingress` receives and schedules, `worker` serves the queue, `all` does both.
        #[arg(long, value_enum, default_value_t = commands::run::Role::All)]
        role: commands::run::Role,
    },
    /// Talk to Herald from this terminal: one message per line on stdin.
    Chat {
        /// Who you are; the conversation is `local:NAME` (default: your OS user name).
        #[arg(long)]
        user: Option<String>,
        /// Print each reply as one JSON line `{"conversation":…,"text":…}`.
        #[arg(long)]
        json: bool,
    },
    /// Apply database migrations (run and chat also do this on start).
    Migrate,
    /// Check configuration, storage, the model endpoint and every channel.
    Doctor,
    /// List, inspect, validate, install, enable and disable skills.
    Skills {
        #[command(subcommand)]
        command: commands::skills::SkillsCommand,
    },
    /// List, add and cancel scheduled tasks.
    Schedule {
        #[command(subcommand)]
        command: commands::schedule::ScheduleCli,
    },
    /// List pairing requests and approve them.
    Pair {
        #[command(subcommand)]
        command: commands::pair::PairCli,
    },
    /// Show how the last prompt of a conversation was built.
    Explain {
        /// The conversation id, such as `local:owner` or `telegram:123456789`.
        #[arg(long)]
        conversation: String,
    },
}

/// Parses the command line and runs the command: what `main` does.
///
/// The configuration is read before the async runtime starts, so the
/// variables it read can be removed from the environment while the process
/// is still single-threaded ([`hardening`]).
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    hardening::keep_memory_private();
    let config = match &cli.command {
        Command::Skills {
            command: commands::skills::SkillsCommand::Validate { .. },
        } => None,
        _ => Some(config::Config::load(&cli.config)),
    };
    if let Some(Ok(config)) = &config {
        hardening::forget_environment(&config.environment);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(commands::dispatch(cli.config, config, cli.command)) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
