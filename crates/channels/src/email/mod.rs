//! Email: mail read over IMAP (IDLE or polling), answered over SMTP.
//!
//! - [`config`]: `channels.email` in herald.yaml.
//! - [`auth`]: whether `From` is authenticated, from the trusted server's
//!   `Authentication-Results` (pure).
//! - [`payload`]: raw mail -> [`InboundMessage`](herald_core::InboundMessage) (pure).
//! - [`render`]: reply -> a threaded mail (pure).
//! - [`client`]: IMAP login (plain, TLS, STARTTLS) and the SMTP sender.
//! - [`ingress`]: new mail by IDLE or polling, cursor kept in the store.
//!
//! A conversation is a mail thread: its id is the sender's address and the
//! thread's first Message-ID, so a reply to Herald's answer (whose
//! References start with that id) continues it. The Message-ID is the dedup
//! key, so a mail read twice (a restart, a UIDVALIDITY change) is answered once.

mod auth;
mod client;
pub mod config;
mod ingress;
pub mod payload;
mod render;

use std::sync::Arc;

use herald_core::{ChannelError, ConversationStore};

use client::EmailSender;
pub use config::{EmailConfig, Tls};
use ingress::EmailIngress;
pub use payload::CHANNEL;

use crate::Built;
use crate::outbound::{Delivery, Rate, RateLimits};

/// Builds the channel from its configuration. `store` keeps the mailbox
/// cursor and the thread map; without one (`herald doctor`) nothing is kept.
/// IMAP and SMTP servers are trusted by `tls`.
pub fn build(
    config: &EmailConfig,
    store: Option<Arc<dyn ConversationStore>>,
    limiter: Arc<dyn herald_core::SendLimiter>,
    tls: &herald_net::ClientTls,
) -> Result<Built, ChannelError> {
    if let Err((key, message)) = config.check() {
        return Err(ChannelError::Fatal(format!("{key}: {message}")));
    }
    let sender = Arc::new(
        EmailSender::new(&config.smtp, &config.from, store.clone(), tls)?
            .with_max_upload_bytes(config.max_upload_bytes)
            .with_format(config.format),
    );
    // Mail servers count messages, not bytes: one mail a second at most.
    let limits = RateLimits {
        per_chat: None,
        per_group: None,
        per_bot: Some(Rate {
            count: 1,
            per: std::time::Duration::from_secs(1),
        }),
    };
    let outbound = Arc::new(Delivery::with_limiter(sender.clone(), &limits, limiter));
    let ingress = Arc::new(EmailIngress::new(config, store, sender, tls));
    Ok(Built {
        outbound,
        ingress,
        fetcher: None,
    })
}
