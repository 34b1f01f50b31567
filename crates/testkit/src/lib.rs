//! Fakes of the services Herald talks to, run in-process on 127.0.0.1 so
//! tests and benchmarks need no network and no accounts.
//!
//! Architecture invariant: a fake answers with the real service's shapes and
//! refuses what the real service refuses. A fake that accepts more than the
//! real thing hides bugs instead of finding them.
//!
//! - [`discord`]: a fake Discord REST API and gateway websocket.
//! - [`openai`]: a scripted OpenAI-compatible chat completions server.
//! - [`platform`]: the control side every fake chat platform offers tests.
//! - [`slack`]: a fake Slack Web API, Socket Mode server and Events API pusher.
//! - [`telegram`]: a fake Telegram Bot API (long polling and webhooks).

pub mod discord;
pub mod openai;
pub mod platform;
pub mod slack;
pub mod telegram;

pub use openai::{RecordedRequest, Reply, ScriptedModel};
pub use platform::{FakePlatform, FakeUser, GroupTarget, SentMessage};
