//! Email: mail read over IMAP (IDLE or polling), answered over SMTP.
//!
//! - [`config`]: `channels.email` in herald.yaml.
//! - [`payload`]: raw mail -> [`InboundMessage`](herald_core::InboundMessage) (pure).
//! - [`render`]: reply -> a threaded mail (pure).
//!
//! A conversation is a mail thread: its id is the sender's address and the
//! thread's first Message-ID, so a reply to Herald's answer (whose
//! References start with that id) continues it. The Message-ID is the dedup
//! key, so a mail read twice (a restart, a UIDVALIDITY change) is answered once.

pub mod config;
pub mod payload;
pub mod render;

pub use config::{EmailConfig, Tls};
