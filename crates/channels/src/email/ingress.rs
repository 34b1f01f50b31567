//! The inbound half: new mail in the configured mailbox, by IMAP IDLE when
//! the server offers it (re-issued well before the 29-minute limit), by
//! polling otherwise, reconnecting with backoff after errors.
//!
//! Each new mail is handed to the sink — stored on the queue — before it is
//! marked `\Seen` and before the cursor (UIDVALIDITY and the last UID) moves
//! past it in the store. A restart therefore re-reads at most the mail that
//! was being handled, and the Message-ID dedup key keeps it from being
//! answered twice; a changed UIDVALIDITY re-reads the unseen mail the same way.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_imap::types::UnsolicitedResponse;
use async_trait::async_trait;
use futures::TryStreamExt;
use herald_core::{
    Admission, ChannelError, ChannelIngress, ChannelName, ConversationStore, InboundMessage, InboundSink, RetryClass,
};
use herald_net::ClientTls;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::retry::{PERSIST, Retry, hand_over, pause, reconnect};

use super::client::{EmailSender, ImapSession, STATE_SCOPE, imap_error, imap_login};
use super::config::{EmailConfig, ImapConfig, allowed};
use super::payload::{CHANNEL, Classified, Mail, Reading, classify, thread_root, to_inbound};
use super::render::Thread;

/// IDLE is ended and issued again after this long (servers may drop it at 30 minutes).
const IDLE_RENEW: Duration = Duration::from_secs(25 * 60);

/// Whether the server announced new mail (`EXISTS`, `RECENT`) in untagged
/// responses since the last look, emptying what async-imap queued.
///
/// A server tells a client about new mail once, with whatever command is
/// running when it arrives. Mail that arrived while Herald was searching or
/// fetching is announced there and not again when IDLE starts: without this
/// check, Herald would IDLE past it until the next new mail or the renewal.
fn announced_new_mail(queued: impl Iterator<Item = UnsolicitedResponse>) -> bool {
    // Counted, not `any`: every queued response is taken off the queue.
    queued
        .filter(|response| {
            matches!(
                response,
                UnsolicitedResponse::Exists(_) | UnsolicitedResponse::Recent(_)
            )
        })
        .count()
        > 0
}

pub struct EmailIngress {
    pub imap: ImapConfig,
    pub from: String,
    pub allow: Vec<String>,
    pub trusted_authserv_id: Option<String>,
    pub max_message_bytes: u32,
    pub store: Option<Arc<dyn ConversationStore>>,
    /// For `probe`: the SMTP side is checked too.
    pub smtp: Arc<EmailSender>,
    /// Whom the IMAP server's certificate must chain to.
    tls: ClientTls,
    /// Whether the missing `trusted_authserv_id` was logged already.
    warned_untrusted: AtomicBool,
}

/// How far this mailbox has been read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Cursor {
    uid_validity: u32,
    last_uid: u32,
}

impl EmailIngress {
    pub fn new(
        config: &EmailConfig,
        store: Option<Arc<dyn ConversationStore>>,
        smtp: Arc<EmailSender>,
        tls: &ClientTls,
    ) -> Self {
        Self {
            imap: ImapConfig {
                host: config.imap.host.clone(),
                port: config.imap.port,
                tls: config.imap.tls,
                username: config.imap.username.clone(),
                password: config.imap.password.clone(),
                mailbox: config.imap.mailbox.clone(),
                idle: config.imap.idle,
                poll_interval: config.imap.poll_interval,
            },
            from: config.from.clone(),
            allow: config.allow.clone(),
            trusted_authserv_id: config.trusted_authserv_id.clone(),
            max_message_bytes: config.max_message_bytes,
            store,
            smtp,
            tls: tls.clone(),
            warned_untrusted: AtomicBool::new(false),
        }
    }

    fn cursor_key(&self) -> String {
        format!("cursor:{}@{}/{}", self.imap.username, self.imap.host, self.imap.mailbox)
    }

    async fn load_cursor(&self) -> Cursor {
        let Some(store) = &self.store else {
            return Cursor::default();
        };
        match store.get_state(STATE_SCOPE, &self.cursor_key()).await {
            Ok(value) => value.and_then(|v| serde_json::from_value(v).ok()).unwrap_or_default(),
            Err(err) => {
                warn!(error = %err, "could not read the mailbox cursor; unseen mail is read again");
                Cursor::default()
            }
        }
    }

    async fn save_cursor(&self, cursor: Cursor) {
        let Some(store) = &self.store else { return };
        if let Err(err) = store
            .put_state(STATE_SCOPE, &self.cursor_key(), &serde_json::json!(cursor))
            .await
        {
            warn!(error = %err, "could not store the mailbox cursor; the mail is recognised by its Message-ID");
        }
    }

    /// The conversation a mail belongs to: the thread of the Herald mail it
    /// answers, when known, else the first id of its References.
    async fn root_of(&self, mail: &Mail) -> String {
        if let Some(store) = &self.store {
            for id in mail.in_reply_to.iter().chain(mail.references.iter().rev()) {
                if let Ok(Some(root)) = store.get_state(STATE_SCOPE, &format!("thread:{id}")).await
                    && let Some(root) = root.as_str()
                {
                    return root.to_owned();
                }
            }
        }
        thread_root(mail).to_owned()
    }

    /// Hands one mail to the sink, retrying while the store is unavailable;
    /// with `unread`, a mail whose body was not fetched, the sink tells the
    /// sender that instead. Returns false when shutdown came first.
    async fn deliver(
        &self,
        mail: &Mail,
        unread: Option<String>,
        sink: &dyn InboundSink,
        shutdown: &CancellationToken,
    ) -> bool {
        let root = self.root_of(mail).await;
        if let Some(store) = &self.store {
            let thread = Thread {
                subject: mail.subject.clone(),
                message_id: Some(mail.message_id.clone()),
                references: mail.references.clone(),
            };
            let key = format!("mail:{}", mail.message_id);
            if let Err(err) = store.put_state(STATE_SCOPE, &key, &serde_json::json!(thread)).await {
                warn!(error = %err, "could not remember the mail's thread; the reply threads under the root");
            }
        }
        let message = to_inbound(mail, &root, chrono::Utc::now());
        let handed = match unread {
            None => hand_over(sink, &message, shutdown).await,
            Some(notice) => refuse_until_stored(sink, &message, &notice, shutdown).await,
        };
        match handed {
            Some(admission) => {
                debug!(message_id = %mail.message_id, ?admission, "mail accepted");
                true
            }
            None => false,
        }
    }

    /// Reads every new mail once. Returns false when shutdown came first.
    async fn read_new(
        &self,
        session: &mut ImapSession,
        cursor: &mut Cursor,
        sink: &dyn InboundSink,
        shutdown: &CancellationToken,
    ) -> Result<bool, ChannelError> {
        let query = format!("UID {}:* UNSEEN", cursor.last_uid.saturating_add(1));
        let mut uids: Vec<u32> = session
            .uid_search(&query)
            .await
            .map_err(imap_error)?
            .into_iter()
            .filter(|uid| *uid > cursor.last_uid)
            .collect();
        uids.sort_unstable();
        for uid in uids {
            let size = self.size_of(session, uid).await?;
            let too_large = size > self.max_message_bytes;
            // Over the cap only the header block is fetched: enough to know
            // who wrote, whether to answer at all, and to say why not.
            let part = if too_large { "BODY.PEEK[HEADER]" } else { "BODY.PEEK[]" };
            let fetched: Vec<_> = session
                .uid_fetch(uid.to_string(), format!("(UID {part})"))
                .await
                .map_err(imap_error)?
                .try_collect()
                .await
                .map_err(imap_error)?;
            let raw = fetched
                .iter()
                .find_map(|f| if too_large { f.header() } else { f.body() })
                .unwrap_or_default();
            let fallback = format!("{}.{uid}@imap.{}", cursor.uid_validity, self.imap.host);
            let reading = Reading {
                own: &self.from,
                trusted_authserv_id: self.trusted_authserv_id.as_deref(),
            };
            match classify(raw, reading, &fallback) {
                Classified::Ignored(reason) => debug!(uid, reason, "mail ignored"),
                Classified::Mail(mail) if !allowed(&self.allow, &mail.from) => {
                    debug!(uid, "mail from a sender outside channels.email.allow ignored");
                }
                Classified::Mail(mail) => {
                    let unread = too_large.then(|| {
                        info!(
                            uid,
                            size,
                            cap = self.max_message_bytes,
                            "mail over the size cap; only its headers were read"
                        );
                        format!(
                            "Your mail was {} KiB, more than the {} KiB I read, so I did not read it. \
                             Please send the text alone, or a shorter mail.",
                            size.div_ceil(1024),
                            self.max_message_bytes / 1024
                        )
                    });
                    if !self.deliver(&mail, unread, sink, shutdown).await {
                        return Ok(false);
                    }
                    let _: Vec<_> = session
                        .uid_store(uid.to_string(), "+FLAGS (\\Seen)")
                        .await
                        .map_err(imap_error)?
                        .try_collect()
                        .await
                        .map_err(imap_error)?;
                }
            }
            cursor.last_uid = uid;
            self.save_cursor(*cursor).await;
        }
        Ok(true)
    }

    /// `RFC822.SIZE` of one mail, before anything of it is fetched.
    async fn size_of(&self, session: &mut ImapSession, uid: u32) -> Result<u32, ChannelError> {
        let fetched: Vec<_> = session
            .uid_fetch(uid.to_string(), "(UID RFC822.SIZE)")
            .await
            .map_err(imap_error)?
            .try_collect()
            .await
            .map_err(imap_error)?;
        // A server that does not say is treated as saying "too large": the
        // cap is a promise about what Herald fetches.
        Ok(fetched.iter().find_map(|f| f.size).unwrap_or(u32::MAX))
    }

    /// One connection's life: log in, select, read, wait for news, repeat.
    async fn session(&self, sink: &dyn InboundSink, shutdown: &CancellationToken) -> Result<(), ChannelError> {
        let mut session = imap_login(&self.imap, &self.tls).await?;
        let idle = self.imap.idle && session.capabilities().await.map_err(imap_error)?.has_str("IDLE");
        let mailbox = session.select(&self.imap.mailbox).await.map_err(imap_error)?;
        let mut cursor = self.load_cursor().await;
        let uid_validity = mailbox.uid_validity.unwrap_or_default();
        if cursor.uid_validity != uid_validity {
            if cursor != Cursor::default() {
                info!(
                    old = cursor.uid_validity,
                    new = uid_validity,
                    "UIDVALIDITY changed; unseen mail is read again"
                );
            }
            cursor = Cursor {
                uid_validity,
                last_uid: 0,
            };
        }
        info!(mailbox = %self.imap.mailbox, idle, "reading mail");
        sink.connected(&ChannelName::new(CHANNEL), true);
        let unsolicited = session.unsolicited_responses.clone();
        let queued = || std::iter::from_fn(|| unsolicited.try_recv().ok());
        loop {
            if !self.read_new(&mut session, &mut cursor, sink, shutdown).await? {
                return Ok(());
            }
            if announced_new_mail(queued()) {
                continue;
            }
            if idle {
                let mut handle = session.idle();
                handle.init().await.map_err(imap_error)?;
                if announced_new_mail(queued()) {
                    // Announced before the server acknowledged IDLE.
                    session = handle.done().await.map_err(imap_error)?;
                    continue;
                }
                let outcome = {
                    let (wait, _stop) = handle.wait_with_timeout(IDLE_RENEW);
                    tokio::select! {
                        _ = shutdown.cancelled() => None,
                        outcome = wait => Some(outcome),
                    }
                };
                match outcome {
                    None => return Ok(()),
                    Some(outcome) => {
                        outcome.map_err(imap_error)?;
                    }
                }
                session = handle.done().await.map_err(imap_error)?;
            } else {
                if !pause(self.imap.poll_interval, shutdown).await {
                    let _ = session.logout().await;
                    return Ok(());
                }
                session.noop().await.map_err(imap_error)?;
            }
        }
    }
}

/// [`InboundSink::refuse`] until the sink answers, as [`hand_over`] does
/// for a message it can read.
async fn refuse_until_stored(
    sink: &dyn InboundSink,
    message: &InboundMessage,
    notice: &str,
    shutdown: &CancellationToken,
) -> Option<Admission> {
    let mut retry = Retry::new(PERSIST);
    loop {
        match sink.refuse(message.clone(), notice.to_owned()).await {
            Ok(admission) => return Some(admission),
            Err(err) => {
                warn!(error = %err, "could not decide about a mail too large to read; it stays unseen");
                if !retry.wait(RetryClass::Transient, shutdown).await {
                    return None;
                }
            }
        }
    }
}

/// Said once at start and by `herald doctor` when no server is trusted.
pub const NO_TRUSTED_SERVER: &str = "channels.email.trusted_authserv_id is not set: no sender is authenticated, so mail is never from an admin or an approved sender (docs/channels.md)";

#[async_trait]
impl ChannelIngress for EmailIngress {
    fn channel(&self) -> ChannelName {
        ChannelName::new(CHANNEL)
    }

    async fn run(&self, sink: Arc<dyn InboundSink>, shutdown: CancellationToken) -> Result<(), ChannelError> {
        if self.trusted_authserv_id.is_none() && !self.warned_untrusted.swap(true, Ordering::Relaxed) {
            warn!("{NO_TRUSTED_SERVER}");
        }
        let channel = ChannelName::new(CHANNEL);
        reconnect("the IMAP connection", &channel, sink.as_ref(), &shutdown, || {
            self.session(sink.as_ref(), &shutdown)
        })
        .await
    }

    async fn probe(&self) -> Result<String, ChannelError> {
        // Both servers are tried, so one run of `herald doctor` names every
        // one that is wrong.
        let imap = async {
            let mut session = imap_login(&self.imap, &self.tls).await?;
            session.select(&self.imap.mailbox).await.map_err(imap_error)?;
            let _ = session.logout().await;
            Ok::<_, ChannelError>(())
        }
        .await;
        let smtp = self.smtp.probe().await;
        match (imap, smtp) {
            (Ok(()), Ok(())) => {}
            (Err(err), Ok(())) | (Ok(()), Err(err)) => return Err(err),
            (Err(imap), Err(smtp)) => return Err(ChannelError::Fatal(format!("{imap}; and {smtp}"))),
        }
        let trust = match &self.trusted_authserv_id {
            Some(server) => format!("senders authenticated by {server}"),
            None => format!("warning: {NO_TRUSTED_SERVER}"),
        };
        Ok(format!("{} (IMAP {}, SMTP ok; {trust})", self.from, self.imap.mailbox))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_mail_is_told_by_exists_or_recent_and_everything_queued_is_consumed() {
        let mut queued = vec![UnsolicitedResponse::Exists(3), UnsolicitedResponse::Expunge(1)].into_iter();
        assert!(announced_new_mail(queued.by_ref()));
        assert_eq!(queued.len(), 0, "an older announcement must not count next time");
        assert!(announced_new_mail([UnsolicitedResponse::Recent(1)].into_iter()));
        assert!(!announced_new_mail([UnsolicitedResponse::Expunge(2)].into_iter()));
        assert!(!announced_new_mail(std::iter::empty()));
    }
}
