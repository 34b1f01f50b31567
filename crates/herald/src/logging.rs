//! Logs go to stderr through tracing, human-readable or JSON. `RUST_LOG`
//! overrides the configured level. Colour only on a terminal, and never
//! when `NO_COLOR` is set (<https://no-color.org>): a log file or a
//! journal gets plain text.
//!
//! serenity instruments the REST requests it builds (and, while it ran
//! Herald's gateway, every gateway event) with `info`-level spans whose
//! fields are formatted with `Debug`, request bodies byte by byte: about a
//! twentieth of the CPU a Discord message cost. Unless the configured level
//! names serenity itself (or `RUST_LOG` is set), serenity is held at `warn`.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::{LogConfig, LogFormat};

pub fn init(config: &LogConfig, default_level: Option<&str>) {
    let level = default_level.unwrap_or(&config.level);
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(directives(level)));
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

/// The filter for the configured `level`: serenity's spans and events at
/// `warn` and above when the level would let its `info` spans through.
fn directives(level: &str) -> String {
    let parts: Vec<&str> = level
        .split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .collect();
    let names_serenity = parts.iter().any(|part| part.starts_with("serenity"));
    let global = parts.iter().rev().find(|part| !part.contains('=')).copied();
    let verbose = global.is_some_and(|g| ["info", "debug", "trace"].contains(&g.to_ascii_lowercase().as_str()));
    if verbose && !names_serenity {
        format!("{},serenity=warn", parts.join(","))
    } else {
        level.to_owned()
    }
}

/// Whether human-readable logs are coloured.
fn colour(terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    terminal && no_color.is_none_or(|value| value.is_empty())
}

#[cfg(test)]
mod tests {
    use super::{colour, directives};

    #[test]
    fn serenity_is_held_at_warn_unless_named_or_already_quiet() {
        assert_eq!(directives("info"), "info,serenity=warn");
        assert_eq!(directives("herald=debug, INFO"), "herald=debug,INFO,serenity=warn");
        assert_eq!(directives("warn"), "warn");
        assert_eq!(directives("serenity=debug,info"), "serenity=debug,info");
        assert_eq!(
            directives("herald=debug"),
            "herald=debug",
            "no global level: nothing else is on"
        );
        for level in ["info", "herald=debug,info", "warn", "serenity=info,debug"] {
            assert!(
                tracing_subscriber::EnvFilter::try_new(directives(level)).is_ok(),
                "{level}"
            );
        }
    }

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour(true, None));
        assert!(!colour(false, None), "a file or a pipe gets plain text");
        assert!(!colour(true, Some("1".into())));
        assert!(colour(true, Some("".into())), "an empty NO_COLOR does not count");
    }
}
