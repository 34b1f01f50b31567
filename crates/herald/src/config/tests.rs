use std::path::Path;
use std::time::Duration;

use super::*;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(Path::new("herald.yaml"), text, |name| match name {
        "OPENAI_API_KEY" => Some("sk-test".into()),
        _ => None,
    })
}

fn error(text: &str) -> String {
    parse(text).expect_err("config should be refused").to_string()
}

#[test]
fn the_example_config_parses() {
    let text = include_str!("../../../../config.example.yaml");
    let config = parse(text).expect("config.example.yaml parses");
    assert!(config.storage.url.starts_with("sqlite:"));
    assert!(config.admins.iter().any(|a| a.as_str() == "local:owner"));
}

#[test]
fn an_empty_file_gives_the_defaults() {
    let config = parse("").unwrap();
    assert_eq!(config.agent.workers, None);
    assert_eq!(config.llm.max_concurrency, 32);
    assert_eq!(config.turns_in_flight(), 64);
    // `agent.workers`, when set, is the bound; else it follows the model.
    let set = Config::parse(Path::new("herald.yaml"), "agent:\n  workers: 3\n", |_| None).unwrap();
    assert_eq!(set.turns_in_flight(), 3);
    let small = Config::parse(Path::new("herald.yaml"), "llm:\n  max_concurrency: 2\n", |_| None).unwrap();
    assert_eq!(small.turns_in_flight(), 4);
    assert_eq!(config.llm.max_tool_iterations, 8);
}

#[test]
fn durations_read_as_written() {
    let config = parse("llm:\n  request_timeout: 500ms\nqueue:\n  lease: 2m\n").unwrap();
    assert_eq!(config.llm.request_timeout, Duration::from_millis(500));
    assert_eq!(config.queue.lease, Duration::from_secs(120));
}

#[test]
fn errors_name_the_file_the_line_and_the_key() {
    for (text, expected) in [
        // An unknown key, with a typo.
        (
            "llm:\n  model: x\n  modle: y\n",
            "herald.yaml:3: `llm.modle`: unknown field `modle`",
        ),
        ("storge:\n  url: x\n", "herald.yaml:1: `storge`: unknown field `storge`"),
        // A bad duration.
        (
            "llm:\n  request_timeout: 5x\n",
            "herald.yaml:2: `llm.request_timeout`: invalid duration `5x`",
        ),
        // A missing environment variable.
        (
            "llm:\n  api_key: ${HERALD_TEST_UNSET_KEY}\n",
            "herald.yaml:2: `llm.api_key`: environment variable HERALD_TEST_UNSET_KEY is not set",
        ),
        // A wrong type.
        (
            "agent:\n  workers: many\n",
            "herald.yaml:2: `agent.workers`: invalid type",
        ),
        // A rule checked after parsing.
        (
            "agent:\n  workers: 0\n",
            "herald.yaml:2: `agent.workers`: must be at least 1",
        ),
        (
            "llm:\n  max_concurrency: 0\n",
            "herald.yaml:2: `llm.max_concurrency`: must be at least 1",
        ),
        (
            "admins: [owner]\n",
            "herald.yaml:1: `admins`: `owner` is not `channel:user-id`",
        ),
    ] {
        let message = error(text);
        assert!(
            message.starts_with(expected),
            "for {text:?}\n got: {message}\nwant: {expected}"
        );
    }
}

#[test]
fn secrets_come_from_the_environment_and_do_not_print() {
    let config = parse("llm:\n  api_key: ${OPENAI_API_KEY}\n").unwrap();
    let debug = format!("{config:?}");
    assert!(
        !debug.contains("sk-test"),
        "the api key leaked into Debug output: {debug}"
    );
    use secrecy::ExposeSecret;
    assert_eq!(config.llm.api_key.expose_secret(), "sk-test");
}

#[test]
fn heartbeat_and_schedules_are_read_and_checked() {
    let config = parse(
        "heartbeat:\n  every: 2s\n  target: telegram:123456789\n  active_hours: {start: '22:00', end: '06:00', timezone: Europe/Berlin}\nschedules:\n  missed_runs: skip\n",
    )
    .unwrap();
    assert_eq!(config.heartbeat.every, Duration::from_secs(2));
    assert_eq!(config.heartbeat.ack_max_chars, 300);
    assert_eq!(config.schedules.missed_runs, herald_schedule::MissedRuns::Skip);
    let defaults = parse("").unwrap();
    assert_eq!(defaults.heartbeat.every, Duration::from_secs(1800));
    for (text, expected) in [
        (
            "heartbeat:\n  every: 500ms\n",
            "herald.yaml:2: `heartbeat.every`: must be at least 1s",
        ),
        (
            "heartbeat:\n  target: me\n",
            "`heartbeat.target`: `me` is not a conversation id",
        ),
        ("heartbeat:\n  evry: 30m\n", "unknown field `evry`"),
        ("schedules:\n  missed_runs: twice\n", "unknown variant `twice`"),
        ("schedules:\n  tick: 10ms\n", "`schedules.tick`: must be at least 100ms"),
    ] {
        let err = error(text);
        assert!(err.contains(expected), "{text:?}: {err}");
    }
}

#[test]
fn an_error_about_a_value_from_the_environment_names_the_variable_never_the_value() {
    let err = Config::parse(Path::new("herald.yaml"), "llm:\n  max_retries: ${RETRIES}\n", |name| {
        (name == "RETRIES").then(|| "sk-live-very-secret".to_owned())
    })
    .unwrap_err()
    .to_string();
    assert!(!err.contains("sk-live-very-secret"), "{err}");
    assert!(err.contains("${RETRIES}") && err.contains("`llm.max_retries`"), "{err}");
}

#[test]
fn the_variables_a_file_read_are_remembered_for_removal() {
    let config = Config::parse(
        Path::new("herald.yaml"),
        "llm:\n  api_key: \"${OPENAI_API_KEY}\"\n  model: ${MODEL:-gpt-4o-mini}\n",
        |name| (name == "OPENAI_API_KEY").then(|| "sk-test".to_owned()),
    )
    .unwrap();
    assert_eq!(config.environment, ["OPENAI_API_KEY"]);
}

/// The secrets `text` holds written out, with `${TOKEN}` and `${PGPASS}`
/// read from the environment.
fn written(text: &str) -> Vec<String> {
    let config = Config::parse(Path::new("herald.yaml"), text, |name| match name {
        "TOKEN" => Some("xoxb-from-the-environment".into()),
        "PGPASS" => Some("pg-from-the-environment".into()),
        "PORT" => Some("5432".into()),
        _ => None,
    });
    config.unwrap_or_else(|err| panic!("{err}")).written_secrets
}

/// Rows: a config → the keys whose secret is written in it. Every form YAML
/// allows counts, since the parsed values are read, not the lines.
#[test]
fn secrets_written_into_the_file_are_found_in_any_form() {
    let email = "channels:\n  email:\n    from: h@example.com\n    imap: {host: imap.example.com, username: h, password: hunter2}\n    smtp: {host: smtp.example.com, password: \"${TOKEN}\"}\n";
    for (text, keys) in [
        (
            "llm:\n  api_key: sk-literal # oops\n  model: gpt\n",
            vec!["llm.api_key"],
        ),
        ("llm: {api_key: sk-literal, model: gpt}\n", vec!["llm.api_key"]),
        ("llm:\n  api_key: \"${TOKEN}\"\n", vec![]),
        ("llm:\n  api_key: \"\"\n", vec![]),
        (
            "llm:\n  base_url: https://me:hunter2@models.example.com/v1\n",
            vec!["llm.base_url"],
        ),
        ("llm:\n  base_url: https://me@models.example.com/v1\n", vec![]),
        (
            "storage:\n  url: postgres://herald:hunter2@db:5432/herald\n",
            vec!["storage.url"],
        ),
        (
            "storage:\n  url: postgres://herald:${PGPASS}@db:${PORT}/herald\n",
            vec![],
        ),
        // A short `${VAR}` elsewhere in the value does not excuse it.
        (
            "storage:\n  url: postgres://herald:hunter5432@db:${PORT}/herald\n",
            vec!["storage.url"],
        ),
        (email, vec!["channels.email.imap.password"]),
        (
            "channels:\n  telegram:\n    token: \"123:abc\"\n  slack: {bot_token: \"${TOKEN}\", app_token: xapp-1}\n",
            vec!["channels.telegram.token", "channels.slack.app_token"],
        ),
        (
            "mcp:\n  servers:\n    tracker:\n      url: https://h/mcp\n      headers: {Authorization: \"Bearer abc\"}\n",
            vec!["mcp.servers.tracker.headers.Authorization"],
        ),
        (
            "mcp:\n  servers:\n    tracker:\n      url: https://h/mcp\n      headers:\n        Authorization: \"Bearer ${TOKEN}\"\n",
            vec![],
        ),
        (
            "mcp:\n  servers:\n    files:\n      command: npx\n      env:\n        GITHUB_TOKEN: ghp_literal\n        API_KEY: ${TOKEN}\n",
            vec!["mcp.servers.files.env.GITHUB_TOKEN"],
        ),
    ] {
        assert_eq!(written(text), keys, "{text}");
    }
}

#[test]
fn a_file_others_can_read_is_checked_for_secrets_written_into_it() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("herald.yaml");
    std::fs::write(&path, "llm:\n  api_key: sk-literal\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(Config::load(&path).unwrap().exposed_secrets, ["llm.api_key"]);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(Config::load(&path).unwrap().exposed_secrets.is_empty());
}
