//! The Discord adapter's REST calls, and the outbound half.
//!
//! Herald calls five REST routes (the bot user, the gateway with the
//! bot's session-start budget, a channel,
//! create message, trigger typing), each built here on the workspace's one
//! HTTP client: API v10 under `api_url`, `Authorization: Bot …` and the
//! `DiscordBot (url, version)` user agent Discord requires. Every answer's
//! rate-limit headers and 429 body are read here ([`super::ratelimit`]), so
//! a 429 is waited out by the shared outbound path, never retried out of
//! sight.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use herald_core::{ChannelError, ChannelName, ConversationRef, OutboundFile};
use herald_net::ClientTls;
use reqwest::Method;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue, USER_AGENT};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use tracing::debug;

use super::config::DiscordConfig;
use super::gateway::start::GatewayBot;
use super::model::{ChannelObject, id_from_string};
use super::payload::{CHANNEL, Place};
use super::ratelimit::{RouteLimits, observe, too_many_requests};
use super::render;
use crate::outbound::{Chunk, FileUploads, PlatformSender};

/// The bot as `GET /users/@me` describes it.
#[derive(Clone, Debug, Deserialize)]
pub struct BotUser {
    #[serde(deserialize_with = "id_from_string")]
    pub id: u64,
    pub username: String,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    message: String,
    #[serde(default)]
    code: i64,
}

/// The user agent Discord asks every bot to send:
/// `DiscordBot ($url, $versionNumber)`.
const BOT_USER_AGENT: &str = concat!(
    "DiscordBot (https://github.com/herald-gateway/herald, ",
    env!("CARGO_PKG_VERSION"),
    ")"
);

fn channel_id(id: u64) -> Result<u64, ChannelError> {
    (id != 0)
        .then_some(id)
        .ok_or_else(|| ChannelError::Fatal("channel id 0 is not a Discord channel".into()))
}

/// One REST request: its method, its path under `/api/v10`, and its body
/// with the body's `Content-Type`.
struct Request {
    method: Method,
    path: String,
    body: Option<(Vec<u8>, String)>,
}

impl Request {
    fn get(path: impl Into<String>) -> Self {
        Self {
            method: Method::GET,
            path: path.into(),
            body: None,
        }
    }

    fn post(path: impl Into<String>, body: Option<(Vec<u8>, String)>) -> Self {
        Self {
            method: Method::POST,
            path: path.into(),
            body,
        }
    }

    fn patch(path: impl Into<String>, body: Option<(Vec<u8>, String)>) -> Self {
        Self {
            method: Method::PATCH,
            path: path.into(),
            body,
        }
    }
}

/// Discord's REST API for one bot, with Herald's rate-limit buckets.
pub struct DiscordApi {
    client: reqwest::Client,
    /// `Bot <token>`, as the `Authorization` header carries it.
    pub(super) authorization: SecretString,
    pub(super) api_base: String,
    limits: RouteLimits,
}

impl DiscordApi {
    pub fn new(config: &DiscordConfig, tls: &ClientTls) -> Result<Self, ChannelError> {
        let client = tls
            .http()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|err| ChannelError::Fatal(format!("could not build the Discord HTTP client: {err}")))?;
        Ok(Self {
            client,
            authorization: SecretString::from(format!("Bot {}", config.bare_token().expose_secret())),
            api_base: config.api_base().to_owned(),
            limits: RouteLimits::default(),
        })
    }

    /// One request on the bucket `route` (method, path and channel).
    async fn call(&self, route: &str, request: Request) -> Result<Vec<u8>, ChannelError> {
        let mut bucket = self.limits.acquire(route).await;
        let authorization = HeaderValue::from_str(self.authorization.expose_secret())
            .map_err(|_| ChannelError::Fatal("channels.discord.token is not a valid header value".into()))?;
        let mut builder = self
            .client
            .request(request.method, format!("{}/api/v10{}", self.api_base, request.path))
            .header(AUTHORIZATION, authorization)
            .header(USER_AGENT, BOT_USER_AGENT);
        if let Some((body, content_type)) = request.body {
            builder = builder.header(CONTENT_TYPE, content_type).body(body);
        }
        let response = builder
            .send()
            .await
            .map_err(|err| ChannelError::Transient(format!("{route}: {err}")))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response
            .bytes()
            .await
            .map_err(|err| ChannelError::Transient(format!("{route}: reading the answer: {err}")))?;
        let now = tokio::time::Instant::now();
        bucket.update(&observe(&headers), now);
        if (200..300).contains(&status) {
            return Ok(body.to_vec());
        }
        if status == 429 {
            let limited = too_many_requests(&headers, &body);
            bucket.block(limited.retry_after, now);
            if limited.global {
                self.limits.block_global(limited.retry_after);
            }
            debug!(route, retry_after = ?limited.retry_after, global = limited.global, "discord rate limited a request");
            return Err(ChannelError::RateLimited {
                retry_after: limited.retry_after,
            });
        }
        let error: Option<ErrorBody> = serde_json::from_slice(&body).ok();
        let reason = error.map_or_else(
            || format!("{route}: HTTP {status}"),
            |e| format!("{route}: HTTP {status}: {} (code {})", e.message, e.code),
        );
        Err(match status {
            401 => ChannelError::Fatal(format!("{reason}; check channels.discord.token")),
            403 => ChannelError::Fatal(format!("{reason}; the bot lacks a permission in this channel")),
            408 | 500..=599 => ChannelError::Transient(reason),
            _ => ChannelError::Fatal(reason),
        })
    }

    fn parse<T: serde::de::DeserializeOwned>(route: &str, body: &[u8]) -> Result<T, ChannelError> {
        serde_json::from_slice(body)
            .map_err(|err| ChannelError::Transient(format!("{route}: unexpected answer: {err}")))
    }

    pub async fn current_user(&self) -> Result<BotUser, ChannelError> {
        let route = "GET /users/@me";
        let body = self.call(route, Request::get("/users/@me")).await?;
        Self::parse(route, &body)
    }

    /// `GET /gateway/bot`: the gateway URL (without a query string: the
    /// reader adds its own), the shard count Discord recommends and the
    /// session-start budget.
    pub async fn gateway_bot(&self) -> Result<GatewayBot, ChannelError> {
        let route = "GET /gateway/bot";
        let body = self.call(route, Request::get("/gateway/bot")).await?;
        let mut gateway: GatewayBot = Self::parse(route, &body)?;
        gateway.url = gateway.url.split('?').next().unwrap_or_default().to_owned();
        if !(gateway.url.starts_with("wss://") || gateway.url.starts_with("ws://")) {
            return Err(ChannelError::Fatal(format!(
                "{route}: `{}` is not a websocket URL",
                gateway.url
            )));
        }
        Ok(gateway)
    }

    pub async fn place(&self, channel: u64) -> Result<Place, ChannelError> {
        let route = format!("GET /channels/{channel}");
        let body = self
            .call(&route, Request::get(format!("/channels/{}", channel_id(channel)?)))
            .await?;
        Ok(Self::parse::<ChannelObject>(&route, &body)?.place())
    }

    /// Posts one message; returns its id.
    pub async fn create_message(&self, channel: u64, body: &serde_json::Value) -> Result<String, ChannelError> {
        #[derive(Deserialize)]
        struct Created {
            id: String,
        }
        let route = format!("POST /channels/{channel}/messages");
        let request = Request::post(
            format!("/channels/{}/messages", channel_id(channel)?),
            Some((body.to_string().into_bytes(), "application/json".to_owned())),
        );
        let answer = self.call(&route, request).await?;
        Ok(Self::parse::<Created>(&route, &answer)?.id)
    }

    /// Edits the bot's message `message` in `channel` (Edit Message). Its
    /// bucket is per channel, as for creating messages.
    pub async fn edit_message(
        &self,
        channel: u64,
        message: &str,
        body: &serde_json::Value,
    ) -> Result<(), ChannelError> {
        let message: u64 = message
            .parse()
            .map_err(|_| ChannelError::Fatal(format!("`{message}` is not a Discord message id")))?;
        let route = format!("PATCH /channels/{channel}/messages");
        let request = Request::patch(
            format!("/channels/{}/messages/{message}", channel_id(channel)?),
            Some((body.to_string().into_bytes(), "application/json".to_owned())),
        );
        self.call(&route, request).await.map(|_| ())
    }

    /// Posts one message with files: a `multipart/form-data` body with the
    /// message as `payload_json` (naming each file in `attachments`) and the
    /// files as `files[n]`, as Discord's API takes uploads.
    pub async fn create_message_with_files(
        &self,
        channel: u64,
        body: &serde_json::Value,
        files: &[OutboundFile],
    ) -> Result<String, ChannelError> {
        #[derive(Deserialize)]
        struct Created {
            id: String,
        }
        let route = format!("POST /channels/{channel}/messages");
        let mut form =
            crate::multipart::Form::new().text("payload_json", &render::with_attachments(body, files).to_string());
        for (index, file) in files.iter().enumerate() {
            form = form.file(
                &format!("files[{index}]"),
                &file.name,
                &file.content_type,
                &file.bytes.0,
            );
        }
        let content_type = form.content_type();
        let request = Request::post(
            format!("/channels/{}/messages", channel_id(channel)?),
            Some((form.finish(), content_type)),
        );
        let answer = self.call(&route, request).await?;
        Ok(Self::parse::<Created>(&route, &answer)?.id)
    }

    pub async fn typing(&self, channel: u64) -> Result<(), ChannelError> {
        let route = format!("POST /channels/{channel}/typing");
        let request = Request::post(format!("/channels/{}/typing", channel_id(channel)?), None);
        self.call(&route, request).await.map(drop)
    }
}

/// Sends chunks for [`crate::outbound::Delivery`].
pub struct DiscordSender {
    pub(super) api: Arc<DiscordApi>,
    /// `channels.discord.max_upload_bytes`.
    pub(super) max_upload_bytes: u64,
    /// `channels.discord.format`.
    pub(super) format: crate::markdown::Format,
}

#[async_trait]
impl PlatformSender for DiscordSender {
    fn channel(&self) -> ChannelName {
        ChannelName::new(CHANNEL)
    }

    fn chunks(&self, text: &str) -> Vec<Chunk> {
        render::chunks(text, self.format)
    }

    async fn send_chunk(
        &self,
        conversation: &ConversationRef,
        chunk: &Chunk,
        reply_to: Option<&str>,
        key: Option<&str>,
    ) -> Result<String, ChannelError> {
        let channel = render::target_channel(conversation)?;
        self.api
            .create_message(channel, &render::message_body(&chunk.text, reply_to, key))
            .await
    }

    fn edits(&self) -> bool {
        true
    }

    async fn edit_chunk(
        &self,
        conversation: &ConversationRef,
        message_id: &str,
        chunk: &Chunk,
    ) -> Result<(), ChannelError> {
        let channel = render::target_channel(conversation)?;
        self.api
            .edit_message(channel, message_id, &render::edit_body(&chunk.text))
            .await
    }

    /// Discord's typing indicator expires after 10 seconds (Trigger Typing
    /// Indicator) or when the bot's message arrives.
    async fn typing(&self, conversation: &ConversationRef) -> Result<Option<Duration>, ChannelError> {
        self.api.typing(render::target_channel(conversation)?).await?;
        Ok(Some(Duration::from_secs(10)))
    }

    /// Up to ten files in one message, with the reply's last chunk as its
    /// content.
    fn uploads(&self) -> Option<FileUploads> {
        Some(FileUploads {
            max_file_bytes: self.max_upload_bytes,
            max_files_per_send: 10,
            with_text: true,
        })
    }

    async fn send_files(
        &self,
        conversation: &ConversationRef,
        text: Option<&str>,
        files: &[OutboundFile],
        reply_to: Option<&str>,
        key: Option<&str>,
    ) -> Result<String, ChannelError> {
        let channel = render::target_channel(conversation)?;
        self.api
            .create_message_with_files(
                channel,
                &render::message_body(text.unwrap_or_default(), reply_to, key),
                files,
            )
            .await
    }
}
