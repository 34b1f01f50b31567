//! The Bot API over HTTP (teloxide's `Bot`), and the outbound half: one
//! chunk, one `sendMessage`. Every error leaves here as a [`ChannelError`]
//! with the token scrubbed from its text, because reqwest puts the request
//! URL — which carries the token — into its messages.

use std::time::Duration;

use async_trait::async_trait;
use herald_core::{ChannelError, ChannelName, ConversationRef};
use secrecy::{ExposeSecret, SecretString};
use teloxide::requests::{HasPayload, JsonRequest, Request, Requester};
use teloxide::types::{AllowedUpdate, Message, Update};
use teloxide::{ApiError, Bot, RequestError};

use super::config::TelegramConfig;
use super::payload::{BotIdentity, CHANNEL};
use super::render;
use crate::chunk::Limit;
use crate::outbound::PlatformSender;

/// A Bot API client for one bot.
pub struct TelegramApi {
    bot: Bot,
    token: SecretString,
}

impl TelegramApi {
    pub fn new(config: &TelegramConfig) -> Result<Self, ChannelError> {
        let token = config.token.clone();
        let base = url::Url::parse(config.api_url.trim_end_matches('/'))
            .map_err(|err| ChannelError::Fatal(format!("channels.telegram.api_url is not a URL: {err}")))?;
        // The client must outlive the longest long poll.
        let client = teloxide::net::default_reqwest_settings()
            .timeout(config.poll_timeout + Duration::from_secs(15))
            .build()
            .map_err(|err| ChannelError::Fatal(format!("cannot build the HTTP client: {err}")))?;
        let bot = Bot::with_client(token.expose_secret(), client).set_api_url(base);
        Ok(Self { bot, token })
    }

    /// `text` with the bot token replaced, fit for logs and errors.
    pub fn redact(&self, text: &str) -> String {
        redact(text, self.token.expose_secret())
    }

    /// Sorts a Bot API failure by what the caller should do about it.
    pub fn classify(&self, err: RequestError) -> ChannelError {
        match err {
            RequestError::RetryAfter(seconds) => ChannelError::RateLimited {
                retry_after: seconds.duration(),
            },
            RequestError::Network(err) => ChannelError::Transient(self.redact(&err.to_string())),
            RequestError::Io(err) => ChannelError::Transient(self.redact(&err.to_string())),
            RequestError::InvalidJson { .. } => {
                ChannelError::Transient("the Bot API answered something that is not its JSON".into())
            }
            RequestError::MigrateToChatId(chat) => ChannelError::Fatal(format!(
                "the group became supergroup {}; its conversations continue there",
                chat.0
            )),
            RequestError::Api(ApiError::Unknown(text)) if is_server_trouble(&text) => {
                ChannelError::Transient(self.redact(&text))
            }
            RequestError::Api(err) => ChannelError::Fatal(self.redact(&err.to_string())),
        }
    }

    /// `getMe`: who the token belongs to.
    pub async fn me(&self) -> Result<BotIdentity, ChannelError> {
        let me = self.bot.get_me().await.map_err(|e| self.classify(e))?;
        Ok(BotIdentity {
            id: me.user.id.0,
            username: me.user.username.clone().unwrap_or_default(),
        })
    }

    /// Removes a webhook left set, which would make `getUpdates` fail with 409.
    /// Pending updates are kept.
    pub async fn ensure_no_webhook(&self) -> Result<(), ChannelError> {
        let info = self.bot.get_webhook_info().await.map_err(|e| self.classify(e))?;
        if info.url.is_some() {
            tracing::info!("a webhook was set; removing it to poll instead");
            self.bot.delete_webhook().await.map_err(|e| self.classify(e))?;
        }
        Ok(())
    }

    pub async fn set_webhook(
        &self,
        url: &str,
        secret: &SecretString,
        allowed: Vec<AllowedUpdate>,
    ) -> Result<(), ChannelError> {
        let url = url::Url::parse(url)
            .map_err(|err| ChannelError::Fatal(format!("channels.telegram.webhook.url is not a URL: {err}")))?;
        let mut request = self.bot.set_webhook(url);
        request.payload_mut().secret_token = Some(secret.expose_secret().to_owned());
        request.payload_mut().allowed_updates = Some(allowed);
        request.send().await.map_err(|e| self.classify(e))?;
        Ok(())
    }

    /// One long poll. `offset` confirms every update below it.
    pub async fn updates(
        &self,
        offset: Option<i32>,
        timeout: Duration,
        allowed: Vec<AllowedUpdate>,
    ) -> Result<Vec<Update>, ChannelError> {
        let mut request = self.bot.get_updates();
        request.payload_mut().offset = offset;
        request.payload_mut().timeout = Some(timeout.as_secs() as u32);
        request.payload_mut().limit = Some(100);
        request.payload_mut().allowed_updates = Some(allowed);
        request.send().await.map_err(|e| self.classify(e))
    }

    async fn send_message(&self, payload: teloxide::payloads::SendMessage) -> Result<Message, ChannelError> {
        JsonRequest::new(self.bot.clone(), payload)
            .send()
            .await
            .map_err(|e| self.classify(e))
    }

    async fn send_chat_action(&self, payload: teloxide::payloads::SendChatAction) -> Result<(), ChannelError> {
        JsonRequest::new(self.bot.clone(), payload)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| self.classify(e))
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
}

#[async_trait]
impl PlatformSender for TelegramSender {
    fn channel(&self) -> ChannelName {
        ChannelName::new(CHANNEL)
    }

    fn limit(&self) -> Limit {
        Limit::TELEGRAM
    }

    async fn send_chunk(
        &self,
        conversation: &ConversationRef,
        text: &str,
        reply_to: Option<&str>,
    ) -> Result<String, ChannelError> {
        let payload = render::send_message(conversation, text, reply_to)?;
        let sent = self.api.send_message(payload).await?;
        Ok(format!("{}:{}", sent.chat.id.0, sent.id.0))
    }

    async fn typing(&self, conversation: &ConversationRef) -> Result<(), ChannelError> {
        self.api.send_chat_action(render::typing(conversation)?).await
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
