//! What every adapter's `build` returns.

use std::sync::Arc;

use herald_core::{ChannelIngress, ChannelOutbound};

use crate::attachments::FetchAttachment;

/// The two halves of one channel, not yet connected: the outbound path
/// (replies, through the shared [`Delivery`](crate::outbound::Delivery)) and
/// the ingress (what the platform sends, handed to a sink once running).
/// Both halves of a platform share one API client.
pub struct Built {
    pub outbound: Arc<dyn ChannelOutbound>,
    pub ingress: Arc<dyn ChannelIngress>,
    /// Fetches the files the channel's messages name; `None` for a channel
    /// that has them in hand (a mail's MIME parts) or cannot fetch.
    pub fetcher: Option<Arc<dyn FetchAttachment>>,
}
