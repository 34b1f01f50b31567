//! The inbound half: long polling (the default) or a webhook server.
//!
//! Polling is Herald's own loop over `getUpdates`, so each update is handed
//! to the sink — stored on the queue — before the next `getUpdates` confirms
//! it with a higher offset. The offset is also kept in the store (at most
//! every second, and when polling stops), so a restart resumes where the
//! last process stopped; an update accepted but not yet confirmed or stored
//! comes again and is recognised by its dedup key.
//!
//! A webhook answers Telegram 200 only after the sink accepted the update;
//! any other answer makes Telegram send it again. It runs on Herald's
//! bounded public server ([`herald_net::serve`]) and reads a body only
//! after the request's secret header matched.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::model::{EDITED_MESSAGES, MESSAGES, Update};
use async_trait::async_trait;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use herald_core::{
    ChannelError, ChannelIngress, ChannelName, ConversationStore, InboundMessage, InboundSink, RetryClass, StoreError,
};
use secrecy::{ExposeSecret, SecretString};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::retry::{PERSIST, Retry, hand_over_all, persist};

use super::client::TelegramApi;
use super::config::{TelegramMode, WebhookConfig, generate_webhook_secret};
use super::payload::{
    self, BotIdentity, CHANNEL, Classified, PayloadRules, album_of, album_tail, classify, group_albums,
};

/// Where polling progress is kept in the store's state.
const STATE_SCOPE: &str = "telegram";

/// How often a moving offset is written to the store at most.
const OFFSET_EVERY: Duration = Duration::from_secs(1);

/// How long the rest of an album is waited for: Telegram sends its parts
/// within a moment of each other.
const ALBUM_WAIT: Duration = Duration::from_millis(800);

/// The polling offset, and what of it the store has.
struct KeptOffset {
    key: String,
    /// The next getUpdates' offset: one past the last update accepted.
    offset: Option<i64>,
    stored: Option<i64>,
    stored_at: Option<std::time::Instant>,
}

/// The webhook settings the ingress needs, copied out of the config.
pub struct WebhookSettings {
    pub listen: std::net::SocketAddr,
    pub url: String,
    pub secret: SecretString,
}

impl From<&WebhookConfig> for WebhookSettings {
    fn from(config: &WebhookConfig) -> Self {
        Self {
            listen: config.listen,
            url: config.url.clone(),
            secret: config.secret.clone().unwrap_or_else(generate_webhook_secret),
        }
    }
}

pub struct TelegramIngress {
    pub api: Arc<TelegramApi>,
    /// Where the polling offset is kept; `None` leaves it to Telegram.
    pub store: Option<Arc<dyn ConversationStore>>,
    pub rules: PayloadRules,
    pub mode: TelegramMode,
    pub webhook: Option<WebhookSettings>,
    pub poll_timeout: Duration,
}

impl TelegramIngress {
    fn allowed_updates(&self) -> Vec<&'static str> {
        let mut allowed = vec![MESSAGES];
        if self.rules.handle_edits {
            allowed.push(EDITED_MESSAGES);
        }
        allowed
    }

    async fn stored_offset(&self, key: &str) -> Result<Option<i64>, StoreError> {
        let Some(store) = &self.store else { return Ok(None) };
        Ok(store
            .get_state(STATE_SCOPE, key)
            .await?
            .and_then(|value| value.as_i64()))
    }

    async fn poll(&self, sink: Arc<dyn InboundSink>, shutdown: CancellationToken) -> Result<(), ChannelError> {
        let Some(bot) = persist("getMe", &shutdown, || self.api.me()).await.transpose()? else {
            return Ok(());
        };
        if persist("removing the webhook", &shutdown, || self.api.ensure_no_webhook())
            .await
            .transpose()?
            .is_none()
        {
            return Ok(());
        }
        let key = format!("offset:{}", bot.id);
        let offset = match self.stored_offset(&key).await {
            Ok(offset) => offset,
            Err(err) => {
                warn!(error = %err, "could not read the stored update offset; Telegram's own confirmation state is used");
                None
            }
        };
        info!(bot = %bot.username, ?offset, "polling Telegram for updates");
        // getMe and deleteWebhook answered: the bot is connected until a
        // poll says otherwise.
        sink.connected(&ChannelName::new(CHANNEL), true);
        let mut kept = KeptOffset {
            key,
            offset,
            stored: offset,
            stored_at: None,
        };
        let result = self.poll_updates(&bot, sink, &shutdown, &mut kept).await;
        // What the last polls accepted, kept for the next process.
        self.store_offset(&mut kept, true).await;
        result
    }

    /// The polling loop; `kept` follows the offset it confirms.
    async fn poll_updates(
        &self,
        bot: &BotIdentity,
        sink: Arc<dyn InboundSink>,
        shutdown: &CancellationToken,
        kept: &mut KeptOffset,
    ) -> Result<(), ChannelError> {
        let channel = ChannelName::new(CHANNEL);
        let mut retry = Retry::new(PERSIST);
        // Whether an album at the end of a poll may wait for the next one.
        let mut may_hold_album = true;
        loop {
            let offset = kept.offset;
            let updates = tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                updates = self.api.updates(offset, self.poll_timeout, self.allowed_updates()) => updates,
            };
            sink.connected(&channel, updates.is_ok());
            let err = match updates {
                Ok(updates) => {
                    retry.succeeded();
                    // A poll returns as soon as the first part of an album
                    // arrives: what ends in one waits a moment (unconfirmed,
                    // so the next poll brings it again with the rest).
                    let ready = if may_hold_album {
                        album_tail(&updates)
                    } else {
                        updates.len()
                    };
                    let held = ready < updates.len();
                    may_hold_album = !held;
                    if !self.deliver_all(&updates[..ready], bot, sink.as_ref(), shutdown).await {
                        return Ok(());
                    }
                    if let Some(last) = updates[..ready].last() {
                        kept.offset = i64::try_from(last.update_id + 1).ok();
                        self.store_offset(kept, false).await;
                    }
                    if held {
                        tokio::select! {
                            _ = shutdown.cancelled() => return Ok(()),
                            () = tokio::time::sleep(ALBUM_WAIT) => {}
                        }
                    }
                    continue;
                }
                Err(ChannelError::Fatal(reason)) if reason.contains("Invalid bot token") => {
                    return Err(ChannelError::Fatal(reason));
                }
                // Someone set a webhook since start; polling needs it gone.
                Err(ChannelError::Fatal(reason)) if reason.contains("webhook is active") => {
                    warn!("a webhook was set while polling; removing it");
                    if let Err(err) = self.api.ensure_no_webhook().await {
                        warn!(error = %err, "could not remove the webhook");
                    }
                    ChannelError::Transient(reason)
                }
                Err(err) => err,
            };
            // Any other refusal of a poll is waited out like an outage: the
            // updates stay with Telegram until a poll confirms them.
            let class = match err.retry_class() {
                RetryClass::Fatal => RetryClass::Transient,
                class => class,
            };
            warn!(error = %err, "getUpdates failed; polling again after a pause");
            if !retry.wait(class, shutdown).await {
                return Ok(());
            }
        }
    }

    /// Hands a poll's updates to the sink in order, as one batch, retrying
    /// while the store is unavailable. Returns false when shutdown came
    /// first.
    async fn deliver_all(
        &self,
        updates: &[Update],
        bot: &BotIdentity,
        sink: &dyn InboundSink,
        shutdown: &CancellationToken,
    ) -> bool {
        let mut messages = Vec::with_capacity(updates.len());
        for update in updates {
            match classify(update, bot, &self.rules) {
                Classified::Message(message) => messages.push((album_of(update).map(str::to_owned), *message)),
                Classified::Ignored(reason) => debug!(update = update.update_id, reason, "update ignored"),
            }
        }
        let messages = group_albums(messages);
        if messages.is_empty() {
            return true;
        }
        let Some(admissions) = hand_over_all(sink, &messages, shutdown).await else {
            return false;
        };
        for (message, admission) in messages.iter().zip(admissions) {
            debug!(message = %message.platform_message_id, ?admission, "update accepted");
        }
        true
    }

    /// Stores the offset when it moved, at most every [`OFFSET_EVERY`]
    /// unless `now`: a write per poll would be a store round trip per
    /// message at a light load. The next getUpdates confirms the updates
    /// with Telegram anyway; a process killed before its write comes back
    /// to at most that long of updates, which the queue drops as
    /// duplicates.
    async fn store_offset(&self, kept: &mut KeptOffset, now: bool) {
        let Some(store) = &self.store else { return };
        let Some(next) = kept.offset.filter(|next| kept.stored != Some(*next)) else {
            return;
        };
        if !now && kept.stored_at.is_some_and(|at| at.elapsed() < OFFSET_EVERY) {
            return;
        }
        kept.stored_at = Some(std::time::Instant::now());
        match store.put_state(STATE_SCOPE, &kept.key, &serde_json::json!(next)).await {
            Ok(()) => kept.stored = Some(next),
            Err(err) => warn!(error = %err, "could not store the update offset"),
        }
    }

    async fn serve_webhook(&self, sink: Arc<dyn InboundSink>, shutdown: CancellationToken) -> Result<(), ChannelError> {
        let settings = self
            .webhook
            .as_ref()
            .ok_or_else(|| ChannelError::Fatal("channels.telegram.webhook is not configured".into()))?;
        let path = url::Url::parse(&settings.url)
            .map(|url| url.path().to_owned())
            .map_err(|err| ChannelError::Fatal(format!("channels.telegram.webhook.url is not a URL: {err}")))?;
        let Some(bot) = persist("getMe", &shutdown, || self.api.me()).await.transpose()? else {
            return Ok(());
        };
        let listener = tokio::net::TcpListener::bind(settings.listen).await.map_err(|err| {
            ChannelError::Fatal(format!(
                "cannot listen on channels.telegram.webhook.listen = {}: {err}",
                settings.listen
            ))
        })?;
        let registered = persist("setWebhook", &shutdown, || {
            self.api
                .set_webhook(&settings.url, &settings.secret, self.allowed_updates())
        })
        .await
        .transpose()?;
        if registered.is_none() {
            return Ok(());
        }
        info!(bot = %bot.username, listen = %settings.listen, path = %path, "receiving Telegram updates by webhook");
        sink.connected(&ChannelName::new(CHANNEL), true);
        let state = Arc::new(WebhookState {
            sink,
            bot,
            rules: self.rules.clone(),
            secret: settings.secret.clone(),
            albums: Mutex::new(HashMap::new()),
        });
        let app = axum::Router::new()
            .route(&path, axum::routing::post(receive))
            .with_state(state);
        herald_net::serve(listener, app, herald_net::PublicLimits::WEBHOOK, shutdown)
            .await
            .map_err(|err| ChannelError::Transient(format!("the webhook server stopped: {err}")))
    }
}

struct WebhookState {
    sink: Arc<dyn InboundSink>,
    bot: BotIdentity,
    rules: PayloadRules,
    secret: SecretString,
    /// Albums whose parts are being gathered, by conversation and group.
    albums: Mutex<HashMap<String, Arc<Album>>>,
}

/// An album's parts as their requests arrive: the first request starts a
/// task that gathers them for [`ALBUM_WAIT`] and stores them as one
/// message; every part's request is answered as the album was stored. The
/// task is spawned, so a request dropped halfway strands no other part.
struct Album {
    parts: Mutex<Vec<InboundMessage>>,
    stored: tokio::sync::watch::Sender<Option<bool>>,
}

impl WebhookState {
    /// Hands the part `message` of album `group` over with the rest of it;
    /// whether the album was stored.
    async fn accept_album_part(self: &Arc<Self>, group: &str, message: InboundMessage) -> bool {
        let key = payload::album_key(&message, group);
        let (album, first) = {
            let mut albums = self.albums.lock().expect("albums lock");
            match albums.get(&key) {
                Some(album) => (Arc::clone(album), false),
                None => {
                    let album = Arc::new(Album {
                        parts: Mutex::new(Vec::new()),
                        stored: tokio::sync::watch::channel(None).0,
                    });
                    albums.insert(key.clone(), Arc::clone(&album));
                    (album, true)
                }
            }
        };
        album.parts.lock().expect("album lock").push(message);
        let mut stored = album.stored.subscribe();
        if first {
            let state = Arc::clone(self);
            let group = group.to_owned();
            tokio::spawn(async move { state.store_album(&key, &group, &album).await });
        }
        match stored.wait_for(Option::is_some).await {
            Ok(outcome) => outcome.unwrap_or(false),
            Err(_) => false,
        }
    }

    /// Waits for the rest of `album`, then stores it as one message.
    async fn store_album(&self, key: &str, group: &str, album: &Album) {
        tokio::time::sleep(ALBUM_WAIT).await;
        // A part later than this starts an album of its own.
        self.albums.lock().expect("albums lock").remove(key);
        let parts = std::mem::take(&mut *album.parts.lock().expect("album lock"));
        let parts = parts.into_iter().map(|part| (Some(group.to_owned()), part)).collect();
        let ok = match group_albums(parts).pop() {
            Some(message) => match self.sink.accept(message).await {
                Ok(_) => true,
                Err(err) => {
                    warn!(error = %err, "could not store an album; Telegram will send its parts again");
                    false
                }
            },
            None => true,
        };
        album.stored.send_replace(Some(ok));
    }
}

/// Compares without stopping at the first difference, so the time taken
/// says nothing about how much of a guess was right.
fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    given.len() == expected.len() && given.iter().zip(expected).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// One pushed update. The secret header is checked before a byte of the
/// body is read, so a stranger's request costs its headers.
async fn receive(State(state): State<Arc<WebhookState>>, request: Request) -> StatusCode {
    let (parts, body) = request.into_parts();
    let given = parts
        .headers
        .get("x-telegram-bot-api-secret-token")
        .map(|value| value.as_bytes())
        .unwrap_or_default();
    if !same_secret(given, state.secret.expose_secret().as_bytes()) {
        warn!("webhook request without the right secret token refused");
        return StatusCode::UNAUTHORIZED;
    }
    let body = match herald_net::read_body(&parts.extensions, body).await {
        Ok(body) => body,
        Err(err) => {
            warn!(error = %err, "webhook body not read");
            return err.status();
        }
    };
    let update: Update = match serde_json::from_slice(&body) {
        Ok(update) => update,
        Err(err) => {
            warn!(error = %err, "webhook body is not a Telegram update");
            return StatusCode::BAD_REQUEST;
        }
    };
    match classify(&update, &state.bot, &state.rules) {
        Classified::Ignored(reason) => {
            debug!(update = update.update_id, reason, "update ignored");
            StatusCode::OK
        }
        Classified::Message(message) if let Some(group) = album_of(&update) => {
            if state.accept_album_part(group, *message).await {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            }
        }
        Classified::Message(message) => match state.sink.accept(*message).await {
            Ok(_) => StatusCode::OK,
            Err(err) => {
                // Telegram sends the update again after a non-2xx answer.
                warn!(error = %err, "could not store an incoming message; Telegram will send it again");
                StatusCode::SERVICE_UNAVAILABLE
            }
        },
    }
}

#[async_trait]
impl ChannelIngress for TelegramIngress {
    fn channel(&self) -> ChannelName {
        ChannelName::new(CHANNEL)
    }

    async fn run(&self, sink: Arc<dyn InboundSink>, shutdown: CancellationToken) -> Result<(), ChannelError> {
        match self.mode {
            TelegramMode::Polling => self.poll(sink, shutdown).await,
            TelegramMode::Webhook => self.serve_webhook(sink, shutdown).await,
        }
    }

    /// Telegram answers a second concurrent `getUpdates` with 409 Conflict;
    /// webhooks may be served by every process behind a load balancer.
    fn exclusive(&self) -> bool {
        matches!(self.mode, TelegramMode::Polling)
    }

    async fn probe(&self) -> Result<String, ChannelError> {
        let bot = self.api.me().await?;
        Ok(format!("@{} (id {})", bot.username, bot.id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_whole() {
        for (given, expected, same) in [
            ("s3cret", "s3cret", true),
            ("s3cres", "s3cret", false),
            ("s3cre", "s3cret", false),
            ("", "s3cret", false),
        ] {
            assert_eq!(same_secret(given.as_bytes(), expected.as_bytes()), same, "{given}");
        }
    }
}
