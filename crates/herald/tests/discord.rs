//! Discord end to end: the conformance suite against the fake Discord REST
//! API and gateway websocket.

#[macro_use]
mod conformance;

use herald_testkit::discord::FakeDiscord;

conformance_suite!(discord, FakeDiscord::start);
