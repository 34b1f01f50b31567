use super::*;

const OWN: &str = "herald@example.com";
const READING: Reading<'static> = Reading {
    own: OWN,
    trusted_authserv_id: Some("mx.example.com"),
};

fn mail(raw: &str) -> Mail {
    match classify(raw.replace('\n', "\r\n").as_bytes(), READING, "1.7@imap") {
        Classified::Mail(mail) => *mail,
        Classified::Ignored(reason) => panic!("ignored: {reason}"),
    }
}

const PLAIN: &str = "Authentication-Results: mx.example.com; dmarc=pass header.from=example.com
From: Alice Example <Alice@Example.com>
To: herald@example.com
Subject: Lunch plans
Message-ID: <first@alice.example>
Date: Wed, 2 Dec 2026 10:00:00 +0000
Content-Type: text/plain; charset=utf-8

Where should we eat today?

-- 
Alice
Sent from my phone
";

#[test]
fn a_plain_mail_becomes_a_message_without_its_signature() {
    let mail = mail(PLAIN);
    assert_eq!(mail.from, "alice@example.com");
    assert_eq!(mail.display_name, "Alice Example");
    assert_eq!(mail.message_id, "first@alice.example");
    assert_eq!(mail.subject, "Lunch plans");
    assert_eq!(mail.text, "Where should we eat today?");
    let inbound = to_inbound(&mail, thread_root(&mail), chrono::Utc::now());
    assert_eq!(
        inbound.conversation.id.as_str(),
        "email:alice@example.com/first@alice.example"
    );
    assert_eq!(inbound.sender.id.as_str(), "email:alice@example.com");
    assert_eq!(inbound.dedup_key(), "email:first@alice.example");
    // The same mail without the trusted server's word: the sender only
    // claims to be Alice.
    let claimed = self::mail(PLAIN.split_once('\n').unwrap().1);
    assert!(!claimed.authenticated);
    let read = to_inbound(&claimed, thread_root(&claimed), chrono::Utc::now());
    assert_eq!(read.sender.id.as_str(), "email:unverified:alice@example.com");
    assert_eq!(
        read.conversation.id.as_str(),
        "email:unverified:alice@example.com/first@alice.example",
        "not Alice's conversation"
    );
    assert_eq!(
        read.conversation.chat, "alice@example.com",
        "answers still go to the address"
    );
    assert!(!read.sender.id.is_verified());

    // A command in the body is not hidden behind the subject.
    let command = self::mail(&PLAIN.replace("Where should we eat today?", "/pair list"));
    let read = to_inbound(&command, thread_root(&command), chrono::Utc::now());
    assert_eq!(read.text, "/pair list");
    assert!(inbound.mentions_bot);
    assert_eq!(inbound.text, "Subject: Lunch plans\n\nWhere should we eat today?");
}

#[test]
fn a_reply_keeps_its_thread_and_drops_the_quote() {
    let mail = mail(
        "From: alice@example.com
To: herald@example.com
Subject: Re: Lunch plans
Message-ID: <second@alice.example>
In-Reply-To: <reply1@herald.example>
References: <first@alice.example> <reply1@herald.example>
Content-Type: text/plain

Thai sounds good.

On Wed, 2 Dec 2026 at 10:01, Herald <herald@example.com> wrote:
> How about Thai?
> Or pizza.
",
    );
    assert_eq!(mail.text, "Thai sounds good.");
    assert_eq!(mail.in_reply_to.as_deref(), Some("reply1@herald.example"));
    assert_eq!(mail.references, ["first@alice.example", "reply1@herald.example"]);
    assert_eq!(
        thread_root(&mail),
        "first@alice.example",
        "the same conversation as the first mail"
    );
    let inbound = to_inbound(&mail, thread_root(&mail), chrono::Utc::now());
    assert_eq!(inbound.text, "Thai sounds good.", "a reply's subject is not repeated");
}

#[test]
fn html_only_mail_reaches_the_model_as_text() {
    let mail = mail(
        "From: bob@example.com
Subject: Hi
Message-ID: <h@bob.example>
Content-Type: text/html; charset=utf-8

<html><body><p>Hello <b>Herald</b>,</p><p>what is the <i>weather</i>?</p></body></html>
",
    );
    assert!(!mail.text.contains('<'), "{}", mail.text);
    assert!(mail.text.contains("Hello Herald"), "{}", mail.text);
    assert!(mail.text.contains("weather"), "{}", mail.text);
}

#[test]
fn text_is_preferred_and_attachments_are_recorded() {
    let mail = mail(
        "From: carol@example.com
Subject: Report
Message-ID: <m@carol.example>
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary=\"outer\"

--outer
Content-Type: multipart/alternative; boundary=\"alt\"

--alt
Content-Type: text/plain

Plain version.
--alt
Content-Type: text/html

<p>HTML version.</p>
--alt--
--outer
Content-Type: application/pdf; name=\"report.pdf\"
Content-Disposition: attachment; filename=\"report.pdf\"
Content-Transfer-Encoding: base64

JVBERi0xLjQK
--outer--
",
    );
    assert_eq!(mail.text, "Plain version.");
    assert_eq!(
        mail.attachments,
        [Attachment {
            name: "report.pdf".into(),
            content_type: "application/pdf".into(),
            size: 9,
            inline: Some(herald_core::InlineBytes(b"%PDF-1.4\n"[..].into())),
            ..Attachment::default()
        }]
    );
}

#[test]
fn noise_and_loops_are_not_answered() {
    let base = "From: alice@example.com\nSubject: x\nMessage-ID: <n@a>\n";
    for (headers, from, why) in [
        ("Auto-Submitted: auto-replied\n", None, "Auto-Submitted"),
        ("Auto-Submitted: auto-generated\n", None, "Auto-Submitted"),
        ("Precedence: bulk\n", None, "Precedence"),
        ("Precedence: list\n", None, "Precedence"),
        ("Precedence: junk\n", None, "Precedence"),
        ("List-Id: <team.lists.example.com>\n", None, "mailing-list"),
        ("", Some("MAILER-DAEMON@mx.example.com"), "bounce"),
        ("", Some("postmaster@example.com"), "bounce"),
        ("", Some("Herald <herald@example.com>"), "own"),
    ] {
        let mut raw = base.to_owned();
        if let Some(from) = from {
            raw = raw.replace("alice@example.com", from);
        }
        raw.push_str(headers);
        raw.push_str("\nhello\n");
        let outcome = classify(raw.replace('\n', "\r\n").as_bytes(), READING, "x");
        assert!(
            matches!(outcome, Classified::Ignored(reason) if reason.contains(why)),
            "{headers}{from:?}: {outcome:?}"
        );
    }
    // `Auto-Submitted: no` is a person.
    let person = format!("{base}Auto-Submitted: no\n\nhello\n");
    assert_eq!(mail(&person).text, "hello");
}

#[test]
fn a_mail_without_message_id_gets_the_fallback() {
    let mail = mail("From: dave@example.com\nSubject: hi\n\nhello\n");
    assert_eq!(mail.message_id, "1.7@imap");
}

#[test]
fn quotes_and_signatures_are_dropped() {
    for (body, expected) in [
        ("Yes.\n\n> earlier\n> text\n", "Yes."),
        ("Yes.\n\nOn Tue, Bob wrote:\n> earlier\n", "Yes."),
        ("Yes.\n-- \nBob\n", "Yes."),
        ("Yes.\n\n-----Original Message-----\nFrom: x\n", "Yes."),
        ("Top line\n> quoted\nInline answer\n", "Top line\nInline answer"),
        ("No quote here.", "No quote here."),
    ] {
        assert_eq!(clean_body(body), expected, "{body:?}");
    }
}
