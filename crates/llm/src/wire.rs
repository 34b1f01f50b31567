//! Pure translation between Herald's [`ChatRequest`]/[`ChatResponse`] and
//! async-openai's chat completion types.
//!
//! It encodes what "OpenAI-compatible" servers disagree on, in the form all of
//! them accept: an assistant message that carried tool calls is replayed with
//! `content: ""` (llama.cpp answers `null` with a 500), the length limit goes
//! out as `max_tokens` (local servers ignore `max_completion_tokens`), a
//! request without tools has no `tools` key at all (OpenAI refuses `[]`),
//! tool schemas go out in their portable form ([`crate::portable`]), and
//! with `tool_results: user` a tool's result is a user message naming the
//! call, for chat templates that drop the `tool` role.

use async_openai::types::chat::{
    ChatCompletionMessageToolCall, ChatCompletionMessageToolCalls, ChatCompletionRequestAssistantMessage,
    ChatCompletionRequestAssistantMessageContent, ChatCompletionRequestMessage,
    ChatCompletionRequestMessageContentPartImage, ChatCompletionRequestMessageContentPartText,
    ChatCompletionRequestSystemMessage, ChatCompletionRequestSystemMessageContent, ChatCompletionRequestToolMessage,
    ChatCompletionRequestToolMessageContent, ChatCompletionRequestUserMessage, ChatCompletionRequestUserMessageContent,
    ChatCompletionRequestUserMessageContentPart, ChatCompletionTool, ChatCompletionToolChoiceOption,
    ChatCompletionTools, CreateChatCompletionRequest, CreateChatCompletionResponse, FunctionCall, FunctionObject,
    ImageUrl, ToolChoiceOptions,
};
use herald_core::{ChatMessage, ChatRequest, ChatResponse, LlmError, ToolCall, ToolChoice, ToolSpec, Usage};

use crate::config::ToolResults;

/// The parts of a request that come from configuration, not from the turn.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Sampling {
    pub model: String,
    pub temperature: Option<f32>,
    pub max_tokens: Option<u32>,
    pub tool_results: ToolResults,
}

fn message(message: ChatMessage) -> ChatCompletionRequestMessage {
    match message {
        ChatMessage::System { content } => ChatCompletionRequestMessage::System(ChatCompletionRequestSystemMessage {
            content: ChatCompletionRequestSystemMessageContent::Text(content),
            name: None,
        }),
        ChatMessage::User { content, images } if images.is_empty() => {
            ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage {
                content: ChatCompletionRequestUserMessageContent::Text(content),
                name: None,
            })
        }
        // Images go as content parts after the text: the one form every
        // vision-capable OpenAI-compatible server reads.
        ChatMessage::User { content, images } => {
            let text = (!content.is_empty()).then_some(ChatCompletionRequestUserMessageContentPart::Text(
                ChatCompletionRequestMessageContentPartText {
                    text: content,
                    prompt_cache_breakpoint: None,
                },
            ));
            let parts = text
                .into_iter()
                .chain(images.into_iter().map(|image| {
                    ChatCompletionRequestUserMessageContentPart::ImageUrl(
                        ChatCompletionRequestMessageContentPartImage {
                            image_url: ImageUrl {
                                url: image.data_url,
                                detail: None,
                            },
                            prompt_cache_breakpoint: None,
                        },
                    )
                }))
                .collect();
            ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage {
                content: ChatCompletionRequestUserMessageContent::Array(parts),
                name: None,
            })
        }
        ChatMessage::Assistant { content, tool_calls } => {
            let tool_calls: Vec<ChatCompletionMessageToolCalls> = tool_calls
                .into_iter()
                .map(|call| {
                    ChatCompletionMessageToolCalls::Function(ChatCompletionMessageToolCall {
                        id: call.id,
                        function: FunctionCall {
                            name: call.name,
                            arguments: call.arguments,
                        },
                    })
                })
                .collect();
            ChatCompletionRequestMessage::Assistant(ChatCompletionRequestAssistantMessage {
                content: Some(ChatCompletionRequestAssistantMessageContent::Text(
                    content.unwrap_or_default(),
                )),
                tool_calls: (!tool_calls.is_empty()).then_some(tool_calls),
                ..Default::default()
            })
        }
        ChatMessage::Tool { tool_call_id, content } => {
            ChatCompletionRequestMessage::Tool(ChatCompletionRequestToolMessage {
                content: ChatCompletionRequestToolMessageContent::Text(content),
                tool_call_id,
            })
        }
    }
}

fn tool(spec: ToolSpec) -> ChatCompletionTools {
    ChatCompletionTools::Function(ChatCompletionTool {
        function: FunctionObject {
            name: spec.name,
            description: (!spec.description.is_empty()).then_some(spec.description),
            // `null` is not a schema; omitting it means "no parameters".
            parameters: (!spec.parameters.is_null()).then(|| crate::portable::schema(&spec.parameters)),
            strict: None,
        },
    })
}

/// The request body for one model call.
pub(crate) fn request(sampling: &Sampling, request: ChatRequest) -> CreateChatCompletionRequest {
    let has_tools = !request.tools.is_empty();
    let messages = match sampling.tool_results {
        ToolResults::Native => request.messages,
        ToolResults::User => tool_results_as_user_messages(request.messages),
    };
    let tool_choice = match request.tool_choice {
        ToolChoice::Auto => ToolChoiceOptions::Auto,
        ToolChoice::None => ToolChoiceOptions::None,
    };
    #[allow(deprecated)] // `max_tokens` is deprecated by OpenAI but the one local servers honour.
    CreateChatCompletionRequest {
        model: sampling.model.clone(),
        messages: messages.into_iter().map(message).collect(),
        tools: has_tools.then(|| request.tools.into_iter().map(tool).collect()),
        tool_choice: has_tools.then_some(ChatCompletionToolChoiceOption::Mode(tool_choice)),
        temperature: sampling.temperature,
        max_tokens: sampling.max_tokens,
        ..Default::default()
    }
}

/// Turns a tool round into plain chat for templates that drop the `tool`
/// role: the assistant's calls become text that names each call, and each
/// run of results one user message naming the calls it answers —
/// `[Result of tool call get_weather (call_1)]` and the text. No message
/// then carries `tool_calls` without `tool` answers (which OpenAI-style
/// validation refuses), and user and assistant turns keep alternating,
/// which some chat templates insist on.
fn tool_results_as_user_messages(messages: Vec<ChatMessage>) -> Vec<ChatMessage> {
    let mut names = std::collections::HashMap::new();
    let mut out: Vec<ChatMessage> = Vec::with_capacity(messages.len());
    let mut pending: Vec<String> = Vec::new();
    let flush = |pending: &mut Vec<String>, out: &mut Vec<ChatMessage>| {
        if !pending.is_empty() {
            out.push(ChatMessage::user(pending.join("\n\n")));
            pending.clear();
        }
    };
    for message in messages {
        match message {
            ChatMessage::Tool { tool_call_id, content } => {
                let name = names.get(&tool_call_id).map_or("a tool", String::as_str);
                pending.push(format!("[Result of tool call {name} ({tool_call_id})]\n{content}"));
            }
            ChatMessage::Assistant { content, tool_calls } if !tool_calls.is_empty() => {
                flush(&mut pending, &mut out);
                let mut text = content.unwrap_or_default();
                for call in tool_calls {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(&format!(
                        "[Called tool {} ({}) with {}]",
                        call.name, call.id, call.arguments
                    ));
                    names.insert(call.id, call.name);
                }
                out.push(ChatMessage::assistant(text));
            }
            other => {
                flush(&mut pending, &mut out);
                out.push(other);
            }
        }
    }
    flush(&mut pending, &mut out);
    out
}

/// Choice 0 of a completion, arguments exactly as the model wrote them.
pub(crate) fn response(response: CreateChatCompletionResponse) -> Result<ChatResponse, LlmError> {
    let usage = response.usage.map(|usage| Usage {
        prompt_tokens: usage.prompt_tokens,
        completion_tokens: usage.completion_tokens,
    });
    let choice = response
        .choices
        .into_iter()
        .min_by_key(|choice| choice.index)
        .ok_or_else(|| LlmError::BadResponse("the completion has no choices".into()))?;
    let tool_calls = choice
        .message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .map(|call| match call {
            ChatCompletionMessageToolCalls::Function(call) => ToolCall {
                id: call.id,
                name: call.function.name,
                arguments: call.function.arguments,
            },
            // Herald offers only function tools; a custom call is passed on so
            // the toolbox refuses it by name like any unknown tool.
            ChatCompletionMessageToolCalls::Custom(call) => ToolCall {
                id: call.id,
                name: call.custom_tool.name,
                arguments: call.custom_tool.input,
            },
        })
        .collect();
    let finish_reason = choice
        .finish_reason
        .and_then(|reason| serde_json::to_value(reason).ok())
        .and_then(|value| value.as_str().map(str::to_owned));
    Ok(ChatResponse {
        content: choice.message.content,
        tool_calls,
        finish_reason,
        usage,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn sampling() -> Sampling {
        Sampling {
            model: "gpt-4o-mini".into(),
            temperature: None,
            max_tokens: None,
            tool_results: ToolResults::Native,
        }
    }

    fn body(sampling: &Sampling, chat: ChatRequest) -> Value {
        serde_json::to_value(request(sampling, chat)).unwrap()
    }

    #[test]
    fn messages_go_out_in_the_shape_every_server_accepts() {
        let chat = ChatRequest {
            messages: vec![
                ChatMessage::system("You are Herald."),
                ChatMessage::user("weather in Oslo?"),
                ChatMessage::Assistant {
                    content: None,
                    tool_calls: vec![ToolCall {
                        id: "call_1".into(),
                        name: "get_weather".into(),
                        arguments: r#"{"city":"Oslo"}"#.into(),
                    }],
                },
                ChatMessage::Tool {
                    tool_call_id: "call_1".into(),
                    content: "sunny".into(),
                },
                ChatMessage::Assistant {
                    content: None,
                    tool_calls: vec![],
                },
            ],
            tools: vec![],
            tool_choice: ToolChoice::Auto,
        };
        assert_eq!(
            body(&sampling(), chat),
            json!({
                "model": "gpt-4o-mini",
                "messages": [
                    { "role": "system", "content": "You are Herald." },
                    { "role": "user", "content": "weather in Oslo?" },
                    { "role": "assistant", "content": "", "tool_calls": [
                        { "type": "function", "id": "call_1",
                          "function": { "name": "get_weather", "arguments": "{\"city\":\"Oslo\"}" } }
                    ] },
                    { "role": "tool", "tool_call_id": "call_1", "content": "sunny" },
                    { "role": "assistant", "content": "" },
                ],
            })
        );
    }

    #[test]
    fn tools_are_functions_with_automatic_choice_and_absent_when_none() {
        let tools = vec![
            ToolSpec {
                name: "get_weather".into(),
                description: "Current weather".into(),
                parameters: json!({ "type": "object", "properties": { "city": { "type": "string" } } }),
            },
            ToolSpec {
                name: "ping".into(),
                description: String::new(),
                parameters: Value::Null,
            },
        ];
        let with_tools = body(&sampling(), ChatRequest::new(vec![ChatMessage::user("hi")], tools));
        assert_eq!(
            with_tools["tools"],
            json!([
                { "type": "function", "function": { "name": "get_weather", "description": "Current weather",
                  "parameters": { "type": "object", "properties": { "city": { "type": "string" } } } } },
                { "type": "function", "function": { "name": "ping" } },
            ])
        );
        assert_eq!(with_tools["tool_choice"], "auto");

        let without = body(&sampling(), ChatRequest::new(vec![ChatMessage::user("hi")], vec![]));
        assert!(
            without.get("tools").is_none() && without.get("tool_choice").is_none(),
            "{without}"
        );
    }

    #[test]
    fn sampling_settings_use_max_tokens() {
        let settings = Sampling {
            model: "llama3".into(),
            temperature: Some(0.5),
            max_tokens: Some(100),
            tool_results: ToolResults::Native,
        };
        let sent = body(&settings, ChatRequest::new(vec![ChatMessage::user("hi")], vec![]));
        assert_eq!(sent["model"], "llama3");
        assert_eq!(sent["temperature"], 0.5);
        assert_eq!(sent["max_tokens"], 100);
        assert!(sent.get("max_completion_tokens").is_none());
    }

    #[test]
    fn tool_choice_none_keeps_the_tools_and_forbids_calls() {
        let mut chat = ChatRequest::new(
            vec![ChatMessage::user("hi")],
            vec![ToolSpec {
                name: "ping".into(),
                description: String::new(),
                parameters: json!({"type": "object"}),
            }],
        );
        chat.tool_choice = ToolChoice::None;
        let sent = body(&sampling(), chat);
        assert_eq!(sent["tool_choice"], "none");
        assert_eq!(sent["tools"][0]["function"]["name"], "ping");
    }

    #[test]
    fn advertised_schemas_are_portable() {
        let chat = ChatRequest::new(
            vec![ChatMessage::user("hi")],
            vec![ToolSpec {
                name: "send".into(),
                description: "Send".into(),
                parameters: json!({"type": "object", "properties": {"text": {"type": "string", "maxLength": 20000}}}),
            }],
        );
        let sent = body(&sampling(), chat);
        assert_eq!(
            sent["tools"][0]["function"]["parameters"],
            json!({"type": "object", "properties": {"text": {"type": "string"}}})
        );
    }

    #[test]
    fn tool_rounds_can_travel_as_plain_chat_naming_each_call() {
        let call = |id: &str, name: &str| ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: "{}".into(),
        };
        let chat = ChatRequest::new(
            vec![
                ChatMessage::user("weather and time?"),
                ChatMessage::Assistant {
                    content: None,
                    tool_calls: vec![call("call_1", "get_weather"), call("call_2", "get_time")],
                },
                ChatMessage::Tool {
                    tool_call_id: "call_1".into(),
                    content: "sunny".into(),
                },
                ChatMessage::Tool {
                    tool_call_id: "call_2".into(),
                    content: "noon".into(),
                },
                ChatMessage::Tool {
                    tool_call_id: "call_9".into(),
                    content: "stray".into(),
                },
            ],
            vec![],
        );
        let settings = Sampling {
            tool_results: ToolResults::User,
            ..sampling()
        };
        let sent = body(&settings, chat);
        let messages = sent["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 3, "{sent}");
        assert_eq!(messages[1]["role"], "assistant");
        assert!(messages[1].get("tool_calls").is_none(), "{sent}");
        assert_eq!(
            messages[1]["content"],
            "[Called tool get_weather (call_1) with {}]\n[Called tool get_time (call_2) with {}]"
        );
        assert_eq!(messages[2]["role"], "user");
        assert_eq!(
            messages[2]["content"],
            "[Result of tool call get_weather (call_1)]\nsunny\n\n[Result of tool call get_time (call_2)]\nnoon\n\n\
             [Result of tool call a tool (call_9)]\nstray"
        );
    }

    fn completion(choices: Value) -> CreateChatCompletionResponse {
        serde_json::from_value(json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
            "choices": choices,
            "usage": { "prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14 },
        }))
        .unwrap()
    }

    #[test]
    fn reads_choice_zero_with_arguments_as_written() {
        let answer = response(completion(json!([
            { "index": 1, "message": { "role": "assistant", "content": "second" }, "finish_reason": "stop" },
            { "index": 0, "message": { "role": "assistant", "content": null, "tool_calls": [
                { "id": "call_9", "type": "function", "function": { "name": "f", "arguments": "{broken" } }
            ] }, "finish_reason": "tool_calls" },
        ])))
        .unwrap();
        assert_eq!(
            answer,
            ChatResponse {
                content: None,
                tool_calls: vec![ToolCall {
                    id: "call_9".into(),
                    name: "f".into(),
                    arguments: "{broken".into(),
                }],
                finish_reason: Some("tool_calls".into()),
                usage: Some(Usage {
                    prompt_tokens: 11,
                    completion_tokens: 3,
                }),
            }
        );
    }

    #[test]
    fn a_completion_without_choices_is_a_bad_response() {
        let err = response(completion(json!([]))).unwrap_err();
        assert!(
            matches!(err, LlmError::BadResponse(ref m) if m.contains("no choices")),
            "{err}"
        );
    }
}
