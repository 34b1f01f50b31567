//! A real model's stream, shown in place on the fake Telegram: run by
//! `scripts/real-model-smoke.sh`, which starts llama-cpp-python's server
//! with a small model and sets `HERALD_REAL_MODEL_URL` (and
//! `HERALD_REAL_MODEL`, the model's name) and runs it with `--ignored`;
//! the suite skips it, having no server to talk to.

#[macro_use]
mod conformance;

use std::time::Duration;

use conformance::{Options, Setup};
use herald_testkit::FakePlatform;
use herald_testkit::telegram::FakeTelegram;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real model server: scripts/real-model-smoke.sh runs it"]
async fn a_real_models_stream_is_shown_in_place_and_ends_as_its_answer() {
    let url = std::env::var("HERALD_REAL_MODEL_URL")
        .expect("HERALD_REAL_MODEL_URL names the real model server (scripts/real-model-smoke.sh sets it)");
    let name = std::env::var("HERALD_REAL_MODEL").unwrap_or_else(|_| "smollm2".into());
    let options = Options {
        real_model: Some((url, name)),
        llm: "  stream: true\n  max_tokens: 200\n  request_timeout: 120s\n  tool_results: user\n".into(),
        ..Options::default()
    };
    let setup = Setup::with_options(FakeTelegram::start().await, options).await;
    let mut herald = setup.start().await;
    setup
        .platform
        .send_dm(
            &setup.platform.admin(),
            "Tell me a short story about a lighthouse keeper.",
        )
        .await;
    herald.wait_for_log("delivered", 1, Duration::from_secs(180)).await;
    let messages = setup.platform.bot_messages();
    let edits = setup.platform.edits();
    eprintln!(
        "{} message(s), {} edit(s); first shown {:?}; final {:?}",
        messages.len(),
        edits.len(),
        setup.platform.sent().first().map(|m| m.text.clone()),
        messages.first().map(|m| m.text.clone())
    );
    assert!(!messages.is_empty(), "{}", herald.stderr());
    assert!(messages.iter().all(|m| !m.text.trim().is_empty()));
    // The first message was shown before the answer was whole, then edited
    // into it; nothing was sent twice, and every request kept the windows.
    assert!(
        !edits.is_empty(),
        "the answer was streamed into place:\n{}",
        herald.stderr()
    );
    let first = &setup.platform.sent()[0];
    assert!(first.text.len() <= messages[0].text.len());
    assert!(
        setup.platform.violations().is_empty(),
        "{:?}",
        setup.platform.violations()
    );
}
