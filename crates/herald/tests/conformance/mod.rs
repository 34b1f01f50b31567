//! The channel conformance suite: the same end-to-end scenarios for every
//! chat platform, run against the platform's fake from `herald-testkit`.
//!
//! Each scenario starts the real `herald run` binary with a fresh SQLite
//! file, the scripted model (whose fallback answers `echo: <text>`) and the
//! fake's `channel_yaml()`, with the fake's admin listed in `admins` and
//! `access.unknown: pair`. It then acts as users on the fake and asserts on
//! what the bot sent, awaiting signals (the process's ready line, the fake's
//! `wait_for_sent`, the model's request count) rather than sleeping.
//!
//! # Adding a platform
//!
//! Make the fake implement [`herald_testkit::FakePlatform`] (its
//! `channel_yaml()` must configure Herald with send rates the fake enforces,
//! fast enough for a 50-message burst to take seconds), then add
//! `crates/herald/tests/<platform>.rs`:
//!
//! ```ignore
//! #[macro_use]
//! mod conformance;
//!
//! conformance_suite!(slack, herald_testkit::slack::FakeSlack::start);
//! ```
//!
//! The second argument is any `async fn() -> impl FakePlatform` (or a path
//! to one). The macro makes a module named by the first argument with one
//! `#[tokio::test]` per scenario, so `cargo test --test slack burst` runs one.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use herald_testkit::openai::last_user_text;
use herald_testkit::{FakePlatform, Reply, ScriptedModel, SentMessage};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::watch;

/// One `#[tokio::test]` per scenario, for the fake `$start()` returns.
#[allow(unused_macros)] // test files that use only `Setup` do not call it
macro_rules! conformance_suite {
    ($platform:ident, $start:expr) => {
        mod $platform {
            // `$start` may name what the calling file imported.
            #[allow(unused_imports)]
            use super::*;
            use crate::conformance as suite;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_dm_gets_one_reply() {
                suite::a_dm_gets_one_reply($start().await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_group_message_is_answered_only_when_addressed() {
                suite::a_group_message_is_answered_only_when_addressed($start().await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_long_reply_arrives_in_chunks_in_order_in_the_thread() {
                suite::a_long_reply_arrives_in_chunks_in_order_in_the_thread($start().await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_burst_of_50_gets_50_replies_in_order_within_the_rates() {
                suite::a_burst_of_50_gets_50_replies_in_order_within_the_rates($start().await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_429_is_waited_out() {
                suite::a_429_is_waited_out($start().await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_restart_mid_burst_loses_nothing_and_duplicates_nothing() {
                suite::a_restart_mid_burst_loses_nothing_and_duplicates_nothing($start().await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn the_bots_own_messages_are_ignored() {
                suite::the_bots_own_messages_are_ignored($start().await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn an_unknown_sender_gets_a_pairing_code_and_no_model_call() {
                suite::an_unknown_sender_gets_a_pairing_code_and_no_model_call($start().await).await;
            }
        }
    };
}

/// How long one reply may take, start-up of a debug binary included.
pub const REPLY: Duration = Duration::from_secs(30);
/// How long a burst may take.
pub const BURST: Duration = Duration::from_secs(120);

/// How [`Setup::with_options`] writes herald.yaml.
pub struct Options {
    /// `storage.url`; a fresh SQLite file in the temporary directory when unset.
    pub storage_url: Option<String>,
    /// `access.unknown`.
    pub access_unknown: &'static str,
    /// Appended to herald.yaml (top-level keys not written otherwise).
    pub extra: String,
    /// Lines added under `llm:`, indented by two spaces (vision, limits).
    pub llm: String,
    /// Actor ids listed in `admins` beside the fake's admin.
    pub more_admins: Vec<String>,
    /// `log.level`.
    pub log_level: &'static str,
    /// A real model server (its `base_url` and model name) in place of the
    /// scripted model.
    pub real_model: Option<(String, String)>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            storage_url: None,
            access_unknown: "pair",
            extra: String::new(),
            llm: String::new(),
            more_admins: Vec::new(),
            log_level: "warn,herald=info,herald_agent=info",
            real_model: None,
        }
    }
}

/// A fake platform, the scripted model, and a config for `herald run`.
pub struct Setup<P: FakePlatform> {
    pub platform: P,
    pub model: ScriptedModel,
    pub dir: TempDir,
    pub config: PathBuf,
}

/// A running `herald run`; killed when dropped.
pub struct Running {
    child: Child,
    stderr: Arc<Mutex<Vec<String>>>,
    /// How many stderr lines were read; watched by [`Running::wait_for_log`].
    lines: watch::Receiver<usize>,
}

impl<P: FakePlatform> Setup<P> {
    pub async fn new(platform: P) -> Self {
        Self::with_extra(platform, "").await
    }

    /// `extra` is appended to herald.yaml (top-level keys not written here).
    pub async fn with_extra(platform: P, extra: &str) -> Self {
        Self::with_options(
            platform,
            Options {
                extra: extra.to_owned(),
                ..Options::default()
            },
        )
        .await
    }

    pub async fn with_options(platform: P, options: Options) -> Self {
        let model = ScriptedModel::start().await;
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("herald.yaml");
        let admin = platform.admin();
        let storage_url = options
            .storage_url
            .unwrap_or_else(|| format!("sqlite://{}", dir.path().join("herald.db").display()));
        let text = format!(
            "storage:\n  url: {storage_url}\n\
             llm:\n  base_url: {base}\n  api_key: test-key\n  model: {model_name}\n  retry_base: 10ms\n  retry_max: 50ms\n{llm}\
             queue:\n  lease: 2s\n\
             admins: [\"{channel}:{admin}\"{more_admins}]\n\
             access:\n  unknown: {unknown}\n\
             log:\n  level: \"{log_level}\"\n\
             channels:\n  {channel}:\n{channel_yaml}{extra}",
            base = options
                .real_model
                .as_ref()
                .map_or_else(|| model.base_url(), |(url, _)| url.clone()),
            model_name = options
                .real_model
                .as_ref()
                .map_or("scripted", |(_, name)| name.as_str()),
            channel = platform.channel(),
            admin = admin.id,
            more_admins = options
                .more_admins
                .iter()
                .map(|id| format!(", \"{id}\""))
                .collect::<String>(),
            unknown = options.access_unknown,
            channel_yaml = platform.channel_yaml(),
            extra = options.extra,
            llm = options.llm,
            log_level = options.log_level,
        );
        std::fs::write(&config, text).expect("write config");
        Self {
            platform,
            model,
            dir,
            config,
        }
    }

    /// Starts `herald run` and waits for its ready line.
    pub async fn start(&self) -> Running {
        self.start_with(&[]).await
    }

    /// Starts `herald run ARGS…` (such as `--role worker`) and waits for its
    /// ready line.
    pub async fn start_with(&self, args: &[&str]) -> Running {
        let mut child = Command::new(env!("CARGO_BIN_EXE_herald"))
            .arg("--config")
            .arg(&self.config)
            .arg("run")
            .args(args)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn herald run");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let (ready_tx, mut ready) = watch::channel(false);
        let (count_tx, count) = watch::channel(0);
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let sink = stderr.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if line.contains("herald is running") {
                    let _ = ready_tx.send(true);
                }
                let mut sink = sink.lock().unwrap();
                sink.push(line);
                count_tx.send_replace(sink.len());
            }
        });
        let mut running = Running {
            child,
            stderr,
            lines: count,
        };
        tokio::select! {
            _ = ready.wait_for(|ready| *ready) => {}
            status = running.child.wait() => panic!("herald run exited ({status:?}):\n{}", running.stderr()),
            _ = tokio::time::sleep(REPLY) => panic!("herald run never became ready:\n{}", running.stderr()),
        }
        running
    }

    /// Waits until the bot sent `count` messages; fails with the process's
    /// log when it does not.
    pub async fn sent(&self, count: usize, within: Duration, running: &Running) -> Vec<SentMessage> {
        let sent = self.platform.wait_for_sent(count, within).await;
        assert!(
            sent.len() >= count,
            "expected {count} sent messages, got {}: {:#?}\n--- herald stderr ---\n{}",
            sent.len(),
            sent,
            running.stderr()
        );
        sent
    }

    /// The user text of every model request, in order.
    pub fn model_inputs(&self) -> Vec<String> {
        self.model
            .requests()
            .iter()
            .map(|request| last_user_text(request).unwrap_or_default())
            .collect()
    }
}

impl Running {
    pub fn pid(&self) -> u32 {
        self.child.id().expect("herald is running")
    }

    /// The most memory the process has held so far (`VmHWM`), in bytes.
    pub fn peak_memory(&self) -> u64 {
        let pid = self.child.id().expect("herald is running");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
        let kilobytes: u64 = status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM in proc status");
        kilobytes * 1024
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }

    /// Waits until `count` stderr lines contain `needle` (e.g. `delivered`,
    /// which the worker logs once a reply's receipt is stored).
    pub async fn wait_for_log(&mut self, needle: &str, count: usize, within: Duration) {
        let stderr = self.stderr.clone();
        let seen = move || stderr.lock().unwrap().iter().filter(|l| l.contains(needle)).count();
        let waited = tokio::time::timeout(within, self.lines.wait_for(|_| seen() >= count))
            .await
            .is_ok();
        assert!(waited, "no {count} lines with {needle:?}:\n{}", self.stderr());
    }

    /// SIGTERM, then the exit status once the process ended.
    pub async fn terminate(mut self, within: Duration) -> std::process::ExitStatus {
        let pid = self.child.id().expect("a running process").to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().await;
        assert!(sent.is_ok_and(|status| status.success()), "kill -TERM {pid}");
        tokio::time::timeout(within, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("herald did not stop within {within:?}:\n{}", self.stderr()))
            .expect("wait for herald")
    }

    /// SIGKILL: no drain, no goodbye.
    pub async fn kill(mut self) {
        self.child.start_kill().expect("kill herald");
        let _ = self.child.wait().await;
    }
}

fn texts(sent: &[SentMessage]) -> Vec<String> {
    sent.iter().map(|m| m.text.clone()).collect()
}

pub async fn a_dm_gets_one_reply(platform: impl FakePlatform) {
    let setup = Setup::new(platform).await;
    let herald = setup.start().await;
    let admin = setup.platform.admin();
    let asked = setup.platform.send_dm(&admin, "hello there").await;
    let sent = setup.sent(1, REPLY, &herald).await;
    assert_eq!(sent[0].text, "echo: hello there");
    assert_eq!(sent[0].chat, setup.platform.dm_chat(&admin));
    if let Some(reply_to) = &sent[0].reply_to {
        assert_eq!(reply_to, &asked, "the reply answers the message that asked");
    }
    // A second message is answered after the first; the first got one reply.
    setup.platform.send_dm(&admin, "and again").await;
    let sent = setup.sent(2, REPLY, &herald).await;
    assert_eq!(texts(&sent), ["echo: hello there", "echo: and again"]);
    assert_eq!(setup.model.requests().len(), 2);
}

pub async fn a_group_message_is_answered_only_when_addressed(platform: impl FakePlatform) {
    let setup = Setup::new(platform).await;
    let herald = setup.start().await;
    let admin = setup.platform.admin();
    let group = setup.platform.group();
    setup
        .platform
        .send_group(&admin, &group, "unaddressed chatter", false)
        .await;
    setup
        .platform
        .send_group(&admin, &group, "addressed question", true)
        .await;
    // The conversation is served in order: had the chatter been taken, its
    // answer would come first.
    let sent = setup.sent(1, REPLY, &herald).await;
    assert_eq!(sent.len(), 1, "{sent:#?}");
    assert!(sent[0].text.starts_with("echo: "), "{}", sent[0].text);
    assert!(sent[0].text.contains("addressed question"), "{}", sent[0].text);
    assert_eq!(sent[0].chat, group.chat);
    assert_eq!(sent[0].thread, group.thread, "the answer stays in the thread");
    let inputs = setup.model_inputs();
    assert_eq!(inputs.len(), 1, "no model call for the chatter: {inputs:?}");
    assert!(!inputs[0].contains("unaddressed"));
}

/// About 10,000 characters in paragraphs, ending with a marker.
fn long_reply() -> String {
    let mut text = String::new();
    let mut n = 0;
    while text.chars().count() < 9_900 {
        n += 1;
        text.push_str(&format!("Paragraph {n}: "));
        for w in 0..60 {
            text.push_str(&format!("word{n}x{w} "));
        }
        text.push_str("\n\n");
    }
    text.push_str("THE-END");
    text
}

pub async fn a_long_reply_arrives_in_chunks_in_order_in_the_thread(platform: impl FakePlatform) {
    let setup = Setup::new(platform).await;
    let herald = setup.start().await;
    let reply = long_reply();
    setup.model.push(Reply::text(reply.clone()));
    let admin = setup.platform.admin();
    let group = setup.platform.group();
    let asked = setup
        .platform
        .send_group(&admin, &group, "tell me everything", true)
        .await;
    let limit = setup.platform.message_limit();
    let mut expected = reply.chars().count().div_ceil(limit).max(2);
    let sent = loop {
        let sent = setup.sent(expected, REPLY, &herald).await;
        if sent.last().is_some_and(|m| m.text.contains("THE-END")) {
            break sent;
        }
        expected = sent.len() + 1;
    };
    assert!(sent.len() >= 2, "a 10,000-character reply is split");
    for chunk in &sent {
        assert!(
            setup.platform.measure(&chunk.text) <= limit,
            "a chunk of {} exceeds {limit}",
            setup.platform.measure(&chunk.text)
        );
        assert_eq!(chunk.chat, group.chat);
        assert_eq!(chunk.thread, group.thread, "every chunk stays in the thread");
    }
    if let Some(reply_to) = &sent[0].reply_to {
        assert_eq!(reply_to, &asked);
    }
    let words: Vec<&str> = sent.iter().flat_map(|m| m.text.split_whitespace()).collect();
    let original: Vec<&str> = reply.split_whitespace().collect();
    assert_eq!(words, original, "every word arrives once, in order");
    assert!(
        setup.platform.violations().is_empty(),
        "{:?}",
        setup.platform.violations()
    );
}

pub async fn a_burst_of_50_gets_50_replies_in_order_within_the_rates(platform: impl FakePlatform) {
    let setup = Setup::new(platform).await;
    let herald = setup.start().await;
    let admin = setup.platform.admin();
    for n in 1..=50 {
        setup.platform.send_dm(&admin, &format!("burst {n}")).await;
    }
    let sent = setup.sent(50, BURST, &herald).await;
    let expected: Vec<String> = (1..=50).map(|n| format!("echo: burst {n}")).collect();
    assert_eq!(texts(&sent), expected);
    assert!(
        setup.platform.violations().is_empty(),
        "rate rules broken: {:?}",
        setup.platform.violations()
    );
}

pub async fn a_429_is_waited_out(platform: impl FakePlatform) {
    let setup = Setup::new(platform).await;
    let herald = setup.start().await;
    setup.platform.throttle_next(1, Duration::from_secs(1));
    let admin = setup.platform.admin();
    setup.platform.send_dm(&admin, "patience").await;
    let sent = setup.sent(1, REPLY, &herald).await;
    assert_eq!(texts(&sent), ["echo: patience"]);
    assert!(
        setup.platform.violations().is_empty(),
        "sent again before retry_after: {:?}",
        setup.platform.violations()
    );
}

pub async fn a_restart_mid_burst_loses_nothing_and_duplicates_nothing(platform: impl FakePlatform) {
    let setup = Setup::new(platform).await;
    // The 20th turn hangs in the model, once: the process is killed while
    // it is in flight and the rest of the burst waits.
    let hung = Arc::new(AtomicBool::new(false));
    let flag = hung.clone();
    setup.model.set_fallback(move |request| {
        let text = last_user_text(request).unwrap_or_default();
        if text == "restart 20" && !flag.swap(true, Ordering::SeqCst) {
            Reply::Hang
        } else {
            Reply::Text(format!("echo: {text}"))
        }
    });
    let herald = setup.start().await;
    let admin = setup.platform.admin();
    for n in 1..=50 {
        setup.platform.send_dm(&admin, &format!("restart {n}")).await;
    }
    let waited = tokio::time::timeout(BURST, setup.model.wait_for_requests(20)).await;
    assert!(waited.is_ok(), "the burst never reached turn 20:\n{}", herald.stderr());
    assert!(hung.load(Ordering::SeqCst));
    herald.kill().await;
    setup.platform.client_restarted();
    let before = setup.platform.sent().len();
    assert_eq!(before, 19, "turns 1-19 were answered before the kill");

    // Known limit: on SQLite the send windows live in the process, so a
    // restart within a chat's one-second window could exceed it (Herald then
    // waits out the platform's 429). This test is about losing and
    // repeating nothing; the restart comes after that window.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let herald = setup.start().await;
    for n in 51..=55 {
        setup.platform.send_dm(&admin, &format!("restart {n}")).await;
    }
    let sent = setup.sent(55, BURST, &herald).await;
    let expected: Vec<String> = (1..=55).map(|n| format!("echo: restart {n}")).collect();
    assert_eq!(texts(&sent), expected, "nothing lost, nothing twice, in order");
    assert!(
        setup.platform.violations().is_empty(),
        "{:?}",
        setup.platform.violations()
    );
}

pub async fn the_bots_own_messages_are_ignored(platform: impl FakePlatform) {
    let setup = Setup::new(platform).await;
    let herald = setup.start().await;
    let group = setup.platform.group();
    setup.platform.send_own_message(&group, "a note from myself").await;
    let admin = setup.platform.admin();
    setup.platform.send_group(&admin, &group, "after the note", true).await;
    let sent = setup.sent(1, REPLY, &herald).await;
    assert_eq!(sent.len(), 1, "{sent:#?}");
    assert!(sent[0].text.contains("after the note"), "{}", sent[0].text);
    let inputs = setup.model_inputs();
    assert_eq!(inputs.len(), 1, "the bot's own message cost no model call: {inputs:?}");
}

pub async fn an_unknown_sender_gets_a_pairing_code_and_no_model_call(platform: impl FakePlatform) {
    let setup = Setup::new(platform).await;
    let herald = setup.start().await;
    let stranger = setup.platform.stranger();
    setup.platform.send_dm(&stranger, "let me in").await;
    let sent = setup.sent(1, REPLY, &herald).await;
    assert_eq!(sent[0].chat, setup.platform.dm_chat(&stranger));
    let code = sent[0]
        .text
        .split("/pair approve ")
        .nth(1)
        .map(|rest| rest.split_whitespace().next().unwrap_or_default().to_owned())
        .unwrap_or_else(|| panic!("no pairing code in {:?}", sent[0].text));
    assert_eq!(code.len(), 6, "{code}");
    assert!(
        setup.model.requests().is_empty(),
        "an unknown sender costs no model call"
    );

    // The admin approves; then the stranger is answered like anyone.
    let admin = setup.platform.admin();
    setup.platform.send_dm(&admin, &format!("/pair approve {code}")).await;
    let sent = setup.sent(2, REPLY, &herald).await;
    assert!(sent[1].text.starts_with("Approved"), "{}", sent[1].text);
    setup.platform.send_dm(&stranger, "thanks").await;
    let sent = setup.sent(3, REPLY, &herald).await;
    assert_eq!(sent[2].text, "echo: thanks");
    assert_eq!(setup.model.requests().len(), 1);
}

/// Each platform's fault test: after a warm-up, `inject` sets the platform's
/// faults (in its own method names), then four 429s and five messages come;
/// every message is answered once, in order, every fault was met
/// (`pending` reads the fake's count), and nothing was sent before
/// `retry_after`.
pub async fn faults_and_a_429_storm_are_waited_out<P: FakePlatform>(
    setup: Setup<P>,
    inject: impl FnOnce(&P),
    pending: impl Fn(&P) -> usize,
) {
    let herald = setup.start().await;
    let admin = setup.platform.admin();
    setup.platform.send_dm(&admin, "warm up").await;
    setup.sent(1, REPLY, &herald).await;

    inject(&setup.platform);
    setup.platform.throttle_next(4, Duration::from_millis(700));
    for n in 1..=5 {
        setup.platform.send_dm(&admin, &format!("storm {n}")).await;
    }
    let sent = setup.sent(6, BURST, &herald).await;
    assert_eq!(
        texts(&sent),
        [
            "echo: warm up",
            "echo: storm 1",
            "echo: storm 2",
            "echo: storm 3",
            "echo: storm 4",
            "echo: storm 5"
        ],
        "each message once, in order\n{}",
        herald.stderr()
    );
    assert_eq!(pending(&setup.platform), 0, "every fault was met");
    assert!(
        setup.platform.violations().is_empty(),
        "sent before retry_after: {:?}",
        setup.platform.violations()
    );
    assert_eq!(setup.model.requests().len(), 6, "one model call per message");
}
