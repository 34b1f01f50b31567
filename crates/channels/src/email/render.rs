//! A reply -> the mail that carries it (pure).
//!
//! Every reply threads under the mail it answers (`In-Reply-To`, and
//! `References` ending with that mail), takes its subject with one `Re:`,
//! has a fresh Message-ID Herald chooses (so a reply to it can be mapped
//! back to the conversation), and says `Auto-Submitted: auto-replied` so
//! other robots do not answer it.

use herald_core::ChannelError;
use lettre::Message;
use lettre::message::header::{ContentType, Header, HeaderName, HeaderValue};
use lettre::message::{Attachment, Mailbox, MessageBuilder, MultiPart, SinglePart};

/// What the answered mail said about its thread.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Thread {
    pub subject: String,
    /// The answered mail's Message-ID, without angle brackets.
    pub message_id: Option<String>,
    /// Its References, oldest first.
    #[serde(default)]
    pub references: Vec<String>,
}

pub struct Reply<'a> {
    pub from: &'a str,
    pub to: &'a str,
    pub thread: &'a Thread,
    pub text: &'a str,
    /// The same reply as an HTML document: the mail is then
    /// `multipart/alternative` (text first, HTML preferred by readers).
    pub html: Option<&'a str>,
    /// Without angle brackets.
    pub message_id: &'a str,
    /// Attached after the text (`multipart/mixed`) when there are any.
    pub files: &'a [herald_core::OutboundFile],
}

/// `Auto-Submitted: auto-replied` (RFC 3834).
#[derive(Clone)]
struct AutoSubmitted;

impl Header for AutoSubmitted {
    fn name() -> HeaderName {
        HeaderName::new_from_ascii_str("Auto-Submitted")
    }

    fn parse(_: &str) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        Ok(AutoSubmitted)
    }

    fn display(&self) -> HeaderValue {
        HeaderValue::new(Self::name(), "auto-replied".into())
    }
}

/// `Re: ` in front, once.
pub fn reply_subject(subject: &str) -> String {
    let subject = subject.trim();
    if subject.is_empty() {
        return "Re: your message to Herald".into();
    }
    if subject.get(..3).is_some_and(|p| p.eq_ignore_ascii_case("re:")) {
        return subject.to_owned();
    }
    format!("Re: {subject}")
}

/// A fresh Message-ID in the domain of Herald's address.
pub fn new_message_id(from: &str) -> String {
    let domain = from.rsplit('@').next().unwrap_or("herald.invalid");
    format!(
        "herald.{:016x}{:08x}@{domain}",
        rand::random::<u64>(),
        rand::random::<u32>()
    )
}

fn mailbox(address: &str, key: &str) -> Result<Mailbox, ChannelError> {
    address
        .parse()
        .map_err(|e| ChannelError::Fatal(format!("{key} `{address}` is not an address: {e}")))
}

pub fn reply(reply: &Reply<'_>) -> Result<Message, ChannelError> {
    let mut builder: MessageBuilder = Message::builder()
        .from(mailbox(reply.from, "from")?)
        .to(mailbox(reply.to, "to")?)
        .subject(reply_subject(&reply.thread.subject))
        .message_id(Some(format!("<{}>", reply.message_id)))
        .header(AutoSubmitted);
    if let Some(answered) = &reply.thread.message_id {
        let mut references = reply.thread.references.clone();
        if references.last() != Some(answered) {
            references.push(answered.clone());
        }
        let references = references
            .iter()
            .map(|id| format!("<{id}>"))
            .collect::<Vec<_>>()
            .join(" ");
        builder = builder.in_reply_to(format!("<{answered}>")).references(references);
    }
    let built = match (reply.html, reply.files.is_empty()) {
        (None, true) => builder.header(ContentType::TEXT_PLAIN).body(reply.text.to_owned()),
        (Some(html), true) => builder.multipart(alternative(reply.text, html)),
        (html, false) => builder.multipart(with_files(reply, html)),
    };
    built.map_err(|e| ChannelError::Fatal(format!("could not build the reply: {e}")))
}

fn alternative(text: &str, html: &str) -> MultiPart {
    MultiPart::alternative_plain_html(text.to_owned(), html.to_owned())
}

/// The text (or text and HTML) first, then each file as an attachment.
fn with_files(reply: &Reply<'_>, html: Option<&str>) -> MultiPart {
    let mut parts = match html {
        Some(html) => MultiPart::mixed().multipart(alternative(reply.text, html)),
        None => MultiPart::mixed().singlepart(SinglePart::plain(reply.text.to_owned())),
    };
    for file in reply.files {
        let content_type = ContentType::parse(&file.content_type)
            .unwrap_or_else(|_| ContentType::parse("application/octet-stream").expect("a valid type"));
        parts = parts.singlepart(Attachment::new(file.name.clone()).body(file.bytes.0.to_vec(), content_type));
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::email::payload::{Classified, Reading, classify};

    fn reading(own: &str) -> Reading<'_> {
        Reading {
            own,
            trusted_authserv_id: None,
        }
    }

    #[test]
    fn subjects_get_one_re() {
        for (subject, expected) in [
            ("Lunch", "Re: Lunch"),
            ("Re: Lunch", "Re: Lunch"),
            ("RE: Lunch", "RE: Lunch"),
            ("  ", "Re: your message to Herald"),
        ] {
            assert_eq!(reply_subject(subject), expected, "{subject:?}");
        }
    }

    #[test]
    fn a_reply_threads_and_reads_back_as_herald_s_own_automatic_mail() {
        let thread = Thread {
            subject: "Lunch plans".into(),
            message_id: Some("second@alice.example".into()),
            references: vec!["first@alice.example".into(), "reply1@example.com".into()],
        };
        let id = new_message_id("herald@example.com");
        assert!(id.ends_with("@example.com"));
        let mail = reply(&Reply {
            from: "herald@example.com",
            to: "alice@example.com",
            thread: &thread,
            text: "Thai it is.",
            html: None,
            message_id: &id,
            files: &[],
        })
        .unwrap()
        .formatted();
        let text = String::from_utf8(mail.clone()).unwrap();
        assert!(text.contains("Auto-Submitted: auto-replied"), "{text}");
        assert!(text.contains("Content-Type: text/plain"), "{text}");
        let parsed = mail_parser::MessageParser::default().parse(&mail).unwrap();
        assert_eq!(parsed.subject(), Some("Re: Lunch plans"));
        assert_eq!(parsed.message_id(), Some(id.as_str()));
        assert_eq!(parsed.in_reply_to().as_text(), Some("second@alice.example"));
        let references: Vec<&str> = parsed
            .references()
            .as_text_list()
            .unwrap()
            .iter()
            .map(|r| r.as_ref())
            .collect();
        assert_eq!(
            references,
            ["first@alice.example", "reply1@example.com", "second@alice.example"]
        );
        assert_eq!(parsed.body_text(0).unwrap().trim(), "Thai it is.");
        // Herald never answers its own mail, and nobody else's robot should either.
        assert!(matches!(
            classify(&mail, reading("herald@example.com"), "x"),
            Classified::Ignored(_)
        ));
        assert!(
            matches!(classify(&mail, reading("other@example.com"), "x"), Classified::Ignored(r) if r.contains("Auto-Submitted"))
        );
    }

    #[test]
    fn files_are_attached_after_the_text() {
        let file = herald_core::OutboundFile {
            name: "report.csv".into(),
            content_type: "text/csv".into(),
            bytes: herald_core::InlineBytes(b"a,b\n1,2\n".as_slice().into()),
        };
        let mail = reply(&Reply {
            from: "herald@example.com",
            to: "alice@example.com",
            thread: &Thread::default(),
            text: "Here it is.",
            html: Some("<p>Here it is.</p>"),
            message_id: "x@example.com",
            files: std::slice::from_ref(&file),
        })
        .unwrap()
        .formatted();
        let parsed = mail_parser::MessageParser::default().parse(&mail).unwrap();
        assert_eq!(parsed.body_text(0).unwrap().trim(), "Here it is.");
        use mail_parser::MimeHeaders;
        let attachment = parsed.attachment(0).expect("an attachment");
        assert_eq!(attachment.attachment_name(), Some("report.csv"));
        assert_eq!(attachment.contents(), b"a,b\n1,2\n");
    }
}
