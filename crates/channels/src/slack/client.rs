//! Every Slack call Herald makes: the Web API (`auth.test`,
//! `apps.connections.open`, `chat.postMessage`, `users.info`) and receiving
//! events, by Socket Mode or as the Events API endpoint.
//!
//! Events are handed to the sink before they are acknowledged (the Socket
//! Mode ack is sent when the callback returns; the Events API answer is the
//! HTTP response). The sink only stores the message on the queue, so the
//! ack goes out well within Slack's three seconds; the work happens later.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use herald_core::channel::ChannelIngress;
use herald_core::{Admission, ChannelError, ChannelName, Clock, ConversationRef, InboundSink, StoreError};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use secrecy::{ExposeSecret, SecretString};
use slack_morphism::api::{SlackApiAppsConnectionOpenRequest, SlackApiUsersInfoRequest};
use slack_morphism::errors::SlackClientError;
use slack_morphism::events::{SlackPushEvent, SlackPushEventCallback};
use slack_morphism::hyper_tokio::SlackClientHyperConnector;
use slack_morphism::listener::{HttpStatusCode, SlackClientEventsListenerEnvironment, SlackClientEventsUserState};
use slack_morphism::{
    SlackApiToken, SlackApiTokenValue, SlackClient, SlackClientSocketModeConfig, SlackClientSocketModeListener,
    SlackSocketModeListenerCallbacks, SlackUserId, UserCallbackResult,
};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::config::{SlackConfig, SlackMode};
use super::payload::{self, Addressing, BotIdentity};
use super::{CHANNEL, render, signature};
use crate::chunk::Limit;
use crate::outbound::PlatformSender;
use crate::retry::persist;

type Connector = SlackClientHyperConnector<HttpsConnector<HttpConnector>>;
type Client = SlackClient<Connector>;
/// What slack-morphism's callbacks return as an error.
type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An HTTPS (and, for a local `api_url`, plain HTTP) connector on rustls with ring.
fn connector(api_url: &str) -> Connector {
    let provider = rustls::crypto::ring::default_provider();
    let builder = match HttpsConnectorBuilder::new().with_provider_and_native_roots(provider.clone()) {
        Ok(builder) => builder,
        Err(err) => {
            warn!(error = %err, "no system root certificates; HTTPS to Slack will fail");
            let config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
                .with_safe_default_protocol_versions()
                .expect("ring supports the default protocol versions")
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth();
            HttpsConnectorBuilder::new().with_tls_config(config)
        }
    };
    let https = builder.https_or_http().enable_http1().build();
    SlackClientHyperConnector::with_connector(https).with_slack_api_url(api_url.trim_end_matches('/'))
}

fn token(secret: &SecretString) -> SlackApiToken {
    SlackApiToken::new(SlackApiTokenValue::new(secret.expose_secret().to_owned()))
}

/// Slack's answer as Herald's retry classes. The error code is kept; bodies
/// are not, so no message text ends up in a log.
pub fn classify(err: SlackClientError) -> ChannelError {
    match err {
        SlackClientError::RateLimitError(limit) => ChannelError::RateLimited {
            retry_after: limit.retry_after.unwrap_or(Duration::from_secs(1)),
        },
        SlackClientError::ApiError(api) => match api.code.as_str() {
            "ratelimited" => ChannelError::RateLimited {
                retry_after: Duration::from_secs(1),
            },
            "internal_error" | "fatal_error" | "service_unavailable" | "request_timeout" => {
                ChannelError::Transient(format!("slack answered {}", api.code))
            }
            code => ChannelError::Fatal(format!("slack refused the request: {code}")),
        },
        SlackClientError::HttpError(http) if http.status_code.is_server_error() => {
            ChannelError::Transient(format!("slack answered HTTP {}", http.status_code))
        }
        SlackClientError::HttpError(http) => ChannelError::Fatal(format!("slack answered HTTP {}", http.status_code)),
        // A response that does not decode may hide a message that was posted;
        // sending it again could post it twice.
        SlackClientError::ProtocolError(protocol) => {
            ChannelError::Fatal(format!("slack's answer did not decode: {}", protocol.json_error))
        }
        other => ChannelError::Transient(format!("slack request failed: {other}")),
    }
}

/// The Web API with the bot token.
pub struct SlackApi {
    client: Arc<Client>,
    bot_token: SlackApiToken,
    /// Display names by user id; a failed lookup is remembered as the id.
    names: Mutex<HashMap<String, String>>,
}

const MAX_CACHED_NAMES: usize = 10_000;

impl SlackApi {
    pub fn new(config: &SlackConfig) -> Self {
        Self {
            client: Arc::new(SlackClient::new(connector(&config.api_url))),
            bot_token: token(&config.bot_token),
            names: Mutex::new(HashMap::new()),
        }
    }

    /// `auth.test`: who the bot token belongs to.
    pub async fn identity(&self) -> Result<(BotIdentity, String), ChannelError> {
        let answer = self
            .client
            .open_session(&self.bot_token)
            .auth_test()
            .await
            .map_err(classify)?;
        let name = answer.user.clone().unwrap_or_else(|| answer.user_id.0.clone());
        let description = format!("{name} ({}) in {}", answer.user_id.0, answer.team);
        let identity = BotIdentity {
            user_id: answer.user_id.0,
            bot_id: answer.bot_id.map(|b| b.0),
        };
        Ok((identity, description))
    }

    /// `apps.connections.open`: checks the app-level token.
    pub async fn open_connection(&self, app_token: &SlackApiToken) -> Result<(), ChannelError> {
        self.client
            .open_session(app_token)
            .apps_connections_open(&SlackApiAppsConnectionOpenRequest::new())
            .await
            .map(|_| ())
            .map_err(classify)
    }

    /// The name people see for `user`, from `users.info` (scope `users:read`),
    /// or the user id when it cannot be read.
    pub async fn display_name(&self, user: &str) -> String {
        if let Some(name) = self.names.lock().expect("names lock").get(user) {
            return name.clone();
        }
        let request = SlackApiUsersInfoRequest::new(SlackUserId::new(user.to_owned()));
        let session = self.client.open_session(&self.bot_token);
        let lookup = session.users_info(&request);
        let name = match tokio::time::timeout(Duration::from_secs(1), lookup).await {
            Ok(Ok(answer)) => {
                let profile = answer.user.profile.as_ref();
                [
                    profile.and_then(|p| p.display_name.clone()),
                    profile.and_then(|p| p.real_name.clone()),
                    answer.user.real_name.clone(),
                    answer.user.name.clone(),
                ]
                .into_iter()
                .flatten()
                .find(|name| !name.trim().is_empty())
                .unwrap_or_else(|| user.to_owned())
            }
            Ok(Err(err)) => {
                debug!(error = %classify(err), user, "users.info failed; using the user id");
                user.to_owned()
            }
            Err(_) => user.to_owned(),
        };
        let mut names = self.names.lock().expect("names lock");
        if names.len() >= MAX_CACHED_NAMES {
            names.clear();
        }
        names.insert(user.to_owned(), name.clone());
        name
    }
}

/// One chunk, one `chat.postMessage`.
pub struct SlackSender {
    api: Arc<SlackApi>,
}

impl SlackSender {
    pub fn new(api: Arc<SlackApi>) -> Self {
        Self { api }
    }
}

#[async_trait]
impl PlatformSender for SlackSender {
    fn channel(&self) -> ChannelName {
        ChannelName::new(CHANNEL)
    }

    fn limit(&self) -> Limit {
        Limit::SLACK
    }

    /// Slack has no reply-to; the conversation's thread (`thread_ts`) is
    /// where a reply belongs, and every chunk goes there.
    async fn send_chunk(
        &self,
        conversation: &ConversationRef,
        text: &str,
        _reply_to: Option<&str>,
        _key: Option<&str>,
    ) -> Result<String, ChannelError> {
        let request = render::post_message(conversation, text);
        let answer = self
            .api
            .client
            .open_session(&self.api.bot_token)
            .chat_post_message(&request)
            .await
            .map_err(classify)?;
        Ok(payload::message_id(&answer.channel.0, &answer.ts.0))
    }
}

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
struct Handler {
    api: Arc<SlackApi>,
    sink: Arc<dyn InboundSink>,
    bot: BotIdentity,
    addressing: Addressing,
    clock: Arc<dyn Clock>,
    recent: Mutex<Recent>,
}

impl Handler {
    async fn handle(&self, callback: SlackPushEventCallback) -> Result<(), StoreError> {
        let event_id = callback.event_id.0.clone();
        let Some(mut message) = payload::inbound(&callback, &self.bot, &self.addressing, self.clock.now()) else {
            debug!(event = %event_id, "not a message for Herald");
            return Ok(());
        };
        let key = message.dedup_key();
        if self.recent.lock().expect("recent lock").contains(&key) {
            debug!(event = %event_id, "already accepted");
            return Ok(());
        }
        let user = message.sender.id.as_str().trim_start_matches("slack:").to_owned();
        message.sender.display_name = self.api.display_name(&user).await;
        let conversation = message.conversation.id.clone();
        match self.sink.accept(message).await {
            Ok(admission) => {
                debug!(event = %event_id, conversation = %conversation, ?admission, "event accepted");
                // An ignored event is not remembered: its twin may be addressed
                // to Herald (an `app_mention` after a `message`).
                if !matches!(admission, Admission::Ignored) {
                    self.recent.lock().expect("recent lock").insert(key);
                }
                Ok(())
            }
            Err(err) => {
                warn!(error = %err, event = %event_id, "could not store a Slack event; Slack will send it again");
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
        // The listener only logs a refused token and retries forever, so a
        // wrong one is caught here, once.
        match self.api.open_connection(&app_token).await {
            Err(ChannelError::Fatal(reason)) => return Err(ChannelError::Fatal(format!("app_token: {reason}"))),
            Err(err) => warn!(error = %err, "apps.connections.open failed; the listener will retry"),
            Ok(()) => {}
        }
        let sink = handler.sink.clone();
        let callbacks = SlackSocketModeListenerCallbacks::new().with_push_events(on_push_event);
        let environment = Arc::new(
            SlackClientEventsListenerEnvironment::new(self.api.client.clone())
                .with_error_handler(on_listener_error)
                .with_user_state(handler),
        );
        let config = SlackClientSocketModeConfig::new().with_max_connections_count(self.connections);
        let listener = SlackClientSocketModeListener::new(&config, environment, callbacks);
        listener.listen_for(&app_token).await.map_err(classify)?;
        listener.start().await;
        info!(connections = self.connections, "receiving Slack events by Socket Mode");
        // The listener reconnects by itself and does not say when; connected
        // here means its connections were opened.
        sink.connected(&ChannelName::new(CHANNEL), true);
        shutdown.cancelled().await;
        listener.shutdown().await;
        Ok(())
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
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
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

async fn on_push_event(
    event: SlackPushEventCallback,
    _client: Arc<Client>,
    state: SlackClientEventsUserState,
) -> UserCallbackResult<()> {
    let handler = state.read().await.get_user_state::<Arc<Handler>>().cloned();
    match handler {
        Some(handler) => handler.handle(event).await.map_err(|err| Box::new(err) as BoxError),
        None => Ok(()),
    }
}

/// A failed hand-off is not acknowledged, so Slack sends the event again.
fn on_listener_error(err: BoxError, _client: Arc<Client>, _state: SlackClientEventsUserState) -> HttpStatusCode {
    warn!(error = %err, "Slack Socket Mode event not acknowledged");
    HttpStatusCode::INTERNAL_SERVER_ERROR
}

struct Endpoint {
    handler: Arc<Handler>,
    secret: SecretString,
}

async fn events_endpoint(State(endpoint): State<Arc<Endpoint>>, headers: HeaderMap, body: Bytes) -> Response {
    let header_text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let now = chrono::Utc::now().timestamp();
    if let Err(err) = signature::verify(
        endpoint.secret.expose_secret(),
        header_text("x-slack-request-timestamp"),
        header_text("x-slack-signature"),
        &body,
        now,
    ) {
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
    use slack_morphism::errors::{SlackClientApiError, SlackClientHttpError, SlackRateLimitError};

    use super::*;

    #[test]
    fn slack_errors_map_to_retry_classes() {
        let api = |code: &str| SlackClientError::ApiError(SlackClientApiError::new(code.into()));
        let cases = [
            (
                SlackClientError::RateLimitError(SlackRateLimitError::new().with_retry_after(Duration::from_secs(7))),
                "RateLimited(7s)",
            ),
            (
                SlackClientError::RateLimitError(SlackRateLimitError::new()),
                "RateLimited(1s)",
            ),
            (api("ratelimited"), "RateLimited(1s)"),
            (api("invalid_auth"), "Fatal"),
            (api("channel_not_found"), "Fatal"),
            (api("internal_error"), "Transient"),
            (
                SlackClientError::HttpError(SlackClientHttpError::new(StatusCode::BAD_GATEWAY)),
                "Transient",
            ),
            (
                SlackClientError::HttpError(SlackClientHttpError::new(StatusCode::NOT_FOUND)),
                "Fatal",
            ),
        ];
        for (err, expected) in cases {
            let got = match classify(err) {
                ChannelError::RateLimited { retry_after } => format!("RateLimited({}s)", retry_after.as_secs()),
                ChannelError::Transient(_) => "Transient".into(),
                ChannelError::Fatal(_) => "Fatal".into(),
            };
            assert_eq!(got, expected);
        }
    }

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
