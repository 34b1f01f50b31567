//! The fake's endpoints: chat completions (checked as the real API checks
//! a request, answered from the script or refused as a server with the
//! configured quirks would), the model list, llama.cpp's `/props`, Ollama's
//! `/api/show`, and the 404 of any other path. `mod.rs` holds the script
//! and what a test reads back; this file is the wire.

use super::*;

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

pub(super) async fn chat_completions(State(shared): State<Arc<Shared>>, headers: HeaderMap, raw: Bytes) -> Response {
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

pub(super) async fn list_models(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
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
pub(super) async fn props(State(shared): State<Arc<Shared>>, method: Method, uri: Uri) -> Response {
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
pub(super) async fn ollama_show(State(shared): State<Arc<Shared>>, method: Method, uri: Uri) -> Response {
    let quirks = shared.lock().quirks.clone();
    if quirks.ollama {
        json_response(StatusCode::OK, &quirks::ollama_show(quirks.ollama_num_ctx))
    } else {
        unknown_route(method, uri).await
    }
}

pub(super) async fn unknown_route(method: Method, uri: Uri) -> Response {
    let message = format!("Invalid URL ({method} {})", uri.path());
    error_response(404, &message, None, None)
}
