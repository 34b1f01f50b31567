//! Email end to end, against real servers: Dovecot (IMAP) and Postfix
//! (SMTP, delivering into the Maildir Dovecot serves), the real `herald run`
//! binary and the scripted model (which answers `echo: <text>`). Each test
//! sends mail to Herald over SMTP and reads Herald's answers back from the
//! sender's mailbox.

mod common;

use std::time::Duration;

use common::email::{ALICE, Setup, mail};
use herald_testkit::mailserver;
use herald_testkit::openai::{content_text, messages};
use tokio::process::Command;

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
async fn a_mails_attached_document_reaches_the_model_and_history_keeps_only_its_reference() {
    let setup = Setup::new().await;
    let herald = setup.start().await;
    // A MIME mail as a mail program writes it: the text, then a CSV file in
    // base64, through the real Postfix into the mailbox Herald reads.
    let body = "This is a multi-part message in MIME format.\n\
--b1\nContent-Type: text/plain; charset=utf-8\n\nThe rain figures are attached.\n\
--b1\nContent-Type: text/csv; name=\"rain.csv\"\nContent-Disposition: attachment; filename=\"rain.csv\"\n\
Content-Transfer-Encoding: base64\n\nY2l0eSxyYWluX21tCk9zbG8sNzYzCkJlcmdlbiwyMjUwCg==\n--b1--";
    let raw = mail(ALICE, "rain@alice.test", "Rain", "MIME-Version: 1.0\n", body).replacen(
        "Content-Type: text/plain; charset=utf-8\n\nThis is a multi-part",
        "Content-Type: multipart/mixed; boundary=\"b1\"\n\nThis is a multi-part",
        1,
    );
    setup.mail.send(ALICE, &raw).await;
    let answers = setup.answers("alice", 1, &herald).await;
    let herald_id = answers[0].header("message-id").expect("a Message-ID").to_owned();
    let said = &setup.model_inputs()[0];
    assert!(said.contains("The rain figures are attached."), "{said}");
    assert!(said.contains("[file \"rain.csv\" (text/csv"), "{said}");
    let request = setup.model.requests()[0].to_string();
    assert!(
        request.contains("Bergen,2250"),
        "the file's text reached the model: {request}"
    );

    // Alice answers in the thread: that turn carries the file's reference
    // in history, not its text.
    let references = format!("In-Reply-To: {herald_id}\nReferences: <rain@alice.test> {herald_id}\n");
    setup
        .mail
        .send(
            ALICE,
            &mail(ALICE, "more@alice.test", "Re: Rain", &references, "And snow?"),
        )
        .await;
    setup.answers("alice", 2, &herald).await;
    let said: Vec<String> = messages(&setup.model.requests()[1])
        .iter()
        .filter(|message| message["role"] == "user")
        .filter_map(content_text)
        .collect();
    assert!(said[0].contains("rain.csv"), "history names the file: {said:?}");
    assert!(
        !said.iter().any(|text| text.contains("Bergen,2250")),
        "history does not carry the file's text: {said:?}"
    );
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
    assert!(
        report.contains("senders authenticated by mail.example.test"),
        "{report}"
    );

    // Without a trusted server doctor says what that means.
    let untrusted = std::fs::read_to_string(&setup.config)
        .unwrap()
        .replace("    trusted_authserv_id: mail.example.test\n", "");
    let path = setup.config.with_file_name("untrusted.yaml");
    std::fs::write(&path, untrusted).unwrap();
    let report = doctor(path).await;
    assert!(
        report.contains("warning: channels.email.trusted_authserv_id is not set"),
        "{report}"
    );

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_markdown_answer_is_mailed_as_text_and_html_with_nothing_active_in_it() {
    let setup = Setup::new().await;
    let answer = "**Agenda** for Monday:\n\n| Time | Item |\n|---|---|\n| 10:00 | `standup` |\n\n\
                  Slides: [deck](https://example.com/deck) ![logo](https://tracker.example/p.png)\n\n\
                  <script>alert(1)</script>";
    setup.model.push(herald_testkit::Reply::text(answer));
    let herald = setup.start().await;
    setup
        .mail
        .send(
            ALICE,
            &mail(ALICE, "agenda@alice.test", "Agenda", "", "What's on Monday?"),
        )
        .await;
    let answers = setup.answers("alice", 1, &herald).await;
    let mail = &answers[0];
    assert!(
        mail.header("content-type")
            .is_some_and(|t| t.starts_with("multipart/alternative")),
        "{:?}",
        mail.header("content-type")
    );
    // The text part is the answer as the model wrote it, readable as is.
    assert_eq!(mail.body, answer);
    let html = mail.html.as_deref().expect("an HTML part");
    for expected in [
        "<strong>Agenda</strong>",
        "<table>",
        "<code>standup</code>",
        "<a href=\"https://example.com/deck\">deck</a>",
        "&lt;script&gt;alert(1)&lt;/script&gt;",
    ] {
        assert!(html.contains(expected), "{expected} not in {html}");
    }
    // Nothing runs and nothing loads when the mail is opened.
    assert!(!html.contains("<script") && !html.contains("<img"), "{html}");
}
