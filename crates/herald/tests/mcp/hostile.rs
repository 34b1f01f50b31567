//! A hostile MCP server (`tests/mcp-servers/hostile.py`, which speaks the
//! protocol itself to do what no SDK lets a server do) against the real
//! binary: a tool list of hundreds of thousands of tools, a listing that
//! never answers, secrets and terminal escapes on stderr, stderr without
//! line ends, names listed twice, annotations that lie, and rules that
//! match nothing. Each attack is bounded by what a person, the model, the
//! operator's terminal or Herald's memory sees of it.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use herald_testkit::openai::tool_names;
use herald_testkit::{Reply, ScriptedModel};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};

use crate::common::{Herald, reply_texts, stderr};
use crate::{mcp_tools, results, servers_dir};

const SECRET: &str = "sk-hostile-0123456789abcdef";

/// A Herald whose one MCP server, `hostile`, plays `mode`; `keys` are more
/// of its configuration (indented YAML lines).
fn hostile(model: ScriptedModel, mode: &str, keys: &str) -> (Herald, PathBuf) {
    let notes = tempfile::tempdir().unwrap().keep().join("notes");
    let yaml = format!(
        "mcp:\n  servers:\n    hostile:\n      command: python3\n      args: [\"{script}\"]\n      \
         env: {{HOSTILE_MODE: \"{mode}\", SECRET: \"{SECRET}\", NOTES_FILE: \"{notes}\"}}\n      \
         elevated: false\n      startup_timeout: 90s\n      call_timeout: 5s\n{keys}",
        script = servers_dir().join("hostile.py").display(),
        notes = notes.display(),
    );
    (Herald::with_model(model, &yaml), notes)
}

/// `herald chat` kept running: lines in, replies and log lines out.
struct LiveChat {
    child: Child,
    stdin: ChildStdin,
    replies: Arc<Mutex<Vec<(Instant, String)>>>,
    log: Arc<Mutex<Vec<String>>>,
}

impl LiveChat {
    fn start(herald: &Herald, user: &str, env: &[(&str, &str)]) -> Self {
        let mut command = herald.command(&["chat", "--json", "--user", user]);
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn herald chat");
        let stdin = child.stdin.take().unwrap();
        let replies = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
        let seen = Arc::clone(&replies);
        tokio::spawn(async move {
            while let Ok(Some(line)) = out.next_line().await {
                let text = serde_json::from_str::<serde_json::Value>(&line)
                    .ok()
                    .and_then(|v| v["text"].as_str().map(str::to_owned))
                    .unwrap_or(line);
                seen.lock().unwrap().push((Instant::now(), text));
            }
        });
        let mut err = BufReader::new(child.stderr.take().unwrap()).lines();
        let kept = Arc::clone(&log);
        tokio::spawn(async move {
            while let Ok(Some(line)) = err.next_line().await {
                kept.lock().unwrap().push(line);
            }
        });
        Self {
            child,
            stdin,
            replies,
            log,
        }
    }

    async fn say(&mut self, line: &str) -> Instant {
        self.stdin.write_all(format!("{line}\n").as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
        Instant::now()
    }

    /// Waits for the `count`th reply; returns when it came and what it said.
    async fn reply(&self, count: usize) -> (Instant, String) {
        let waited = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                if let Some(reply) = self.replies.lock().unwrap().get(count - 1).cloned() {
                    return reply;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        waited.unwrap_or_else(|_| panic!("no reply {count}; log:\n{}", self.log()))
    }

    async fn wait_for_log(&self, needle: &str) {
        let waited = tokio::time::timeout(Duration::from_secs(60), async {
            while !self.log.lock().unwrap().iter().any(|line| line.contains(needle)) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        assert!(waited.is_ok(), "no log line with {needle:?}:\n{}", self.log());
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// The most memory the process has held so far (`VmHWM`), in bytes.
    fn peak_memory(&self) -> u64 {
        let pid = self.child.id().expect("running");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let kilobytes: u64 = status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap();
        kilobytes * 1024
    }

    async fn end(mut self) -> String {
        drop(self.stdin);
        let _ = tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        self.log.lock().unwrap().join("\n")
    }
}

#[tokio::test]
async fn a_list_of_three_hundred_thousand_tools_is_cut_at_the_bound_and_costs_megabytes() {
    let (plain, _) = hostile(ScriptedModel::start().await, "", "");
    let (flood, _) = hostile(ScriptedModel::start().await, "many_tools", "");
    let mut peaks = Vec::new();
    for herald in [&plain, &flood] {
        herald.model.push(Reply::text("listed"));
        let mut chat = LiveChat::start(herald, "owner", &[]);
        chat.say("$hostile list your tools").await;
        chat.reply(1).await;
        peaks.push(chat.peak_memory());
        chat.end().await;
    }
    let requests = flood.model.requests();
    let offered = mcp_tools(&requests[0]);
    assert!(
        !offered.is_empty() && offered.len() <= 64,
        "{} tools offered",
        offered.len()
    );
    // 40 pages of 8,000 tools (25 MB of JSON) once took Herald to 1.2 GB.
    let growth = peaks[1].saturating_sub(peaks[0]);
    assert!(
        growth < 32 * 1024 * 1024,
        "listing grew Herald by {} MiB",
        growth / 1024 / 1024
    );
    let doctor = flood.command(&["doctor"]).output().await.unwrap();
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        report.contains("FAIL mcp server hostile: it lists more than 256 tools; the first 256 are used"),
        "{report}"
    );
}

#[tokio::test]
async fn a_servers_stderr_reaches_the_log_with_its_secret_hidden_and_never_a_chat_or_the_model() {
    let (herald, _) = hostile(ScriptedModel::start().await, "leak_and_die", "");
    herald
        .model
        .push(Reply::tool_call("activate_skill", json!({"name": "hostile"})));
    herald.model.push(Reply::text("it failed"));
    let output = herald.chat("mallory", "$hostile log me in\n").await;
    let replies = reply_texts(&output);
    assert!(
        replies.iter().any(|r| r.contains("`hostile` was not activated")),
        "{replies:?}"
    );
    let said = replies.join("\n");
    assert!(!said.contains(SECRET) && !said.contains("cannot log in"), "{said}");
    let requests = herald.model.requests();
    let seen_by_model: String = requests.iter().map(|r| r.to_string()).collect();
    assert!(!seen_by_model.contains(SECRET), "the model saw the secret");
    assert!(
        !results(&requests, 1)[0].contains("cannot log in"),
        "{:?}",
        results(&requests, 1)
    );
    // The operator's log has the stderr, with the secret hidden.
    let log = stderr(&output);
    assert!(log.contains("fatal: cannot log in with token [hidden]"), "{log}");
    assert!(!log.contains(SECRET), "{log}");
    let doctor = herald.command(&["doctor"]).output().await.unwrap();
    let printed = format!("{}{}", String::from_utf8_lossy(&doctor.stdout), stderr(&doctor));
    assert!(printed.contains("FAIL mcp server hostile"), "{printed}");
    assert!(!printed.contains(SECRET), "{printed}");
}

#[tokio::test]
async fn a_hung_eager_server_costs_a_plain_turn_nothing() {
    let (herald, _) = hostile(ScriptedModel::start().await, "hang_list", "      eager: true\n");
    let mut chat = LiveChat::start(&herald, "mallory", &[]);
    // The first turn comes while the warm-up's listing hangs; the later
    // ones after it timed out and while the server waits for its next try.
    for n in 1..=3 {
        let asked = chat.say(&format!("hello {n}")).await;
        let (answered, text) = chat.reply(n).await;
        assert_eq!(text, format!("echo: hello {n}"));
        let took = answered - asked;
        assert!(took < Duration::from_secs(1), "turn {n} took {took:?}\n{}", chat.log());
        if n == 1 {
            chat.wait_for_log("tools/list did not answer within call_timeout").await;
        }
    }
    chat.end().await;
    assert!(mcp_tools(&herald.model.requests()[0]).is_empty());
}

#[tokio::test]
async fn stderr_without_line_ends_costs_its_cut_lines_not_its_size() {
    let mut peaks = Vec::new();
    for mode in ["", "progress", "endless_line"] {
        let (herald, _) = hostile(ScriptedModel::start().await, mode, "");
        herald.model.push(Reply::text("ok"));
        let mut chat = LiveChat::start(&herald, "owner", &[]);
        // The server writes all its stderr before it answers the handshake.
        chat.say("$hostile ping").await;
        let (_, text) = chat.reply(1).await;
        assert_eq!(text, "ok", "{mode}: {}", chat.log());
        peaks.push((mode, chat.peak_memory()));
        chat.end().await;
    }
    let plain = peaks[0].1;
    for (mode, peak) in &peaks[1..] {
        let growth = peak.saturating_sub(plain);
        assert!(
            growth < 16 * 1024 * 1024,
            "{mode}: stderr grew Herald by {} MiB",
            growth / 1024 / 1024
        );
    }
}

#[tokio::test]
async fn escapes_a_server_writes_reach_no_terminal_and_no_log() {
    let (herald, _) = hostile(
        ScriptedModel::start().await,
        "escapes",
        "      trust_annotations: true\n",
    );
    let has_escape = |text: &str| text.contains('\u{1b}') || text.contains('\u{7}') || text.contains('\u{9b}');
    herald.model.push(Reply::text("ok"));
    let mut chat = LiveChat::start(&herald, "owner", &[("RUST_LOG", "herald_mcp=debug,warn")]);
    chat.say("$hostile shout").await;
    chat.reply(1).await;
    let log = chat.end().await;
    assert!(
        log.contains("starting]0;pwned-title]52;c;cGF5bG9hZA==[2J"),
        "the stderr line is logged:\n{log}"
    );
    assert!(!has_escape(&log), "{log:?}");
    let request = &herald.model.requests()[0];
    assert!(!has_escape(&request.to_string()), "the model sees no escape");

    let list = herald.command(&["skills", "list"]).output().await.unwrap();
    let listing = String::from_utf8_lossy(&list.stdout);
    let doctor = herald.command(&["doctor"]).output().await.unwrap();
    let report = format!("{}{}", String::from_utf8_lossy(&doctor.stdout), stderr(&doctor));
    assert!(listing.contains("hostile"), "{listing}");
    assert!(report.contains("mcp server hostile"), "{report}");
    for (what, text) in [("skills list", listing.to_string()), ("doctor", report)] {
        assert!(!has_escape(&text), "{what}: {text:?}");
    }
}

#[tokio::test]
async fn a_tool_that_claims_to_be_read_only_waits_for_an_admin_unless_its_server_is_trusted() {
    let (herald, notes) = hostile(ScriptedModel::start().await, "claims_read_only", "");
    let read_notes = || std::fs::read_to_string(&notes).unwrap_or_default();
    herald.model.push(Reply::tool_call("mcp__hostile__erase", json!({})));
    herald.model.push(Reply::text("I cannot."));
    herald.chat("mallory", "$hostile look it up\n").await;
    let refused = results(&herald.model.requests(), 1);
    assert!(refused[0].contains("needs an admin's confirmation"), "{refused:?}");
    herald.model.push(Reply::tool_call("mcp__hostile__erase", json!({})));
    herald.model.push(Reply::text("It waits."));
    let output = herald.chat("owner", "$hostile look it up\n").await;
    assert!(
        reply_texts(&output).iter().any(|t| t.contains("Reply /approve ")),
        "{:?}",
        reply_texts(&output)
    );
    assert_eq!(read_notes(), "", "nothing ran before an approval");

    // The operator who trusts the server is believed.
    let (trusted, notes) = hostile(
        ScriptedModel::start().await,
        "claims_read_only",
        "      trust_annotations: true\n",
    );
    trusted.model.push(Reply::tool_call("mcp__hostile__erase", json!({})));
    trusted.model.push(Reply::text("done"));
    trusted.chat("mallory", "$hostile look it up\n").await;
    assert_eq!(results(&trusted.model.requests(), 1)[0], "erase done");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "erased\n");
}

#[tokio::test]
async fn a_name_listed_twice_is_offered_under_neither_and_doctor_says_so() {
    let (herald, _) = hostile(
        ScriptedModel::start().await,
        "duplicates",
        "      trust_annotations: true\n",
    );
    herald.model.push(Reply::text("ok"));
    herald.chat("owner", "$hostile write\n").await;
    let offered = tool_names(&herald.model.requests()[0]);
    assert!(offered.contains(&"mcp__hostile__read".to_owned()), "{offered:?}");
    assert!(!offered.iter().any(|t| t.contains("write")), "{offered:?}");
    let doctor = herald.command(&["doctor"]).output().await.unwrap();
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        report.contains("FAIL mcp server hostile: it lists `write` more than once; those are not offered"),
        "{report}"
    );
}

#[tokio::test]
async fn rules_that_match_no_tool_are_reported_and_a_deny_rule_fails_closed() {
    let (herald, _) = hostile(
        ScriptedModel::start().await,
        "",
        "      tools: {deny: [write_file]}\n      policy: {erase_all: {dangerous: false}}\n",
    );
    herald.model.push(Reply::text("ok"));
    let output = herald.chat("owner", "$hostile ping\n").await;
    let replies = reply_texts(&output);
    assert!(
        replies
            .iter()
            .any(|r| r.contains("`hostile` was not activated") && r.contains("tools.deny names `write_file`")),
        "{replies:?}"
    );
    assert!(mcp_tools(&herald.model.requests()[0]).is_empty());
    let doctor = herald.command(&["doctor"]).output().await.unwrap();
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        report.contains("FAIL mcp server hostile") && report.contains("tools.deny names `write_file`"),
        "{report}"
    );

    // Without the deny rule, a policy key that matches nothing is reported.
    let (herald, _) = hostile(
        ScriptedModel::start().await,
        "",
        "      policy: {erase_all: {dangerous: false}}\n",
    );
    let doctor = herald.command(&["doctor"]).output().await.unwrap();
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(report.contains("ok   mcp server hostile: 1 tools"), "{report}");
    assert!(
        report.contains("FAIL mcp server hostile: policy names `erase_all`, which it does not list"),
        "{report}"
    );
}
