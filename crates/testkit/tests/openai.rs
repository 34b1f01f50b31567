//! The scripted model server seen from the outside: through async-openai's
//! own types (what Herald's client deserializes) and through raw HTTP for
//! the parts a typed client hides (status codes, headers, error bodies).

use std::time::Duration;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::types::chat::{
    ChatCompletionMessageToolCalls, CreateChatCompletionRequest, CreateChatCompletionResponse, FinishReason, Role,
};
use futures::StreamExt;
use herald_testkit::openai::{last_user_text, system_prompt, tool_names};
use herald_testkit::{Reply, ScriptedModel};
use serde_json::{Value, json};

fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

fn openai(model: &ScriptedModel) -> Client<OpenAIConfig> {
    let config = OpenAIConfig::new()
        .with_api_base(model.base_url())
        .with_api_key("sk-test");
    Client::build(http(), config)
}

fn request(body: Value) -> CreateChatCompletionRequest {
    serde_json::from_value(body).expect("a valid request")
}

fn hello(text: &str) -> Value {
    json!({ "model": "gpt-4o-mini", "messages": [
        { "role": "system", "content": "You are Herald." },
        { "role": "user", "content": text },
    ] })
}

async fn post(model: &ScriptedModel, body: &Value) -> reqwest::Response {
    http()
        .post(format!("{}/chat/completions", model.base_url()))
        .json(body)
        .send()
        .await
        .expect("the server answers")
}

#[tokio::test]
async fn text_reply_reads_as_an_openai_chat_completion() {
    let model = ScriptedModel::start().await;
    model.push(Reply::text("Hello from the script"));

    let response = openai(&model).chat().create(request(hello("hi"))).await.unwrap();

    assert_eq!(response.object, "chat.completion");
    assert_eq!(response.model, "gpt-4o-mini");
    let choice = &response.choices[0];
    assert_eq!(choice.message.role, Role::Assistant);
    assert_eq!(choice.message.content.as_deref(), Some("Hello from the script"));
    assert_eq!(choice.finish_reason, Some(FinishReason::Stop));
    let usage = response.usage.expect("usage is always sent");
    assert_eq!(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);

    let requests = model.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(last_user_text(&requests[0]).as_deref(), Some("hi"));
    assert_eq!(system_prompt(&requests[0]).as_deref(), Some("You are Herald."));
    assert_eq!(model.recorded()[0].authorization.as_deref(), Some("Bearer sk-test"));
}

#[tokio::test]
async fn tool_calls_carry_string_arguments_and_unique_ids() {
    let model = ScriptedModel::start().await;
    model.push(Reply::ToolCalls(vec![
        ("get_weather".into(), json!({ "city": "Oslo" })),
        ("clock".into(), json!({})),
    ]));
    model.push(Reply::tool_call("broken", Value::String("{not json".into())));
    let client = openai(&model);
    let mut body = hello("weather?");
    body["tools"] =
        json!([{ "type": "function", "function": { "name": "get_weather", "parameters": { "type": "object" } } }]);

    let first = client.chat().create(request(body.clone())).await.unwrap();
    let second = client.chat().create(request(body)).await.unwrap();

    assert_eq!(first.choices[0].finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(first.choices[0].message.content, None);
    let calls = function_calls(&first);
    assert_eq!(
        calls
            .iter()
            .map(|(_, name, args)| (name.as_str(), args.as_str()))
            .collect::<Vec<_>>(),
        [("get_weather", r#"{"city":"Oslo"}"#), ("clock", "{}")]
    );
    let broken = function_calls(&second);
    assert_eq!(broken[0].2, "{not json");
    let mut ids: Vec<&String> = calls.iter().chain(&broken).map(|(id, _, _)| id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3, "tool call ids are unique across requests");
    assert_eq!(tool_names(&model.requests()[0]), ["get_weather"]);
}

fn function_calls(response: &CreateChatCompletionResponse) -> Vec<(String, String, String)> {
    response.choices[0]
        .message
        .tool_calls
        .iter()
        .flatten()
        .map(|call| match call {
            ChatCompletionMessageToolCalls::Function(call) => (
                call.id.clone(),
                call.function.name.clone(),
                call.function.arguments.clone(),
            ),
            other => panic!("unexpected tool call {other:?}"),
        })
        .collect()
}

#[tokio::test]
async fn streamed_text_arrives_in_pieces_and_ends() {
    let model = ScriptedModel::start().await;
    model.push(Reply::text("one two three"));
    let mut body = hello("count");
    body["stream"] = json!(true);
    body["stream_options"] = json!({ "include_usage": true });

    let mut stream = openai(&model).chat().create_stream(request(body)).await.unwrap();
    let mut text = String::new();
    let mut pieces = 0;
    let mut finish = None;
    let mut usage = None;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.unwrap();
        assert_eq!(chunk.object, "chat.completion.chunk");
        usage = usage.or(chunk.usage);
        for choice in chunk.choices {
            if let Some(content) = choice.delta.content.filter(|c| !c.is_empty()) {
                text.push_str(&content);
                pieces += 1;
            }
            finish = finish.or(choice.finish_reason);
        }
    }

    assert_eq!(text, "one two three");
    assert_eq!(pieces, 3);
    assert_eq!(finish, Some(FinishReason::Stop));
    assert!(usage.is_some(), "include_usage adds a usage chunk");
}

#[tokio::test]
async fn streamed_tool_call_arguments_concatenate() {
    let model = ScriptedModel::start().await;
    model.push(Reply::tool_call("get_weather", json!({ "city": "Zürich" })));
    let mut body = hello("weather?");
    body["stream"] = json!(true);
    body["tools"] = json!([{ "type": "function", "function": { "name": "get_weather" } }]);

    let mut stream = openai(&model).chat().create_stream(request(body)).await.unwrap();
    let (mut id, mut name, mut arguments, mut finish) = (None, None, String::new(), None);
    while let Some(chunk) = stream.next().await {
        for choice in chunk.unwrap().choices {
            for call in choice.delta.tool_calls.unwrap_or_default() {
                assert_eq!(call.index, 0);
                id = id.or(call.id);
                if let Some(function) = call.function {
                    name = name.or(function.name);
                    arguments.push_str(function.arguments.as_deref().unwrap_or(""));
                }
            }
            finish = finish.or(choice.finish_reason);
        }
    }

    assert!(id.is_some_and(|id| id.starts_with("call_")));
    assert_eq!(name.as_deref(), Some("get_weather"));
    assert_eq!(arguments, r#"{"city":"Zürich"}"#);
    assert_eq!(finish, Some(FinishReason::ToolCalls));
}

#[tokio::test]
async fn raw_stream_ends_with_done() {
    let model = ScriptedModel::start().await;
    let mut body = hello("hi");
    body["stream"] = json!(true);

    let response = post(&model, &body).await;

    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let text = response.text().await.unwrap();
    assert!(text.starts_with("data: {"), "{text}");
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
}

#[tokio::test]
async fn script_is_first_in_first_out_then_the_fallback_answers() {
    let model = ScriptedModel::start().await;
    model.push(Reply::text("first"));
    model.push(Reply::text("second"));
    let client = openai(&model);
    let mut answers = Vec::new();
    for text in ["a", "b", "c"] {
        let response = client.chat().create(request(hello(text))).await.unwrap();
        answers.push(response.choices[0].message.content.clone().unwrap());
    }
    model.set_fallback(|request| Reply::Text(format!("custom: {}", last_user_text(request).unwrap())));
    let response = client.chat().create(request(hello("d"))).await.unwrap();
    answers.push(response.choices[0].message.content.clone().unwrap());

    assert_eq!(answers, ["first", "second", "echo: c", "custom: d"]);
    assert_eq!(model.unused_replies(), 0);
}

#[tokio::test]
async fn invalid_requests_get_openai_400s_and_keep_the_script() {
    let model = ScriptedModel::start().await;
    model.push(Reply::text("kept for a valid request"));
    let cases = [
        (
            json!({ "messages": [{ "role": "user", "content": "hi" }] }),
            Value::Null,
        ),
        (json!({ "model": "gpt-4o-mini" }), json!("messages")),
        (
            json!({ "model": "gpt-4o-mini", "messages": [{ "role": "user", "content": "hi" }], "tools": [] }),
            json!("tools"),
        ),
    ];
    for (body, param) in &cases {
        let response = post(&model, body).await;
        assert_eq!(response.status(), 400, "{body}");
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"]["type"], "invalid_request_error");
        assert_eq!(&error["error"]["param"], param);
        assert!(error["error"]["message"].is_string());
    }
    let not_json = http()
        .post(format!("{}/chat/completions", model.base_url()))
        .header("content-type", "application/json")
        .body("{oops")
        .send()
        .await
        .unwrap();
    assert_eq!(not_json.status(), 400);

    assert_eq!(model.requests().len(), 4, "refused bodies are recorded too");
    assert_eq!(model.requests()[3], Value::String("{oops".into()));
    assert_eq!(model.unused_replies(), 1);
}

#[tokio::test]
async fn errors_have_openai_bodies_and_429_has_retry_after() {
    let model = ScriptedModel::start().await;
    model.push(Reply::rate_limited(7));
    model.push(Reply::error(503, "overloaded"));
    model.push(Reply::Raw(200, "not json at all".into()));

    let limited = post(&model, &hello("a")).await;
    assert_eq!(limited.status(), 429);
    assert_eq!(limited.headers()["retry-after"], "7");
    let body: Value = limited.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");

    let unavailable = post(&model, &hello("b")).await;
    assert_eq!(unavailable.status(), 503);
    assert!(unavailable.headers().get("retry-after").is_none());
    let body: Value = unavailable.json().await.unwrap();
    assert_eq!(body["error"]["message"], "overloaded");
    assert_eq!(body["error"]["type"], "server_error");

    let raw = post(&model, &hello("c")).await;
    assert_eq!(raw.status(), 200);
    assert_eq!(raw.text().await.unwrap(), "not json at all");
}

#[tokio::test]
async fn a_held_request_answers_after_release() {
    let model = ScriptedModel::start().await;
    model.push(Reply::Hang);
    let client = openai(&model);
    let held = tokio::spawn({
        let client = client.clone();
        async move { client.chat().create(request(hello("wait for me"))).await }
    });

    model.wait_for_requests(1).await;
    assert!(!held.is_finished());
    model.release();
    let response = held.await.unwrap().unwrap();

    assert_eq!(
        response.choices[0].message.content.as_deref(),
        Some("echo: wait for me")
    );
}

#[tokio::test(start_paused = true)]
async fn delayed_replies_wait_on_tokio_time() {
    let model = ScriptedModel::start().await;
    model.push(Reply::Delayed(Duration::from_secs(30), Box::new(Reply::text("late"))));
    let started = tokio::time::Instant::now();

    let response = openai(&model).chat().create(request(hello("hi"))).await.unwrap();

    assert_eq!(response.choices[0].message.content.as_deref(), Some("late"));
    assert!(started.elapsed() >= Duration::from_secs(30));
}

#[tokio::test]
async fn models_are_listed_like_openai_does() {
    let model = ScriptedModel::start().await;
    let response = http().get(format!("{}/models", model.base_url())).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["object"], "list");
    let first = &body["data"][0];
    assert_eq!(first["object"], "model");
    assert!(first["id"].is_string() && first["created"].is_u64() && first["owned_by"].is_string());
}

#[tokio::test]
async fn a_required_api_key_is_enforced() {
    let model = ScriptedModel::start().await;
    model.require_api_key("sk-right");

    let wrong = openai(&model).chat().create(request(hello("hi"))).await.unwrap_err();
    let models = http().get(format!("{}/models", model.base_url())).send().await.unwrap();
    let right = http()
        .get(format!("{}/models", model.base_url()))
        .bearer_auth("sk-right")
        .send()
        .await
        .unwrap();

    assert!(wrong.to_string().contains("Incorrect API key"), "{wrong}");
    assert_eq!(models.status(), 401);
    assert_eq!(right.status(), 200);
}

#[tokio::test]
async fn unknown_paths_are_openai_404s() {
    let model = ScriptedModel::start().await;
    let response = http()
        .post(format!("{}/embeddings", model.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["message"], "Invalid URL (POST /v1/embeddings)");
}

#[tokio::test]
async fn base_url_has_v1_and_no_trailing_slash() {
    let model = ScriptedModel::start().await;
    let url = model.base_url();
    assert!(url.starts_with("http://127.0.0.1:") && url.ends_with("/v1"), "{url}");
}

/// A request offering one tool whose `text` has this `maxLength`.
fn with_tool(max_length: u64) -> Value {
    let mut body = hello("hi");
    body["tools"] = json!([{ "type": "function", "function": { "name": "send_message",
        "parameters": { "type": "object", "properties": { "text": { "type": "string", "maxLength": max_length } } } } }]);
    body["tool_choice"] = json!("auto");
    body
}

#[tokio::test]
async fn playing_llama_cpp_a_large_max_length_kills_the_server() {
    let model = ScriptedModel::start().await;
    model.set_quirks(herald_testkit::openai::Quirks::llama_cpp(8192));
    let small = post(&model, &with_tool(256)).await;
    assert_eq!(small.status(), 200);
    let body: Value = small.json().await.unwrap();
    assert_eq!(
        body["choices"][0]["message"]["content"], "",
        "offered tools on auto, llama.cpp's text answers come back empty"
    );

    let crash = http()
        .post(format!("{}/chat/completions", model.base_url()))
        .json(&with_tool(20_000))
        .send()
        .await;
    assert!(crash.is_err(), "the connection died with the server: {crash:?}");
    assert!(model.crashed());
    let after = http()
        .post(format!("{}/chat/completions", model.base_url()))
        .json(&hello("anyone there?"))
        .send()
        .await;
    assert!(after.is_err(), "nothing answers once it crashed");
}

#[tokio::test]
async fn over_long_prompts_are_refused_in_each_servers_own_shape() {
    use herald_testkit::openai::Quirks;
    let long = hello(&"word ".repeat(4000));
    for (quirks, status, fragment) in [
        (
            Quirks::llama_cpp_python(2048),
            400,
            r#""code":"context_length_exceeded""#,
        ),
        (Quirks::llama_cpp(2048), 400, r#""n_ctx":2048"#),
        (Quirks::vllm(2048), 400, "maximum context length is 2048 tokens"),
    ] {
        let model = ScriptedModel::start().await;
        model.set_quirks(quirks.clone());
        let response = post(&model, &long).await;
        assert_eq!(response.status(), status, "{quirks:?}");
        let text = response.text().await.unwrap();
        assert!(text.contains(fragment), "{quirks:?}: {text}");
        assert_eq!(post(&model, &hello("short")).await.status(), 200);
    }
    // Streamed, llama-cpp-python answers 200 with nothing at all.
    let model = ScriptedModel::start().await;
    model.set_quirks(Quirks::llama_cpp_python(2048));
    let mut streamed = long.clone();
    streamed["stream"] = json!(true);
    let response = post(&model, &streamed).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), "");
}

#[tokio::test]
async fn servers_say_their_context_window_where_the_real_ones_do() {
    use herald_testkit::openai::Quirks;
    let model = ScriptedModel::start().await;
    model.set_quirks(Quirks::llama_cpp(4096));
    let root = model.base_url().trim_end_matches("/v1").to_owned();
    let props: Value = http()
        .get(format!("{root}/props"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(props["default_generation_settings"]["n_ctx"], 4096);

    model.set_quirks(Quirks::ollama(Some(8192)));
    let show: Value = http()
        .post(format!("{root}/api/show"))
        .json(&json!({"model": "llama3.2"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(show["parameters"].as_str().unwrap().contains("num_ctx"));
    assert_eq!(show["model_info"]["llama.context_length"], 131072);
    model.set_models(vec!["llama3.2:latest".into()]);
    assert_eq!(
        post(&model, &hello("hi")).await.status(),
        404,
        "Ollama has not pulled gpt-4o-mini"
    );
    let mut pulled = hello("hi");
    pulled["model"] = json!("llama3.2");
    assert_eq!(
        post(&model, &pulled).await.status(),
        200,
        "`llama3.2` is `llama3.2:latest`"
    );

    model.set_quirks(Quirks::vllm(12288));
    let models: Value = http()
        .get(format!("{}/models", model.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][0]["max_model_len"], 12288);
    // Without a quirk, neither exists.
    model.set_quirks(Quirks::default());
    assert_eq!(http().get(format!("{root}/props")).send().await.unwrap().status(), 404);
}

#[tokio::test]
async fn playing_vllm_a_schema_its_grammar_cannot_compile_is_refused() {
    let model = ScriptedModel::start().await;
    model.set_quirks(herald_testkit::openai::Quirks::vllm(8192));
    let mut body = with_tool(100);
    body["tools"][0]["function"]["parameters"]["properties"]["text"]["pattern"] = json!("^[a-z]+$");
    let response = post(&model, &body).await;
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["object"], "error");
    assert!(error["message"].as_str().unwrap().contains("`pattern`"));
    assert_eq!(post(&model, &with_tool(100)).await.status(), 200);
}

#[tokio::test]
async fn playing_a_server_that_honours_max_tokens_long_answers_are_cut() {
    let model = ScriptedModel::start().await;
    model.set_quirks(herald_testkit::openai::Quirks::llama_cpp_python(4096));
    model.push(Reply::text("word ".repeat(100)));
    let mut body = hello("talk");
    body["max_tokens"] = json!(10);
    let answer: Value = post(&model, &body).await.json().await.unwrap();
    assert_eq!(answer["choices"][0]["finish_reason"], "length");
    assert_eq!(
        answer["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .chars()
            .count(),
        40
    );
    // Without a limit it runs on to the end of its context.
    let answer: Value = post(&model, &hello("talk")).await.json().await.unwrap();
    assert_eq!(answer["choices"][0]["finish_reason"], "length");
    assert!(answer["choices"][0]["message"]["content"].as_str().unwrap().len() > 10_000);
}
