//! Helpers for end-to-end tests: the real `herald` binary, a fresh SQLite
//! file in a temporary folder, and the scripted model from the testkit.

#![allow(dead_code)]

pub mod email;

use std::path::PathBuf;
use std::process::{Output, Stdio};

use herald_testkit::ScriptedModel;
use serde_json::Value;
use tempfile::TempDir;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, Command};

pub struct Herald {
    pub dir: TempDir,
    pub model: ScriptedModel,
    pub config: PathBuf,
}

impl Herald {
    /// A config with a fresh SQLite file, the scripted model, and `extra`
    /// YAML appended (top-level keys not already written here).
    pub async fn start(extra: &str) -> Self {
        let model = ScriptedModel::start().await;
        Self::with_model(model, extra)
    }

    pub fn with_model(model: ScriptedModel, extra: &str) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("herald.yaml");
        let text = format!(
            "storage:\n  url: sqlite://{db}\nllm:\n  base_url: {base}\n  api_key: test-key\n  model: scripted\n  max_retries: 1\n  retry_base: 10ms\n  retry_max: 50ms\nadmins: [local:owner]\nlog:\n  level: warn\n{extra}",
            db = dir.path().join("herald.db").display(),
            base = model.base_url(),
        );
        std::fs::write(&config, text).expect("write config");
        // It holds a (test) API key: private, as the doctor asks of real ones.
        std::fs::set_permissions(&config, std::os::unix::fs::PermissionsExt::from_mode(0o600)).expect("chmod config");
        Self { dir, model, config }
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_herald"));
        command
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .env_remove("RUST_LOG")
            .kill_on_drop(true);
        command
    }

    /// Runs `herald chat --json --user USER` with `input` on stdin to its end.
    pub async fn chat(&self, user: &str, input: &str) -> Output {
        let mut child = self
            .command(&["chat", "--json", "--user", user])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn herald chat");
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(input.as_bytes()).await.expect("write stdin");
        drop(stdin);
        child.wait_with_output().await.expect("herald chat runs")
    }

    /// Starts `herald chat` with stdin left open, for tests that interrupt it.
    pub fn spawn_chat(&self, user: &str) -> Child {
        self.command(&["chat", "--json", "--user", user])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn herald chat")
    }
}

/// The `text` of every JSON reply line a chat printed.
pub fn reply_texts(output: &Output) -> Vec<String> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| {
            let reply: Value =
                serde_json::from_str(line).unwrap_or_else(|err| panic!("not a JSON reply: {line:?}: {err}"));
            reply["text"].as_str().expect("reply text").to_owned()
        })
        .collect()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}
