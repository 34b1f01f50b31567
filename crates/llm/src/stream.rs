//! Streamed chat completions (`llm.stream: true`): the answer arrives as
//! server-sent events, and the request timeout measures the silence between
//! two of them, not the whole answer. A slow local model that writes a long
//! answer is then not abandoned halfway — an abandoned request keeps the
//! server busy, and every retry would queue behind it.
//!
//! The events are read with reqwest directly and folded into one
//! [`ChatResponse`] by [`Accumulator`], which is pure and tested here. It is
//! lenient where servers differ: a stream that ends without `[DONE]` is the
//! answer so far, a JSON body where a stream was asked for is read as a
//! plain completion, and an `error` event is an error. A stream that ends
//! before its first event says nothing at all — llama-cpp-python answers a
//! prompt longer than its context that way, `200` and zero bytes — so the
//! client asks once more without streaming, which gets the real error.

use herald_core::{ChatResponse, LlmError, ToolCall, Usage};
use serde_json::Value;

/// Folds `chat.completion.chunk` events into one response.
#[derive(Debug, Default)]
pub(crate) struct Accumulator {
    content: String,
    saw_content: bool,
    calls: Vec<PartialCall>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    buffer: String,
    done: bool,
    /// Data events read, `[DONE]` included.
    events: usize,
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

impl Accumulator {
    /// Feeds raw bytes as they arrive; returns whether `[DONE]` was seen.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<bool, LlmError> {
        self.buffer.push_str(&String::from_utf8_lossy(bytes));
        // Events end with a blank line; `\r\n` line ends are allowed too.
        loop {
            let normalized = self.buffer.replace("\r\n", "\n");
            let Some(end) = normalized.find("\n\n") else {
                self.buffer = normalized;
                break;
            };
            let event = normalized[..end].to_owned();
            self.buffer = normalized[end + 2..].to_owned();
            self.event(&event)?;
            if self.done {
                break;
            }
        }
        Ok(self.done)
    }

    fn event(&mut self, event: &str) -> Result<(), LlmError> {
        let data: Vec<&str> = event
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(str::trim_start)
            .collect();
        if data.is_empty() {
            return Ok(());
        }
        let data = data.join("\n");
        self.events += 1;
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk: Value = serde_json::from_str(&data).map_err(|err| {
            LlmError::BadResponse(format!(
                "a streamed part is not JSON: {}",
                crate::transport::describe(&err)
            ))
        })?;
        if let Some(error) = chunk.get("error") {
            let status = error["code"]
                .as_u64()
                .and_then(|c| u16::try_from(c).ok())
                .unwrap_or(500);
            let body = serde_json::to_vec(&serde_json::json!({ "error": error })).unwrap_or_default();
            return Err(crate::errors::from_status(status, None, &body));
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(Usage {
                prompt_tokens: usage["prompt_tokens"].as_u64().unwrap_or(0) as u32,
                completion_tokens: usage["completion_tokens"].as_u64().unwrap_or(0) as u32,
            });
        }
        let Some(choice) = chunk["choices"]
            .as_array()
            .and_then(|choices| choices.iter().find(|c| c["index"].as_u64().unwrap_or(0) == 0))
        else {
            return Ok(());
        };
        let delta = &choice["delta"];
        if let Some(text) = delta["content"].as_str() {
            self.saw_content = true;
            self.content.push_str(text);
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = call["index"].as_u64().unwrap_or(0) as usize;
            if index >= 128 {
                return Err(LlmError::BadResponse(
                    "a streamed tool call index is out of range".into(),
                ));
            }
            if self.calls.len() <= index {
                self.calls.resize_with(index + 1, PartialCall::default);
            }
            let partial = &mut self.calls[index];
            if let Some(id) = call["id"].as_str().filter(|id| !id.is_empty()) {
                partial.id = id.to_owned();
            }
            if let Some(name) = call["function"]["name"].as_str() {
                partial.name.push_str(name);
            }
            if let Some(arguments) = call["function"]["arguments"].as_str() {
                partial.arguments.push_str(arguments);
            }
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            self.finish_reason = Some(reason.to_owned());
        }
        Ok(())
    }

    /// Whether the stream carried no event at all.
    pub fn is_silent(&self) -> bool {
        self.events == 0
    }

    /// The answer as received.
    /// The answer's text so far, once there is some.
    pub fn text(&self) -> Option<&str> {
        (!self.content.is_empty()).then_some(self.content.as_str())
    }

    pub fn finish(self) -> ChatResponse {
        let tool_calls = self
            .calls
            .into_iter()
            .enumerate()
            .filter(|(_, call)| !call.name.is_empty())
            .map(|(index, call)| ToolCall {
                id: if call.id.is_empty() {
                    format!("call_{index}")
                } else {
                    call.id
                },
                name: call.name,
                arguments: call.arguments,
            })
            .collect();
        ChatResponse {
            content: self.saw_content.then_some(self.content),
            tool_calls,
            finish_reason: self.finish_reason,
            usage: self.usage,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fold(parts: &[&str]) -> Result<(ChatResponse, bool), LlmError> {
        let mut accumulator = Accumulator::default();
        let mut done = false;
        for part in parts {
            done = accumulator.feed(part.as_bytes())?;
        }
        Ok((accumulator.finish(), done))
    }

    #[test]
    fn text_arrives_in_pieces_split_anywhere() {
        let (response, done) = fold(&[
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"}}]}\n",
            "\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":null}]}\r\n\r\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n",
        ])
        .unwrap();
        assert!(done);
        assert_eq!(response.content.as_deref(), Some("Hello"));
        assert_eq!(response.finish_reason.as_deref(), Some("length"));
        assert_eq!(
            response.usage,
            Some(Usage {
                prompt_tokens: 9,
                completion_tokens: 2
            })
        );
    }

    #[test]
    fn tool_call_arguments_are_concatenated_per_index() {
        let (response, _) = fold(&[
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"city\\\":\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_b\",\"function\":{\"name\":\"get_time\",\"arguments\":\"{}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"Oslo\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
        ])
        .unwrap();
        assert_eq!(response.content, None);
        assert_eq!(
            response.tool_calls,
            vec![
                ToolCall {
                    id: "call_a".into(),
                    name: "get_weather".into(),
                    arguments: "{\"city\":\"Oslo\"}".into()
                },
                ToolCall {
                    id: "call_b".into(),
                    name: "get_time".into(),
                    arguments: "{}".into()
                },
            ]
        );
    }

    #[test]
    fn a_stream_without_events_is_silent_and_one_with_empty_content_is_not() {
        let mut accumulator = Accumulator::default();
        assert!(!accumulator.feed(b": keep-alive\n\n").unwrap());
        assert!(accumulator.is_silent());
        let (response, done) =
            fold(&["data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"finish_reason\":\"stop\"}]}\n\n"])
                .unwrap();
        assert!(!done);
        assert_eq!(response.content.as_deref(), Some(""));
    }

    #[test]
    fn an_error_event_is_an_error() {
        let err = fold(&[
            "data: {\"error\":{\"code\":400,\"message\":\"the request exceeds the available context size\",\"type\":\"exceed_context_size_error\",\"n_ctx\":2048}}\n\n",
        ])
        .unwrap_err();
        assert!(
            matches!(
                err,
                LlmError::ContextOverflow {
                    limit_tokens: Some(2048),
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(matches!(fold(&["data: {not json\n\n"]), Err(LlmError::BadResponse(_))));
    }
}
