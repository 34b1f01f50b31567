//! Pure rendering of the bodies the real chat completions API sends: a
//! `chat.completion` object, the `chat.completion.chunk` events of a stream,
//! the model list and error objects.
//!
//! Invariant: every shape here deserializes into async-openai's types
//! (`object`, message `role`, tool call `type` and `arguments` as a JSON
//! string are all required there), so a client that reads this server also
//! reads OpenAI.

use serde_json::{Value, json};

/// Identity of one completion, shared by all chunks of a stream.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CompletionMeta {
    pub id: String,
    pub created: u64,
    pub model: String,
}

/// A tool call as it goes on the wire: the arguments are a JSON text.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct WireToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// What the assistant answers, before it is shaped for the wire.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Answer {
    Text(String),
    /// Text the model stopped at its length limit: `finish_reason: length`.
    CutText(String),
    ToolCalls(Vec<WireToolCall>),
}

impl Answer {
    fn finish_reason(&self) -> &'static str {
        match self {
            Answer::Text(_) => "stop",
            Answer::CutText(_) => "length",
            Answer::ToolCalls(_) => "tool_calls",
        }
    }

    fn output_chars(&self) -> usize {
        match self {
            Answer::Text(text) | Answer::CutText(text) => text.chars().count(),
            Answer::ToolCalls(calls) => calls.iter().map(|c| c.name.len() + c.arguments.chars().count()).sum(),
        }
    }
}

/// Token counts are estimated at four characters a token, as a stand-in for
/// a tokenizer: tests only need plausible, deterministic numbers.
pub(crate) fn usage(prompt_chars: usize, answer: &Answer) -> Value {
    let prompt_tokens = prompt_chars.div_ceil(4).max(1);
    let completion_tokens = answer.output_chars().div_ceil(4).max(1);
    json!({
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    })
}

fn tool_calls_json(calls: &[WireToolCall]) -> Value {
    calls
        .iter()
        .map(|call| {
            json!({
                "id": call.id,
                "type": "function",
                "function": { "name": call.name, "arguments": call.arguments },
            })
        })
        .collect()
}

/// The body of a non-streamed answer.
pub(crate) fn completion(meta: &CompletionMeta, answer: &Answer, usage: Value) -> Value {
    let message = match answer {
        Answer::Text(text) | Answer::CutText(text) => {
            json!({ "role": "assistant", "content": text, "refusal": null })
        }
        Answer::ToolCalls(calls) => json!({
            "role": "assistant",
            "content": null,
            "refusal": null,
            "tool_calls": tool_calls_json(calls),
        }),
    };
    json!({
        "id": meta.id,
        "object": "chat.completion",
        "created": meta.created,
        "model": meta.model,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": answer.finish_reason(),
        }],
        "usage": usage,
        "system_fingerprint": "fp_herald_testkit",
    })
}

fn chunk(meta: &CompletionMeta, delta: Value, finish_reason: Option<&str>) -> Value {
    json!({
        "id": meta.id,
        "object": "chat.completion.chunk",
        "created": meta.created,
        "model": meta.model,
        "system_fingerprint": "fp_herald_testkit",
        "choices": [{
            "index": 0,
            "delta": delta,
            "logprobs": null,
            "finish_reason": finish_reason,
        }],
        "usage": null,
    })
}

/// Splits text after each space so a stream carries several content deltas,
/// as a real model's would.
fn text_pieces(text: &str) -> Vec<&str> {
    text.split_inclusive(' ').collect()
}

/// Splits a JSON text in two at a character boundary, so clients must
/// concatenate argument deltas.
fn halves(text: &str) -> (&str, &str) {
    let middle = text
        .char_indices()
        .nth(text.chars().count() / 2)
        .map_or(text.len(), |(i, _)| i);
    text.split_at(middle)
}

/// The payloads of a streamed answer in order, each one SSE `data:` line's
/// content, ending with `[DONE]`. With `include_usage` a last chunk with no
/// choices carries the usage, as `stream_options.include_usage` asks.
pub(crate) fn stream_events(meta: &CompletionMeta, answer: &Answer, usage: Value, include_usage: bool) -> Vec<String> {
    let mut chunks = Vec::new();
    match answer {
        Answer::Text(text) | Answer::CutText(text) => {
            chunks.push(chunk(
                meta,
                json!({ "role": "assistant", "content": "", "refusal": null }),
                None,
            ));
            for piece in text_pieces(text) {
                chunks.push(chunk(meta, json!({ "content": piece }), None));
            }
        }
        Answer::ToolCalls(calls) => {
            for (index, call) in calls.iter().enumerate() {
                let (first, second) = halves(&call.arguments);
                let mut opening = json!({
                    "tool_calls": [{
                        "index": index,
                        "id": call.id,
                        "type": "function",
                        "function": { "name": call.name, "arguments": "" },
                    }],
                });
                if index == 0 {
                    opening["role"] = json!("assistant");
                    opening["content"] = Value::Null;
                    opening["refusal"] = Value::Null;
                }
                chunks.push(chunk(meta, opening, None));
                for part in [first, second].into_iter().filter(|part| !part.is_empty()) {
                    chunks.push(chunk(
                        meta,
                        json!({ "tool_calls": [{ "index": index, "function": { "arguments": part } }] }),
                        None,
                    ));
                }
            }
        }
    }
    chunks.push(chunk(meta, json!({}), Some(answer.finish_reason())));
    if include_usage {
        chunks.push(json!({
            "id": meta.id,
            "object": "chat.completion.chunk",
            "created": meta.created,
            "model": meta.model,
            "system_fingerprint": "fp_herald_testkit",
            "choices": [],
            "usage": usage,
        }));
    }
    let mut events: Vec<String> = chunks.iter().map(Value::to_string).collect();
    events.push("[DONE]".to_owned());
    events
}

/// The `type` OpenAI puts in error objects for a status.
pub(crate) fn error_type(status: u16) -> &'static str {
    match status {
        401 | 403 | 404 | 409 | 413 | 415 | 422 => "invalid_request_error",
        429 => "requests",
        500..=599 => "server_error",
        _ => "invalid_request_error",
    }
}

/// The `code` OpenAI puts in error objects for a status, when it has a
/// usual one.
fn error_code(status: u16) -> Option<&'static str> {
    match status {
        401 => Some("invalid_api_key"),
        429 => Some("rate_limit_exceeded"),
        _ => None,
    }
}

/// `{"error": {"message", "type", "param", "code"}}`.
pub(crate) fn error(status: u16, message: &str, param: Option<&str>, code: Option<&str>) -> Value {
    json!({
        "error": {
            "message": message,
            "type": error_type(status),
            "param": param,
            "code": code.or(error_code(status)),
        }
    })
}

/// The body of `GET /v1/models`.
pub(crate) fn model_list(ids: &[String], created: u64) -> Value {
    let data: Vec<Value> = ids
        .iter()
        .map(|id| json!({ "id": id, "object": "model", "created": created, "owned_by": "herald-testkit" }))
        .collect();
    json!({ "object": "list", "data": data })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> CompletionMeta {
        CompletionMeta {
            id: "chatcmpl-1".into(),
            created: 1_700_000_000,
            model: "gpt-4o-mini".into(),
        }
    }

    fn call(arguments: &str) -> WireToolCall {
        WireToolCall {
            id: "call_1_0".into(),
            name: "get_weather".into(),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn text_answer_has_the_fields_clients_require() {
        let body = completion(
            &meta(),
            &Answer::Text("hi".into()),
            usage(8, &Answer::Text("hi".into())),
        );
        assert_eq!(body["object"], "chat.completion");
        assert_eq!(body["choices"][0]["message"]["role"], "assistant");
        assert_eq!(body["choices"][0]["message"]["content"], "hi");
        assert_eq!(body["choices"][0]["finish_reason"], "stop");
        assert_eq!(body["usage"]["total_tokens"], 3);
    }

    #[test]
    fn tool_call_arguments_are_a_string_and_the_type_is_function() {
        let answer = Answer::ToolCalls(vec![call(r#"{"city":"Oslo"}"#)]);
        let body = completion(&meta(), &answer, usage(4, &answer));
        let tool_call = &body["choices"][0]["message"]["tool_calls"][0];
        assert_eq!(tool_call["type"], "function");
        assert_eq!(tool_call["function"]["arguments"], r#"{"city":"Oslo"}"#);
        assert!(body["choices"][0]["message"]["content"].is_null());
        assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
    }

    #[test]
    fn streamed_deltas_concatenate_to_the_answer() {
        for (answer, expected_text, expected_arguments) in [
            (Answer::Text("hello there world".into()), "hello there world", ""),
            (Answer::Text(String::new()), "", ""),
            (
                Answer::ToolCalls(vec![call(r#"{"city":"Zürich"}"#)]),
                "",
                r#"{"city":"Zürich"}"#,
            ),
            (Answer::ToolCalls(vec![call("")]), "", ""),
        ] {
            let events = stream_events(&meta(), &answer, json!(null), false);
            assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
            let chunks: Vec<Value> = events[..events.len() - 1]
                .iter()
                .map(|e| serde_json::from_str(e).unwrap())
                .collect();
            let mut text = String::new();
            let mut arguments = String::new();
            for chunk in &chunks {
                assert_eq!(chunk["object"], "chat.completion.chunk");
                let delta = &chunk["choices"][0]["delta"];
                text.push_str(delta["content"].as_str().unwrap_or(""));
                for tool_call in delta["tool_calls"].as_array().into_iter().flatten() {
                    assert_eq!(tool_call["index"], 0);
                    arguments.push_str(tool_call["function"]["arguments"].as_str().unwrap_or(""));
                }
            }
            assert_eq!(text, expected_text);
            assert_eq!(arguments, expected_arguments);
            assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
            assert_eq!(
                chunks.last().unwrap()["choices"][0]["finish_reason"],
                answer.finish_reason()
            );
        }
    }

    #[test]
    fn usage_chunk_comes_last_when_asked_for() {
        let answer = Answer::Text("hi".into());
        let events = stream_events(&meta(), &answer, usage(4, &answer), true);
        let last: Value = serde_json::from_str(&events[events.len() - 2]).unwrap();
        assert_eq!(last["choices"], json!([]));
        assert_eq!(last["usage"]["prompt_tokens"], 1);
    }

    #[test]
    fn errors_carry_openai_types_and_codes() {
        for (status, error_type, code) in [
            (400, "invalid_request_error", Value::Null),
            (401, "invalid_request_error", json!("invalid_api_key")),
            (429, "requests", json!("rate_limit_exceeded")),
            (500, "server_error", Value::Null),
            (503, "server_error", Value::Null),
        ] {
            let body = error(status, "nope", None, None);
            assert_eq!(body["error"]["type"], error_type, "{status}");
            assert_eq!(body["error"]["code"], code, "{status}");
            assert_eq!(body["error"]["message"], "nope");
            assert!(body["error"].get("param").is_some());
        }
    }
}
