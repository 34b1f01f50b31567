//! Raw RFC 5322 mail -> what Herald answers (pure).
//!
//! MIME is mail-parser's job; this module decides what of it reaches the
//! model (text/plain, else the HTML as text, without quoted history and the
//! signature), which thread the mail belongs to, and which mail is never
//! answered because answering it could start a loop (auto-replies, lists,
//! bounces, Herald's own mail), and whether the sender is who `From` says
//! ([`super::auth`]): an authenticated sender's actor id is
//! `email:<address>`, any other's `email:unverified:<address>`.

use herald_core::{
    ActorId, Attachment, ChannelName, ConversationId, ConversationKind, ConversationRef, InboundMessage, Sender,
    Timestamp,
};
use mail_parser::{HeaderValue, MessageParser, MimeHeaders};

use super::auth;

pub const CHANNEL: &str = "email";

/// One mail worth answering, with what the reply needs to thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mail {
    pub from: String,
    pub display_name: String,
    /// Without angle brackets; a made-up `<uidvalidity>.<uid>@imap` when absent.
    pub message_id: String,
    pub in_reply_to: Option<String>,
    /// Oldest first, as written.
    pub references: Vec<String>,
    pub subject: String,
    pub text: String,
    pub attachments: Vec<Attachment>,
    /// Whether the trusted server vouched for `from` ([`super::auth`]).
    pub authenticated: bool,
}

/// What decides how a mail is read: Herald's own address, and the server
/// whose `Authentication-Results` count.
#[derive(Clone, Copy, Debug)]
pub struct Reading<'a> {
    /// Herald's address: mail from it is never answered.
    pub own: &'a str,
    /// `channels.email.trusted_authserv_id`.
    pub trusted_authserv_id: Option<&'a str>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Classified {
    Mail(Box<Mail>),
    Ignored(&'static str),
}

/// The most attachments read out of one mail; the rest are counted. The
/// gateway takes fewer still (`channels.attachments.max_files_per_message`).
pub const MAX_ATTACHMENTS: usize = 64;

/// Parses one mail (or only its header block: the text is then empty);
/// `fallback_id` names a mail that has no Message-ID.
pub fn classify(raw: &[u8], reading: Reading<'_>, fallback_id: &str) -> Classified {
    let own = reading.own;
    let Some(message) = MessageParser::default().parse(raw) else {
        return Classified::Ignored("not a mail");
    };
    let Some(from) = message.from().and_then(|a| a.first()) else {
        return Classified::Ignored("no sender");
    };
    let Some(address) = from.address() else {
        return Classified::Ignored("no sender");
    };
    let address = address.trim().to_ascii_lowercase();
    if address == own.trim().to_ascii_lowercase() {
        return Classified::Ignored("Herald's own mail");
    }
    let local = address.split('@').next().unwrap_or_default();
    if ["mailer-daemon", "postmaster"].contains(&local) {
        return Classified::Ignored("a bounce or server notice");
    }
    let header_text = |name: &str| message.header_raw(name).map(|v| v.trim().to_ascii_lowercase());
    if header_text("Auto-Submitted").is_some_and(|v| !v.starts_with("no")) {
        return Classified::Ignored("an automatic message (Auto-Submitted)");
    }
    if header_text("Precedence").is_some_and(|v| ["bulk", "list", "junk"].contains(&v.as_str())) {
        return Classified::Ignored("bulk mail (Precedence)");
    }
    if message.header_raw("List-Id").is_some() || message.header_raw("List-Unsubscribe").is_some() {
        return Classified::Ignored("a mailing-list message");
    }
    if header_text("X-Autoreply").is_some() || header_text("X-Autorespond").is_some() {
        return Classified::Ignored("an automatic message (X-Autoreply)");
    }
    let domain = address.rsplit_once('@').map(|(_, domain)| domain).unwrap_or_default();
    let authenticated =
        auth::verdict(&auth::header_fields(raw), reading.trusted_authserv_id, domain) == auth::Verdict::Authenticated;
    let body = message.body_text(0).map(|text| text.into_owned()).unwrap_or_default();
    let mut attachments: Vec<Attachment> = message
        .attachments()
        .take(MAX_ATTACHMENTS)
        .map(|part| Attachment {
            name: part.attachment_name().unwrap_or("unnamed").to_owned(),
            content_type: part
                .content_type()
                .map(|ct| match ct.subtype() {
                    Some(sub) => format!("{}/{}", ct.ctype(), sub),
                    None => ct.ctype().to_owned(),
                })
                .unwrap_or_else(|| "application/octet-stream".into()),
            size: part.contents().len() as u64,
            // The bytes are in hand: the gateway stores them as they are.
            inline: Some(herald_core::InlineBytes(part.contents().into())),
            ..Attachment::default()
        })
        .collect();
    let more = message.attachments().skip(MAX_ATTACHMENTS).count();
    if more > 0 {
        // Named to the model as one line, not as thousands.
        attachments.push(Attachment {
            name: format!("{more} more attachments"),
            content_type: "application/octet-stream".into(),
            not_fetched: Some(format!(
                "a mail's attachments past the first {MAX_ATTACHMENTS} are not taken"
            )),
            ..Attachment::default()
        });
    }
    Classified::Mail(Box::new(Mail {
        display_name: from.name().map(str::to_owned).unwrap_or_else(|| address.clone()),
        from: address,
        message_id: message
            .message_id()
            .map(str::to_owned)
            .unwrap_or_else(|| fallback_id.to_owned()),
        in_reply_to: ids(message.in_reply_to()).pop(),
        references: ids(message.references()),
        subject: message.subject().unwrap_or_default().trim().to_owned(),
        text: clean_body(&body),
        attachments,
        authenticated,
    }))
}

fn ids(value: &HeaderValue<'_>) -> Vec<String> {
    match value {
        HeaderValue::Text(id) => vec![id.to_string()],
        HeaderValue::TextList(ids) => ids.iter().map(|id| id.to_string()).collect(),
        _ => Vec::new(),
    }
}

/// The body without quoted history (`> ` lines and the `On … wrote:` line
/// before them, Outlook's `-----Original Message-----`) and the signature
/// (after `-- `).
pub fn clean_body(body: &str) -> String {
    let mut kept: Vec<&str> = Vec::new();
    for line in body.lines() {
        let trimmed = line.trim_end_matches('\r');
        if trimmed == "-- " || trimmed == "--" {
            break;
        }
        let bare = trimmed.trim();
        if bare.starts_with("-----Original Message-----")
            || bare.starts_with("________________________________")
            || (bare.starts_with("From:") && kept.last().is_some_and(|l| l.trim().is_empty()) && is_outlook_block(bare))
        {
            break;
        }
        if bare.starts_with('>') {
            continue;
        }
        kept.push(trimmed);
    }
    // The attribution line right above quoted text: "On Mon, … Alice wrote:".
    while let Some(last) = kept.last() {
        let last = last.trim();
        if last.is_empty() || (last.ends_with("wrote:") || last.ends_with("schrieb:") || last.ends_with("a écrit :")) {
            kept.pop();
        } else {
            break;
        }
    }
    let text = kept.join("\n");
    text.trim().to_owned()
}

fn is_outlook_block(line: &str) -> bool {
    line.contains('@')
}

/// The first mail of the thread: the conversation's name.
pub fn thread_root(mail: &Mail) -> &str {
    mail.references
        .first()
        .or(mail.in_reply_to.as_ref())
        .map(String::as_str)
        .unwrap_or(&mail.message_id)
}

/// The normalized message for a mail in the conversation named by `root`.
pub fn to_inbound(mail: &Mail, root: &str, received_at: Timestamp) -> InboundMessage {
    let channel = ChannelName::new(CHANNEL);
    let mut text = mail.text.clone();
    // A chat command (`/pair approve …`) is read as written: the subject
    // in front would hide it.
    if !mail.subject.is_empty() && mail.in_reply_to.is_none() && !mail.text.starts_with('/') {
        text = format!("Subject: {}\n\n{text}", mail.subject);
    }
    let sender = if mail.authenticated {
        ActorId::on(&channel, &mail.from)
    } else {
        ActorId::unverified(&channel, &mail.from)
    };
    // The conversation is the sender's as Herald knows them: a forged From
    // does not write into the real sender's thread (and history).
    let conversation = sender.as_str().trim_start_matches(&format!("{CHANNEL}:")).to_owned();
    InboundMessage {
        conversation: ConversationRef {
            id: ConversationId::new(format!("{CHANNEL}:{conversation}/{root}")),
            channel: channel.clone(),
            kind: ConversationKind::Direct,
            chat: mail.from.clone(),
            thread: Some(root.to_owned()),
        },
        sender: Sender {
            id: sender,
            display_name: mail.display_name.clone(),
        },
        text,
        platform_message_id: mail.message_id.clone(),
        reply_to: mail.in_reply_to.clone(),
        // A mail to Herald's address is always addressed to Herald.
        mentions_bot: true,
        received_at,
        attachments: mail.attachments.clone(),
    }
}

#[cfg(test)]
mod tests;
