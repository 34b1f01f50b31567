//! Formatted sends and edits against the fake over HTTP: what the chat
//! shows, what Telegram refuses, and edits under the same send rules.

use std::time::Duration;

use serde_json::{Value, json};

use super::tests::{call, client};
use super::*;

const NOT_MODIFIED: &str = "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a specified content and reply markup of the message";

async fn started() -> FakeTelegram {
    started_with(FakeTelegramOptions::default()).await
}

async fn started_with(options: FakeTelegramOptions) -> FakeTelegram {
    let fake = FakeTelegram::start_with(options).await;
    fake.send_dm(&fake.admin(), "hi").await;
    fake
}

async fn send(fake: &FakeTelegram, text: &str, parse_mode: Option<&str>) -> (u16, Value) {
    let mut body = json!({"chat_id": 1001, "text": text});
    if let Some(mode) = parse_mode {
        body["parse_mode"] = json!(mode);
    }
    call(fake, "sendMessage", body).await
}

async fn edit(fake: &FakeTelegram, message_id: i64, text: &str, parse_mode: Option<&str>) -> (u16, Value) {
    let mut body = json!({"chat_id": 1001, "message_id": message_id, "text": text});
    if let Some(mode) = parse_mode {
        body["parse_mode"] = json!(mode);
    }
    call(fake, "editMessageText", body).await
}

fn refusal(status: u16, body: &Value) -> (u16, &str) {
    assert_eq!(body["ok"], false, "{body}");
    assert_eq!(body["error_code"], status, "{body}");
    (status, body["description"].as_str().unwrap_or_default())
}

#[tokio::test]
async fn an_html_send_shows_its_visible_text_and_entities() {
    let fake = started().await;
    let raw = "<b>Done</b> &amp; 😀 <a href=\"https://example.com\">see <i>this</i></a>";
    let (status, body) = send(&fake, raw, Some("HTML")).await;
    assert_eq!(status, 200, "{body}");
    let entities = json!([
        {"type": "bold", "offset": 0, "length": 4},
        {"type": "text_link", "offset": 10, "length": 8, "url": "https://example.com/"},
        {"type": "italic", "offset": 14, "length": 4},
    ]);
    assert_eq!(body["result"]["text"], "Done & 😀 see this");
    assert_eq!(body["result"]["entities"], entities);

    let sent = fake.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].text, "Done & 😀 see this");
    assert_eq!(sent[0].raw, raw);
    assert_eq!(sent[0].parse_mode.as_deref(), Some("HTML"));
    assert_eq!(Value::Array(sent[0].entities.clone()), entities);

    // A plain send is recorded as before, without entities.
    let (_, plain) = send(&fake, "<b>as is</b>", None).await;
    assert!(plain["result"].get("entities").is_none(), "{plain}");
    let texts: Vec<String> = fake.bot_messages().into_iter().map(|m| m.text).collect();
    assert_eq!(texts, ["Done & 😀 see this", "<b>as is</b>"]);
}

#[tokio::test]
async fn markup_telegram_cannot_parse_is_refused_and_not_recorded() {
    let fake = started().await;
    for (text, mode, expected) in [
        (
            "Hello there <foo>x</foo>",
            "HTML",
            "Bad Request: can't parse entities: Unsupported start tag \"foo\" at byte offset 12",
        ),
        (
            "<b>bold",
            "HTML",
            "Bad Request: can't parse entities: Can't find end tag corresponding to start tag \"b\"",
        ),
        (
            "Hello world.",
            "MarkdownV2",
            "Bad Request: can't parse entities: Character '.' is reserved and must be escaped with the preceding '\\'",
        ),
        ("x", "Plain", "Bad Request: unsupported parse_mode"),
        ("<b></b>", "HTML", "Bad Request: message text is empty"),
    ] {
        let (status, body) = send(&fake, text, Some(mode)).await;
        assert_eq!(refusal(status, &body), (400, expected), "{text} as {mode}");
    }
    assert!(fake.sent().is_empty(), "nothing refused was recorded");
    assert!(fake.bot_messages().is_empty());

    let (status, body) = send(&fake, "Hello world\\.", Some("MarkdownV2")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(fake.sent()[0].text, "Hello world.");
}

#[tokio::test]
async fn the_length_limit_counts_the_visible_text() {
    let fake = started_with(FakeTelegramOptions {
        message_limit: 10,
        ..FakeTelegramOptions::default()
    })
    .await;
    let (status, body) = send(&fake, "<b>0123456789</b>", Some("HTML")).await;
    assert_eq!(status, 200, "markup does not count: {body}");
    let (status, body) = send(&fake, "<b>0123456789X</b>", Some("HTML")).await;
    assert_eq!(refusal(status, &body), (400, "Bad Request: message is too long"));
}

#[tokio::test]
async fn an_edit_changes_what_the_chat_shows() {
    let fake = started().await;
    let (_, draft) = send(&fake, "draft…", None).await;
    let id = draft["result"]["message_id"].as_i64().unwrap();

    let (status, body) = edit(&fake, id, "<b>final</b> answer", Some("HTML")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["message_id"], id);
    assert_eq!(body["result"]["text"], "final answer");
    assert_eq!(
        body["result"]["entities"],
        json!([{"type": "bold", "offset": 0, "length": 5}])
    );
    assert!(body["result"]["edit_date"].is_i64(), "{body}");

    let shown = fake.bot_messages();
    assert_eq!(shown.len(), 1);
    assert_eq!(
        (shown[0].message_id, shown[0].text.as_str()),
        (id as i32, "final answer")
    );
    assert!(shown[0].edited);
    assert_eq!(fake.sent()[0].text, "draft…", "the send record keeps what was sent");
    let edits = fake.edits();
    assert_eq!(edits.len(), 1);
    assert_eq!(
        (edits[0].chat.as_str(), edits[0].text.as_str(), edits[0].raw.as_str()),
        ("1001", "final answer", "<b>final</b> answer")
    );
    assert_eq!(edits[0].parse_mode.as_deref(), Some("HTML"));
    assert_eq!(edits[0].entities.len(), 1);
    assert!(fake.calls().contains(&"editmessagetext".to_owned()));

    // The same content again changes nothing and is refused; the same text
    // without its bold is a change.
    let (status, body) = edit(&fake, id, "<b>final</b> answer", Some("html")).await;
    assert_eq!(refusal(status, &body), (400, NOT_MODIFIED));
    let (status, _) = edit(&fake, id, "final answer", None).await;
    assert_eq!(status, 200);
    assert_eq!(fake.edits().len(), 2);
    assert!(fake.bot_messages()[0].entities.is_empty());

    // A reply to the edited message quotes its new text.
    let (_, reply) = call(
        &fake,
        "sendMessage",
        json!({"chat_id": 1001, "text": "more", "reply_parameters": {"message_id": id}}),
    )
    .await;
    assert_eq!(reply["result"]["reply_to_message"]["text"], "final answer");
}

#[tokio::test]
async fn edits_telegram_refuses() {
    let fake = started().await;
    let (_, sent) = send(&fake, "mine", None).await;
    let id = sent["result"]["message_id"].as_i64().unwrap();
    let users_message: i64 = fake.send_dm(&fake.admin(), "theirs").await.parse().unwrap();
    for (body, expected) in [
        (
            json!({"chat_id": 1001, "message_id": 999, "text": "x"}),
            "Bad Request: message to edit not found",
        ),
        (
            json!({"chat_id": 1001, "message_id": users_message, "text": "x"}),
            "Bad Request: message can't be edited",
        ),
        (json!({"chat_id": 1001, "message_id": id, "text": "mine"}), NOT_MODIFIED),
        (
            json!({"chat_id": 1001, "message_id": id, "text": " "}),
            "Bad Request: message text is empty",
        ),
        (
            json!({"chat_id": 1001, "message_id": id, "text": "a.b", "parse_mode": "MarkdownV2"}),
            "Bad Request: can't parse entities: Character '.' is reserved and must be escaped with the preceding '\\'",
        ),
        (
            json!({"chat_id": 1001, "message_id": id, "text": "😀".repeat(2049)}),
            "Bad Request: message is too long",
        ),
        (
            json!({"chat_id": 999, "message_id": id, "text": "x"}),
            "Bad Request: chat not found",
        ),
    ] {
        let (status, answer) = call(&fake, "editMessageText", body.clone()).await;
        assert_eq!(refusal(status, &answer), (400, expected), "{body}");
    }
    assert!(fake.edits().is_empty());
    assert_eq!(fake.bot_messages()[0].text, "mine");
    assert!(!fake.bot_messages()[0].edited);
}

#[tokio::test]
async fn edits_count_against_the_send_rate() {
    let fake = started_with(FakeTelegramOptions {
        // A window long enough that three requests always fall in it.
        per_chat: Some((2, Duration::from_secs(30))),
        ..FakeTelegramOptions::default()
    })
    .await;
    let (_, sent) = send(&fake, "one", None).await;
    let id = sent["result"]["message_id"].as_i64().unwrap();
    let (status, _) = edit(&fake, id, "two", None).await;
    assert_eq!(status, 200);
    let (status, body) = edit(&fake, id, "three", None).await;
    assert_eq!(status, 429, "{body}");
    assert!(
        body["parameters"]["retry_after"]
            .as_u64()
            .is_some_and(|s| (1..=30).contains(&s))
    );
    assert_eq!(fake.violations().len(), 1, "{:?}", fake.violations());
    assert_eq!(fake.edits().len(), 1);
    assert_eq!(fake.bot_messages()[0].text, "two");

    // And a throttle set by the test applies to edits too.
    let fake = started().await;
    let (_, sent) = send(&fake, "one", None).await;
    let id = sent["result"]["message_id"].as_i64().unwrap();
    fake.throttle_next(1, Duration::from_secs(1));
    let (status, body) = edit(&fake, id, "two", None).await;
    assert_eq!((status, body["parameters"]["retry_after"].as_u64()), (429, Some(1)));
}

#[tokio::test]
async fn injected_faults_hit_edits_and_change_nothing() {
    use crate::faults::Fault;
    let fake = started().await;
    let (_, sent) = send(&fake, "one", None).await;
    let id = sent["result"]["message_id"].as_i64().unwrap();
    fake.inject_faults("editMessageText", [Fault::bad_gateway()]);
    let (status, _) = {
        let response = client()
            .post(format!("{}/bot{}/editMessageText", fake.api_url(), fake.token()))
            .json(&json!({"chat_id": 1001, "message_id": id, "text": "two"}))
            .send()
            .await
            .expect("an answer");
        (response.status().as_u16(), response.text().await)
    };
    assert_eq!(status, 502);
    assert!(fake.edits().is_empty());
    let (status, _) = edit(&fake, id, "two", None).await;
    assert_eq!(status, 200);
    assert_eq!(fake.wait_for_edits(1, Duration::from_secs(1)).await.len(), 1);
}

#[tokio::test]
async fn a_document_caption_is_parsed_with_its_parse_mode() {
    let fake = started().await;
    let form = |caption: &str| {
        reqwest::multipart::Form::new()
            .text("chat_id", "1001")
            .text("caption", caption.to_owned())
            .text("parse_mode", "HTML")
            .part(
                "document",
                reqwest::multipart::Part::bytes(b"report".to_vec()).file_name("report.txt"),
            )
    };
    let url = format!("{}/bot{}/sendDocument", fake.api_url(), fake.token());
    let response = client()
        .post(&url)
        .multipart(form("<i>the</i> report"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["result"]["caption"], "the report");
    assert_eq!(
        body["result"]["caption_entities"],
        json!([{"type": "italic", "offset": 0, "length": 3}])
    );
    assert_eq!(fake.uploads()[0].text.as_deref(), Some("the report"));

    let response = client()
        .post(&url)
        .multipart(form("<i>the report"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    assert_eq!(fake.uploads().len(), 1);
}
