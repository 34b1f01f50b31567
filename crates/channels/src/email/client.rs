//! The I/O of the email channel: IMAP connections (plain, implicit TLS or
//! STARTTLS, with rustls on Herald's one trust) and the SMTP sender behind the shared
//! [`Delivery`](crate::outbound::Delivery).
//!
//! Neither ever logs or returns a password.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use herald_core::{ChannelError, ChannelName, ConversationRef, ConversationStore, OutboundFile};
use herald_net::ClientTls;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, CertificateStore, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use secrecy::ExposeSecret;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tracing::{debug, warn};

use super::config::{ImapConfig, SmtpConfig, Tls};
use super::payload::CHANNEL;
use super::render::{self, Reply, Thread};
use crate::chunk::Limit;
use crate::outbound::{Chunk, FileUploads, PlatformSender};

/// Where the channel keeps its cursor and thread map in the store's state.
pub const STATE_SCOPE: &str = "email";

/// How long connecting (TCP, TLS, greeting) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Any byte stream an IMAP session can run over.
pub trait ImapIo: AsyncRead + AsyncWrite + Unpin + Send + Debug {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Debug> ImapIo for T {}

pub type ImapSession = async_imap::Session<Box<dyn ImapIo>>;

fn transient(what: &str) -> impl Fn(std::io::Error) -> ChannelError + '_ {
    move |e| ChannelError::Transient(format!("{what}: {e}"))
}

async fn wrap_tls(host: &str, tcp: TcpStream, tls: &ClientTls) -> Result<Box<dyn ImapIo>, ChannelError> {
    let name = rustls::pki_types::ServerName::try_from(host.to_owned())
        .map_err(|e| ChannelError::Fatal(format!("IMAP host `{host}`: {e}")))?;
    let tls = tokio_rustls::TlsConnector::from(tls.rustls())
        .connect(name, tcp)
        .await
        .map_err(transient("IMAP TLS handshake"))?;
    Ok(Box::new(tls))
}

/// `STARTTLS` on a fresh connection, before async-imap takes it over: the
/// greeting, the command, its tagged answer.
async fn starttls(host: &str, tcp: TcpStream, tls: &ClientTls) -> Result<Box<dyn ImapIo>, ChannelError> {
    let mut stream = BufReader::new(tcp);
    let mut line = String::new();
    stream.read_line(&mut line).await.map_err(transient("IMAP greeting"))?;
    stream
        .get_mut()
        .write_all(b"h1 STARTTLS\r\n")
        .await
        .map_err(transient("IMAP STARTTLS"))?;
    loop {
        line.clear();
        if stream.read_line(&mut line).await.map_err(transient("IMAP STARTTLS"))? == 0 {
            return Err(ChannelError::Transient(
                "IMAP server closed the connection at STARTTLS".into(),
            ));
        }
        if let Some(status) = line.strip_prefix("h1 ") {
            if !status.to_ascii_uppercase().starts_with("OK") {
                return Err(ChannelError::Fatal(format!(
                    "IMAP server refused STARTTLS: {}",
                    status.trim()
                )));
            }
            break;
        }
    }
    wrap_tls(host, stream.into_inner(), tls).await
}

/// Connects, reads the greeting and logs in, trusting `tls`. A refused
/// login is fatal.
pub async fn imap_login(config: &ImapConfig, tls: &ClientTls) -> Result<ImapSession, ChannelError> {
    let connect = async {
        let tcp = TcpStream::connect((config.host.as_str(), config.port()))
            .await
            .map_err(transient("IMAP connect"))?;
        let (stream, greeted): (Box<dyn ImapIo>, bool) = match config.tls {
            Tls::None => (Box::new(tcp), false),
            Tls::Implicit => (wrap_tls(&config.host, tcp, tls).await?, false),
            Tls::Starttls => (starttls(&config.host, tcp, tls).await?, true),
        };
        let mut client = async_imap::Client::new(stream);
        if !greeted {
            client
                .read_response()
                .await
                .map_err(transient("IMAP greeting"))?
                .ok_or_else(|| ChannelError::Transient("IMAP server closed before its greeting".into()))?;
        }
        Ok::<_, ChannelError>(client)
    };
    let client = tokio::time::timeout(CONNECT_TIMEOUT, connect)
        .await
        .map_err(|_| ChannelError::Transient(format!("IMAP {}:{} did not answer", config.host, config.port())))??;
    client
        .login(&config.username, config.password.expose_secret())
        .await
        .map_err(|(err, _)| match err {
            async_imap::error::Error::No(reason) | async_imap::error::Error::Bad(reason) => {
                ChannelError::Fatal(format!("IMAP login as {} refused: {reason}", config.username))
            }
            other => ChannelError::Transient(format!("IMAP login: {other}")),
        })
}

/// lettre's TLS for `host` on Herald's one trust: lettre builds its own
/// rustls configuration, from exactly the roots every other client trusts.
fn smtp_tls(host: &str, tls: &ClientTls) -> Result<TlsParameters, lettre::transport::smtp::Error> {
    let mut builder = TlsParameters::builder(host.to_owned()).certificate_store(CertificateStore::None);
    for root in tls.roots() {
        builder = builder.add_root_certificate(Certificate::from_der(root.to_vec())?);
    }
    builder.build_rustls()
}

pub fn imap_error(err: async_imap::error::Error) -> ChannelError {
    ChannelError::Transient(format!("IMAP: {err}"))
}

/// Herald's outbound half for email, wrapped by [`crate::outbound::Delivery`].
pub struct EmailSender {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: String,
    /// Where the answered mail's subject and references are looked up, and
    /// where each sent Message-ID is mapped to its thread.
    store: Option<Arc<dyn ConversationStore>>,
    /// `channels.email.max_upload_bytes`.
    max_upload_bytes: u64,
    /// `channels.email.format`.
    format: crate::markdown::Format,
}

impl EmailSender {
    /// Files larger than `bytes` are not attached.
    pub fn with_max_upload_bytes(mut self, bytes: u64) -> Self {
        self.max_upload_bytes = bytes;
        self
    }

    /// Whether replies carry an HTML part rendered from their Markdown.
    pub fn with_format(mut self, format: crate::markdown::Format) -> Self {
        self.format = format;
        self
    }

    /// The sender for `config`, trusting `tls`'s roots.
    pub fn new(
        config: &SmtpConfig,
        from: &str,
        store: Option<Arc<dyn ConversationStore>>,
        tls: &ClientTls,
    ) -> Result<Self, ChannelError> {
        type Smtp = AsyncSmtpTransport<Tokio1Executor>;
        let refused = |e: lettre::transport::smtp::Error| ChannelError::Fatal(format!("SMTP {}: {e}", config.host));
        let parameters = || smtp_tls(&config.host, tls).map_err(refused);
        let builder = Smtp::builder_dangerous(&config.host);
        let builder = match config.tls {
            Tls::None => builder,
            Tls::Starttls => builder.tls(lettre::transport::smtp::client::Tls::Required(parameters()?)),
            Tls::Implicit => builder.tls(lettre::transport::smtp::client::Tls::Wrapper(parameters()?)),
        };
        let mut builder = builder.port(config.port()).timeout(Some(Duration::from_secs(60)));
        if let (Some(user), Some(password)) = (&config.username, &config.password) {
            builder = builder.credentials(Credentials::new(user.clone(), password.expose_secret().to_owned()));
        }
        Ok(Self {
            transport: builder.build(),
            from: from.to_owned(),
            store,
            max_upload_bytes: super::config::DEFAULT_MAX_UPLOAD_BYTES,
            format: crate::markdown::Format::default(),
        })
    }

    /// Whether the SMTP server answers (and takes the credentials).
    pub async fn probe(&self) -> Result<(), ChannelError> {
        match self.transport.test_connection().await {
            Ok(true) => Ok(()),
            Ok(false) => Err(ChannelError::Transient("the SMTP server did not answer NOOP".into())),
            Err(err) => Err(ChannelError::Transient(format!("SMTP: {err}"))),
        }
    }

    async fn thread_of(&self, conversation: &ConversationRef, reply_to: Option<&str>) -> Thread {
        if let (Some(store), Some(answered)) = (&self.store, reply_to) {
            match store.get_state(STATE_SCOPE, &format!("mail:{answered}")).await {
                Ok(Some(value)) => {
                    if let Ok(thread) = serde_json::from_value::<Thread>(value) {
                        return thread;
                    }
                }
                Ok(None) => {}
                Err(err) => {
                    warn!(error = %err, "could not read the answered mail's thread; replying to the thread's root")
                }
            }
        }
        Thread {
            subject: String::new(),
            message_id: reply_to.map(str::to_owned).or_else(|| conversation.thread.clone()),
            references: conversation.thread.iter().cloned().collect(),
        }
    }
}

#[async_trait]
impl PlatformSender for EmailSender {
    fn channel(&self) -> ChannelName {
        ChannelName::new(CHANNEL)
    }

    /// One mail, however long: its text part is the reply as written.
    fn chunks(&self, text: &str) -> Vec<Chunk> {
        Chunk::verbatim(text, Limit::NONE)
    }

    async fn send_chunk(
        &self,
        conversation: &ConversationRef,
        chunk: &Chunk,
        reply_to: Option<&str>,
        _key: Option<&str>,
    ) -> Result<String, ChannelError> {
        self.send_mail(conversation, &chunk.text, &[], reply_to).await
    }

    /// Every file in the one reply mail, as attachments beside its text.
    fn uploads(&self) -> Option<FileUploads> {
        Some(FileUploads {
            max_file_bytes: self.max_upload_bytes,
            max_files_per_send: usize::MAX,
            with_text: true,
        })
    }

    async fn send_files(
        &self,
        conversation: &ConversationRef,
        text: Option<&str>,
        files: &[OutboundFile],
        reply_to: Option<&str>,
        _key: Option<&str>,
    ) -> Result<String, ChannelError> {
        self.send_mail(conversation, text.unwrap_or_default(), files, reply_to)
            .await
    }
}

impl EmailSender {
    async fn send_mail(
        &self,
        conversation: &ConversationRef,
        text: &str,
        files: &[OutboundFile],
        reply_to: Option<&str>,
    ) -> Result<String, ChannelError> {
        let thread = self.thread_of(conversation, reply_to).await;
        let message_id = render::new_message_id(&self.from);
        let html = (self.format == crate::markdown::Format::Markdown).then(|| crate::markdown::html::render(text));
        let mail = render::reply(&Reply {
            from: &self.from,
            to: &conversation.chat,
            thread: &thread,
            text,
            html: html.as_deref(),
            message_id: &message_id,
            files,
        })?;
        self.transport.send(mail).await.map_err(|err| {
            if err.is_permanent() {
                ChannelError::Fatal(format!("SMTP refused the reply: {err}"))
            } else {
                ChannelError::Transient(format!("SMTP: {err}"))
            }
        })?;
        debug!(to = %conversation.chat, %message_id, "reply sent");
        if let (Some(store), Some(root)) = (&self.store, &conversation.thread) {
            let key = format!("thread:{message_id}");
            if let Err(err) = store.put_state(STATE_SCOPE, &key, &serde_json::json!(root)).await {
                warn!(error = %err, "could not remember the reply's thread; a reply to it may start a new conversation");
            }
        }
        Ok(message_id)
    }
}
