//! herald.yaml text through `herald::config::Config::parse`: `${VAR}`
//! expansion from a fixed environment, YAML, the typed config structs of
//! every crate, and the checks types do not express.
//!
//! Asserts that parsing never panics, and:
//! - expansion keeps the text as it is when there is no `$` in it, and keeps
//!   its lines (the environment's values have no line breaks), so error
//!   line numbers stay true;
//! - an accepted config passes the rules `Config::check` promises;
//! - an error names the file and, when it has one, a line from 1.

#![no_main]

use std::path::Path;

use herald::config::{Config, env};
use libfuzzer_sys::fuzz_target;

/// The environment `${VAR}` reads: a few set, one empty, the rest unset.
fn lookup(name: &str) -> Option<String> {
    let value = match name {
        "OPENAI_API_KEY" => "sk-fuzz-0123456789",
        "HERALD_DATABASE_URL" => "sqlite://fuzz.db",
        "HERALD_LLM_MODEL" => "gpt-4o-mini",
        "TELEGRAM_BOT_TOKEN" => "7100200300:AAE-fuzz",
        "PORT" => "8443",
        "EMPTY" => "",
        // A value that is YAML syntax when written unquoted.
        "TRICKY" => "a: b # c",
        _ => return None,
    };
    Some(value.to_owned())
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(expanded) = env::expand(text, lookup) {
        if !text.contains('$') {
            assert_eq!(expanded, text);
        }
        assert_eq!(expanded.matches('\n').count(), text.matches('\n').count());
    }
    match Config::parse(Path::new("herald.yaml"), text, lookup) {
        Ok(config) => {
            assert!(config.turns_in_flight() >= 1 && config.agent.workers != Some(0));
            assert!(config.llm.max_concurrency >= 1 && config.agent.history_limit >= 1);
            assert!(config.llm.max_tool_iterations >= 1);
            assert!(config.llm.context_chars.is_none_or(|chars| chars >= 1000));
            assert!(config.llm.context_tokens.is_none_or(|tokens| tokens >= 512));
            assert!(config.schedules.tick >= std::time::Duration::from_millis(100));
            assert!(config.admins.iter().all(|admin| admin.as_str().contains(':')));
        }
        Err(err) => {
            assert!(err.line.is_none_or(|line| line >= 1), "{err}");
            assert!(err.to_string().starts_with("herald.yaml"), "{err}");
        }
    }
});
