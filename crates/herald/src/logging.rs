//! Logs go to stderr through tracing, human-readable or JSON. `RUST_LOG`
//! overrides the configured level. Colour only on a terminal, and never
//! when `NO_COLOR` is set (<https://no-color.org>): a log file or a
//! journal gets plain text.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::{LogConfig, LogFormat};

pub fn init(config: &LogConfig, default_level: Option<&str>) {
    let level = default_level.unwrap_or(&config.level);
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour(std::io::stderr().is_terminal(), std::env::var_os("NO_COLOR")));
    let result = match config.format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(true).try_init(),
    };
    if let Err(err) = result {
        eprintln!("warning: logging was set up already: {err}");
    }
}

/// Whether human-readable logs are coloured.
fn colour(terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    terminal && no_color.is_none_or(|value| value.is_empty())
}

#[cfg(test)]
mod tests {
    use super::colour;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour(true, None));
        assert!(!colour(false, None), "a file or a pipe gets plain text");
        assert!(!colour(true, Some("1".into())));
        assert!(colour(true, Some("".into())), "an empty NO_COLOR does not count");
    }
}
