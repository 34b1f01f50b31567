//! MCP servers end to end: the real binary, real MCP servers from the
//! package registries (`@modelcontextprotocol/server-everything` from npm,
//! and a server built on the official Python SDK, `mcp` from PyPI, whose
//! tools misbehave on purpose), and the scripted model. What the model is
//! shown is read from the requests it received; what a server did is read
//! from the file its side effects write.
//!
//! The servers are installed by `.ci/test` into `tests/mcp-servers`; a test
//! fails (never skips) when they are missing, saying how to install them.

#[path = "../common/mod.rs"]
mod common;
mod faults;
mod hostile;
mod policy;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{Herald, reply_texts, stderr};
use herald_testkit::openai::{system_prompt, tool_names, tool_results};
use herald_testkit::{Reply, ScriptedModel};
use serde_json::{Value, json};

pub const EVERYTHING_DESCRIPTION: &str = "The reference MCP server: echo, sums, its environment, a tiny image.";

/// `tests/mcp-servers` at the top of the repository.
pub fn servers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp-servers")
}

const INSTALL_HINT: &str = "install the test servers with `npm ci --prefix tests/mcp-servers` and \
     `python3 -m venv tests/mcp-servers/.venv && tests/mcp-servers/.venv/bin/pip install -r tests/mcp-servers/requirements.txt` \
     (.ci/test does both)";

/// The npm reference server's entry point.
pub fn everything_js() -> PathBuf {
    let path = servers_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(path.exists(), "{} is missing: {INSTALL_HINT}", path.display());
    path
}

/// The Python with the `mcp` package, and the fault server.
pub fn python_and_faults() -> (PathBuf, PathBuf) {
    let python = servers_dir().join(".venv/bin/python");
    assert!(python.exists(), "{} is missing: {INSTALL_HINT}", python.display());
    (python, servers_dir().join("faults.py"))
}

/// A Herald with the npm `everything` server (elevated, the default) and
/// the Python `faults` server (not elevated), `faults_extra` added to the
/// latter's keys (indented YAML lines).
pub struct McpHerald {
    pub herald: Herald,
    pub notes: PathBuf,
}

impl McpHerald {
    pub async fn start(faults_extra: &str) -> Self {
        Self::with_model(ScriptedModel::start().await, faults_extra)
    }

    pub fn with_model(model: ScriptedModel, faults_extra: &str) -> Self {
        Self::with_top_level(model, faults_extra, "")
    }

    /// With `top_level` YAML after the `mcp` section (other sections).
    pub fn with_top_level(model: ScriptedModel, faults_extra: &str, top_level: &str) -> Self {
        let notes_dir = tempfile::tempdir().unwrap().keep();
        let notes = notes_dir.join("notes");
        let (python, faults) = python_and_faults();
        let yaml = format!(
            "mcp:\n  servers:\n    everything:\n      command: node\n      args: [\"{everything}\", stdio]\n      \
             description: \"{EVERYTHING_DESCRIPTION}\"\n      env: {{PROBE_VAR: probe-value}}\n      trust_annotations: true\n    faults:\n      \
             command: \"{python}\"\n      args: [\"{faults}\"]\n      \
             env: {{NOTES_FILE: \"{notes}\", PIDS_FILE: \"{notes}.pids\"}}\n      \
             elevated: false\n      trust_annotations: true\n      startup_timeout: 30s\n      call_timeout: 5s\n{faults_extra}{top_level}",
            everything = everything_js().display(),
            python = python.display(),
            faults = faults.display(),
            notes = notes.display(),
        );
        Self {
            herald: Herald::with_model(model, &yaml),
            notes,
        }
    }

    pub fn model(&self) -> &ScriptedModel {
        &self.herald.model
    }

    /// The pids of every fault server process started so far.
    pub fn server_pids(&self) -> Vec<u32> {
        std::fs::read_to_string(self.notes.with_extension("pids"))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.trim().parse().ok())
            .collect()
    }

    /// The lines the fault server's side effects wrote.
    pub fn notes(&self) -> Vec<String> {
        std::fs::read_to_string(&self.notes)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    pub async fn chat(&self, user: &str, input: &str) -> Output {
        let output = self.herald.chat(user, input).await;
        assert!(output.status.success(), "{}", stderr(&output));
        output
    }
}

/// Whether process `pid` is gone (or a zombie no one reaped yet).
pub fn is_dead(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().next());
    stat.is_empty() || matches!(state, Some("Z" | "X"))
}

/// The tool results the model was shown in request `index`.
pub fn results(requests: &[Value], index: usize) -> Vec<String> {
    tool_results(&requests[index])
        .into_iter()
        .map(|(_, text)| text)
        .collect()
}

pub fn mcp_tools(request: &Value) -> Vec<String> {
    tool_names(request)
        .into_iter()
        .filter(|name| name.starts_with("mcp__"))
        .collect()
}

#[tokio::test]
async fn a_server_is_in_the_catalog_and_its_tools_come_only_after_activation() {
    let setup = McpHerald::start("").await;
    setup.model().push(Reply::text("Hello."));
    setup
        .model()
        .push(Reply::tool_call("activate_skill", json!({"name": "everything"})));
    setup
        .model()
        .push(Reply::tool_call("mcp__everything__get-sum", json!({"a": 2, "b": 3})));
    setup.model().push(Reply::ToolCalls(vec![
        ("mcp__everything__get-tiny-image".into(), json!({})),
        ("mcp__everything__get-env".into(), json!({})),
    ]));
    setup.model().push(Reply::text("The sum is 5."));
    let output = setup.chat("owner", "hello\nadd 2 and 3\n").await;
    assert_eq!(reply_texts(&output), ["Hello.", "The sum is 5."]);

    let requests = setup.model().requests();
    let first = system_prompt(&requests[0]).unwrap_or_default();
    assert!(
        first.contains("- everything: ") && first.contains(EVERYTHING_DESCRIPTION),
        "the catalog lists the server like a skill: {first}"
    );
    assert!(mcp_tools(&requests[0]).is_empty(), "no MCP tool before activation");
    assert!(tool_names(&requests[0]).contains(&"activate_skill".to_owned()));
    assert!(mcp_tools(&requests[1]).is_empty());

    // The step after the activation offers the server's tools.
    let activated = results(&requests, 2);
    assert!(activated[0].contains("is active in this conversation"), "{activated:?}");
    let offered = mcp_tools(&requests[2]);
    assert!(
        offered.contains(&"mcp__everything__get-sum".to_owned()) && offered.len() > 5,
        "{offered:?}"
    );
    assert!(
        results(&requests, 3)[1].contains("The sum of 2 and 3 is 5"),
        "{:?}",
        results(&requests, 3)
    );

    // Non-text content is described, not dropped; the server's environment
    // is PATH and what the configuration gives it, nothing of Herald's.
    let last = results(&requests, 4);
    assert!(
        last[2].contains("image/png") && last[2].contains("not show"),
        "{}",
        last[2]
    );
    let environment: serde_json::Map<String, Value> =
        serde_json::from_str(&last[3]).unwrap_or_else(|err| panic!("{err}: {}", last[3]));
    let names: Vec<&str> = environment.keys().map(String::as_str).collect();
    assert_eq!(names, ["PATH", "PROBE_VAR"], "exactly what docs/mcp.md promises");
    assert_eq!(environment["PROBE_VAR"], "probe-value");

    // Activation lasts: the next chat (a new process, a new server) offers the tools at once.
    setup.model().push(Reply::text("still here"));
    setup.chat("owner", "again\n").await;
    let again = setup.model().requests();
    assert!(mcp_tools(again.last().unwrap()).contains(&"mcp__everything__echo".to_owned()));
}

#[tokio::test]
async fn a_mention_activates_a_server_for_the_same_turn_and_explain_counts_its_schemas() {
    let setup = McpHerald::start("").await;
    setup
        .model()
        .push(Reply::tool_call("mcp__everything__echo", json!({"message": "ping"})));
    setup.model().push(Reply::text("pong"));
    let output = setup.chat("owner", "use $everything to echo ping\n").await;
    assert_eq!(reply_texts(&output), ["pong"]);
    let requests = setup.model().requests();
    assert!(mcp_tools(&requests[0]).contains(&"mcp__everything__echo".to_owned()));
    assert_eq!(results(&requests, 1), ["Echo: ping"]);

    let explained = setup
        .herald
        .command(&["explain", "--conversation", "local:owner"])
        .output()
        .await
        .unwrap();
    let report = String::from_utf8_lossy(&explained.stdout);
    assert!(report.contains("mcp__everything__echo"), "{report}");
    let schemas: usize = report
        .lines()
        .find(|l| l.trim_start().starts_with("tool schemas"))
        .and_then(|l| l.split_whitespace().nth(2))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    // Thirteen tools with their schemas are far more than the core tools alone.
    assert!(schemas > 500, "tool schema tokens: {report}");
}

#[tokio::test]
async fn streamable_http_servers_work_like_stdio_ones() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = tokio::process::Command::new("node")
        .arg(everything_js())
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Ready when it says so on stderr.
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(server.stderr.take().unwrap()));
    while let Some(line) = lines.next_line().await.unwrap() {
        if line.contains("listening on port") {
            break;
        }
    }
    let model = ScriptedModel::start().await;
    let herald = Herald::with_model(
        model,
        &format!(
            "mcp:\n  servers:\n    remote:\n      url: http://127.0.0.1:{port}/mcp\n      \
             headers: {{X-Probe: probe}}\n      elevated: false\n      trust_annotations: true\n"
        ),
    );
    herald
        .model
        .push(Reply::tool_call("mcp__remote__get-sum", json!({"a": 40, "b": 2})));
    herald.model.push(Reply::text("42"));
    let output = herald.chat("mallory", "$remote add 40 and 2\n").await;
    assert_eq!(reply_texts(&output), ["42"], "{}", stderr(&output));
    let requests = herald.model.requests();
    let catalog = system_prompt(&requests[0]).unwrap_or_default();
    assert!(catalog.contains("- remote: "), "{catalog}");
    assert!(
        results(&requests, 1)[0].contains("is 42"),
        "{:?}",
        results(&requests, 1)
    );
}

#[tokio::test]
async fn operators_list_inspect_and_switch_servers_and_single_tools() {
    let setup = McpHerald::start("").await;
    let herald = &setup.herald;
    let list = herald.command(&["skills", "list"]).output().await.unwrap();
    let listing = String::from_utf8_lossy(&list.stdout);
    assert!(list.status.success(), "{}", stderr(&list));
    for expected in [
        "MCP servers:",
        "- everything [enabled, admins only, running, 13 tools]",
        "- faults [enabled, running, 7 tools]",
        "- mcp__faults__wipe [enabled, on faults, side effect, dangerous]",
        "- mcp__faults__lookup [enabled, on faults, parallel-safe]",
    ] {
        assert!(listing.contains(expected), "missing {expected:?} in\n{listing}");
    }
    let disable = herald
        .command(&["skills", "disable", "mcp__faults__lookup"])
        .output()
        .await
        .unwrap();
    assert!(disable.status.success(), "{}", stderr(&disable));

    // In chat: admins switch a whole server off; its tools go with it.
    setup.model().push(Reply::text("ok"));
    let output = setup
        .chat("owner", "/skills disable everything\n/skills info faults\n$faults hi\n")
        .await;
    let replies = reply_texts(&output);
    assert!(
        replies[0].contains("everything") && replies[0].contains("disabled"),
        "{replies:?}"
    );
    assert!(replies[1].contains("faults (MCP server)"), "{replies:?}");
    let requests = setup.model().requests();
    let offered = mcp_tools(&requests[0]);
    assert!(offered.contains(&"mcp__faults__append_note".to_owned()), "{offered:?}");
    assert!(
        !offered.contains(&"mcp__faults__lookup".to_owned()),
        "a disabled tool: {offered:?}"
    );
    assert!(!offered.iter().any(|t| t.starts_with("mcp__everything")), "{offered:?}");
    assert!(
        !system_prompt(&requests[0])
            .unwrap_or_default()
            .contains("- everything:")
    );

    let doctor = herald.command(&["doctor"]).output().await.unwrap();
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        report.contains("ok   mcp server everything: 13 tools: mcp__everything__echo"),
        "{report}"
    );
    assert!(report.contains("ok   mcp server faults: 7 tools"), "{report}");
}

#[tokio::test]
async fn a_broken_configuration_names_the_file_and_the_key() {
    let model = ScriptedModel::start().await;
    let herald = Herald::with_model(model, "mcp:\n  servers:\n    Bad_Name:\n      command: x\n");
    let output = herald.chat("owner", "hi\n").await;
    assert!(!output.status.success());
    let text = stderr(&output);
    assert!(
        text.contains("herald.yaml") && text.contains("mcp.servers.Bad_Name") && text.contains("lowercase"),
        "{text}"
    );
    let model = ScriptedModel::start().await;
    let herald = Herald::with_model(
        model,
        "mcp:\n  servers:\n    files:\n      command: x\n      call_timout: 5s\n",
    );
    let text = stderr(&herald.chat("owner", "hi\n").await);
    assert!(
        text.contains("mcp.servers.files") && text.contains("call_timout"),
        "{text}"
    );
}

#[tokio::test]
async fn a_server_that_cannot_start_is_reported_and_herald_answers_anyway() {
    let model = ScriptedModel::start().await;
    let herald = Herald::with_model(
        model,
        "mcp:\n  servers:\n    ghost:\n      command: /nonexistent/mcp-server\n      elevated: false\n",
    );
    herald.model.push(Reply::text("I am still here."));
    let output = herald.chat("mallory", "$ghost do something\n").await;
    assert!(output.status.success(), "{}", stderr(&output));
    let replies = reply_texts(&output);
    assert!(
        replies
            .iter()
            .any(|r| r.contains("`ghost` was not activated") && r.contains("cannot start")),
        "{replies:?}"
    );
    assert_eq!(replies.last().unwrap(), "I am still here.");
    let doctor = herald.command(&["doctor"]).output().await.unwrap();
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        report.contains("FAIL mcp server ghost: ") && report.contains("cannot start"),
        "{report}"
    );
    assert!(!doctor.status.success());
}
