//! One module per subcommand; `dispatch` loads the configuration and hands
//! over.

mod chat;
mod doctor;
mod explain;
pub mod pair;
pub mod run;
pub mod schedule;
pub mod skills;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use crate::Command;
use crate::app::{App, open_storage};
use crate::config::{Config, ConfigError};
use crate::logging;

/// Runs `command` with the configuration `main` loaded (`None` for the
/// commands that need none).
pub async fn dispatch(
    config_path: PathBuf,
    loaded: Option<Result<Config, ConfigError>>,
    command: Command,
) -> Result<ExitCode> {
    if let Command::Skills {
        command: skills::SkillsCommand::Validate { paths },
    } = &command
    {
        return Ok(skills::validate(paths));
    }
    let loaded = loaded.unwrap_or_else(|| Config::load(&config_path));
    if let Command::Doctor = command {
        return doctor::doctor(&config_path, loaded).await;
    }
    let config = loaded?;
    for key in &config.exposed_secrets {
        eprintln!(
            "warning: {} can be read by other users and holds a secret in `{key}`: \
             run chmod 600 on it, or move the secret into the environment (${{VAR}})",
            config_path.display()
        );
    }
    match command {
        Command::Run { role } => {
            logging::init(&config.log, None);
            let app = App::open(config).await?;
            run::run(app, role).await
        }
        Command::Chat { user, json } => {
            // The terminal is the conversation: only warnings go to stderr
            // unless the user asks for more with RUST_LOG.
            logging::init(&config.log, Some("warn"));
            let app = App::open(config).await?;
            chat::chat(app, user, json).await
        }
        Command::Migrate => {
            logging::init(&config.log, None);
            crate::app::install_crypto_provider();
            let storage = open_storage(&config, std::sync::Arc::new(herald_core::SystemClock)).await?;
            println!("migrations applied ({})", storage.backend());
            storage.close().await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Explain { conversation } => {
            logging::init(&config.log, Some("warn"));
            crate::app::install_crypto_provider();
            explain::explain(&config, &conversation).await
        }
        Command::Skills { command } => {
            logging::init(&config.log, Some("warn"));
            let app = App::open(config).await?;
            skills::skills(app, command).await
        }
        Command::Schedule { command } => {
            logging::init(&config.log, Some("warn"));
            let app = App::open(config).await?;
            schedule::schedule(app, command).await
        }
        Command::Pair { command } => {
            logging::init(&config.log, Some("warn"));
            let app = App::open(config).await?;
            pair::pair(app, command).await
        }
        Command::Doctor => unreachable!("handled above"),
    }
}
