//! Fakes of the services Herald talks to, run in-process on 127.0.0.1 so
//! tests and benchmarks need no network and no accounts.
//!
//! Architecture invariant: a fake answers with the real service's shapes and
//! refuses what the real service refuses. A fake that accepts more than the
//! real thing hides bugs instead of finding them.
//!
//! - [`attack`]: hostile clients of Herald's public endpoints (trickled bodies).
//! - [`corpus`]: model answers in Markdown, for the rendering tests.
//! - [`discord`]: a fake Discord REST API and gateway websocket.
//! - [`faults`]: server errors and dropped connections a fake answers with.
//! - [`mailserver`]: real Dovecot and Postfix on 127.0.0.1, for email.
//! - [`openai`]: a scripted OpenAI-compatible chat completions server.
//! - [`platform`]: the control side every fake chat platform offers tests.
//! - [`postgres`]: a PostgreSQL database of its own per test.
//! - [`slack`]: a fake Slack Web API, Socket Mode server and Events API pusher.
//! - [`telegram`]: a fake Telegram Bot API (long polling and webhooks).
//! - [`tls`]: a private certificate authority and TLS in front of any fake.

pub mod attack;
pub mod corpus;
pub mod discord;
pub mod faults;
pub mod mailserver;
pub mod openai;
pub mod pdf;
pub mod platform;
pub mod postgres;
pub mod slack;
pub mod telegram;
pub mod tls;

pub use openai::{RecordedRequest, Reply, ScriptedModel};
pub use platform::{FakePlatform, FakeUser, GroupTarget, SentMessage, Stamped, Upload};

/// Each accepted connection sends small writes at once (`TCP_NODELAY`), as
/// a real service's front end does. Without it, Nagle's algorithm holds a
/// frame back until the previous one is acknowledged, and the client's
/// delayed ACK makes that up to 40 ms: latency that is the fake's, not the
/// client's.
pub(crate) fn no_delay(
    listener: tokio::net::TcpListener,
) -> impl axum::serve::Listener<Io = tokio::net::TcpStream, Addr = std::net::SocketAddr> {
    use axum::serve::ListenerExt;
    listener.tap_io(|stream| {
        let _ = stream.set_nodelay(true);
    })
}
