//! The model client against herald-testkit's scripted OpenAI server: what
//! goes on the wire, what comes back, and how often it retries.

use std::time::Duration;

use herald_core::{ChatMessage, ChatModel, ChatRequest, LlmError, ToolSpec};
use herald_llm::{LlmConfig, OpenAiModel, check, model_from_config};
use herald_testkit::openai::{roles, tool_names, tool_results};
use herald_testkit::{Reply, ScriptedModel};
use serde_json::json;

fn config(model: &ScriptedModel) -> LlmConfig {
    LlmConfig {
        base_url: model.base_url(),
        api_key: "sk-test".into(),
        model: "gpt-4o-mini".into(),
        max_retries: 3,
        retry_base: Duration::from_secs(1),
        retry_max: Duration::from_secs(30),
        ..LlmConfig::default()
    }
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest::new(
        vec![ChatMessage::system("You are Herald."), ChatMessage::user(text)],
        vec![],
    )
}

fn weather_tool() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: "Current weather for a city".into(),
        parameters: json!({ "type": "object", "properties": { "city": { "type": "string" } }, "required": ["city"] }),
    }
}

#[tokio::test]
async fn a_text_reply_comes_back_with_usage() {
    let server = ScriptedModel::start().await;
    let model = model_from_config(&LlmConfig {
        temperature: Some(0.3),
        max_tokens: 64,
        ..config(&server)
    })
    .unwrap();

    let response = model.complete(ask("hello")).await.unwrap();

    assert_eq!(response.content.as_deref(), Some("echo: hello"));
    assert!(response.tool_calls.is_empty());
    assert_eq!(response.finish_reason.as_deref(), Some("stop"));
    assert!(response.usage.is_some_and(|u| u.prompt_tokens > 0));
    let sent = &server.requests()[0];
    assert_eq!(sent["model"], "gpt-4o-mini");
    assert_eq!(roles(sent), ["system", "user"]);
    assert_eq!(sent["max_tokens"], 64);
    assert!(sent.get("max_completion_tokens").is_none());
    assert!(
        sent.get("tools").is_none() && sent.get("tool_choice").is_none(),
        "{sent}"
    );
    assert!(sent.get("stream").is_none_or(|s| s == false));
    assert_eq!(server.recorded()[0].authorization.as_deref(), Some("Bearer sk-test"));
}

#[tokio::test]
async fn a_tool_call_round_trip_replays_the_call_and_its_result() {
    let server = ScriptedModel::start().await;
    server.push(Reply::tool_call("get_weather", json!({ "city": "Oslo" })));
    server.push(Reply::text("It is sunny in Oslo."));
    let model = model_from_config(&config(&server)).unwrap();
    let mut request = ask("weather in Oslo?");
    request.tools = vec![weather_tool()];

    let first = model.complete(request.clone()).await.unwrap();
    assert_eq!(first.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(first.content, None);
    let call = first.tool_calls[0].clone();
    assert_eq!(
        (call.name.as_str(), call.arguments.as_str()),
        ("get_weather", r#"{"city":"Oslo"}"#)
    );
    request.messages.push(ChatMessage::Assistant {
        content: first.content,
        tool_calls: first.tool_calls,
    });
    request.messages.push(ChatMessage::Tool {
        tool_call_id: call.id.clone(),
        content: "sunny, 21°C".into(),
    });
    let second = model.complete(request).await.unwrap();

    assert_eq!(second.content.as_deref(), Some("It is sunny in Oslo."));
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "both requests passed the server's validation");
    let offered = &requests[0];
    assert_eq!(tool_names(offered), ["get_weather"]);
    assert_eq!(offered["tools"][0]["type"], "function");
    assert_eq!(
        offered["tools"][0]["function"]["parameters"]["required"],
        json!(["city"])
    );
    assert_eq!(offered["tool_choice"], "auto");
    let replay = &requests[1];
    assert_eq!(roles(replay), ["system", "user", "assistant", "tool"]);
    let assistant = &replay["messages"][2];
    assert_eq!(assistant["content"], "", "llama.cpp refuses null content here");
    assert_eq!(
        assistant["tool_calls"],
        json!([{ "id": call.id, "type": "function",
                 "function": { "name": "get_weather", "arguments": "{\"city\":\"Oslo\"}" } }])
    );
    assert_eq!(tool_results(replay), [(call.id, "sunny, 21°C".to_owned())]);
}

#[tokio::test(start_paused = true)]
async fn a_rate_limit_waits_the_servers_retry_after_then_succeeds() {
    let server = ScriptedModel::start().await;
    server.push(Reply::rate_limited(5));
    server.push(Reply::text("finally"));
    let model = model_from_config(&config(&server)).unwrap();

    let response = model.complete(ask("hi")).await.unwrap();

    assert_eq!(response.content.as_deref(), Some("finally"));
    let recorded = server.recorded();
    assert_eq!(recorded.len(), 2);
    let gap = recorded[1].at - recorded[0].at;
    assert!(
        gap >= Duration::from_secs(5) && gap < Duration::from_secs(6),
        "waited {gap:?}: the server's 5s, not the 1s backoff"
    );
}

#[tokio::test(start_paused = true)]
async fn server_errors_are_retried_up_to_the_limit_then_returned() {
    let server = ScriptedModel::start().await;
    for _ in 0..5 {
        server.push(Reply::error(
            500,
            "The server had an error while processing your request",
        ));
    }
    let model = model_from_config(&LlmConfig {
        max_retries: 2,
        ..config(&server)
    })
    .unwrap();

    let error = model.complete(ask("hi")).await.unwrap_err();

    assert!(matches!(error, LlmError::Server { status: 500, .. }), "{error}");
    assert!(error.to_string().contains("had an error"), "{error}");
    let recorded = server.recorded();
    assert_eq!(recorded.len(), 3, "one attempt and two retries");
    let gaps: Vec<Duration> = recorded.windows(2).map(|w| w[1].at - w[0].at).collect();
    assert!(
        gaps[0] >= Duration::from_secs(1) && gaps[1] >= Duration::from_secs(2),
        "{gaps:?}"
    );
}

#[tokio::test]
async fn a_refused_request_is_not_retried() {
    let server = ScriptedModel::start().await;
    server.push(Reply::error(400, "Invalid 'messages[1].content'"));
    let model = model_from_config(&config(&server)).unwrap();

    let error = model.complete(ask("hi")).await.unwrap_err();

    assert!(matches!(error, LlmError::Rejected { status: 400, .. }), "{error}");
    assert!(error.to_string().contains("Invalid 'messages[1].content'"), "{error}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn async_openai_does_not_retry_underneath() {
    let server = ScriptedModel::start().await;
    server.push(Reply::error(500, "boom"));
    server.push(Reply::rate_limited(1));
    server.push(Reply::error(503, "busy"));
    let model = model_from_config(&LlmConfig {
        max_retries: 0,
        ..config(&server)
    })
    .unwrap();

    let errors = [
        model.complete(ask("a")).await.unwrap_err(),
        model.complete(ask("b")).await.unwrap_err(),
        model.complete(ask("c")).await.unwrap_err(),
    ];

    assert_eq!(server.requests().len(), 3, "one request per call: {errors:?}");
    assert!(matches!(errors[1], LlmError::RateLimited { retry_after: Some(d) } if d == Duration::from_secs(1)));
}

#[tokio::test]
async fn a_refused_connection_names_the_base_url() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
    drop(listener);
    let config = LlmConfig {
        base_url: base_url.clone(),
        ..LlmConfig::default()
    };

    let error = OpenAiModel::new(&config)
        .unwrap()
        .complete(ask("hi"))
        .await
        .unwrap_err();
    let probed = check(&config, vec![]).await.unwrap_err();

    for error in [error, probed] {
        assert!(matches!(error, LlmError::Connect(_)), "{error}");
        let text = error.to_string();
        assert!(text.contains("llm.base_url") && text.contains(&base_url), "{text}");
        assert!(!text.contains('\n'), "one line: {text}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_slow_model_times_out_after_request_timeout() {
    let server = ScriptedModel::start().await;
    server.push(Reply::Delayed(
        Duration::from_secs(120),
        Box::new(Reply::text("too late")),
    ));
    let config = LlmConfig {
        request_timeout: Duration::from_secs(2),
        ..config(&server)
    };

    let error = OpenAiModel::new(&config)
        .unwrap()
        .complete(ask("hi"))
        .await
        .unwrap_err();

    assert!(
        matches!(error, LlmError::Timeout(d) if d == Duration::from_secs(2)),
        "{error}"
    );
}

#[tokio::test]
async fn an_unreadable_answer_is_a_bad_response_and_not_retried() {
    let server = ScriptedModel::start().await;
    server.push(Reply::Raw(200, r#"{"choices": "the user's words"}"#.into()));
    server.push(Reply::Raw(
        200,
        r#"{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[]}"#.into(),
    ));
    let model = model_from_config(&config(&server)).unwrap();

    let undecodable = model.complete(ask("hi")).await.unwrap_err();
    let empty = model.complete(ask("hi")).await.unwrap_err();

    assert!(matches!(undecodable, LlmError::BadResponse(_)), "{undecodable}");
    assert!(!undecodable.to_string().contains("user's words"), "{undecodable}");
    assert!(
        matches!(empty, LlmError::BadResponse(ref m) if m.contains("no choices")),
        "{empty}"
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_trailing_slash_in_the_base_url_is_harmless() {
    let server = ScriptedModel::start().await;
    let model = OpenAiModel::new(&LlmConfig {
        base_url: format!("{}/", server.base_url()),
        ..config(&server)
    })
    .unwrap();

    assert_eq!(
        model.complete(ask("hi")).await.unwrap().content.as_deref(),
        Some("echo: hi")
    );
}

#[tokio::test]
async fn the_check_sends_one_tiny_completion_with_the_real_tools() {
    let server = ScriptedModel::start().await;
    let found = check(&config(&server), vec![weather_tool()]).await.unwrap();

    assert!(
        found.contains(&server.base_url()) && found.contains("`gpt-4o-mini`") && found.contains("1 tools"),
        "{found}"
    );
    assert!(found.contains("context window 32768 tokens (default"), "{found}");
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "one completion");
    assert_eq!(tool_names(&requests[0]), ["get_weather"]);
    assert_eq!(requests[0]["max_tokens"], 16);
}

#[tokio::test]
async fn the_check_fails_for_a_model_the_server_does_not_serve() {
    let server = ScriptedModel::start().await;
    let error = check(
        &LlmConfig {
            model: "llama3".into(),
            ..config(&server)
        },
        vec![],
    )
    .await
    .unwrap_err()
    .to_string();

    assert!(
        error.contains("`llama3` is not served") && error.contains("gpt-4o-mini"),
        "{error}"
    );
    assert!(server.requests().is_empty(), "no completion was tried");
}

#[tokio::test]
async fn the_check_names_the_key_when_it_is_refused() {
    let server = ScriptedModel::start().await;
    server.require_api_key("sk-right");

    let wrong = check(&config(&server), vec![]).await.unwrap_err().to_string();
    let empty = check(
        &LlmConfig {
            api_key: "".into(),
            ..config(&server)
        },
        vec![],
    )
    .await
    .unwrap_err()
    .to_string();

    assert!(
        wrong.contains("401") && wrong.contains("llm.base_url") && wrong.contains("check llm.api_key"),
        "{wrong}"
    );
    assert!(empty.contains("llm.api_key is empty"), "{empty}");
    assert!(!wrong.contains("sk-test"), "{wrong}");
}

#[tokio::test]
async fn the_check_hints_at_a_missing_v1() {
    let server = ScriptedModel::start().await;
    let without_v1 = server.base_url().trim_end_matches("/v1").to_owned();

    let error = check(
        &LlmConfig {
            base_url: without_v1,
            ..config(&server)
        },
        vec![],
    )
    .await
    .unwrap_err()
    .to_string();

    assert!(error.contains("404") && error.contains("/v1"), "{error}");
}

#[tokio::test]
async fn a_password_in_the_base_url_never_reaches_a_message() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let config = LlmConfig {
        base_url: format!("http://herald:hunter2-secret@{address}/v1?api_key=also-secret"),
        ..LlmConfig::default()
    };
    let model = OpenAiModel::new(&config).unwrap();
    let errors = [
        model.complete(ask("hi")).await.unwrap_err().to_string(),
        check(&config, vec![]).await.unwrap_err().to_string(),
        format!("{model:?}"),
    ];
    for text in errors {
        assert!(!text.contains("hunter2") && !text.contains("also-secret"), "{text}");
        assert!(text.contains(&address.port().to_string()), "{text}");
    }
}
