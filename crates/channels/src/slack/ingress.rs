//! Receiving events from Slack, by Socket Mode or as the Events API
//! endpoint.
//!
//! Events are handed to the sink before they are acknowledged (the Socket
//! Mode ack is sent once the queue holds them, see [`super::socket`]; the
//! Events API answer is the HTTP response). The sink only stores the message
//! on the queue, so the ack goes out well within Slack's three seconds; the
//! work happens later.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use herald_core::channel::ChannelIngress;
use herald_core::{Admission, ChannelError, ChannelName, Clock, InboundMessage, InboundSink, StoreError};
use secrecy::{ExposeSecret, SecretString};
use slack_morphism::SlackApiToken;
use slack_morphism::events::{SlackPushEvent, SlackPushEventCallback};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::client::{SlackApi, token};
use super::config::{SlackConfig, SlackMode};
use super::payload::{self, Addressing, BotIdentity};
use super::socket::SocketMode;
use super::{CHANNEL, signature};
use crate::retry::persist;

/// How long the names of a batch's new senders are waited for before the
/// batch is stored and acknowledged without them.
const NAME_WAIT: std::time::Duration = std::time::Duration::from_millis(300);

/// Dedup keys accepted lately, so a retried or doubled event (the
/// `app_mention` beside its `message`) is not handed over twice.
struct Recent {
    order: VecDeque<String>,
    keys: HashSet<String>,
}

const RECENT_KEYS: usize = 4096;

impl Recent {
    fn contains(&self, key: &str) -> bool {
        self.keys.contains(key)
    }

    fn insert(&mut self, key: String) {
        if self.keys.insert(key.clone()) {
            self.order.push_back(key);
        }
        while self.order.len() > RECENT_KEYS {
            if let Some(old) = self.order.pop_front() {
                self.keys.remove(&old);
            }
        }
    }
}

/// Turns events into messages for the sink.
pub(super) struct Handler {
    api: Arc<SlackApi>,
    pub(super) sink: Arc<dyn InboundSink>,
    bot: BotIdentity,
    addressing: Addressing,
    clock: Arc<dyn Clock>,
    recent: Mutex<Recent>,
}

/// An event turned into a message, not yet handed to the sink.
pub(super) struct Prepared {
    pub(super) key: String,
    pub(super) message: InboundMessage,
}

impl Prepared {
    /// The Slack user id of the sender.
    pub(super) fn user(&self) -> &str {
        self.message.sender.id.as_str().trim_start_matches("slack:")
    }
}

impl Handler {
    /// The message in `callback` for the sink, its sender not yet named, or
    /// `None` when there is none (not a message, not for Herald) or it was
    /// accepted lately.
    pub(super) fn screen(&self, callback: &SlackPushEventCallback) -> Option<Prepared> {
        let event_id = &callback.event_id.0;
        let Some(message) = payload::inbound(callback, &self.bot, &self.addressing, self.clock.now()) else {
            debug!(event = %event_id, "not a message for Herald");
            return None;
        };
        let key = message.dedup_key();
        if self.was_accepted(&key) {
            debug!(event = %event_id, "already accepted");
            return None;
        }
        Some(Prepared { key, message })
    }

    /// Names the senders of `prepared`. Unknown senders are looked up in
    /// the background; their names are waited for [`NAME_WAIT`] at most
    /// (so a new sender is usually named in their first message), then
    /// a sender still unknown is named by user id for this message: a burst
    /// of new senders never holds the acknowledgement past Slack's three
    /// seconds.
    pub(super) async fn name_senders(&self, prepared: &mut [Prepared]) {
        let senders = prepared.iter().map(|message| message.user().to_owned());
        if let Some(lookups) = self.api.learn_names(senders.collect::<Vec<_>>()) {
            // On time out the lookups go on, detached, for later messages.
            let _ = tokio::time::timeout(NAME_WAIT, lookups).await;
        }
        for message in prepared.iter_mut() {
            let user = message.user().to_owned();
            message.message.sender.display_name = self.api.known_name(&user).unwrap_or(user);
        }
    }

    pub(super) fn was_accepted(&self, key: &str) -> bool {
        self.recent.lock().expect("recent lock").contains(key)
    }

    /// Remembers what the sink took. An ignored event is not remembered: its
    /// twin may be addressed to Herald (an `app_mention` after a `message`).
    pub(super) fn accepted(&self, key: &str, message: &InboundMessage, admission: &Admission) {
        debug!(conversation = %message.conversation.id, ?admission, "slack event accepted");
        if !matches!(admission, Admission::Ignored) {
            self.recent.lock().expect("recent lock").insert(key.to_owned());
        }
    }

    /// One Events API request's event, handed to the sink.
    async fn handle(&self, callback: SlackPushEventCallback) -> Result<(), StoreError> {
        let Some(prepared) = self.screen(&callback) else {
            return Ok(());
        };
        let mut prepared = [prepared];
        self.name_senders(&mut prepared).await;
        let [Prepared { key, message }] = prepared;
        match self.sink.accept(message.clone()).await {
            Ok(admission) => {
                self.accepted(&key, &message, &admission);
                Ok(())
            }
            Err(err) => {
                warn!(error = %err, event = %callback.event_id.0, "could not store a Slack event; Slack will send it again");
                Err(err)
            }
        }
    }
}

/// Receives from Slack by Socket Mode or as the Events API endpoint.
pub struct SlackIngress {
    api: Arc<SlackApi>,
    mode: SlackMode,
    app_token: Option<SlackApiToken>,
    signing_secret: Option<SecretString>,
    listen: std::net::SocketAddr,
    events_path: String,
    connections: u32,
    addressing: Addressing,
    clock: Arc<dyn Clock>,
}

impl SlackIngress {
    pub fn new(config: &SlackConfig, api: Arc<SlackApi>, clock: Arc<dyn Clock>) -> Self {
        Self {
            api,
            mode: config.mode,
            app_token: config.app_token.as_ref().map(token),
            signing_secret: config.signing_secret.clone(),
            listen: config.listen,
            events_path: config.events_path.clone(),
            connections: config.socket_connections,
            addressing: Addressing {
                respond_in: config.respond_in.clone(),
            },
            clock,
        }
    }

    /// `auth.test` until it answers: a wrong token stops here, an outage waits.
    async fn identity(&self, shutdown: &CancellationToken) -> Result<Option<BotIdentity>, ChannelError> {
        let Some((identity, description)) = persist("Slack auth.test", shutdown, || self.api.identity())
            .await
            .transpose()?
        else {
            return Ok(None);
        };
        info!(bot = %description, "connected to Slack");
        Ok(Some(identity))
    }

    async fn run_socket_mode(&self, handler: Arc<Handler>, shutdown: CancellationToken) -> Result<(), ChannelError> {
        let app_token = self
            .app_token
            .clone()
            .ok_or_else(|| ChannelError::Fatal("socket mode needs channels.slack.app_token".into()))?;
        info!(connections = self.connections, "receiving Slack events by Socket Mode");
        SocketMode::new(self.api.clone(), app_token, handler)
            .run(self.connections, &shutdown)
            .await
    }

    async fn run_events_api(&self, handler: Arc<Handler>, shutdown: CancellationToken) -> Result<(), ChannelError> {
        let secret = self
            .signing_secret
            .clone()
            .ok_or_else(|| ChannelError::Fatal("events mode needs channels.slack.signing_secret".into()))?;
        let listener = tokio::net::TcpListener::bind(self.listen)
            .await
            .map_err(|err| ChannelError::Fatal(format!("cannot listen on {}: {err}", self.listen)))?;
        handler.sink.connected(&ChannelName::new(CHANNEL), true);
        let state = Arc::new(Endpoint { handler, secret });
        let app = Router::new()
            .route(&self.events_path, post(events_endpoint))
            .with_state(state);
        info!(listen = %self.listen, path = %self.events_path, "receiving Slack events by the Events API");
        herald_net::serve(listener, app, herald_net::PublicLimits::WEBHOOK, shutdown)
            .await
            .map_err(|err| ChannelError::Transient(format!("events endpoint stopped: {err}")))
    }
}

#[async_trait]
impl ChannelIngress for SlackIngress {
    fn channel(&self) -> ChannelName {
        ChannelName::new(CHANNEL)
    }

    async fn run(&self, sink: Arc<dyn InboundSink>, shutdown: CancellationToken) -> Result<(), ChannelError> {
        let Some(bot) = self.identity(&shutdown).await? else {
            return Ok(());
        };
        let handler = Arc::new(Handler {
            api: self.api.clone(),
            sink,
            bot,
            addressing: self.addressing.clone(),
            clock: self.clock.clone(),
            recent: Mutex::new(Recent {
                order: VecDeque::new(),
                keys: HashSet::new(),
            }),
        });
        match self.mode {
            SlackMode::Socket => self.run_socket_mode(handler, shutdown).await,
            SlackMode::Events => self.run_events_api(handler, shutdown).await,
        }
    }

    /// Slack spreads events over every open Socket Mode connection (and an
    /// Events API endpoint may sit behind a load balancer); redeliveries are
    /// recognised by the queue's dedup key, so every process may receive.
    fn exclusive(&self) -> bool {
        false
    }

    async fn probe(&self) -> Result<String, ChannelError> {
        let (_, description) = self.api.identity().await?;
        if let (SlackMode::Socket, Some(app_token)) = (self.mode, &self.app_token) {
            self.api
                .open_connection(app_token)
                .await
                .map_err(|err| ChannelError::Fatal(format!("app_token: {err}")))?;
            return Ok(format!("{description}; Socket Mode token accepted"));
        }
        Ok(description)
    }
}

struct Endpoint {
    handler: Arc<Handler>,
    secret: SecretString,
}

/// One Events API request. What its headers can prove (a signature of the
/// right form, a fresh timestamp) is checked before its body is read; the
/// signature itself, over the body, after.
async fn events_endpoint(State(endpoint): State<Arc<Endpoint>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let headers: &HeaderMap = &parts.headers;
    let header_text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let now = chrono::Utc::now().timestamp();
    let (timestamp, claimed) = (
        header_text("x-slack-request-timestamp"),
        header_text("x-slack-signature"),
    );
    if let Err(err) = signature::plausible(timestamp, claimed, now) {
        warn!(error = %err, "refused an Events API request before reading it");
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let body = match herald_net::read_body(&parts.extensions, body).await {
        Ok(body) => body,
        Err(err) => {
            warn!(error = %err, "an Events API request's body was not read");
            return err.into_response();
        }
    };
    if let Err(err) = signature::verify(endpoint.secret.expose_secret(), timestamp, claimed, &body, now) {
        warn!(error = %err, "refused an Events API request");
        return StatusCode::UNAUTHORIZED.into_response();
    }
    if let Some(retry) = header_text("x-slack-retry-num") {
        debug!(
            retry,
            reason = header_text("x-slack-retry-reason"),
            "Slack retried an event"
        );
    }
    match serde_json::from_slice::<SlackPushEvent>(&body) {
        Ok(SlackPushEvent::UrlVerification(verification)) => {
            ([(header::CONTENT_TYPE, "text/plain")], verification.challenge).into_response()
        }
        Ok(SlackPushEvent::EventCallback(callback)) => match endpoint.handler.handle(callback).await {
            Ok(()) => StatusCode::OK.into_response(),
            Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        },
        Ok(SlackPushEvent::AppRateLimited(limited)) => {
            warn!(team = %limited.team_id, "Slack is rate limiting events to this app");
            StatusCode::OK.into_response()
        }
        Err(err) => {
            // Sending it again would not make it decode.
            warn!(error = %err, "an Events API request did not decode; acknowledged anyway");
            StatusCode::OK.into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_keys_are_bounded() {
        let mut recent = Recent {
            order: VecDeque::new(),
            keys: HashSet::new(),
        };
        for n in 0..RECENT_KEYS + 10 {
            recent.insert(format!("slack:C1:{n}"));
        }
        assert!(!recent.contains("slack:C1:0"));
        assert!(recent.contains(&format!("slack:C1:{}", RECENT_KEYS + 9)));
        assert_eq!(recent.keys.len(), RECENT_KEYS);
    }
}
