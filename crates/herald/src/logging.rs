//! Logs go to stderr through tracing, human-readable or JSON. `RUST_LOG`
//! overrides the configured level.

use tracing_subscriber::EnvFilter;

use crate::config::{LogConfig, LogFormat};

pub fn init(config: &LogConfig, default_level: Option<&str>) {
    let level = default_level.unwrap_or(&config.level);
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let result = match config.format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(true).try_init(),
    };
    if let Err(err) = result {
        eprintln!("warning: logging was set up already: {err}");
    }
}
