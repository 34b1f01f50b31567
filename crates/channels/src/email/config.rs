//! `channels.email` in herald.yaml: where mail is read (IMAP) and sent
//! (SMTP), Herald's own address, and who may write to it.

use std::time::Duration;

use secrecy::SecretString;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmailConfig {
    pub imap: ImapConfig,
    pub smtp: SmtpConfig,
    /// Herald's address: the `From` of every reply; mail from it is never answered.
    pub from: String,
    /// Addresses (`alice@example.com`) and domains (`@example.com`) that may
    /// write; empty lets everyone through to access control.
    #[serde(default)]
    pub allow: Vec<String>,
    /// The authserv-id of the receiving mail server whose
    /// `Authentication-Results` headers Herald believes (`mx.example.com`).
    /// Without it no sender is authenticated: mail is never from an admin
    /// or an approved sender, whatever `From` says.
    #[serde(default)]
    pub trusted_authserv_id: Option<String>,
    /// Mail larger than this (IMAP `RFC822.SIZE`) is not fetched: only its
    /// headers are read, and the sender is told it was too large.
    #[serde(default = "default_max_message_bytes")]
    pub max_message_bytes: u32,
    /// The largest file Herald attaches to a reply, in bytes. Base64 makes
    /// it a third larger in the mail, and Postfix takes 10 MB mails by
    /// default: 5 MiB fits.
    #[serde(default = "default_max_upload_bytes")]
    pub max_upload_bytes: u64,
    /// `markdown` (the default): replies carry an HTML part rendered from
    /// the model's Markdown beside the text part; `plain`: text only.
    #[serde(default)]
    pub format: crate::markdown::Format,
}

pub const DEFAULT_MAX_UPLOAD_BYTES: u64 = 5 * 1024 * 1024;

fn default_max_upload_bytes() -> u64 {
    DEFAULT_MAX_UPLOAD_BYTES
}

/// 5 MiB: a long text with a few photos; larger mail is mostly attachments,
/// which Herald does not read anyway.
pub const DEFAULT_MAX_MESSAGE_BYTES: u32 = 5 * 1024 * 1024;

fn default_max_message_bytes() -> u32 {
    DEFAULT_MAX_MESSAGE_BYTES
}

/// How a connection is secured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tls {
    /// TLS from the first byte (IMAPS 993, SMTPS 465).
    Implicit,
    /// Plain first, then `STARTTLS` (submission 587).
    Starttls,
    /// No TLS at all: only for servers on the same machine.
    None,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImapConfig {
    pub host: String,
    #[serde(default)]
    pub port: Option<u16>,
    #[serde(default = "implicit")]
    pub tls: Tls,
    pub username: String,
    pub password: SecretString,
    #[serde(default = "inbox")]
    pub mailbox: String,
    /// Use IMAP IDLE when the server offers it (otherwise poll).
    #[serde(default = "yes")]
    pub idle: bool,
    #[serde(default = "default_poll", with = "herald_core::duration::serde")]
    pub poll_interval: Duration,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SmtpConfig {
    pub host: String,
    #[serde(default)]
    pub port: Option<u16>,
    #[serde(default = "starttls")]
    pub tls: Tls,
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub password: Option<SecretString>,
}

fn implicit() -> Tls {
    Tls::Implicit
}
fn starttls() -> Tls {
    Tls::Starttls
}
fn inbox() -> String {
    "INBOX".into()
}
fn yes() -> bool {
    true
}
fn default_poll() -> Duration {
    Duration::from_secs(60)
}

impl ImapConfig {
    pub fn port(&self) -> u16 {
        self.port.unwrap_or(if self.tls == Tls::Implicit { 993 } else { 143 })
    }
}

impl SmtpConfig {
    pub fn port(&self) -> u16 {
        self.port.unwrap_or(match self.tls {
            Tls::Implicit => 465,
            Tls::Starttls => 587,
            Tls::None => 25,
        })
    }
}

impl EmailConfig {
    /// Rules the types do not express, as `(key, message)`.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if !self.from.contains('@') {
            return Err(("channels.email.from", "must be an address (herald@example.com)".into()));
        }
        if let Some(bad) = self.allow.iter().find(|entry| !entry.contains('@')) {
            return Err((
                "channels.email.allow",
                format!("`{bad}` is neither an address nor a @domain"),
            ));
        }
        if self
            .trusted_authserv_id
            .as_ref()
            .is_some_and(|id| id.trim().is_empty() || id.contains([';', ' ']))
        {
            return Err((
                "channels.email.trusted_authserv_id",
                "must be one server name (mx.example.com), as its Authentication-Results headers start".into(),
            ));
        }
        if self.max_message_bytes < 1024 {
            return Err(("channels.email.max_message_bytes", "must be at least 1024".into()));
        }
        if self.imap.poll_interval < Duration::from_secs(1) {
            return Err(("channels.email.imap.poll_interval", "must be at least 1s".into()));
        }
        if self.smtp.username.is_some() != self.smtp.password.is_some() {
            return Err((
                "channels.email.smtp",
                "username and password go together (both or neither)".into(),
            ));
        }
        Ok(())
    }

    /// Whether `address` passes `allow` (always, when it is empty).
    pub fn allows(&self, address: &str) -> bool {
        allowed(&self.allow, address)
    }
}

pub fn allowed(allow: &[String], address: &str) -> bool {
    if allow.is_empty() {
        return true;
    }
    let address = address.to_ascii_lowercase();
    allow.iter().any(|entry| {
        let entry = entry.trim().to_ascii_lowercase();
        if entry.starts_with('@') {
            address.ends_with(&entry)
        } else {
            address == entry
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<EmailConfig, String> {
        serde_json::from_str::<EmailConfig>(json).map_err(|e| e.to_string())
    }

    const MINIMAL: &str = r#"{"from": "herald@example.com",
        "imap": {"host": "imap.example.com", "username": "herald", "password": "pw"},
        "smtp": {"host": "smtp.example.com"}}"#;

    #[test]
    fn defaults_are_the_secure_ports() {
        let config = parse(MINIMAL).unwrap();
        assert_eq!((config.imap.tls, config.imap.port()), (Tls::Implicit, 993));
        assert_eq!((config.smtp.tls, config.smtp.port()), (Tls::Starttls, 587));
        assert_eq!(config.imap.mailbox, "INBOX");
        assert!(config.imap.idle);
        assert_eq!(config.imap.poll_interval, Duration::from_secs(60));
        assert_eq!(
            config.trusted_authserv_id, None,
            "nobody is authenticated unless configured"
        );
        assert_eq!(config.max_message_bytes, DEFAULT_MAX_MESSAGE_BYTES);
        assert!(config.check().is_ok());
        assert!(
            !format!("{config:?}").contains("\"pw\""),
            "the password is never printed"
        );
    }

    #[test]
    fn allow_takes_addresses_and_domains() {
        let allow = vec!["alice@example.com".to_owned(), "@corp.example".to_owned()];
        for (address, expected) in [
            ("alice@example.com", true),
            ("Alice@Example.com", true),
            ("bob@example.com", false),
            ("carol@corp.example", true),
            ("mallory@evilcorp.example", false),
        ] {
            assert_eq!(allowed(&allow, address), expected, "{address}");
        }
        assert!(allowed(&[], "anyone@anywhere"), "an empty list lets everyone through");
    }

    #[test]
    fn checks_name_the_key() {
        let bad_from = MINIMAL.replace("herald@example.com", "herald");
        assert_eq!(
            parse(&bad_from).unwrap().check().map_err(|(k, _)| k),
            Err("channels.email.from")
        );
        let bad_allow = MINIMAL.replace(r#""from""#, r#""allow": ["example.com"], "from""#);
        assert_eq!(
            parse(&bad_allow).unwrap().check().map_err(|(k, _)| k),
            Err("channels.email.allow")
        );
        let bad_trust = MINIMAL.replace(
            r#""from""#,
            r#""trusted_authserv_id": "mx.example.com; dkim=pass", "from""#,
        );
        assert_eq!(
            parse(&bad_trust).unwrap().check().map_err(|(k, _)| k),
            Err("channels.email.trusted_authserv_id")
        );
        let half_auth = MINIMAL.replace(r#""host": "smtp.example.com""#, r#""host": "s", "username": "u""#);
        assert_eq!(
            parse(&half_auth).unwrap().check().map_err(|(k, _)| k),
            Err("channels.email.smtp")
        );
        assert!(
            parse(
                &MINIMAL
                    .replace("\"mailbox\"", "x")
                    .replace("\"host\": \"imap", "\"hots\": \"imap")
            )
            .is_err()
        );
    }
}
