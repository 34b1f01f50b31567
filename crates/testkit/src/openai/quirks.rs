//! What real OpenAI-compatible servers do that OpenAI does not, so Herald is
//! tested against them and not only against the API's documentation.
//!
//! Each quirk was seen on a real server (llama-cpp-python 0.3.36 with
//! `chatml-function-calling` on this machine kind, see `docs/models.md`) or
//! is documented by the server's project (llama.cpp's server, Ollama, vLLM).
//! The presets ([`Quirks::llama_cpp_python`], [`Quirks::llama_cpp`],
//! [`Quirks::ollama`], [`Quirks::vllm`]) switch on what each one does.
//!
//! Token counts here are the server's own: four characters a token (with a
//! few tokens of framing per message), as a stand-in for a tokenizer — not
//! the estimate Herald counts with, which is the point: Herald must cope
//! with a server that counts differently.

use serde_json::{Value, json};

use super::inspect::{content_text, messages};

/// Which server's shape an over-long prompt is refused in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OverflowStyle {
    /// `400`, OpenAI's body with `code: context_length_exceeded`; a streamed
    /// request gets `200` and an empty body (the error is raised inside the
    /// stream's generator).
    LlamaCppPython,
    /// llama.cpp's `llama-server`: `400` with `type: exceed_context_size_error` and `n_ctx`.
    LlamaCpp,
    /// vLLM: `400` with `object: error` and the window in the message.
    Vllm,
}

/// How the server answers what Herald sends.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Quirks {
    /// Offered tools with automatic choice, a text answer comes back as
    /// `content: ""` with no tool call (llama.cpp's function-calling
    /// grammar lets the model emit a call or end its message).
    pub empty_text_with_tools: bool,
    /// A tool schema with a bound (`maxLength`, `maxItems`, …) this large or
    /// larger crashes the whole server: the connection is reset and nothing
    /// answers afterwards (the grammar's rules overflow the stack).
    pub crash_on_schema_bound: Option<u64>,
    /// Tool-role messages render as empty: the model never sees tool results.
    pub drops_tool_role: bool,
    /// The context window in tokens, and how a longer prompt is refused.
    pub context: Option<(u32, OverflowStyle)>,
    /// `max_tokens` is honoured (answers longer are cut, `finish_reason:
    /// length`), and without it an answer runs on until the context is
    /// full. The plain fake leaves scripted texts as written.
    pub honours_max_tokens: bool,
    /// `GET /props` answers llama.cpp's server properties with `n_ctx`.
    pub props: bool,
    /// Ollama: `POST /api/show` with `model_info` and `parameters`, models
    /// listed as `name:latest`, errors in Ollama's shape.
    pub ollama: bool,
    /// vLLM: `/v1/models` lists `max_model_len`; tool schemas with keywords
    /// its grammar backend does not compile are refused with a `400`.
    pub vllm: bool,
    /// The model's `num_ctx` parameter that `/api/show` reports (Ollama).
    pub ollama_num_ctx: Option<u32>,
}

impl Quirks {
    /// llama-cpp-python's server with `--chat_format chatml-function-calling`.
    pub fn llama_cpp_python(n_ctx: u32) -> Self {
        Self {
            empty_text_with_tools: true,
            crash_on_schema_bound: Some(2000),
            drops_tool_role: true,
            context: Some((n_ctx, OverflowStyle::LlamaCppPython)),
            honours_max_tokens: true,
            ..Self::default()
        }
    }

    /// llama.cpp's own `llama-server`.
    pub fn llama_cpp(n_ctx: u32) -> Self {
        Self {
            empty_text_with_tools: true,
            crash_on_schema_bound: Some(2000),
            context: Some((n_ctx, OverflowStyle::LlamaCpp)),
            honours_max_tokens: true,
            props: true,
            ..Self::default()
        }
    }

    /// Ollama's OpenAI-compatible endpoint.
    pub fn ollama(num_ctx: Option<u32>) -> Self {
        Self {
            honours_max_tokens: true,
            ollama: true,
            ollama_num_ctx: num_ctx,
            ..Self::default()
        }
    }

    /// vLLM's OpenAI-compatible server.
    pub fn vllm(max_model_len: u32) -> Self {
        Self {
            context: Some((max_model_len, OverflowStyle::Vllm)),
            honours_max_tokens: true,
            vllm: true,
            ..Self::default()
        }
    }

    pub(crate) fn window(&self) -> Option<u32> {
        self.context.map(|(tokens, _)| tokens)
    }
}

/// The server's token count of a text.
pub(crate) fn server_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// The server's count of a request's prompt: messages with their framing,
/// and the tool schemas.
pub(crate) fn prompt_tokens(body: &Value) -> usize {
    let messages: usize = messages(body)
        .iter()
        .map(|m| {
            4 + content_text(m).map_or(0, |t| server_tokens(&t))
                + m.get("tool_calls").map_or(0, |c| server_tokens(&c.to_string()))
        })
        .sum();
    let tools = body.get("tools").map_or(0, |tools| server_tokens(&tools.to_string()));
    messages + tools
}

/// The tokens the request asks to keep for the answer.
pub(crate) fn answer_tokens(body: &Value) -> Option<usize> {
    body.get("max_tokens")
        .or_else(|| body.get("max_completion_tokens"))
        .and_then(Value::as_u64)
        .map(|n| n as usize)
}

/// Whether the request offers tools and lets the model choose to call them.
pub(crate) fn tools_on_auto(body: &Value) -> bool {
    let offered = body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    let choice = body.get("tool_choice");
    offered && (choice.is_none() || choice == Some(&json!("auto")))
}

/// The largest bound anywhere in the request's tool schemas.
pub(crate) fn largest_schema_bound(body: &Value) -> u64 {
    fn walk(value: &Value, largest: &mut u64) {
        match value {
            Value::Object(object) => {
                for (key, child) in object {
                    if matches!(key.as_str(), "maxLength" | "minLength" | "maxItems" | "minItems")
                        && let Some(n) = child.as_u64()
                    {
                        *largest = (*largest).max(n);
                    }
                    walk(child, largest);
                }
            }
            Value::Array(items) => items.iter().for_each(|item| walk(item, largest)),
            _ => {}
        }
    }
    let mut largest = 0;
    if let Some(tools) = body.get("tools") {
        walk(tools, &mut largest);
    }
    largest
}

/// Keywords vLLM's grammar backend refused in tool schemas (xgrammar, and
/// outlines before it): found in the first tool that uses one.
pub(crate) fn vllm_unsupported_keyword(body: &Value) -> Option<String> {
    const UNSUPPORTED: [&str; 9] = [
        "pattern",
        "format",
        "$ref",
        "$defs",
        "definitions",
        "oneOf",
        "anyOf",
        "allOf",
        "not",
    ];
    fn walk(value: &Value) -> Option<String> {
        match value {
            Value::Object(object) => object.iter().find_map(|(key, child)| {
                if UNSUPPORTED.contains(&key.as_str()) {
                    Some(key.clone())
                } else {
                    walk(child)
                }
            }),
            Value::Array(items) => items.iter().find_map(walk),
            _ => None,
        }
    }
    body.get("tools")?
        .as_array()?
        .iter()
        .find_map(|tool| walk(tool.get("function")?.get("parameters")?))
}

/// The body a prompt's tool results are shown to the model in, when the
/// chat template drops the tool role: each tool message's content empty.
pub(crate) fn without_tool_results(body: &Value) -> Value {
    let mut body = body.clone();
    if let Some(messages) = body.get_mut("messages").and_then(Value::as_array_mut) {
        for message in messages {
            if message.get("role").and_then(Value::as_str) == Some("tool") {
                message["content"] = Value::String(String::new());
            }
        }
    }
    body
}

/// The refusal of a prompt of `requested` tokens by a server whose window is `window`.
pub(crate) fn overflow_body(style: OverflowStyle, window: u32, prompt: usize, answer: usize) -> Value {
    match style {
        OverflowStyle::LlamaCppPython => json!({"error": {
            "message": format!(
                "This model's maximum context length is {window} tokens. However, you requested {} tokens \
                 ({prompt} in the messages, {answer} in the completion). Please reduce the length of the \
                 messages or completion.",
                prompt + answer
            ),
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }}),
        OverflowStyle::LlamaCpp => json!({"error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": prompt,
            "n_ctx": window,
        }}),
        OverflowStyle::Vllm => json!({
            "object": "error",
            "message": format!(
                "This model's maximum context length is {window} tokens. However, you requested {} tokens \
                 in the messages, Please reduce the length of the messages.",
                prompt + answer
            ),
            "type": "BadRequestError",
            "param": null,
            "code": 400,
        }),
    }
}

/// vLLM's refusal of a tool schema its grammar backend cannot compile.
pub(crate) fn vllm_schema_error(keyword: &str) -> Value {
    json!({
        "object": "error",
        "message": format!("The provided JSON schema contains features not supported by xgrammar: `{keyword}`"),
        "type": "BadRequestError",
        "param": null,
        "code": 400,
    })
}

/// Ollama's error for a model it does not have.
pub(crate) fn ollama_model_not_found(model: &str) -> Value {
    json!({"error": {
        "message": format!("model \"{model}\" not found, try pulling it first"),
        "type": "api_error",
        "param": null,
        "code": null,
    }})
}

/// llama.cpp's `GET /props`, the parts clients read.
pub(crate) fn props(n_ctx: u32, model: &str) -> Value {
    json!({
        "default_generation_settings": {"n_ctx": n_ctx, "params": {"n_predict": -1}},
        "total_slots": 1,
        "model_path": format!("/models/{model}.gguf"),
        "chat_template": "{% for message in messages %}…{% endfor %}",
    })
}

/// Ollama's `POST /api/show`.
pub(crate) fn ollama_show(num_ctx: Option<u32>) -> Value {
    let parameters = match num_ctx {
        Some(n) => format!("num_ctx                        {n}\nstop                           \"<|im_end|>\""),
        None => "stop                           \"<|im_end|>\"".to_owned(),
    };
    json!({
        "modelfile": "FROM /root/.ollama/models/blobs/sha256-…",
        "parameters": parameters,
        "template": "{{ .Prompt }}",
        "details": {"format": "gguf", "family": "llama", "parameter_size": "1.2B", "quantization_level": "Q8_0"},
        "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
        "capabilities": ["completion", "tools"],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_bounds_and_keywords_are_found_anywhere_in_the_tools() {
        let body = json!({"tools": [
            {"type": "function", "function": {"name": "a", "parameters": {"type": "object", "properties": {
                "text": {"type": "string", "maxLength": 20000}}}}},
            {"type": "function", "function": {"name": "b", "parameters": {"type": "object", "properties": {
                "args": {"type": "array", "items": {"type": "string", "pattern": "^x"}, "maxItems": 32}}}}}
        ]});
        assert_eq!(largest_schema_bound(&body), 20000);
        assert_eq!(vllm_unsupported_keyword(&body).as_deref(), Some("pattern"));
        assert_eq!(largest_schema_bound(&json!({})), 0);
        assert_eq!(vllm_unsupported_keyword(&json!({"tools": []})), None);
    }

    #[test]
    fn tool_results_vanish_where_the_template_drops_the_tool_role() {
        let body = json!({"messages": [
            {"role": "user", "content": "weather?"},
            {"role": "tool", "tool_call_id": "c", "content": "sunny"}
        ]});
        let shown = without_tool_results(&body);
        assert_eq!(shown["messages"][1]["content"], "");
        assert_eq!(shown["messages"][0]["content"], "weather?");
    }
}
