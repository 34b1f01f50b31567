//! Hostile senders at the channel edge, against the real `herald run`
//! binary: forged email identities (real Dovecot and Postfix), auto-responder
//! loops, oversized mail and messages, and the bot's own messages carrying
//! admin commands on every platform. Each test fails on a Herald that trusts
//! what the attacker controls.

mod common;
#[macro_use]
mod conformance;

use std::time::Duration;

use common::email::{ALICE, EmailOptions, Setup, dmarc_pass, mail, raw_mail};
use conformance::{Options, REPLY};
use herald_testkit::discord::FakeDiscord;
use herald_testkit::mailserver::{self, AUTHSERV_ID};
use herald_testkit::slack::FakeSlack;
use herald_testkit::telegram::FakeTelegram;
use herald_testkit::{FakePlatform, GroupTarget};

const BOB: &str = "bob@example.test";

/// The pairing code in a pairing reply.
fn code_in(text: &str) -> String {
    text.split("/pair approve ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no pairing code in {text:?}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_admin_from_approves_nothing_and_is_not_answered() {
    let setup = Setup::new().await;
    let herald = setup.start().await;
    setup
        .mail
        .send(BOB, &mail(BOB, "bob1@bob.test", "Hello", "", "let me in"))
        .await;
    let answers = setup.answers("bob", 1, &herald).await;
    let code = code_in(&answers[0].body);
    let approve = format!("/pair approve {code}");

    // Three forgeries of the admin's address.
    let forged = [
        // No Authentication-Results at all.
        raw_mail(ALICE, "forged1@x.test", "hi", "", &approve),
        // A pass from a server Herald does not trust.
        format!(
            "Authentication-Results: mx.attacker.test; dmarc=pass header.from=example.test\n{}",
            raw_mail(ALICE, "forged2@x.test", "hi", "", &approve)
        ),
        // The trusted server's real verdict on top (fail); the pass the
        // sender wrote into their own mail sits below it.
        format!(
            "Authentication-Results: {AUTHSERV_ID}; dmarc=fail (p=reject) header.from=example.test\n\
             Received: from attacker.test by relay.attacker.test\n{}{}",
            dmarc_pass(ALICE),
            raw_mail(ALICE, "forged3@x.test", "hi", "", &approve)
        ),
    ];
    for raw in &forged {
        setup.mail.send(ALICE, raw).await;
    }
    herald.wait_for_lines("message from an unknown sender denied", 3).await;
    assert!(
        setup.mail.mailbox("alice").is_empty(),
        "nothing is mailed to a forged address"
    );
    assert!(setup.model.requests().is_empty());

    // The code is still pending: the real admin approves it.
    setup
        .mail
        .send(ALICE, &mail(ALICE, "real@alice.test", "ok", "", &approve))
        .await;
    let answers = setup.answers("alice", 1, &herald).await;
    assert!(answers[0].body.starts_with("Approved"), "{}", answers[0].body);
    setup
        .mail
        .send(BOB, &mail(BOB, "bob2@bob.test", "Thanks", "", "thanks"))
        .await;
    let answers = setup.answers("bob", 2, &herald).await;
    assert!(
        answers[1].body.starts_with("echo: ") && answers[1].body.contains("thanks"),
        "{}",
        answers[1].body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_sender_gets_one_pairing_reply_and_an_auto_responder_loop_stops() {
    let setup = Setup::new().await;
    let herald = setup.start().await;
    setup
        .mail
        .send(BOB, &mail(BOB, "bob1@bob.test", "Hello", "", "let me in"))
        .await;
    // Bob's mailbox answers Herald's reply without saying it is a robot
    // (no Auto-Submitted): the kind of responder that loops.
    let got = setup.answers("bob", 1, &herald).await;
    let references = format!(
        "In-Reply-To: {id}\nReferences: {id}\n",
        id = got[0].header("message-id").unwrap()
    );
    setup
        .mail
        .send(
            BOB,
            &mail(BOB, "auto1@bob.test", "Re: Hello", &references, "I am away."),
        )
        .await;
    herald.wait_for_lines("the pending code is not sent again", 1).await;
    // And a third, hand-written mail while the code is pending: still silence.
    setup
        .mail
        .send(BOB, &mail(BOB, "bob3@bob.test", "Hello?", "", "hello again"))
        .await;
    herald.wait_for_lines("the pending code is not sent again", 2).await;
    assert_eq!(setup.mail.mailbox("bob").len(), 1, "{:#?}", setup.mail.mailbox("bob"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mail_over_the_size_cap_is_not_fetched_and_its_sender_is_told() {
    let setup = Setup::with_options(EmailOptions {
        email: "    max_message_bytes: 65536\n",
        ..EmailOptions::default()
    })
    .await;
    let herald = setup.start().await;
    let line = "SECRET-BODY-MARKER ".repeat(5);
    let body = format!("{line}\n").repeat(3_000);
    assert!(body.len() > 250_000);
    setup
        .mail
        .send(ALICE, &mail(ALICE, "big@alice.test", "Huge", "", &body))
        .await;
    let answers = setup.answers("alice", 1, &herald).await;
    assert!(
        answers[0].body.contains("more than the 64 KiB I read"),
        "{}",
        answers[0].body
    );
    assert_eq!(answers[0].header("in-reply-to"), Some("<big@alice.test>"));
    assert!(setup.model.requests().is_empty(), "the body never reached the model");
    assert_eq!(setup.mail.seen("herald"), 1, "marked seen, so it is not read again");

    // A mail under the cap is read as usual.
    setup
        .mail
        .send(ALICE, &mail(ALICE, "small@alice.test", "Small", "", "a short one"))
        .await;
    let answers = setup.answers("alice", 2, &herald).await;
    assert!(answers[1].body.contains("a short one"), "{}", answers[1].body);

    // Dovecot counts what it sent once the session ends: the headers and
    // the small mail, never the 250 kB body.
    herald.kill().await;
    for _ in 0..100 {
        if setup.mail.imap_sessions_ended() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let sent = setup.mail.imap_bytes_sent();
    assert!(sent > 0, "Dovecot logged the session");
    assert!(sent < 64 * 1024, "IMAP sent {sent} bytes: the big body was fetched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn herald_s_own_mail_approves_nothing_even_from_an_admin_address() {
    let own = mailserver::HERALD;
    let admins = format!("\"email:{ALICE}\", \"email:{own}\"");
    let setup = Setup::with_options(EmailOptions {
        admins: &admins,
        ..EmailOptions::default()
    })
    .await;
    let herald = setup.start().await;
    setup
        .mail
        .send(BOB, &mail(BOB, "bob1@bob.test", "Hello", "", "let me in"))
        .await;
    let answers = setup.answers("bob", 1, &herald).await;
    let code = code_in(&answers[0].body);
    // Herald's own reply comes back to its mailbox (a copy, a Bcc, a loop
    // through a list), authenticated, quoting the command.
    setup
        .mail
        .send(
            own,
            &mail(
                own,
                "own@herald.test",
                "Re: Hello",
                "",
                &format!("/pair approve {code}"),
            ),
        )
        .await;
    herald.wait_for_line("Herald's own mail").await;
    setup
        .mail
        .send(ALICE, &mail(ALICE, "list@alice.test", "list", "", "/pair list"))
        .await;
    let answers = setup.answers("alice", 1, &herald).await;
    assert!(answers[0].body.contains(&code), "still pending: {}", answers[0].body);
}

/// The bot's own message, in the stranger's direct chat, carries an admin
/// command. Even with the bot's own id listed as an admin, it is not read
/// as a message: the code stays pending until the real admin approves it.
async fn the_bots_own_message_approves_nothing(platform: impl FakePlatform) {
    let bot = platform.bot();
    let channel = platform.channel();
    let setup = conformance::Setup::with_options(
        platform,
        Options {
            more_admins: vec![format!("{channel}:{}", bot.id)],
            ..Options::default()
        },
    )
    .await;
    let herald = setup.start().await;
    let stranger = setup.platform.stranger();
    setup.platform.send_dm(&stranger, "let me in").await;
    let sent = setup.sent(1, REPLY, &herald).await;
    let code = code_in(&sent[0].text);
    let dm = GroupTarget {
        chat: setup.platform.dm_chat(&stranger),
        thread: None,
    };
    setup
        .platform
        .send_own_message(&dm, &format!("/pair approve {code}"))
        .await;
    let admin = setup.platform.admin();
    setup.platform.send_dm(&admin, &format!("/pair approve {code}")).await;
    let sent = setup.sent(2, REPLY, &herald).await;
    assert!(
        sent[1].text.starts_with("Approved"),
        "the code was still pending for the admin: {:?}",
        sent[1].text
    );
    assert_eq!(sent.len(), 2, "{sent:#?}");
    assert!(setup.model.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telegram_the_bots_own_message_approves_nothing() {
    the_bots_own_message_approves_nothing(FakeTelegram::start().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discord_the_bots_own_message_approves_nothing() {
    the_bots_own_message_approves_nothing(FakeDiscord::start().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_the_bots_own_message_approves_nothing() {
    the_bots_own_message_approves_nothing(FakeSlack::start_quick().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_telegram_message_reaches_the_model_cut_to_the_cap_and_the_sender_is_told() {
    let setup = conformance::Setup::with_extra(FakeTelegram::start().await, "").await;
    let herald = setup.start().await;
    let admin = setup.platform.admin();
    // Telegram caps a message at 4096 characters; a client or a forged
    // update can send more, and nothing else stops it before the model.
    let huge = format!("{}\u{0}tail", "ž".repeat(40_000));
    setup.platform.send_dm(&admin, &huge).await;
    let sent = setup.sent(2, REPLY, &herald).await;
    assert_eq!(
        sent[0].text,
        "Your message was longer than 16000 characters; I read only the first 16000."
    );
    let inputs = setup.model_inputs();
    assert_eq!(inputs.len(), 1);
    assert!(inputs[0].starts_with(&"ž".repeat(16_000)));
    assert!(!inputs[0].contains('\u{0}') && !inputs[0].contains("tail"));
    assert!(
        inputs[0].ends_with("only the first 16000 characters were kept]"),
        "{}",
        &inputs[0][inputs[0].len() - 200..]
    );
}
