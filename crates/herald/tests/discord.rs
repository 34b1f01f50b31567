//! Discord end to end: the conformance suite against the fake Discord REST
//! API and gateway websocket, and what only Discord has (idempotent sends).

#[macro_use]
mod conformance;

use conformance::{REPLY, Setup};
use herald_testkit::FakePlatform;
use herald_testkit::discord::FakeDiscord;
use herald_testkit::faults::Fault;

conformance_suite!(discord, FakeDiscord::start);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_whose_answer_was_lost_is_posted_once() {
    let setup = Setup::new(FakeDiscord::start().await).await;
    let mut herald = setup.start().await;
    let admin = setup.platform.admin();
    // Discord creates the message but the answer never arrives; the next
    // tries meet a bad gateway and a dropped connection. The enforced nonce
    // makes the try that gets through return the message made at first.
    setup
        .platform
        .inject_message_faults([Fault::LoseAnswer, Fault::bad_gateway(), Fault::Drop]);
    setup.platform.send_dm(&admin, "once").await;
    herald.wait_for_log("delivered", 1, REPLY).await;
    let texts: Vec<String> = setup.platform.sent().into_iter().map(|m| m.text).collect();
    assert_eq!(texts, ["echo: once"], "posted once:\n{}", herald.stderr());
    assert_eq!(setup.model.requests().len(), 1);
}
