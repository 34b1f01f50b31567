//! Readers for recorded request bodies, so tests assert on what the model
//! was shown (the system prompt, the user's words, the tools offered, the
//! tool results fed back) without walking JSON by hand.

use serde_json::Value;

/// The text of a message's `content`: a string, or the `text` parts of an
/// array joined, as the API allows both.
pub fn content_text(message: &Value) -> Option<String> {
    match message.get("content")? {
        Value::String(text) => Some(text.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(|part| part.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(""),
        ),
        _ => None,
    }
}

/// The messages of a request, empty when there are none.
pub fn messages(request: &Value) -> Vec<Value> {
    request
        .get("messages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// The role of every message in order, e.g. `["system", "user", "assistant", "tool"]`.
pub fn roles(request: &Value) -> Vec<String> {
    messages(request)
        .iter()
        .map(|message| message.get("role").and_then(Value::as_str).unwrap_or("").to_owned())
        .collect()
}

/// The text of the last user message.
pub fn last_user_text(request: &Value) -> Option<String> {
    messages(request)
        .iter()
        .rev()
        .find(|message| message.get("role").and_then(Value::as_str) == Some("user"))
        .and_then(content_text)
}

/// The `image_url` URLs of the last user message's content parts, in order.
pub fn image_urls(request: &Value) -> Vec<String> {
    messages(request)
        .iter()
        .rev()
        .find(|message| message.get("role").and_then(Value::as_str) == Some("user"))
        .and_then(|message| message.get("content").and_then(Value::as_array).cloned())
        .unwrap_or_default()
        .iter()
        .filter(|part| part.get("type").and_then(Value::as_str) == Some("image_url"))
        .filter_map(|part| {
            part.pointer("/image_url/url")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .collect()
}

/// All system (and developer) messages' text, joined by blank lines; `None`
/// when there is none.
pub fn system_prompt(request: &Value) -> Option<String> {
    let parts: Vec<String> = messages(request)
        .iter()
        .filter(|message| {
            matches!(
                message.get("role").and_then(Value::as_str),
                Some("system" | "developer")
            )
        })
        .filter_map(content_text)
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

/// The names of the function tools offered, in order.
pub fn tool_names(request: &Value) -> Vec<String> {
    request
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|tool| tool["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

/// `(tool_call_id, content)` of every tool message, in order.
pub fn tool_results(request: &Value) -> Vec<(String, String)> {
    messages(request)
        .iter()
        .filter(|message| message.get("role").and_then(Value::as_str) == Some("tool"))
        .map(|message| {
            let id = message
                .get("tool_call_id")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            (id, content_text(message).unwrap_or_default())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn reads_what_the_model_was_shown() {
        let request = json!({
            "model": "m",
            "messages": [
                { "role": "system", "content": "You are Herald." },
                { "role": "system", "content": [{ "type": "text", "text": "Skills: none" }] },
                { "role": "user", "content": "first" },
                { "role": "assistant", "content": "", "tool_calls": [
                    { "id": "call_1", "type": "function", "function": { "name": "clock", "arguments": "{}" } }
                ] },
                { "role": "tool", "tool_call_id": "call_1", "content": "12:00" },
                { "role": "user", "content": [{ "type": "text", "text": "sec" }, { "type": "text", "text": "ond" }] },
            ],
            "tools": [
                { "type": "function", "function": { "name": "clock", "parameters": {} } },
                { "type": "function", "function": { "name": "send_message", "parameters": {} } },
            ],
        });
        assert_eq!(last_user_text(&request).as_deref(), Some("second"));
        assert_eq!(
            system_prompt(&request).as_deref(),
            Some("You are Herald.\n\nSkills: none")
        );
        assert_eq!(tool_names(&request), ["clock", "send_message"]);
        assert_eq!(tool_results(&request), [("call_1".to_owned(), "12:00".to_owned())]);
        assert_eq!(
            roles(&request),
            ["system", "system", "user", "assistant", "tool", "user"]
        );
    }

    #[test]
    fn empty_requests_read_as_nothing() {
        let request = json!({ "model": "m" });
        assert_eq!(last_user_text(&request), None);
        assert_eq!(system_prompt(&request), None);
        assert!(tool_names(&request).is_empty());
        assert!(tool_results(&request).is_empty());
    }
}
