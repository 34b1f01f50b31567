//! `herald doctor`: checks each part a deployment depends on and prints one
//! verdict per item, so an operator sees every problem at once.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use herald_core::SystemClock;

use crate::app::{App, install_crypto_provider, open_storage};
use crate::config::{Config, ConfigError};

pub async fn doctor(config_path: &Path, loaded: Result<Config, ConfigError>) -> Result<ExitCode> {
    install_crypto_provider();
    let mut failures = 0;
    let mut report = |ok: bool, item: &str, detail: String| {
        if !ok {
            failures += 1;
        }
        println!("{} {item}: {detail}", if ok { "ok  " } else { "FAIL" });
    };
    let config = match loaded {
        Ok(config) if !config.exposed_secrets.is_empty() => {
            report(
                false,
                "config",
                format!(
                    "{} can be read by other users and holds secrets in {}: run chmod 600 on it, or move them \
                     into the environment",
                    config_path.display(),
                    config.exposed_secrets.join(", ")
                ),
            );
            config
        }
        Ok(config) => {
            report(true, "config", config_path.display().to_string());
            config
        }
        Err(err) => {
            report(false, "config", err.to_string());
            return Ok(ExitCode::FAILURE);
        }
    };
    let clock: Arc<dyn herald_core::Clock> = Arc::new(SystemClock);
    let storage = match open_storage(&config, clock.clone()).await {
        Ok(storage) => match storage.ping().await {
            Ok(()) => {
                report(
                    true,
                    "storage",
                    format!("{} ({}), migrations applied", config.storage.url, storage.backend()),
                );
                Some(storage)
            }
            Err(err) => {
                report(false, "storage", format!("{err}"));
                None
            }
        },
        Err(err) => {
            report(false, "storage", format!("{err:#}"));
            None
        }
    };
    // The model gets the tool list a real turn offers, so a server that
    // refuses (or crashes on) Herald's tools fails here, not on a user.
    let llm = config.llm.clone();
    // The channels are checked last, with their own configuration.
    let mut config = config;
    let channels_config = std::mem::take(&mut config.channels);
    let tls = config.client_tls.clone();
    let tools = match storage {
        Some(storage) => {
            let app = App::with_storage(config, storage, clock).await;
            let tools = match &app {
                Ok(app) => app.offered_tools().await,
                Err(err) => Err(anyhow::anyhow!("{err:#}")),
            };
            // Each MCP server is started (or reached) and lists its tools.
            if let Ok(app) = &app
                && !app.mcp.is_empty()
            {
                match app.skills(herald_core::Outbound::new()).await {
                    Ok(toolbox) => {
                        let reached = toolbox.reach_mcp_servers().await;
                        let infos = herald_core::McpServers::servers(app.mcp.as_ref());
                        for (server, tools) in reached {
                            let item = format!("mcp server {server}");
                            match tools {
                                Ok(tools) => {
                                    report(true, &item, format!("{} tools: {}", tools.len(), tools.join(", ")))
                                }
                                Err(err) => report(false, &item, err),
                            }
                            // What its list left out, or rules that match
                            // nothing: the operator's to fix.
                            let notes = infos
                                .iter()
                                .filter(|info| info.name == server)
                                .flat_map(|info| &info.notes);
                            for note in notes {
                                report(false, &item, note.clone());
                            }
                        }
                    }
                    Err(err) => report(false, "mcp servers", format!("{err:#}")),
                }
            }
            if let Ok(app) = app {
                app.close().await;
            }
            tools
        }
        None => Err(anyhow::anyhow!("storage is unavailable")),
    };
    let (tools, note) = match tools {
        Ok(tools) => (tools, String::new()),
        Err(err) => (Vec::new(), format!(" (tools not checked: {err:#})")),
    };
    match herald_llm::check(&llm, tools).await {
        Ok(detail) => report(true, "model", format!("{detail}{note}")),
        Err(err) => report(false, "model", err.to_string()),
    }
    // Each configured platform checks its credentials and reachability
    // (Discord: GET /users/@me and GET /gateway/bot; Telegram: getMe; Slack: auth.test and, in
    // Socket Mode, apps.connections.open; email: IMAP login and SMTP NOOP).
    match crate::channels::build(
        &channels_config,
        None,
        None,
        Arc::new(herald_core::LocalLimiter::new(
            Arc::new(herald_core::SteadyClock::new()),
        )),
        &tls,
    ) {
        Ok(channels) => {
            for ingress in &channels.ingress {
                let item = format!("channel {}", ingress.channel());
                match ingress.probe().await {
                    Ok(detail) => report(true, &item, detail),
                    Err(err) => report(false, &item, err.to_string()),
                }
            }
        }
        Err(err) => report(false, "channels", format!("{err:#}")),
    }
    Ok(if failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
