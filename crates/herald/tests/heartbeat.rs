//! The heartbeat end to end: `herald run` schedules a heartbeat every 2s for
//! the conversation of a running `herald chat`, which serves it. Turns the
//! model answers with `HEARTBEAT_OK` print nothing; the one alert prints one
//! message.

mod common;

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{Herald, stderr};
use herald_testkit::Reply;
use herald_testkit::openai::last_user_text;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const CHECK: &str = "Is the disk on db-1 full?";
const ALERT: &str = "The disk on db-1 is 97% full.";

fn is_heartbeat(request: &Value) -> bool {
    last_user_text(request).is_some_and(|text| text.contains(CHECK))
}

#[tokio::test]
async fn ok_heartbeats_send_nothing_and_an_alert_sends_one_message() {
    let model = herald_testkit::ScriptedModel::start().await;
    let heartbeats = Arc::new(AtomicUsize::new(0));
    let counted = heartbeats.clone();
    model.set_fallback(move |request| {
        if !is_heartbeat(request) {
            return Reply::text(format!("echo: {}", last_user_text(request).unwrap_or_default()));
        }
        // The third heartbeat finds something; the others do not.
        match counted.fetch_add(1, Ordering::SeqCst) + 1 {
            3 => Reply::text(ALERT),
            2 => Reply::text("**HEARTBEAT_OK** nothing to report"),
            _ => Reply::text("HEARTBEAT_OK"),
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let checklist = dir.path().join("HEARTBEAT.md");
    std::fs::write(&checklist, format!("# Checks\n\n- [ ] {CHECK}\n")).unwrap();
    let herald = Herald::with_model(
        model,
        &format!(
            "heartbeat:\n  every: 2s\n  target: local:tester\n  file: {}\nschedules:\n  tick: 200ms\n",
            checklist.display()
        ),
    );

    // The tester's chat makes the conversation known and stays open.
    let mut chat = herald.spawn_chat("tester");
    let mut input = chat.stdin.take().unwrap();
    let mut replies = BufReader::new(chat.stdout.take().unwrap()).lines();
    input.write_all(b"hello\n").await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(30), replies.next_line())
        .await
        .expect("the chat answered")
        .unwrap()
        .unwrap();
    assert!(first.contains("echo: hello"), "{first}");

    let mut run = herald
        .command(&["run"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn herald run");

    // The next thing the tester sees is the alert: two OK turns said nothing.
    let line = tokio::time::timeout(Duration::from_secs(60), replies.next_line())
        .await
        .expect("the alert arrived")
        .unwrap()
        .expect("a reply line");
    let reply: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(reply["text"], ALERT, "{line}");
    assert_eq!(reply["conversation"], "local:tester");
    assert_eq!(heartbeats.load(Ordering::SeqCst), 3);

    // Two more heartbeats, both OK, are answered before everything stops.
    let seen = herald.model.requests().len();
    tokio::time::timeout(Duration::from_secs(60), herald.model.wait_for_requests(seen + 2))
        .await
        .expect("more heartbeats ran");
    let pid = run.id().unwrap().to_string();
    let killed = tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(30), run.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "herald run exit status {status:?}");

    drop(input);
    let mut rest = Vec::new();
    while let Some(line) = tokio::time::timeout(Duration::from_secs(30), replies.next_line())
        .await
        .expect("the chat finished")
        .unwrap()
    {
        rest.push(line);
    }
    let output = chat.wait_with_output().await.unwrap();
    assert!(output.status.success(), "chat failed: {}", stderr(&output));
    assert!(rest.is_empty(), "OK heartbeats printed something: {rest:?}");
    assert!(heartbeats.load(Ordering::SeqCst) >= 5);
    let requests = herald.model.requests();
    assert!(
        requests.iter().filter(|r| is_heartbeat(r)).count() >= 5,
        "every heartbeat called the model"
    );
}

#[tokio::test]
async fn an_empty_checklist_makes_no_model_call() {
    let herald = Herald::start("heartbeat:\n  every: 1s\n  target: local:tester\nschedules:\n  tick: 100ms\n").await;
    std::fs::write(
        herald.dir.path().join("HEARTBEAT.md"),
        "# Checks\n\n- [ ]\n<!-- nothing yet -->\n",
    )
    .unwrap();
    // Make the target known, then let `herald run` tick through several intervals.
    let output = herald.chat("tester", "hello\n").await;
    assert!(output.status.success(), "{}", stderr(&output));
    let seen = herald.model.requests().len();
    let mut run = herald
        .command(&["run"])
        .current_dir(herald.dir.path())
        .env("RUST_LOG", "warn,herald_schedule=debug")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // `herald run` probes the model once at start; a heartbeat would be a
    // chat request. Watch the scheduler work through three intervals.
    let mut lines = BufReader::new(run.stderr.take().unwrap()).lines();
    let skipped = tokio::time::timeout(Duration::from_secs(30), async {
        let mut empty = 0;
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("heartbeat checklist is empty") {
                empty += 1;
                if empty == 3 {
                    return true;
                }
            }
        }
        false
    })
    .await
    .expect("the scheduler ran");
    assert!(skipped, "the scheduler said it skipped three heartbeats");
    let pid = run.id().unwrap().to_string();
    tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(run.wait().await.unwrap().success());
    assert_eq!(
        herald.model.requests().len(),
        seen,
        "no model call for an empty checklist"
    );
}

#[tokio::test]
async fn a_schedule_added_on_the_command_line_runs_in_its_conversation() {
    let herald = Herald::start("heartbeat:\n  every: 0\nschedules:\n  tick: 100ms\n").await;
    let cli = |args: &[&str]| {
        let mut command = herald.command(args);
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        command
    };

    let unknown = cli(&["schedule", "add", "--conversation", "local:ann", "every", "1h", "Nag"])
        .output()
        .await
        .unwrap();
    assert!(!unknown.status.success());
    assert!(
        stderr(&unknown).contains("has never written to Herald"),
        "{}",
        stderr(&unknown)
    );

    let hello = herald.chat("ann", "hello\n").await;
    assert!(hello.status.success(), "{}", stderr(&hello));
    let past = cli(&[
        "schedule",
        "add",
        "--conversation",
        "local:ann",
        "at",
        "2020-01-01T00:00:00Z",
        "Late",
    ])
    .output()
    .await
    .unwrap();
    assert!(stderr(&past).contains("is in the past"), "{}", stderr(&past));
    let added = cli(&[
        "schedule",
        "add",
        "--conversation",
        "local:ann",
        "every",
        "1s",
        "Say",
        "the",
        "word",
    ])
    .output()
    .await
    .unwrap();
    assert!(added.status.success(), "{}", stderr(&added));
    let added = String::from_utf8_lossy(&added.stdout).into_owned();
    assert!(added.starts_with("scheduled: #1 every 1s"), "{added}");
    let listed = cli(&["schedule", "list"]).output().await.unwrap();
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("in local:ann: Say the word"),
        "{listed:?}"
    );

    // Ann's chat is open and `herald run` fires the schedule into it.
    let mut chat = herald.spawn_chat("ann");
    let input = chat.stdin.take().unwrap();
    let mut replies = BufReader::new(chat.stdout.take().unwrap()).lines();
    let mut run = cli(&["run"]).spawn().unwrap();
    let line = tokio::time::timeout(Duration::from_secs(30), replies.next_line())
        .await
        .expect("the scheduled run was answered")
        .unwrap()
        .unwrap();
    assert!(line.contains("echo: Say the word"), "{line}");

    let cancelled = cli(&["schedule", "cancel", "1"]).output().await.unwrap();
    assert!(cancelled.status.success(), "{}", stderr(&cancelled));
    let again = cli(&["schedule", "cancel", "1"]).output().await.unwrap();
    assert!(stderr(&again).contains("no schedule 1"), "{}", stderr(&again));
    let pid = run.id().unwrap().to_string();
    tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(run.wait().await.unwrap().success());
    drop(input);
    let output = chat.wait_with_output().await.unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
}
