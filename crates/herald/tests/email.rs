//! Email end to end, against real servers: Dovecot (IMAP) and Postfix
//! (SMTP, delivering into the Maildir Dovecot serves), the real `herald run`
//! binary and the scripted model (which answers `echo: <text>`). Each test
//! sends mail to Herald over SMTP and reads Herald's answers back from the
//! sender's mailbox.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use herald_testkit::ScriptedModel;
use herald_testkit::mailserver::{self, MailServers, ReadMail};
use herald_testkit::openai::last_user_text;
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const REPLY: Duration = Duration::from_secs(40);
const ALICE: &str = "alice@example.test";

struct Setup {
    mail: MailServers,
    model: ScriptedModel,
    _dir: TempDir,
    config: std::path::PathBuf,
}

struct Running {
    child: Child,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Running {
    fn log(&self) -> impl Fn() -> String + use<> {
        let stderr = self.stderr.clone();
        move || stderr.lock().unwrap().join("\n")
    }

    /// Waits until Herald logged a line containing `needle`.
    async fn wait_for_line(&self, needle: &str) {
        let deadline = tokio::time::Instant::now() + REPLY;
        while !self.stderr.lock().unwrap().iter().any(|line| line.contains(needle)) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "herald never logged {needle:?}:\n{}",
                self.log()()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn kill(mut self) {
        self.child.start_kill().expect("kill herald");
        let _ = self.child.wait().await;
    }
}

impl Setup {
    async fn new() -> Self {
        Self::with_imap("").await
    }

    /// `imap` is added to `channels.email.imap` (keys at six spaces).
    async fn with_imap(imap: &str) -> Self {
        let mail = MailServers::start().await;
        let model = ScriptedModel::start().await;
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("herald.yaml");
        let text = format!(
            "storage:\n  url: sqlite://{db}\n\
             llm:\n  base_url: {base}\n  api_key: test-key\n  model: scripted\n  retry_base: 10ms\n  retry_max: 50ms\n\
             queue:\n  lease: 2s\n\
             admins: [\"email:{ALICE}\"]\n\
             access:\n  unknown: pair\n\
             log:\n  level: \"warn,herald=info,herald_agent=info,herald_channels=debug\"\n\
             channels:\n{channel}",
            db = dir.path().join("herald.db").display(),
            base = model.base_url(),
            channel = mail
                .channel_yaml()
                .replace("      username: herald\n", &format!("      username: herald\n{imap}")),
        );
        std::fs::write(&config, text).expect("write config");
        Self {
            mail,
            model,
            _dir: dir,
            config,
        }
    }

    async fn start(&self) -> Running {
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

    async fn answers(&self, user: &str, count: usize, herald: &Running) -> Vec<ReadMail> {
        self.mail.wait_for_mail(user, count, REPLY, herald.log()).await
    }

    fn model_inputs(&self) -> Vec<String> {
        self.model
            .requests()
            .iter()
            .map(|request| last_user_text(request).unwrap_or_default())
            .collect()
    }
}

fn mail(from: &str, id: &str, subject: &str, extra_headers: &str, body: &str) -> String {
    format!(
        "From: {from}\nTo: {to}\nSubject: {subject}\nMessage-ID: <{id}>\nDate: Wed, 2 Dec 2026 10:00:00 +0000\n{extra_headers}Content-Type: text/plain; charset=utf-8\n\n{body}\n",
        to = mailserver::HERALD
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_mail_is_answered_once_and_a_reply_continues_the_thread() {
    let setup = Setup::new().await;
    let herald = setup.start().await;
    setup
        .mail
        .send(
            ALICE,
            &mail(
                ALICE,
                "first@alice.test",
                "Lunch",
                "",
                "Where shall we eat?\n\n-- \nAlice",
            ),
        )
        .await;
    let answers = setup.answers("alice", 1, &herald).await;
    let answer = &answers[0];
    assert_eq!(answer.header("subject"), Some("Re: Lunch"));
    assert_eq!(answer.header("in-reply-to"), Some("<first@alice.test>"));
    assert_eq!(answer.header("references"), Some("<first@alice.test>"));
    assert_eq!(answer.header("auto-submitted"), Some("auto-replied"));
    assert!(answer.header("from").unwrap().contains(mailserver::HERALD));
    assert!(answer.body.contains("Where shall we eat?"), "{}", answer.body);
    assert!(
        !answer.body.contains("Alice"),
        "the signature is not part of what the model read"
    );
    let herald_id = answer.header("message-id").expect("a Message-ID").to_owned();

    // Alice answers Herald's mail, quoting it.
    let references = format!("In-Reply-To: {herald_id}\nReferences: <first@alice.test> {herald_id}\n");
    let body = "Thai, please.\n\nOn Wed, Herald wrote:\n> echo: Where shall we eat?";
    setup
        .mail
        .send(ALICE, &mail(ALICE, "second@alice.test", "Re: Lunch", &references, body))
        .await;
    let answers = setup.answers("alice", 2, &herald).await;
    let second = &answers[1];
    assert_eq!(second.body, "echo: Thai, please.");
    assert_eq!(second.header("subject"), Some("Re: Lunch"), "one Re:, not two");
    assert_eq!(second.header("in-reply-to"), Some("<second@alice.test>"));
    assert_eq!(
        second.header("references"),
        Some(format!("<first@alice.test> {herald_id} <second@alice.test>").as_str())
    );
    // The same conversation: the model saw the first exchange as history.
    let requests = setup.model.requests();
    let last = requests.last().unwrap().to_string();
    assert!(last.contains("Where shall we eat?"), "{last}");
    assert_eq!(setup.mail.mailbox("alice").len(), 2, "each mail answered once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_replies_lists_and_herald_s_own_mail_are_not_answered() {
    let setup = Setup::new().await;
    let herald = setup.start().await;
    for (id, headers) in [
        ("auto@alice.test", "Auto-Submitted: auto-replied\n"),
        (
            "list@alice.test",
            "List-Id: <team.lists.example.test>\nPrecedence: list\n",
        ),
    ] {
        setup
            .mail
            .send(ALICE, &mail(ALICE, id, "noise", headers, "out of office"))
            .await;
    }
    let own = mailserver::HERALD;
    setup
        .mail
        .send(own, &mail(own, "own@herald.test", "mine", "", "hello me"))
        .await;
    setup
        .mail
        .send(
            ALICE,
            &mail(ALICE, "real@alice.test", "Question", "", "a real question"),
        )
        .await;
    let answers = setup.answers("alice", 1, &herald).await;
    assert_eq!(answers[0].header("in-reply-to"), Some("<real@alice.test>"));
    assert_eq!(setup.model_inputs().len(), 1, "{:?}", setup.model_inputs());
    assert!(setup.mail.mailbox("herald").len() >= 4, "all four mails arrived");
    assert!(setup.mail.mailbox("alice").len() == 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn html_only_mail_reaches_the_model_as_text() {
    let setup = Setup::new().await;
    let herald = setup.start().await;
    let raw = mail(
        ALICE,
        "html@alice.test",
        "Hi",
        "",
        "<html><body><p>Hello <b>Herald</b>, how is the <i>weather</i>?</p></body></html>",
    )
    .replace("text/plain", "text/html");
    setup.mail.send(ALICE, &raw).await;
    setup.answers("alice", 1, &herald).await;
    let inputs = setup.model_inputs();
    assert!(inputs[0].contains("Hello Herald"), "{inputs:?}");
    assert!(!inputs[0].contains('<'), "{inputs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_sender_gets_a_pairing_code_by_mail() {
    let setup = Setup::new().await;
    let herald = setup.start().await;
    let bob = "bob@example.test";
    setup
        .mail
        .send(bob, &mail(bob, "bob1@bob.test", "Hello", "", "let me in"))
        .await;
    let answers = setup.answers("bob", 1, &herald).await;
    assert!(answers[0].body.contains("/pair approve "), "{}", answers[0].body);
    assert_eq!(answers[0].header("in-reply-to"), Some("<bob1@bob.test>"));
    assert!(
        setup.model.requests().is_empty(),
        "an unknown sender costs no model call"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_loses_and_duplicates_nothing() {
    let setup = Setup::new().await;
    let herald = setup.start().await;
    setup
        .mail
        .send(ALICE, &mail(ALICE, "r1@alice.test", "One", "", "before"))
        .await;
    setup.answers("alice", 1, &herald).await;
    // Killed after the receipt of the reply is stored: a kill between the
    // SMTP server's 250 and that receipt re-sends the reply, a gap no mail
    // protocol lets a client close (docs/channels.md).
    herald.wait_for_line("delivered").await;
    herald.kill().await;
    for (id, text) in [("r2@alice.test", "while down 1"), ("r3@alice.test", "while down 2")] {
        setup.mail.send(ALICE, &mail(ALICE, id, "More", "", text)).await;
    }
    let herald = setup.start().await;
    let answers = setup.answers("alice", 3, &herald).await;
    let mut replied_to: Vec<&str> = answers.iter().filter_map(|a| a.header("in-reply-to")).collect();
    replied_to.sort();
    assert_eq!(replied_to, ["<r1@alice.test>", "<r2@alice.test>", "<r3@alice.test>"]);
    // Give a duplicate the time it would take to appear.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        setup.mail.mailbox("alice").len(),
        3,
        "{:#?}",
        setup.mail.mailbox("alice")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_checks_the_imap_login_and_the_smtp_server_without_printing_the_password() {
    let doctor = |config: std::path::PathBuf| async move {
        let output = Command::new(env!("CARGO_BIN_EXE_herald"))
            .arg("--config")
            .arg(config)
            .arg("doctor")
            .env_remove("RUST_LOG")
            .output()
            .await
            .expect("herald doctor runs");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let setup = Setup::new().await;
    let report = doctor(setup.config.clone()).await;
    assert!(report.contains("ok   channel email: herald@example.test"), "{report}");

    let wrong = std::fs::read_to_string(&setup.config)
        .unwrap()
        .replace(mailserver::PASSWORD, "wrong-password-xyz");
    let path = setup.config.with_file_name("wrong.yaml");
    std::fs::write(&path, wrong).unwrap();
    let report = doctor(path).await;
    assert!(report.contains("FAIL channel email"), "{report}");
    assert!(!report.contains("wrong-password-xyz"), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_idle_new_mail_is_found_by_polling() {
    let setup = Setup::with_imap("      idle: false\n      poll_interval: 1s\n").await;
    let herald = setup.start().await;
    setup
        .mail
        .send(ALICE, &mail(ALICE, "p1@alice.test", "Poll", "", "polled"))
        .await;
    let answers = setup.answers("alice", 1, &herald).await;
    assert_eq!(answers[0].header("in-reply-to"), Some("<p1@alice.test>"));
    let log = herald.log()();
    let reading = log
        .lines()
        .find(|line| line.contains("reading mail"))
        .unwrap_or_default();
    assert!(reading.contains("false"), "polling, not IDLE: {log}");
}
