//! A scripted OpenAI-compatible chat completions server on 127.0.0.1, for
//! tests and benchmarks that need a model without a network or a GPU.
//!
//! A test pushes [`Reply`] values; each `POST /v1/chat/completions` takes the
//! next one (first in, first out), or the fallback when the script is empty.
//! Every request body is recorded, so a test asserts on what the model was
//! shown with the readers in [`inspect`]. Requests are checked the way the
//! real API checks them ([`validate`]) and refused with a 400 and an OpenAI
//! error object, without using up a scripted reply.
//!
//! Architecture invariant: the shapes sent here are the real API's
//! (`chat.completion`, `chat.completion.chunk` events ending in `[DONE]`,
//! `{"error": {...}}`, `retry-after` on 429), never a simplification a real
//! server would not send, so a client that passes against this server is not
//! surprised by OpenAI.

mod audio;
pub mod inspect;
mod quirks;
mod render;
mod server;
mod validate;

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};

pub use audio::{TranscriptionReply, TranscriptionRequest};
pub use inspect::{content_text, image_urls, last_user_text, messages, roles, system_prompt, tool_names, tool_results};
pub use quirks::{OverflowStyle, Quirks};

use render::{Answer, CompletionMeta, WireToolCall};
use server::{chat_completions, list_models, ollama_show, props, unknown_route};

/// What the server answers to one chat completions request.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// An assistant message with this content, `finish_reason: "stop"`.
    Text(String),
    /// Tool calls by name and arguments, `finish_reason: "tool_calls"`. The
    /// arguments go on the wire as a JSON string; a `Value::String` is sent
    /// as the raw arguments text, so tests can send malformed arguments.
    ToolCalls(Vec<(String, Value)>),
    /// An OpenAI error object with this status; `retry_after` (seconds) sets
    /// the `retry-after` header.
    Error {
        status: u16,
        message: String,
        retry_after: Option<u64>,
    },
    /// Waits, then answers with the inner reply.
    Delayed(Duration, Box<Reply>),
    /// Holds the request until [`ScriptedModel::release`], then answers with
    /// the fallback.
    Hang,
    /// Any status and body (sent as `application/json`), for fault tests.
    Raw(u16, String),
    /// This text, generated slowly: streamed one piece per `gap` when the
    /// request asked for a stream, else all at once after every piece's gap.
    Slow(Duration, String),
}

impl Reply {
    pub fn text(text: impl Into<String>) -> Self {
        Reply::Text(text.into())
    }

    /// One tool call.
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Self {
        Reply::ToolCalls(vec![(name.into(), arguments)])
    }

    pub fn error(status: u16, message: impl Into<String>) -> Self {
        Reply::Error {
            status,
            message: message.into(),
            retry_after: None,
        }
    }

    /// A 429 with a `retry-after` header of this many seconds.
    pub fn rate_limited(retry_after_seconds: u64) -> Self {
        Reply::Error {
            status: 429,
            message: "Rate limit reached for requests. Please try again later.".into(),
            retry_after: Some(retry_after_seconds),
        }
    }
}

/// One chat completions request as the server saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedRequest {
    /// The JSON body, or the raw text as a `Value::String` when it was not JSON.
    pub body: Value,
    /// The `authorization` header, e.g. `Bearer sk-...`.
    pub authorization: Option<String>,
    /// When it arrived, on tokio's clock, so paused-time tests can measure
    /// the gaps a retry policy left between attempts.
    pub at: tokio::time::Instant,
}

type Fallback = Arc<dyn Fn(&Value) -> Reply + Send + Sync>;

struct ScriptState {
    script: VecDeque<Reply>,
    fallback: Fallback,
    requests: Vec<RecordedRequest>,
    api_key: Option<String>,
    models: Vec<String>,
    /// Whether request bodies are kept; a benchmark sending thousands of
    /// long prompts records `null` bodies instead.
    keep_bodies: bool,
    quirks: Quirks,
}

struct Shared {
    state: Mutex<ScriptState>,
    /// How many chat requests were recorded; watched by `wait_for_requests`.
    received: watch::Sender<usize>,
    /// Incremented by `release`; a held request waits for a value above the
    /// one it saw when it arrived.
    releases: watch::Sender<u64>,
    /// Set when a quirk crashed the server: it stops listening.
    crashed: watch::Sender<bool>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, ScriptState> {
        // A panicking fallback must not take every later request down with it.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn echo_fallback(request: &Value) -> Reply {
    Reply::Text(format!("echo: {}", last_user_text(request).unwrap_or_default()))
}

/// The running server; dropping it stops it (held requests are released).
pub struct ScriptedModel {
    shared: Arc<Shared>,
    transcriptions: audio::SharedTranscriptions,
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
}

impl std::fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedModel")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl ScriptedModel {
    /// Starts on 127.0.0.1 with a port the OS picks.
    pub async fn start() -> Self {
        Self::start_on(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .expect("the scripted model server binds 127.0.0.1:0")
    }

    /// Starts on a given address, for the `fake-openai` binary.
    pub async fn start_on(addr: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            state: Mutex::new(ScriptState {
                script: VecDeque::new(),
                fallback: Arc::new(echo_fallback),
                requests: Vec::new(),
                api_key: None,
                models: vec!["gpt-4o-mini".into(), "herald-scripted".into()],
                keep_bodies: true,
                quirks: Quirks::default(),
            }),
            received: watch::Sender::new(0),
            releases: watch::Sender::new(0),
            crashed: watch::Sender::new(false),
        });
        let transcriptions = audio::SharedTranscriptions::default();
        let audio_routes = Router::new()
            .route("/v1/audio/transcriptions", post(audio::transcribe))
            .with_state(transcriptions.clone());
        let router = Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .route("/v1/models", get(list_models))
            .route("/props", get(props))
            .route("/api/show", post(ollama_show))
            .fallback(unknown_route)
            .with_state(shared.clone())
            .merge(audio_routes)
            .layer(DefaultBodyLimit::max(32 * 1024 * 1024));
        let (stop, stopped) = oneshot::channel::<()>();
        let mut crashed = shared.crashed.subscribe();
        tokio::spawn(async move {
            let shutdown = async move {
                tokio::select! {
                    _ = stopped => {}
                    _ = crashed.wait_for(|crashed| *crashed) => {}
                }
            };
            let _ = axum::serve(crate::no_delay(listener), router)
                .with_graceful_shutdown(shutdown)
                .await;
        });
        Ok(Self {
            shared,
            transcriptions,
            addr,
            stop: Some(stop),
        })
    }

    /// `http://127.0.0.1:PORT/v1`, no trailing slash: what a client takes as
    /// its API base.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Appends an answer to `POST /v1/audio/transcriptions`' script; with
    /// none left, the endpoint answers 500.
    pub fn push_transcription(&self, reply: TranscriptionReply) {
        audio::Transcriptions::push(&self.transcriptions, reply);
    }

    /// Every transcription request so far, in order.
    pub fn transcription_requests(&self) -> Vec<TranscriptionRequest> {
        audio::Transcriptions::requests(&self.transcriptions)
    }

    /// Appends a reply to the script; one reply answers one request.
    pub fn push(&self, reply: Reply) {
        self.shared.lock().script.push_back(reply);
    }

    /// Replies still waiting in the script.
    pub fn unused_replies(&self) -> usize {
        self.shared.lock().script.len()
    }

    /// What answers when the script is empty. The default echoes the last
    /// user message as `echo: TEXT`.
    pub fn set_fallback(&self, fallback: impl Fn(&Value) -> Reply + Send + Sync + 'static) {
        self.shared.lock().fallback = Arc::new(fallback);
    }

    /// Requires `authorization: Bearer KEY` on every request; others get the
    /// 401 OpenAI sends for a wrong key.
    pub fn require_api_key(&self, key: impl Into<String>) {
        self.shared.lock().api_key = Some(key.into());
    }

    /// The model ids `GET /v1/models` lists.
    pub fn set_models(&self, ids: Vec<String>) {
        self.shared.lock().models = ids;
    }

    /// Behaves like a real server that is not OpenAI (see [`Quirks`]).
    pub fn set_quirks(&self, quirks: Quirks) {
        self.shared.lock().quirks = quirks;
    }

    /// Whether a quirk crashed the server (it no longer listens).
    pub fn crashed(&self) -> bool {
        *self.shared.crashed.borrow()
    }

    /// Whether request bodies are recorded (the default). Off, every request
    /// is still counted and timed, with a `null` body, so a long benchmark
    /// does not hold every prompt in memory.
    pub fn keep_request_bodies(&self, keep: bool) {
        self.shared.lock().keep_bodies = keep;
    }

    /// The chat completions bodies received, in order (refused ones included).
    pub fn requests(&self) -> Vec<Value> {
        self.shared.lock().requests.iter().map(|r| r.body.clone()).collect()
    }

    /// The chat completions requests received with their headers and times.
    pub fn recorded(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }

    /// Waits until at least `n` chat requests arrived, then returns them all.
    pub async fn wait_for_requests(&self, n: usize) -> Vec<Value> {
        let mut received = self.shared.received.subscribe();
        received
            .wait_for(|count| *count >= n)
            .await
            .expect("the request counter lives as long as the server");
        self.requests()
    }

    /// Lets every request held by [`Reply::Hang`] answer (with the fallback).
    pub fn release(&self) {
        self.shared.releases.send_modify(|generation| *generation += 1);
    }
}

impl Drop for ScriptedModel {
    fn drop(&mut self) {
        self.release();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
