//! Herald against the model servers people run, end to end: the real binary
//! and the scripted model playing llama.cpp (its Python binding's server and
//! `llama-server`), Ollama and vLLM, each with the quirks seen on the real
//! ones (see `herald_testkit::openai::Quirks` and `docs/models.md`).

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{Herald, reply_texts, stderr};
use herald_testkit::openai::{Quirks, last_user_text, messages, roles, system_prompt};
use herald_testkit::{Reply, ScriptedModel};
use serde_json::{Value, json};

/// A scripted model playing a real server.
async fn server(quirks: Quirks) -> ScriptedModel {
    let model = ScriptedModel::start().await;
    model.set_quirks(quirks);
    model.set_models(vec!["scripted".into()]);
    model
}

/// Adds `keys` (YAML lines) to the `llm:` section of Herald's config.
fn set_llm(herald: &Herald, keys: &str) {
    let config = std::fs::read_to_string(&herald.config).unwrap();
    std::fs::write(&herald.config, config.replacen("llm:\n", &format!("llm:\n{keys}"), 1)).unwrap();
}

/// llama-cpp-python's quirks without the empty text it gives when tools
/// are on offer, for tests about something else.
fn answering_llama_cpp_python(n_ctx: u32) -> Quirks {
    Quirks {
        empty_text_with_tools: false,
        ..Quirks::llama_cpp_python(n_ctx)
    }
}

/// What `herald explain` prints for `conversation`.
async fn explain(herald: &Herald, conversation: &str) -> String {
    let output = herald
        .command(&["explain", "--conversation", conversation])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .await
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The history the model was shown before the current input: `role: text`.
fn shown_history(request: &Value) -> Vec<String> {
    let all = messages(request);
    all[1..all.len() - 1]
        .iter()
        .map(|m| {
            format!(
                "{}: {}",
                m["role"].as_str().unwrap_or(""),
                m["content"].as_str().unwrap_or("")
            )
        })
        .collect()
}

/// A skill folder with one skill whose body carries a marker.
fn skills_dir() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let skill = dir.path().join("haiku");
    std::fs::create_dir_all(skill.join("scripts")).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: haiku\ndescription: Answer in a haiku.\n---\n\nMARKER-5e1f: three lines.\n",
    )
    .unwrap();
    std::fs::write(skill.join("scripts/count.sh"), "echo 3\n").unwrap();
    let yaml = format!("skills:\n  dirs: [{}]\n", dir.path().display());
    (dir, yaml)
}

#[tokio::test]
async fn an_empty_answer_with_tools_on_offer_is_asked_again_with_tool_calls_off() {
    // llama-cpp-python: offered tools on `auto`, a text answer comes back as "".
    let herald = Herald::with_model(server(Quirks::llama_cpp_python(8192)).await, "");
    let output = herald.chat("owner", "hello\nand again\n").await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(reply_texts(&output), ["echo: hello", "echo: and again"]);

    let requests = herald.model.requests();
    assert_eq!(requests.len(), 4, "each message: one empty answer, one asked again");
    assert_eq!(requests[0]["tool_choice"], "auto");
    assert_eq!(requests[1]["tool_choice"], "none", "the second try forbids calls");
    assert!(
        !requests[1]["tools"].as_array().unwrap().is_empty(),
        "with the same tools shown"
    );
    // History keeps the answer that was sent, never an empty one.
    assert_eq!(shown_history(&requests[2]), ["user: hello", "assistant: echo: hello"]);
    assert!(
        explain(&herald, "local:owner")
            .await
            .contains("asked again with tool calls off")
    );
}

#[tokio::test]
async fn a_model_that_stays_empty_gets_the_user_a_plain_sentence_not_silence() {
    let herald = Herald::with_model(server(Quirks::llama_cpp_python(8192)).await, "");
    herald.model.set_fallback(|_| Reply::text(""));
    let output = herald.chat("owner", "hello\nstill there?\n").await;
    assert!(output.status.success(), "{}", stderr(&output));
    let replies = reply_texts(&output);
    assert_eq!(replies.len(), 2, "{replies:?}");
    assert!(replies[0].contains("empty answer"), "{replies:?}");
    let requests = herald.model.requests();
    let history = shown_history(&requests[2]);
    assert_eq!(history[0], "user: hello");
    assert!(
        history[1].starts_with("assistant: The model returned an empty answer"),
        "{history:?}"
    );
}

#[tokio::test]
async fn the_tools_herald_offers_never_crash_a_llama_cpp_server() {
    // llama.cpp builds a grammar rule per unit of maxLength: 2,000 or more
    // overflows its stack and the whole server dies.
    let (_skills, yaml) = skills_dir();
    let herald = Herald::with_model(server(Quirks::llama_cpp(8192)).await, &yaml);
    herald
        .model
        .push(Reply::tool_call("activate_skill", json!({"name": "haiku"})));
    herald.model.set_fallback(|_| Reply::text("Autumn wind at dusk"));
    let output = herald.chat("owner", "a poem\n").await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(reply_texts(&output), ["Autumn wind at dusk"]);
    assert!(!herald.model.crashed(), "the server survived every request");

    let offered = &herald.model.requests()[0]["tools"];
    let names: Vec<&str> = offered
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    for expected in ["send_message", "run_skill_script", "schedule_task", "activate_skill"] {
        assert!(
            names.contains(&expected),
            "{expected} is offered to an admin: {names:?}"
        );
    }
    for tool in offered.as_array().unwrap() {
        let schema = &tool["function"]["parameters"];
        assert_eq!(
            herald_llm::portable::check(schema),
            Ok(()),
            "{} is advertised in the portable subset",
            tool["function"]["name"]
        );
    }
}

/// The model's fallback: what it could see of the last tool result.
fn report_what_was_seen(request: &Value) -> Reply {
    let seen = messages(request)
        .iter()
        .rev()
        .find_map(|m| {
            let text = m["content"].as_str().unwrap_or("");
            match m["role"].as_str() {
                Some("tool") | Some("user") if text.contains("MARKER-5e1f") => Some("the instructions"),
                Some("tool") => Some("nothing"),
                _ => None,
            }
        })
        .unwrap_or("nothing");
    Reply::text(format!("I saw {seen}"))
}

#[tokio::test]
async fn tool_results_reach_a_model_whose_chat_template_drops_the_tool_role() {
    // llama-cpp-python's chatml-function-calling renders tool messages empty.
    let quirks = Quirks {
        drops_tool_role: true,
        ..Quirks::default()
    };
    for (mode, seen) in [("native", "I saw nothing"), ("user", "I saw the instructions")] {
        let (_skills, yaml) = skills_dir();
        let herald = Herald::with_model(server(quirks.clone()).await, &yaml);
        set_llm(&herald, &format!("  tool_results: {mode}\n"));
        herald
            .model
            .push(Reply::tool_call("activate_skill", json!({"name": "haiku"})));
        herald.model.set_fallback(report_what_was_seen);
        let output = herald.chat("owner", "a poem\n").await;
        assert!(output.status.success(), "{}", stderr(&output));
        assert_eq!(reply_texts(&output), [seen], "tool_results: {mode}");
        let second = &herald.model.requests()[1];
        match mode {
            "native" => assert_eq!(roles(second).last().map(String::as_str), Some("tool")),
            _ => {
                assert_eq!(roles(second), ["system", "user", "assistant", "user"]);
                let shown = last_user_text(second).unwrap();
                assert!(shown.starts_with("[Result of tool call activate_skill ("), "{shown}");
            }
        }
    }
}

/// Four long messages, so history outgrows a 2,048-token window.
fn long_messages() -> String {
    (0..4)
        .map(|i| format!("message {i}: {}\n", "lorem ipsum dolor sit amet ".repeat(90)))
        .collect()
}

#[tokio::test]
async fn a_prompt_over_the_servers_window_is_shortened_and_the_window_learned() {
    // The operator says 16k; the server has 2k and refuses longer prompts
    // with llama-cpp-python's `context_length_exceeded`.
    let herald = Herald::with_model(server(answering_llama_cpp_python(2048)).await, "");
    set_llm(&herald, "  context_tokens: 16384\n");
    let output = herald.chat("owner", &format!("{}and now?\n", long_messages())).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let replies = reply_texts(&output);
    assert_eq!(replies.len(), 5, "every message was answered: {replies:?}");
    assert!(replies.iter().all(|r| r.starts_with("echo: ")), "{replies:?}");
    assert_eq!(replies[4], "echo: and now?");

    let requests = herald.model.requests();
    assert!(
        requests.len() > replies.len(),
        "the server refused at least one prompt as too long"
    );
    // Once the server named its window, prompts stayed within it.
    let last = requests
        .iter()
        .filter(|r| last_user_text(r).as_deref() == Some("and now?"))
        .count();
    assert_eq!(last, 1, "the last message went through at the first try");
    let report = explain(&herald, "local:owner").await;
    assert!(report.contains("context window 2048 tokens"), "{report}");
}

#[tokio::test]
async fn a_streamed_prompt_over_the_window_is_asked_again_and_shortened() {
    // Streamed, llama-cpp-python answers an over-long prompt with 200 and
    // an empty stream; Herald asks once without streaming to learn why.
    let herald = Herald::with_model(server(answering_llama_cpp_python(2048)).await, "");
    set_llm(&herald, "  context_tokens: 16384\n  stream: true\n");
    let output = herald.chat("owner", &format!("{}and now?\n", long_messages())).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let replies = reply_texts(&output);
    assert_eq!(replies.len(), 5, "{replies:?}");
    assert_eq!(replies[4], "echo: and now?");
    let bodies = herald.model.requests();
    assert!(bodies.iter().any(|b| b["stream"] == true), "answers were streamed");
    assert!(
        bodies.iter().any(|b| b.get("stream").is_none_or(|s| s != true)),
        "a silent stream was asked again without streaming"
    );
}

#[tokio::test]
async fn an_answer_cut_at_the_length_limit_says_so() {
    // Without max_tokens a local server writes until its context is full.
    let herald = Herald::with_model(server(answering_llama_cpp_python(4096)).await, "");
    set_llm(&herald, "  max_tokens: 0\n");
    let output = herald.chat("owner", "tell me everything\n").await;
    let replies = reply_texts(&output);
    assert!(
        replies[0].ends_with("[The answer was cut off at the length limit.]"),
        "{}",
        &replies[0][replies[0].len() - 80..]
    );
    assert!(
        herald.model.requests()[0].get("max_tokens").is_none(),
        "max_tokens: 0 sends none"
    );

    // The default sends a limit, and the server honours it.
    let herald = Herald::with_model(server(answering_llama_cpp_python(8192)).await, "");
    herald.model.push(Reply::text("word ".repeat(2000)));
    let output = herald.chat("owner", "a long answer\n").await;
    assert_eq!(herald.model.requests()[0]["max_tokens"], 1024);
    let replies = reply_texts(&output);
    assert!(replies[0].ends_with("[The answer was cut off at the length limit.]"));
    assert!(replies[0].len() < 5000, "cut at 1,024 tokens: {}", replies[0].len());
}

#[tokio::test]
async fn a_streamed_answer_may_take_longer_than_the_request_timeout() {
    // Nine pieces 300 ms apart: 2.7 s in all, never 1 s of silence.
    let herald = Herald::with_model(server(Quirks::default()).await, "");
    set_llm(&herald, "  stream: true\n  request_timeout: 1s\n");
    herald.model.push(Reply::Slow(
        Duration::from_millis(300),
        "a slow local model takes its time".into(),
    ));
    let output = herald.chat("owner", "hello\n").await;
    assert_eq!(
        reply_texts(&output),
        ["a slow local model takes its time"],
        "{}",
        stderr(&output)
    );
    assert_eq!(herald.model.requests().len(), 1, "no timeout, no retry");
}

#[tokio::test]
async fn context_windows_are_read_from_llama_cpp_ollama_and_vllm() {
    for (quirks, model, window) in [
        (Quirks::llama_cpp(4096), "scripted", "4096"),
        (Quirks::ollama(Some(8192)), "llama3.2", "8192"),
        (Quirks::ollama(None), "llama3.2", "4096"),
        (Quirks::vllm(12288), "scripted", "12288"),
    ] {
        let label = format!("{quirks:?}");
        let server = server(Quirks {
            empty_text_with_tools: false,
            ..quirks
        })
        .await;
        server.set_models(vec![if model == "scripted" {
            "scripted".into()
        } else {
            format!("{model}:latest")
        }]);
        let herald = Herald::with_model(server, "");
        let config = std::fs::read_to_string(&herald.config).unwrap();
        std::fs::write(
            &herald.config,
            config.replace("model: scripted", &format!("model: {model}")),
        )
        .unwrap();
        let output = herald.chat("owner", "hello\n").await;
        assert_eq!(reply_texts(&output), ["echo: hello"], "{label}: {}", stderr(&output));
        let report = explain(&herald, "local:owner").await;
        assert!(
            report.contains(&format!("context window {window} tokens")),
            "{label}: {report}"
        );
        // vLLM's grammar backend compiles every schema Herald advertises.
        assert!(system_prompt(&herald.model.requests()[0]).is_some());
    }
}

#[tokio::test]
async fn doctor_sends_one_completion_with_the_real_tools_and_fails_on_an_unknown_model() {
    let (_skills, yaml) = skills_dir();
    let herald = Herald::with_model(server(Quirks::llama_cpp(4096)).await, &yaml);
    let doctor = |herald: &Herald| {
        let mut command = herald.command(&["doctor"]);
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        command
    };
    let output = doctor(&herald).output().await.unwrap();
    let report = String::from_utf8_lossy(&output.stdout).into_owned();
    let line = report.lines().find(|l| l.contains("model")).unwrap_or_default();
    assert!(line.starts_with("ok"), "{report}");
    assert!(
        line.contains("context window 4096 tokens (llama.cpp's /props"),
        "{line}"
    );
    let requests = herald.model.requests();
    assert_eq!(requests.len(), 1, "one tiny completion");
    assert!(
        requests[0]["tools"].as_array().is_some_and(|t| t.len() >= 4),
        "with the tools a turn offers: {}",
        requests[0]["tools"]
    );

    // Ollama, asked for a model it has not pulled.
    let ollama = server(Quirks::ollama(None)).await;
    ollama.set_models(vec!["llama3.2:latest".into()]);
    let herald = Herald::with_model(ollama, "");
    let output = doctor(&herald).output().await.unwrap();
    assert!(!output.status.success());
    let report = String::from_utf8_lossy(&output.stdout).into_owned();
    let line = report.lines().find(|l| l.contains("model")).unwrap_or_default();
    assert!(
        line.starts_with("FAIL") && line.contains("`scripted` is not served") && line.contains("llama3.2:latest"),
        "{report}"
    );
}
