//! The Bot API over HTTP, and the outbound half: one chunk, one
//! `sendMessage`.
//!
//! The request bodies and the objects are [`super::model`]; the requests
//! are sent here, on the workspace's one HTTP client, and the Bot API's
//! envelope is read here. No request is retried here: a server error is
//! reported at once, to the shared outbound path's one retry policy (and
//! the long poll's). Every error leaves here as a
//! [`ChannelError`] with the token scrubbed from its text, because the
//! request URL carries the token.

use std::time::Duration;

use super::config::TelegramConfig;
use super::model::{
    DeleteWebhook, EditMessageText, File, GetFile, GetMe, GetUpdates, GetWebhookInfo, Method, SendChatAction,
    SendMessage, Sent, SetWebhook, Update,
};
use super::payload::{BotIdentity, CHANNEL};
use super::render;
use crate::outbound::{Chunk, FileUploads, PlatformSender};
use async_trait::async_trait;
use herald_core::{ChannelError, ChannelName, ConversationRef, OutboundFile};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

/// The largest file a bot may send through the Bot API (50 MB).
pub const MAX_UPLOAD_BYTES: u64 = 50 * 1024 * 1024;

/// A Bot API client for one bot.
pub struct TelegramApi {
    client: reqwest::Client,
    /// `{api_url}/bot{token}/`, to which method names are appended.
    base: String,
    /// `{api_url}/file/bot{token}/`, to which `getFile`'s paths are appended.
    files: String,
    token: SecretString,
}

/// The Bot API's answer to every method.
#[derive(Deserialize)]
struct Envelope<T> {
    ok: bool,
    result: Option<T>,
    #[serde(default)]
    description: String,
    error_code: Option<u16>,
    parameters: Option<Parameters>,
}

#[derive(Deserialize)]
struct Parameters {
    retry_after: Option<u64>,
    migrate_to_chat_id: Option<i64>,
}

impl TelegramApi {
    pub fn new(config: &TelegramConfig, tls: &herald_net::ClientTls) -> Result<Self, ChannelError> {
        let token = config.token.clone();
        let api_url = url::Url::parse(config.api_url.trim_end_matches('/'))
            .map_err(|err| ChannelError::Fatal(format!("channels.telegram.api_url is not a URL: {err}")))?;
        // The client must outlive the longest long poll.
        let client = tls
            .http()
            .connect_timeout(Duration::from_secs(5))
            .timeout(config.poll_timeout + Duration::from_secs(15))
            .tcp_nodelay(true)
            .build()
            .map_err(|err| ChannelError::Fatal(format!("cannot build the HTTP client: {err}")))?;
        let base = format!(
            "{}/bot{}/",
            api_url.as_str().trim_end_matches('/'),
            token.expose_secret()
        );
        let files = format!(
            "{}/file/bot{}/",
            api_url.as_str().trim_end_matches('/'),
            token.expose_secret()
        );
        Ok(Self {
            client,
            base,
            files,
            token,
        })
    }

    /// `text` with the bot token replaced, fit for logs and errors.
    pub fn redact(&self, text: &str) -> String {
        redact(text, self.token.expose_secret())
    }

    /// Calls `P::NAME` with `payload` as its JSON body.
    async fn call<P: Method>(&self, payload: &P) -> Result<P::Output, ChannelError> {
        let response = self
            .client
            .post(format!("{}{}", self.base, P::NAME))
            .json(payload)
            .send()
            .await
            .map_err(|err| ChannelError::Transient(self.redact(&format!("{}: {err}", P::NAME))))?;
        let status = response.status().as_u16();
        let body = response
            .bytes()
            .await
            .map_err(|err| ChannelError::Transient(self.redact(&format!("{}: {err}", P::NAME))))?;
        let envelope: Envelope<P::Output> = match serde_json::from_slice(&body) {
            Ok(envelope) => envelope,
            Err(_) => {
                return Err(ChannelError::Transient(format!(
                    "{}: HTTP {status}: the Bot API answered something that is not its JSON",
                    P::NAME
                )));
            }
        };
        if envelope.ok
            && let Some(result) = envelope.result
        {
            return Ok(result);
        }
        Err(self.classify(P::NAME, status, envelope))
    }

    /// Sorts a Bot API refusal by what the caller should do about it.
    fn classify<T>(&self, method: &str, status: u16, envelope: Envelope<T>) -> ChannelError {
        let code = envelope.error_code.unwrap_or(status);
        let description = self.redact(&envelope.description);
        let parameters = envelope.parameters.unwrap_or(Parameters {
            retry_after: None,
            migrate_to_chat_id: None,
        });
        if let Some(seconds) = parameters.retry_after {
            return ChannelError::RateLimited {
                retry_after: Duration::from_secs(seconds),
            };
        }
        if let Some(chat) = parameters.migrate_to_chat_id {
            return ChannelError::Fatal(format!(
                "the group became supergroup {chat}; its conversations continue there"
            ));
        }
        match code {
            401 | 404 if method == GetMe::NAME || description == "Unauthorized" || description == "Not Found" => {
                ChannelError::Fatal(format!(
                    "Invalid bot token ({description}); check channels.telegram.token"
                ))
            }
            429 => ChannelError::RateLimited {
                retry_after: Duration::from_secs(1),
            },
            500..=599 => ChannelError::Transient(format!("{method}: {code} {description}")),
            _ if is_server_trouble(&description) => ChannelError::Transient(format!("{method}: {description}")),
            _ => ChannelError::Fatal(format!("{method}: {description}")),
        }
    }

    /// `getFile`: where the file `file_id` names is served, and its size.
    pub async fn file(&self, file_id: &str) -> Result<File, ChannelError> {
        self.call(&GetFile {
            file_id: file_id.to_owned(),
        })
        .await
    }

    /// The request for a path `getFile` named. The URL carries the token:
    /// errors about it go through [`TelegramApi::redact`].
    pub fn download(&self, path: &str) -> reqwest::RequestBuilder {
        self.client.get(format!("{}{path}", self.files))
    }

    /// `getMe`: who the token belongs to.
    pub async fn me(&self) -> Result<BotIdentity, ChannelError> {
        let me = self.call(&GetMe {}).await?;
        Ok(BotIdentity {
            id: me.id,
            username: me.username.unwrap_or_default(),
        })
    }

    /// Removes a webhook left set, which would make `getUpdates` fail with 409.
    /// Pending updates are kept.
    pub async fn ensure_no_webhook(&self) -> Result<(), ChannelError> {
        let info = self.call(&GetWebhookInfo {}).await?;
        if !info.url.is_empty() {
            tracing::info!("a webhook was set; removing it to poll instead");
            self.call(&DeleteWebhook {}).await?;
        }
        Ok(())
    }

    pub async fn set_webhook(
        &self,
        url: &str,
        secret: &SecretString,
        allowed: Vec<&'static str>,
    ) -> Result<(), ChannelError> {
        let url = url::Url::parse(url)
            .map_err(|err| ChannelError::Fatal(format!("channels.telegram.webhook.url is not a URL: {err}")))?;
        self.call(&SetWebhook {
            url: url.to_string(),
            secret_token: secret.expose_secret().to_owned(),
            allowed_updates: allowed,
        })
        .await?;
        Ok(())
    }

    /// One long poll. `offset` confirms every update below it.
    pub async fn updates(
        &self,
        offset: Option<i64>,
        timeout: Duration,
        allowed: Vec<&'static str>,
    ) -> Result<Vec<Update>, ChannelError> {
        self.call(&GetUpdates {
            offset,
            timeout: timeout.as_secs(),
            limit: 100,
            allowed_updates: allowed,
        })
        .await
    }

    async fn send_message(&self, payload: SendMessage) -> Result<Sent, ChannelError> {
        self.call(&payload).await
    }

    /// `sendDocument` with the file uploaded as `document` in a
    /// `multipart/form-data` body, as the Bot API takes new files.
    async fn send_document(&self, fields: Vec<(String, String)>, file: &OutboundFile) -> Result<Sent, ChannelError> {
        let method = "sendDocument";
        let mut form = crate::multipart::Form::new();
        for (name, value) in &fields {
            form = form.text(name, value);
        }
        let form = form.file("document", &file.name, &file.content_type, &file.bytes.0);
        let content_type = form.content_type();
        let response = self
            .client
            .post(format!("{}{method}", self.base))
            .header(reqwest::header::CONTENT_TYPE, content_type)
            .body(form.finish())
            .send()
            .await
            .map_err(|err| ChannelError::Transient(self.redact(&format!("{method}: {err}"))))?;
        let status = response.status().as_u16();
        let body = response
            .bytes()
            .await
            .map_err(|err| ChannelError::Transient(self.redact(&format!("{method}: {err}"))))?;
        let Ok(envelope) = serde_json::from_slice::<Envelope<Sent>>(&body) else {
            return Err(ChannelError::Transient(format!(
                "{method}: HTTP {status}: the Bot API answered something that is not its JSON"
            )));
        };
        if envelope.ok
            && let Some(result) = envelope.result
        {
            return Ok(result);
        }
        Err(self.classify(method, status, envelope))
    }

    async fn edit_message_text(&self, payload: EditMessageText) -> Result<(), ChannelError> {
        self.call(&payload).await.map(|_| ())
    }

    async fn send_chat_action(&self, payload: SendChatAction) -> Result<(), ChannelError> {
        self.call(&payload).await?;
        Ok(())
    }
}

/// Telegram's own 5xx descriptions: worth another try.
fn is_server_trouble(description: &str) -> bool {
    [
        "Internal Server Error",
        "Bad Gateway",
        "Gateway Timeout",
        "Service Unavailable",
        "Too Many Requests",
    ]
    .iter()
    .any(|trouble| description.contains(trouble))
}

pub fn redact(text: &str, token: &str) -> String {
    if token.is_empty() {
        return text.to_owned();
    }
    text.replace(token, "<token>")
}

/// Herald's outbound half for Telegram, wrapped by [`crate::outbound::Delivery`].
pub struct TelegramSender {
    pub api: std::sync::Arc<TelegramApi>,
    /// `channels.telegram.format`.
    pub format: crate::markdown::Format,
}

#[async_trait]
impl PlatformSender for TelegramSender {
    fn channel(&self) -> ChannelName {
        ChannelName::new(CHANNEL)
    }

    fn chunks(&self, text: &str) -> Vec<Chunk> {
        render::chunks(text, self.format)
    }

    /// A chunk Telegram refuses for its HTML goes again as its plain text.
    async fn send_chunk(
        &self,
        conversation: &ConversationRef,
        chunk: &Chunk,
        reply_to: Option<&str>,
        _key: Option<&str>,
    ) -> Result<String, ChannelError> {
        let html = chunk.plain.is_some();
        let payload = render::send_message(conversation, &chunk.text, html, reply_to)?;
        let sent = match (self.api.send_message(payload).await, &chunk.plain) {
            (Err(err), Some(plain)) if render::refused_markup(&err) => {
                tracing::warn!(error = %err, "Telegram refused a chunk's HTML; sending it as plain text");
                metrics::counter!("herald_markup_refused_total", "channel" => CHANNEL).increment(1);
                let payload = render::send_message(conversation, plain, false, reply_to)?;
                self.api.send_message(payload).await?
            }
            (sent, _) => sent?,
        };
        Ok(format!("{}:{}", sent.chat.id, sent.message_id))
    }

    fn edits(&self) -> bool {
        true
    }

    /// As a send: HTML, and its plain text if Telegram refuses the HTML.
    async fn edit_chunk(&self, _: &ConversationRef, message_id: &str, chunk: &Chunk) -> Result<(), ChannelError> {
        let html = chunk.plain.is_some();
        let result = match (
            self.api
                .edit_message_text(render::edit_message(message_id, &chunk.text, html)?)
                .await,
            &chunk.plain,
        ) {
            (Err(err), Some(plain)) if render::refused_markup(&err) => {
                tracing::warn!(error = %err, "Telegram refused an edit's HTML; editing to plain text");
                metrics::counter!("herald_markup_refused_total", "channel" => CHANNEL).increment(1);
                self.api
                    .edit_message_text(render::edit_message(message_id, plain, false)?)
                    .await
            }
            (result, _) => result,
        };
        match result {
            Err(err) if render::not_modified(&err) => Ok(()),
            result => result,
        }
    }

    /// "The status is set for 5 seconds or less" (Bot API, `sendChatAction`).
    async fn typing(&self, conversation: &ConversationRef) -> Result<Option<Duration>, ChannelError> {
        self.api.send_chat_action(render::typing(conversation)?).await?;
        Ok(Some(Duration::from_secs(5)))
    }

    /// One `sendDocument` per file, after the text: a caption holds only
    /// 1024 characters and one document.
    fn uploads(&self) -> Option<FileUploads> {
        Some(FileUploads {
            max_file_bytes: MAX_UPLOAD_BYTES,
            max_files_per_send: 1,
            with_text: false,
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
        let [file] = files else {
            return Err(ChannelError::Fatal("Telegram sends one document per request".into()));
        };
        let fields = render::document_fields(conversation, text, reply_to)?;
        let sent = self.api.send_document(fields, file).await?;
        Ok(format!("{}:{}", sent.chat.id, sent.message_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_never_survives_into_an_error() {
        let token = "7100200300:AAE-secret";
        let text = "error sending request for url (https://api.telegram.org/bot7100200300:AAE-secret/GetUpdates)";
        let clean = redact(text, token);
        assert!(!clean.contains("AAE-secret"), "{clean}");
        assert!(clean.contains("/bot<token>/GetUpdates"));
    }

    #[test]
    fn server_trouble_is_retried_and_refusals_are_not() {
        for (description, transient) in [
            ("Internal Server Error", true),
            ("Bad Gateway", true),
            ("Bad Request: chat not found", false),
            ("Forbidden: bot was blocked by the user", false),
        ] {
            assert_eq!(is_server_trouble(description), transient, "{description}");
        }
    }
}
