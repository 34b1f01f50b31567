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

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

fn error_response(status: u16, message: &str, param: Option<&str>, code: Option<&str>) -> Response {
    let status_code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_response(status_code, &render::error(status, message, param, code))
}

/// `None` when the key matches or none is required, else the 401 to send.
fn check_api_key(expected: Option<&str>, headers: &HeaderMap) -> Option<Response> {
    let expected = expected?;
    let given = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    if given == Some(format!("Bearer {expected}").as_str()) {
        return None;
    }
    let message = match given
        .and_then(|v| v.strip_prefix("Bearer "))
        .filter(|key| !key.is_empty())
    {
        Some(_) => {
            "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."
        }
        None => {
            "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
        }
    };
    Some(error_response(401, message, None, Some("invalid_api_key")))
}

/// What the handler decided while holding the lock.
enum Decision {
    Refuse(Response),
    /// A quirk says this request kills the server.
    Crash,
    Answer {
        body: Value,
        reply: Reply,
        serial: usize,
        generation: u64,
        quirks: Quirks,
    },
}

/// What a quirky server does to a request before any model sees it.
fn quirk_refusal(quirks: &Quirks, models: &[String], body: &Value) -> Option<Decision> {
    if let Some(bound) = quirks.crash_on_schema_bound
        && quirks::largest_schema_bound(body) >= bound
    {
        return Some(Decision::Crash);
    }
    if quirks.vllm
        && let Some(keyword) = quirks::vllm_unsupported_keyword(body)
    {
        return Some(Decision::Refuse(json_response(
            StatusCode::BAD_REQUEST,
            &quirks::vllm_schema_error(&keyword),
        )));
    }
    if let Some((window, style)) = quirks.context {
        let prompt = quirks::prompt_tokens(body);
        let answer = quirks::answer_tokens(body).unwrap_or(0);
        if prompt + answer > window as usize {
            if style == OverflowStyle::LlamaCppPython && body["stream"] == Value::Bool(true) {
                return Some(Decision::Refuse(
                    Response::builder()
                        .status(StatusCode::OK)
                        .header(header::CONTENT_TYPE, "text/event-stream; charset=utf-8")
                        .body(Body::empty())
                        .expect("an empty stream is a valid response"),
                ));
            }
            return Some(Decision::Refuse(json_response(
                StatusCode::BAD_REQUEST,
                &quirks::overflow_body(style, window, prompt, answer),
            )));
        }
    }
    // Ollama serves only the models it has pulled, `name` meaning `name:latest`.
    if quirks.ollama
        && let Some(model) = body["model"].as_str()
        && !models
            .iter()
            .any(|id| id == model || id.strip_suffix(":latest") == Some(model))
    {
        return Some(Decision::Refuse(json_response(
            StatusCode::NOT_FOUND,
            &quirks::ollama_model_not_found(model),
        )));
    }
    None
}

async fn chat_completions(State(shared): State<Arc<Shared>>, headers: HeaderMap, raw: Bytes) -> Response {
    let parsed: Result<Value, _> = serde_json::from_slice(&raw);
    let decision = {
        let mut state = shared.lock();
        let keep_bodies = state.keep_bodies;
        state.requests.push(RecordedRequest {
            body: match &parsed {
                _ if !keep_bodies => Value::Null,
                Ok(body) => body.clone(),
                Err(_) => Value::String(String::from_utf8_lossy(&raw).into_owned()),
            },
            authorization: headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            at: tokio::time::Instant::now(),
        });
        let serial = state.requests.len();
        if let Some(refusal) = check_api_key(state.api_key.as_deref(), &headers) {
            Decision::Refuse(refusal)
        } else {
            match parsed {
                Err(_) => Decision::Refuse(error_response(
                    400,
                    "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)",
                    None,
                    None,
                )),
                Ok(body) => match validate::chat_request(&body) {
                    Err(rejection) => Decision::Refuse(error_response(
                        400,
                        &rejection.message,
                        rejection.param.as_deref(),
                        rejection.code.as_deref(),
                    )),
                    Ok(()) => match quirk_refusal(&state.quirks, &state.models, &body) {
                        Some(refusal) => refusal,
                        None => {
                            let quirks = state.quirks.clone();
                            let reply = match state.script.pop_front() {
                                Some(reply) => reply,
                                None => {
                                    let fallback = state.fallback.clone();
                                    drop(state);
                                    // The model sees the prompt as the server renders it.
                                    if quirks.drops_tool_role {
                                        fallback(&quirks::without_tool_results(&body))
                                    } else {
                                        fallback(&body)
                                    }
                                }
                            };
                            Decision::Answer {
                                body,
                                reply,
                                serial,
                                generation: *shared.releases.borrow(),
                                quirks,
                            }
                        }
                    },
                },
            }
        }
    };
    // Counted only now, so a test that saw the count also sees a held
    // request's release generation already taken.
    shared.received.send_modify(|count| *count += 1);
    match decision {
        Decision::Refuse(response) => response,
        Decision::Crash => {
            shared.crashed.send_replace(true);
            // The connection dies with the server: no answer, a reset.
            panic!("the scripted model server crashed, as the quirk it plays does");
        }
        Decision::Answer {
            body,
            reply,
            serial,
            generation,
            quirks,
        } => {
            let reply = settle(&shared, reply, &body, generation).await;
            respond(reply, &body, serial, &quirks)
        }
    }
}

/// Plays out delays and holds until a reply that can be sent remains.
async fn settle(shared: &Shared, mut reply: Reply, body: &Value, mut generation: u64) -> Reply {
    loop {
        reply = match reply {
            Reply::Delayed(delay, inner) => {
                tokio::time::sleep(delay).await;
                *inner
            }
            Reply::Slow(gap, text) if body["stream"] != Value::Bool(true) => {
                let pieces = text.split_inclusive(' ').count().max(1) as u32;
                tokio::time::sleep(gap * pieces).await;
                Reply::Text(text)
            }
            Reply::Hang => {
                let mut releases = shared.releases.subscribe();
                let released = releases
                    .wait_for(|current| *current > generation)
                    .await
                    .map_or(generation, |current| *current);
                generation = released;
                let fallback = shared.lock().fallback.clone();
                fallback(body)
            }
            settled => return settled,
        };
    }
}

fn prompt_chars(body: &Value) -> usize {
    messages(body)
        .iter()
        .filter_map(content_text)
        .map(|text| text.chars().count())
        .sum()
}

/// A text answer as a quirky server gives it: empty when the grammar only
/// allowed a tool call, cut at `max_tokens`, or run on to the context's end.
fn shape_text(text: String, body: &Value, quirks: &Quirks) -> Answer {
    if quirks.empty_text_with_tools && quirks::tools_on_auto(body) {
        return Answer::Text(String::new());
    }
    if !quirks.honours_max_tokens {
        return Answer::Text(text);
    }
    let limit = quirks::answer_tokens(body).or_else(|| {
        quirks
            .window()
            .map(|window| (window as usize).saturating_sub(quirks::prompt_tokens(body)))
    });
    match limit {
        Some(limit) if quirks::answer_tokens(body).is_none() => {
            // No limit asked: the model rambles on until the context is full.
            let mut long = text.clone();
            while quirks::server_tokens(&long) < limit {
                long.push(' ');
                long.push_str(if text.is_empty() { "and" } else { &text });
            }
            Answer::CutText(long.chars().take(limit * 4).collect())
        }
        Some(limit) if quirks::server_tokens(&text) > limit => Answer::CutText(text.chars().take(limit * 4).collect()),
        _ => Answer::Text(text),
    }
}

fn respond(reply: Reply, body: &Value, serial: usize, quirks: &Quirks) -> Response {
    let mut gap = None;
    let answer = match reply {
        Reply::Text(text) => shape_text(text, body, quirks),
        Reply::Slow(every, text) => {
            gap = Some(every);
            shape_text(text, body, quirks)
        }
        Reply::ToolCalls(calls) => Answer::ToolCalls(
            calls
                .into_iter()
                .enumerate()
                .map(|(index, (name, arguments))| WireToolCall {
                    id: format!("call_{serial}_{index}"),
                    name,
                    arguments: match arguments {
                        Value::String(raw) => raw,
                        other => other.to_string(),
                    },
                })
                .collect(),
        ),
        Reply::Error {
            status,
            message,
            retry_after,
        } => {
            let mut response = error_response(status, &message, None, None);
            if let Some(seconds) = retry_after {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
            }
            return response;
        }
        Reply::Raw(status, text) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return (status, [(header::CONTENT_TYPE, "application/json")], text).into_response();
        }
        Reply::Delayed(..) | Reply::Hang => unreachable!("settle resolves delays and holds"),
    };
    let meta = CompletionMeta {
        id: format!("chatcmpl-herald{serial}"),
        created: unix_now(),
        model: body["model"].as_str().unwrap_or_default().to_owned(),
    };
    let usage = render::usage(prompt_chars(body), &answer);
    if body["stream"] == Value::Bool(true) {
        let include_usage = body["stream_options"]["include_usage"] == Value::Bool(true);
        let events = render::stream_events(&meta, &answer, usage, include_usage);
        let frames = futures::StreamExt::then(futures::stream::iter(events), move |event| async move {
            if let Some(gap) = gap {
                tokio::time::sleep(gap).await;
            }
            Ok::<_, Infallible>(Bytes::from(format!("data: {event}\n\n")))
        });
        return Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "text/event-stream; charset=utf-8")
            .header(header::CACHE_CONTROL, "no-cache")
            .body(Body::from_stream(frames))
            .expect("a static streaming response is valid");
    }
    json_response(StatusCode::OK, &render::completion(&meta, &answer, usage))
}

async fn list_models(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let (api_key, models, quirks) = {
        let state = shared.lock();
        (state.api_key.clone(), state.models.clone(), state.quirks.clone())
    };
    if let Some(refusal) = check_api_key(api_key.as_deref(), &headers) {
        return refusal;
    }
    let mut list = render::model_list(&models, unix_now());
    if quirks.vllm
        && let Some(window) = quirks.window()
        && let Some(data) = list["data"].as_array_mut()
    {
        for model in data {
            model["max_model_len"] = Value::from(window);
        }
    }
    json_response(StatusCode::OK, &list)
}

/// llama.cpp's server properties, when it plays llama.cpp.
async fn props(State(shared): State<Arc<Shared>>, method: Method, uri: Uri) -> Response {
    let (quirks, model) = {
        let state = shared.lock();
        (state.quirks.clone(), state.models.first().cloned().unwrap_or_default())
    };
    match quirks.window() {
        Some(n_ctx) if quirks.props => json_response(StatusCode::OK, &quirks::props(n_ctx, &model)),
        _ => unknown_route(method, uri).await,
    }
}

/// Ollama's model details, when it plays Ollama.
async fn ollama_show(State(shared): State<Arc<Shared>>, method: Method, uri: Uri) -> Response {
    let quirks = shared.lock().quirks.clone();
    if quirks.ollama {
        json_response(StatusCode::OK, &quirks::ollama_show(quirks.ollama_num_ctx))
    } else {
        unknown_route(method, uri).await
    }
}

async fn unknown_route(method: Method, uri: Uri) -> Response {
    let message = format!("Invalid URL ({method} {})", uri.path());
    error_response(404, &message, None, None)
}
