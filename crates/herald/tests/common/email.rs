//! The email harness for end-to-end tests: real Dovecot and Postfix
//! (`herald_testkit::mailserver`), the real `herald run` binary and the
//! scripted model. Tests send mail to Herald over SMTP and read Herald's
//! answers back from the sender's mailbox.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use herald_testkit::ScriptedModel;
use herald_testkit::mailserver::{self, MailServers, ReadMail};
use herald_testkit::openai::last_user_text;
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

pub const REPLY: Duration = Duration::from_secs(40);
pub const ALICE: &str = "alice@example.test";

/// What [`Setup::with_options`] adds to the usual config.
pub struct EmailOptions<'a> {
    /// Keys of `channels.email.imap` (six spaces).
    pub imap: &'a str,
    /// Keys of `channels.email` (four spaces).
    pub email: &'a str,
    /// The `admins` list, written inside `[…]`.
    pub admins: &'a str,
}

impl Default for EmailOptions<'_> {
    fn default() -> Self {
        Self {
            imap: "",
            email: "",
            admins: "\"email:alice@example.test\"",
        }
    }
}

pub struct Setup {
    pub mail: MailServers,
    pub model: ScriptedModel,
    _dir: TempDir,
    pub config: std::path::PathBuf,
}

pub struct Running {
    child: Child,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Running {
    pub fn log(&self) -> impl Fn() -> String + use<> {
        let stderr = self.stderr.clone();
        move || stderr.lock().unwrap().join("\n")
    }

    /// Waits until Herald logged a line containing `needle`.
    pub async fn wait_for_line(&self, needle: &str) {
        self.wait_for_lines(needle, 1).await;
    }

    /// Waits until Herald logged `count` lines containing `needle`.
    pub async fn wait_for_lines(&self, needle: &str, count: usize) {
        let deadline = tokio::time::Instant::now() + REPLY;
        let seen = || {
            self.stderr
                .lock()
                .unwrap()
                .iter()
                .filter(|line| line.contains(needle))
                .count()
        };
        while seen() < count {
            assert!(
                tokio::time::Instant::now() < deadline,
                "herald never logged {needle:?}:\n{}",
                self.log()()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn kill(mut self) {
        self.child.start_kill().expect("kill herald");
        let _ = self.child.wait().await;
    }
}

impl Setup {
    pub async fn new() -> Self {
        Self::with_imap("").await
    }

    /// `imap` is added to `channels.email.imap` (keys at six spaces).
    pub async fn with_imap(imap: &str) -> Self {
        Self::with_options(EmailOptions {
            imap,
            ..EmailOptions::default()
        })
        .await
    }

    pub async fn with_options(options: EmailOptions<'_>) -> Self {
        let EmailOptions { imap, email, admins } = options;
        let mail = MailServers::start().await;
        let model = ScriptedModel::start().await;
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("herald.yaml");
        let text = format!(
            "storage:\n  url: sqlite://{db}\n\
             llm:\n  base_url: {base}\n  api_key: test-key\n  model: scripted\n  retry_base: 10ms\n  retry_max: 50ms\n\
             queue:\n  lease: 2s\n\
             admins: [{admins}]\n\
             access:\n  unknown: pair\n\
             log:\n  level: \"warn,herald=info,herald_agent=info,herald_channels=debug\"\n\
             channels:\n{channel}",
            db = dir.path().join("herald.db").display(),
            base = model.base_url(),
            channel = mail
                .channel_yaml()
                .replace("      username: herald\n", &format!("      username: herald\n{imap}"))
                .replace("    imap:\n", &format!("{email}    imap:\n")),
        );
        std::fs::write(&config, text).expect("write config");
        Self {
            mail,
            model,
            _dir: dir,
            config,
        }
    }

    pub async fn start(&self) -> Running {
        let mut child = Command::new(env!("CARGO_BIN_EXE_herald"))
            .arg("--config")
            .arg(&self.config)
            .arg("run")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn herald run");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let (ready_tx, mut ready) = tokio::sync::watch::channel(false);
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let sink = stderr.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if line.contains("herald is running") {
                    let _ = ready_tx.send(true);
                }
                sink.lock().unwrap().push(line);
            }
        });
        let running = Running { child, stderr };
        let log = running.log();
        tokio::select! {
            _ = ready.wait_for(|ready| *ready) => {}
            _ = tokio::time::sleep(REPLY) => panic!("herald run never became ready:\n{}", log()),
        }
        running
    }

    pub async fn answers(&self, user: &str, count: usize, herald: &Running) -> Vec<ReadMail> {
        self.mail.wait_for_mail(user, count, REPLY, herald.log()).await
    }

    pub fn model_inputs(&self) -> Vec<String> {
        self.model
            .requests()
            .iter()
            .map(|request| last_user_text(request).unwrap_or_default())
            .collect()
    }
}

/// A mail as the receiving server hands it on when DMARC passed for the
/// sender's domain: its `Authentication-Results` on top.
pub fn mail(from: &str, id: &str, subject: &str, extra_headers: &str, body: &str) -> String {
    format!(
        "{}{}",
        dmarc_pass(from),
        raw_mail(from, id, subject, extra_headers, body)
    )
}

/// The header the trusted receiving server writes when DMARC passed for
/// `from`'s domain.
pub fn dmarc_pass(from: &str) -> String {
    let domain = from.rsplit_once('@').map(|(_, d)| d).unwrap_or(from);
    format!(
        "Authentication-Results: {}; dmarc=pass (p=reject dis=none) header.from={domain}\n",
        mailserver::AUTHSERV_ID
    )
}

/// A mail with only the headers given: what anyone can send.
pub fn raw_mail(from: &str, id: &str, subject: &str, extra_headers: &str, body: &str) -> String {
    format!(
        "From: {from}\nTo: {to}\nSubject: {subject}\nMessage-ID: <{id}>\nDate: Wed, 2 Dec 2026 10:00:00 +0000\n{extra_headers}Content-Type: text/plain; charset=utf-8\n\n{body}\n",
        to = mailserver::HERALD
    )
}
