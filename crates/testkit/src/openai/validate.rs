//! The request checks the real chat completions API makes before a model
//! sees anything, with its messages, so a client bug that OpenAI would answer
//! with a 400 fails the same way in tests: missing `model` or `messages`, an
//! empty `tools` array, `tool_choice` without tools, and tool messages that do
//! not answer the tool calls before them.
//!
//! It must stay lenient about everything else: a fake that rejects what
//! OpenAI accepts would hide nothing and break honest clients.

use std::collections::BTreeSet;

use serde_json::Value;

/// Why a request was refused, as OpenAI words it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Rejection {
    pub message: String,
    pub param: Option<String>,
    pub code: Option<String>,
}

impl Rejection {
    fn new(message: impl Into<String>, param: Option<String>, code: Option<&str>) -> Self {
        Self {
            message: message.into(),
            param,
            code: code.map(str::to_owned),
        }
    }

    fn missing(param: &str) -> Self {
        Self::new(
            format!("Missing required parameter: '{param}'."),
            Some(param.to_owned()),
            Some("missing_required_parameter"),
        )
    }
}

const ROLES: [&str; 6] = ["system", "developer", "user", "assistant", "tool", "function"];

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Checks a chat completions request body.
pub(crate) fn chat_request(body: &Value) -> Result<(), Rejection> {
    let Some(object) = body.as_object() else {
        return Err(Rejection::new(
            format!(
                "Invalid type for request body: expected an object, but got {} instead.",
                json_type(body)
            ),
            None,
            Some("invalid_type"),
        ));
    };
    match object.get("model") {
        Some(Value::String(model)) if !model.is_empty() => {}
        _ => return Err(Rejection::new("you must provide a model parameter", None, None)),
    }
    let messages = match object.get("messages") {
        None | Some(Value::Null) => return Err(Rejection::missing("messages")),
        Some(Value::Array(messages)) => messages,
        Some(other) => {
            return Err(Rejection::new(
                format!(
                    "Invalid type for 'messages': expected an array, but got {} instead.",
                    json_type(other)
                ),
                Some("messages".into()),
                Some("invalid_type"),
            ));
        }
    };
    if messages.is_empty() {
        return Err(empty_array("messages"));
    }
    messages_in_order(messages)?;
    let has_tools = match object.get("tools") {
        None | Some(Value::Null) => false,
        Some(Value::Array(tools)) if tools.is_empty() => return Err(empty_array("tools")),
        Some(Value::Array(tools)) => {
            tools_are_functions(tools)?;
            true
        }
        Some(other) => {
            return Err(Rejection::new(
                format!(
                    "Invalid type for 'tools': expected an array, but got {} instead.",
                    json_type(other)
                ),
                Some("tools".into()),
                Some("invalid_type"),
            ));
        }
    };
    if !has_tools && object.get("tool_choice").is_some_and(|choice| !choice.is_null()) {
        return Err(Rejection::new(
            "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
            Some("tool_choice".into()),
            None,
        ));
    }
    Ok(())
}

fn empty_array(param: &str) -> Rejection {
    Rejection::new(
        format!(
            "Invalid '{param}': empty array. Expected an array with minimum length 1, but got an empty array instead."
        ),
        Some(param.to_owned()),
        Some("empty_array"),
    )
}

fn tools_are_functions(tools: &[Value]) -> Result<(), Rejection> {
    for (index, tool) in tools.iter().enumerate() {
        if tool["type"] != "function" && tool["type"] != "custom" {
            return Err(Rejection::missing(&format!("tools[{index}].type")));
        }
        if tool["type"] == "function" && !tool["function"]["name"].is_string() {
            return Err(Rejection::missing(&format!("tools[{index}].function.name")));
        }
    }
    Ok(())
}

fn unanswered(assistant_index: usize, ids: &BTreeSet<String>) -> Rejection {
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    Rejection::new(
        format!(
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
            ids.join(", ")
        ),
        Some(format!("messages.[{assistant_index}].role")),
        None,
    )
}

/// Roles are known, text messages have content, and every tool message
/// answers a pending call of the assistant message right before it.
fn messages_in_order(messages: &[Value]) -> Result<(), Rejection> {
    // The assistant message whose tool calls still wait for answers.
    let mut pending: Option<(usize, BTreeSet<String>)> = None;
    for (index, message) in messages.iter().enumerate() {
        let role = match message.get("role") {
            Some(Value::String(role)) => role.as_str(),
            _ => return Err(Rejection::missing(&format!("messages.[{index}].role"))),
        };
        if !ROLES.contains(&role) {
            return Err(Rejection::new(
                format!(
                    "Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'."
                ),
                Some(format!("messages.[{index}].role")),
                Some("invalid_value"),
            ));
        }
        if role == "tool" {
            let id = message.get("tool_call_id").and_then(Value::as_str);
            let Some(id) = id else {
                return Err(Rejection::missing(&format!("messages.[{index}].tool_call_id")));
            };
            let answered = pending.as_mut().is_some_and(|(_, ids)| ids.remove(id));
            if !answered {
                return Err(Rejection::new(
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
                    Some(format!("messages.[{index}].role")),
                    None,
                ));
            }
            continue;
        }
        if let Some((assistant_index, ids)) = pending.take()
            && !ids.is_empty()
        {
            return Err(unanswered(assistant_index, &ids));
        }
        content_parts(index, role, message)?;
        let tool_calls = message.get("tool_calls").and_then(Value::as_array);
        let has_content = message.get("content").is_some_and(|content| !content.is_null());
        match (role, tool_calls) {
            ("assistant", Some(calls)) if !calls.is_empty() => {
                let ids = calls
                    .iter()
                    .filter_map(|call| call.get("id").and_then(Value::as_str).map(str::to_owned))
                    .collect();
                pending = Some((index, ids));
            }
            _ if !has_content => return Err(Rejection::missing(&format!("messages.[{index}].content"))),
            _ => {}
        }
    }
    match pending {
        Some((assistant_index, ids)) if !ids.is_empty() => Err(unanswered(assistant_index, &ids)),
        _ => Ok(()),
    }
}

/// A content array as OpenAI checks it: every part has a known `type` and
/// its field (`text`, or `image_url.url` as an http(s) or base64 image data
/// URL), and images come only in user messages.
fn content_parts(index: usize, role: &str, message: &Value) -> Result<(), Rejection> {
    let Some(parts) = message.get("content").and_then(Value::as_array) else {
        return Ok(());
    };
    for (at, part) in parts.iter().enumerate() {
        let param = format!("messages.[{index}].content.[{at}]");
        match part.get("type").and_then(Value::as_str) {
            Some("text") if part.get("text").is_some_and(Value::is_string) => {}
            Some("text") => return Err(Rejection::missing(&format!("{param}.text"))),
            Some("image_url") if role != "user" => {
                return Err(Rejection::new(
                    format!(
                        "Invalid 'messages[{index}]'. Image URLs are only allowed for messages with role 'user', but this message with role '{role}' contains an image URL."
                    ),
                    Some(format!("messages.[{index}]")),
                    Some("invalid_value"),
                ));
            }
            Some("image_url") => {
                let url = part
                    .pointer("/image_url/url")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let data_ok = url
                    .strip_prefix("data:image/")
                    .and_then(|rest| rest.split_once(";base64,"))
                    .is_some_and(|(kind, data)| ["png", "jpeg", "gif", "webp"].contains(&kind) && !data.is_empty());
                if !(data_ok || url.starts_with("https://") || url.starts_with("http://")) {
                    return Err(Rejection::new(
                        "Invalid image URL: expected an http(s) URL or a base64-encoded data URL of a png, jpeg, gif or webp image.",
                        Some(format!("{param}.image_url.url")),
                        Some("invalid_image_url"),
                    ));
                }
            }
            _ => {
                return Err(Rejection::new(
                    format!(
                        "Invalid value: '{}'. Supported values are: 'text', 'image_url', 'input_audio', 'refusal', and 'file'.",
                        part.get("type").and_then(Value::as_str).unwrap_or("")
                    ),
                    Some(format!("{param}.type")),
                    Some("invalid_value"),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn user(text: &str) -> Value {
        json!({ "role": "user", "content": text })
    }

    fn assistant_calls(ids: &[&str]) -> Value {
        let calls: Vec<Value> = ids
            .iter()
            .map(|id| json!({ "id": id, "type": "function", "function": { "name": "f", "arguments": "{}" } }))
            .collect();
        json!({ "role": "assistant", "content": null, "tool_calls": calls })
    }

    fn tool(id: &str) -> Value {
        json!({ "role": "tool", "tool_call_id": id, "content": "ok" })
    }

    fn request(messages: Vec<Value>) -> Value {
        json!({ "model": "m", "messages": messages })
    }

    #[test]
    fn accepts_what_openai_accepts() {
        for body in [
            request(vec![user("hi")]),
            request(vec![json!({"role": "system", "content": "be kind"}), user("hi")]),
            request(vec![user("hi"), assistant_calls(&["a", "b"]), tool("b"), tool("a")]),
            request(vec![
                user("hi"),
                assistant_calls(&["a"]),
                tool("a"),
                json!({"role": "assistant", "content": "done"}),
            ]),
            request(vec![
                user("hi"),
                json!({"role": "assistant", "content": "", "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}),
                tool("a"),
            ]),
            json!({ "model": "m", "messages": [user("hi")], "tools": [
                {"type": "function", "function": {"name": "f", "parameters": {}}}], "tool_choice": "auto" }),
            json!({ "model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}] }),
            json!({ "model": "m", "messages": [{"role": "user", "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}}]}] }),
        ] {
            assert_eq!(chat_request(&body), Ok(()), "{body}");
        }
    }

    #[test]
    fn refuses_what_openai_refuses_and_names_the_parameter() {
        for (body, param, words) in [
            (json!({ "messages": [user("hi")] }), None, "must provide a model"),
            (
                json!({ "model": "", "messages": [user("hi")] }),
                None,
                "must provide a model",
            ),
            (json!({ "model": "m" }), Some("messages"), "Missing required parameter"),
            (
                json!({ "model": "m", "messages": "hi" }),
                Some("messages"),
                "expected an array",
            ),
            (request(vec![]), Some("messages"), "empty array"),
            (
                request(vec![json!({"role": "user", "content": [
                    {"type": "image_url", "image_url": {"url": "data:application/zip;base64,UEsD"}}]})]),
                Some("messages.[0].content.[0].image_url.url"),
                "Invalid image URL",
            ),
            (
                request(vec![json!({"role": "assistant", "content": [
                    {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]})]),
                Some("messages.[0]"),
                "only allowed for messages with role 'user'",
            ),
            (
                request(vec![json!({"role": "user", "content": [{"type": "picture"}]})]),
                Some("messages.[0].content.[0].type"),
                "Invalid value",
            ),
            (
                request(vec![json!({"role": "robot", "content": "x"})]),
                Some("messages.[0].role"),
                "Invalid value",
            ),
            (
                request(vec![json!({"content": "x"})]),
                Some("messages.[0].role"),
                "Missing",
            ),
            (
                request(vec![json!({"role": "user"})]),
                Some("messages.[0].content"),
                "Missing",
            ),
            (
                request(vec![user("hi"), tool("a")]),
                Some("messages.[1].role"),
                "must be a response",
            ),
            (
                request(vec![user("hi"), assistant_calls(&["a"]), tool("b")]),
                Some("messages.[2].role"),
                "must be a response",
            ),
            (
                request(vec![user("hi"), assistant_calls(&["a"]), tool("a"), tool("a")]),
                Some("messages.[3].role"),
                "must be a response",
            ),
            (
                request(vec![user("hi"), assistant_calls(&["a", "b"]), tool("a")]),
                Some("messages.[1].role"),
                "did not have response messages: b",
            ),
            (
                request(vec![user("hi"), assistant_calls(&["a"]), user("again")]),
                Some("messages.[1].role"),
                "did not have response messages: a",
            ),
            (
                json!({ "model": "m", "messages": [user("hi")], "tools": [] }),
                Some("tools"),
                "empty array",
            ),
            (
                json!({ "model": "m", "messages": [user("hi")], "tool_choice": "auto" }),
                Some("tool_choice"),
                "only allowed when 'tools'",
            ),
            (
                json!({ "model": "m", "messages": [user("hi")], "tools": [{"type": "function", "function": {}}] }),
                Some("tools[0].function.name"),
                "Missing",
            ),
        ] {
            let rejection = chat_request(&body).expect_err(&body.to_string());
            assert_eq!(rejection.param.as_deref(), param, "{body}");
            assert!(rejection.message.contains(words), "{body}: {}", rejection.message);
        }
    }
}
