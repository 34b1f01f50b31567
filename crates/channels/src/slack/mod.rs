//! The Slack channel: a Slack app's bot in DMs, channels (when mentioned, or
//! in channels listed in `respond_in`) and threads.
//!
//! Events come by Socket Mode (an app-level token, no public URL; the
//! default) or by the Events API (Slack POSTs to Herald; requests are
//! checked against the signing secret and refused with 401 when forged or
//! older than five minutes). Either way a message is handed to the sink,
//! which stores it on the queue, before Slack gets its acknowledgement, and
//! Slack's redeliveries are recognised by the message's channel and `ts`.
//! Replies go through the shared [`Delivery`] path: chunked to
//! [`Limit::SLACK`], at most one message per second per channel by default,
//! in the conversation's thread.
//!
//! - `config`: `channels.slack` in herald.yaml.
//! - `payload`: events to normalized messages (pure).
//! - `render`: a reply chunk to a `chat.postMessage` request (pure).
//! - `signature`: the Events API request signature check (pure).
//! - `client`: every Web API call, and the outbound sender.
//! - `http`: slack-morphism's connector on Herald's reqwest client.
//! - `ingress`: the two ways of receiving (Socket Mode, Events API).
//! - `socket`: the Socket Mode connections, read in batches.
//!
//! [`Limit::SLACK`]: crate::chunk::Limit::SLACK

mod client;
pub mod config;
mod files;
mod http;
mod ingress;
pub mod payload;
mod render;
mod signature;
mod socket;

use std::sync::Arc;

use herald_core::{ChannelError, SystemClock};

use client::{SlackApi, SlackSender};
pub use config::{SlackConfig, SlackMode};
use ingress::SlackIngress;

use crate::Built;
use crate::outbound::Delivery;

pub const CHANNEL: &str = "slack";

/// The Slack channel `config` describes, not yet connected.
/// Every connection it makes trusts `tls`.
pub fn build(
    config: &SlackConfig,
    limiter: Arc<dyn herald_core::SendLimiter>,
    tls: &herald_net::ClientTls,
) -> Result<Built, ChannelError> {
    config
        .check()
        .map_err(|reason| ChannelError::Fatal(format!("channels.slack: {reason}")))?;
    let api = Arc::new(SlackApi::new(config, tls)?);
    Ok(Built {
        outbound: Arc::new(
            Delivery::with_limiter(
                Arc::new(SlackSender::new(api.clone(), config.format)),
                &config.rate_limits,
                limiter,
            )
            .with_streaming(config.streaming == crate::outbound::Streaming::Edit),
        ),
        ingress: Arc::new(SlackIngress::new(config, api, Arc::new(SystemClock))),
        fetcher: Some(Arc::new(files::SlackFiles::new(config, tls)?)),
    })
}
