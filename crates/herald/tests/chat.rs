//! `herald chat` end to end: the real binary, a real SQLite file, the
//! scripted model over HTTP.

mod common;

use std::time::Duration;

use common::{Herald, reply_texts, stderr};
use herald_testkit::Reply;
use herald_testkit::openai::{last_user_text, messages};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

#[tokio::test]
async fn piped_lines_get_one_reply_each_in_order() {
    let herald = Herald::start("").await;
    let output = herald.chat("ann", "first\nsecond\n\nthird\nfourth\nfifth\n").await;
    assert!(output.status.success(), "chat failed: {}", stderr(&output));
    assert_eq!(
        reply_texts(&output),
        [
            "echo: first",
            "echo: second",
            "echo: third",
            "echo: fourth",
            "echo: fifth"
        ],
        "one reply per non-empty line, in order"
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.lines().all(|l| l.contains("\"conversation\":\"local:ann\"")),
        "{stdout}"
    );
}

/// The local chat cleans a line as the gateway cleans every channel's
/// text: control characters (an escape sequence pasted in) never reach the
/// model, and a paste over `channels.max_message_chars` is cut and said so.
#[tokio::test]
async fn chat_lines_are_cleaned_and_capped_like_every_channels_text() {
    let herald = Herald::start("channels:\n  max_message_chars: 100\n").await;
    let long = "x".repeat(500);
    let output = herald
        .chat("ann", &format!("bell\u{7}and \u{1b}[31mred\u{1b}[0m\n{long}\n"))
        .await;
    assert!(output.status.success(), "chat failed: {}", stderr(&output));
    let replies = reply_texts(&output);
    assert_eq!(replies[0], "echo: belland [31mred[0m");
    assert!(
        replies[1].starts_with(&format!("echo: {}", "x".repeat(100))),
        "{}",
        replies[1]
    );
    assert!(replies[1].contains("message cut by Herald"), "{}", replies[1]);
    assert!(stderr(&output).contains("channels.max_message_chars"));
}

#[tokio::test]
async fn plain_output_prints_the_reply_text() {
    let herald = Herald::start("").await;
    let mut child = herald
        .command(&["chat", "--user", "ann"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"hello\n").await.unwrap();
    let output = child.wait_with_output().await.unwrap();
    assert!(output.status.success());
    assert_eq!(String::from_utf8_lossy(&output.stdout), "echo: hello\n");
}

#[tokio::test]
async fn history_survives_a_restart() {
    let herald = Herald::start("").await;
    herald.model.push(Reply::text("Nice to meet you, Ann."));
    let first = herald.chat("ann", "My name is Ann.\n").await;
    assert_eq!(reply_texts(&first), ["Nice to meet you, Ann."]);

    // A new process on the same database continues the conversation.
    herald.model.push(Reply::text("You are Ann."));
    let second = herald.chat("ann", "What is my name?\n").await;
    assert_eq!(reply_texts(&second), ["You are Ann."]);

    let requests = herald.model.requests();
    assert_eq!(requests.len(), 2);
    let seen: Vec<String> = messages(&requests[1])
        .iter()
        .map(|m| {
            format!(
                "{}: {}",
                m["role"].as_str().unwrap(),
                m["content"].as_str().unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(
        seen[1..],
        [
            "user: My name is Ann.",
            "assistant: Nice to meet you, Ann.",
            "user: What is my name?"
        ]
    );

    // Another user's conversation starts empty.
    let other = herald.chat("bob", "hi\n").await;
    assert_eq!(reply_texts(&other), ["echo: hi"]);
    assert_eq!(
        messages(&herald.model.requests()[2]).len(),
        2,
        "system prompt and bob's message only"
    );
}

#[tokio::test]
async fn a_worker_killed_mid_turn_answers_the_message_exactly_once() {
    let herald = Herald::start("queue:\n  lease: 1s\n").await;
    herald.model.push(Reply::Hang);
    let mut child = herald.spawn_chat("ann");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"please answer once\n").await.unwrap();
    // The turn is under way when the model has the request; then the process dies.
    herald.model.wait_for_requests(1).await;
    child.start_kill().unwrap();
    let killed = child.wait_with_output().await.unwrap();
    assert!(!killed.status.success());
    assert!(reply_texts(&killed).is_empty(), "nothing was answered before the kill");
    herald.model.release();

    // A new process finds the unfinished task once its lease expires and answers it.
    herald.model.push(Reply::text("answered"));
    let restarted = herald.chat("ann", "").await;
    assert!(restarted.status.success(), "{}", stderr(&restarted));
    assert_eq!(reply_texts(&restarted), ["answered"]);

    // And never again.
    let again = herald.chat("ann", "").await;
    assert!(
        reply_texts(&again).is_empty(),
        "the reply was sent a second time: {:?}",
        reply_texts(&again)
    );
    let requests = herald.model.requests();
    assert_eq!(requests.len(), 2, "the killed turn and the retried one");
    assert_eq!(last_user_text(&requests[1]).as_deref(), Some("please answer once"));
}

#[tokio::test]
async fn a_model_that_keeps_failing_gets_the_user_one_short_notice() {
    let herald = Herald::start("queue:\n  retry_base: 10ms\n  retry_max: 20ms\n  max_attempts: 2\n").await;
    herald.model.set_fallback(|_| Reply::error(500, "model is down"));
    let output = herald.chat("ann", "hello?\n").await;
    assert!(output.status.success(), "{}", stderr(&output));
    let replies = reply_texts(&output);
    assert_eq!(replies.len(), 1, "{replies:?}");
    assert!(replies[0].contains("could not handle your message"), "{replies:?}");
}

/// Piped input is not lost when the model is down: Herald warns once (one
/// line naming `llm.base_url`), queues the message, and the queue's retries
/// answer it once the model is back.
#[tokio::test]
async fn a_message_sent_while_the_model_is_down_is_answered_once_it_is_back() {
    // A port nothing listens on yet.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("herald.yaml");
    std::fs::write(
        &config,
        format!(
            "storage:\n  url: sqlite://{}\nllm:\n  base_url: http://{address}/v1\n  max_retries: 0\n\
             queue:\n  retry_base: 100ms\n  retry_max: 300ms\n  max_attempts: 50\n",
            dir.path().join("h.db").display()
        ),
    )
    .unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_herald"))
        .arg("--config")
        .arg(&config)
        .args(["chat", "--json", "--user", "ann"])
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"hello while you were down\n").await.unwrap();
    drop(stdin);
    let mut errors = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let warning = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = errors.next_line().await.unwrap() {
            if line.contains("warning") {
                return line;
            }
        }
        panic!("herald chat ended without a warning");
    })
    .await
    .expect("a warning that the model is down");
    assert!(
        warning.contains("llm.base_url") && warning.contains(&address.port().to_string()),
        "{warning}"
    );

    let model = herald_testkit::ScriptedModel::start_on(address).await.unwrap();
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("chat finished once the model was back")
        .unwrap();
    assert!(output.status.success());
    assert_eq!(reply_texts(&output), ["echo: hello while you were down"]);
    assert!(!model.requests().is_empty());
}

#[tokio::test]
async fn a_config_typo_names_the_file_line_and_key() {
    let herald = Herald::start("agent:\n  wokers: 2\n").await;
    let output = herald.chat("ann", "hi\n").await;
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(
        err.contains("herald.yaml:") && err.contains("`agent.wokers`") && err.contains("unknown field"),
        "{err}"
    );
}

#[tokio::test]
async fn run_drains_and_exits_zero_on_sigterm() {
    use tokio::io::AsyncBufReadExt;
    let herald = Herald::start("").await;
    let mut child = herald
        .command(&["run"])
        .env("RUST_LOG", "info")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    // Wait until it says it is serving.
    let mut seen = Vec::new();
    let ready = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let running = line.contains("herald is running");
            seen.push(line);
            if running {
                return true;
            }
        }
        false
    })
    .await
    .unwrap();
    assert!(ready, "herald run never said it was running");
    let pid = child.id().unwrap().to_string();
    let status = tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(status.success());
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "exit status {status:?}");
    while let Some(line) = lines.next_line().await.unwrap() {
        seen.push(line);
    }
    // Logs to a pipe are plain text, and a fresh install with no heartbeat
    // checklist and no known admin conversation does not complain about it.
    assert!(
        !seen.iter().any(|line| line.contains('\u{1b}')),
        "colour codes in a pipe: {seen:?}"
    );
    assert!(
        !seen
            .iter()
            .any(|line| line.contains("heartbeat") && line.contains("WARN")),
        "{seen:?}"
    );
}
