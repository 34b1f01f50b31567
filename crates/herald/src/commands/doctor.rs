//! `herald doctor`: checks each part a deployment depends on and prints one
//! verdict per item, so an operator sees every problem at once.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use herald_core::SystemClock;

use crate::app::{install_crypto_provider, open_storage, redact_url};
use crate::config::Config;

pub async fn doctor(config_path: &Path) -> Result<ExitCode> {
    install_crypto_provider();
    let mut failures = 0;
    let mut report = |ok: bool, item: &str, detail: String| {
        if !ok {
            failures += 1;
        }
        println!("{} {item}: {detail}", if ok { "ok  " } else { "FAIL" });
    };
    let config = match Config::load(config_path) {
        Ok(config) => {
            report(true, "config", config_path.display().to_string());
            config
        }
        Err(err) => {
            report(false, "config", err.to_string());
            return Ok(ExitCode::FAILURE);
        }
    };
    match open_storage(&config, Arc::new(SystemClock)).await {
        Ok(storage) => {
            match storage.ping().await {
                Ok(()) => report(
                    true,
                    "storage",
                    format!(
                        "{} ({}), migrations applied",
                        redact_url(&config.storage.url),
                        storage.backend()
                    ),
                ),
                Err(err) => report(false, "storage", format!("{err}")),
            }
            storage.close().await;
        }
        Err(err) => report(false, "storage", format!("{err:#}")),
    }
    match herald_llm::probe(&config.llm).await {
        Ok(detail) => report(
            true,
            "model",
            format!("{} at {}: {detail}", config.llm.model, config.llm.base_url),
        ),
        Err(err) => report(false, "model", err.to_string()),
    }
    // Each configured platform checks its credentials and reachability
    // (Discord: GET /users/@me and GET /gateway; Telegram: getMe; Slack: auth.test and, in
    // Socket Mode, apps.connections.open; email: IMAP login and SMTP NOOP).
    match crate::channels::build(&config.channels, None) {
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
