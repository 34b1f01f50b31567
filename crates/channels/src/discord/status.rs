//! Whether the Discord channel counts as connected while this process runs
//! several shards: when every shard it runs has a ready session. Each
//! shard reports through its own [`ShardSink`], which passes messages on
//! unchanged and turns its shard's up and down into the channel's.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use herald_core::{Admission, ChannelName, InboundMessage, InboundSink, StoreError, Taken};

use super::payload::CHANNEL;

/// The shards this process runs, and which are up.
#[derive(Default)]
pub(super) struct ShardsUp {
    up: Mutex<BTreeMap<u32, bool>>,
}

impl ShardsUp {
    /// Sets `shard` (`None`: no longer run here) and says whether all are
    /// up; `None` when none is run here any more.
    fn set(&self, shard: u32, up: Option<bool>) -> Option<bool> {
        let mut shards = self.up.lock().unwrap_or_else(PoisonError::into_inner);
        match up {
            Some(up) => shards.insert(shard, up),
            None => shards.remove(&shard),
        };
        (!shards.is_empty()).then(|| shards.values().all(|up| *up))
    }

    /// Whether no shard runs here.
    pub(super) fn none(&self) -> bool {
        self.up.lock().unwrap_or_else(PoisonError::into_inner).is_empty()
    }
}

/// One shard's view of the sink.
pub(super) struct ShardSink<'a> {
    inner: &'a dyn InboundSink,
    shard: u32,
    shards: &'a ShardsUp,
}

impl<'a> ShardSink<'a> {
    pub(super) fn new(inner: &'a dyn InboundSink, shard: u32, shards: &'a ShardsUp) -> Self {
        shards.set(shard, Some(false));
        Self { inner, shard, shards }
    }
}

impl Drop for ShardSink<'_> {
    fn drop(&mut self) {
        let channel = ChannelName::new(CHANNEL);
        match self.shards.set(self.shard, None) {
            Some(all_up) => self.inner.connected(&channel, all_up),
            None => self.inner.standing_by(&channel),
        }
    }
}

#[async_trait]
impl InboundSink for ShardSink<'_> {
    async fn accept(&self, message: InboundMessage) -> Result<Admission, StoreError> {
        self.inner.accept(message).await
    }

    async fn accept_all(&self, messages: Vec<InboundMessage>) -> Taken {
        self.inner.accept_all(messages).await
    }

    async fn refuse(&self, message: InboundMessage, notice: String) -> Result<Admission, StoreError> {
        self.inner.refuse(message, notice).await
    }

    fn connected(&self, channel: &ChannelName, connected: bool) {
        let all_up = self.shards.set(self.shard, Some(connected)).unwrap_or(connected);
        self.inner.connected(channel, all_up);
    }

    fn standing_by(&self, channel: &ChannelName) {
        self.inner.standing_by(channel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Seen(Mutex<Vec<Option<bool>>>);

    #[async_trait]
    impl InboundSink for Seen {
        async fn accept(&self, _message: InboundMessage) -> Result<Admission, StoreError> {
            Ok(Admission::Ignored)
        }

        fn connected(&self, _channel: &ChannelName, connected: bool) {
            self.0.lock().unwrap().push(Some(connected));
        }

        fn standing_by(&self, _channel: &ChannelName) {
            self.0.lock().unwrap().push(None);
        }
    }

    #[test]
    fn the_channel_is_up_when_every_shard_run_here_is() {
        let (seen, shards) = (Seen::default(), ShardsUp::default());
        let channel = ChannelName::new(CHANNEL);
        let zero = ShardSink::new(&seen, 0, &shards);
        let one = ShardSink::new(&seen, 1, &shards);
        zero.connected(&channel, true);
        one.connected(&channel, true);
        zero.connected(&channel, false);
        zero.connected(&channel, true);
        // Shard 1 handed to another process: shard 0 alone decides.
        drop(one);
        zero.connected(&channel, false);
        drop(zero);
        // The last shard gone, the channel stands by here.
        let (up, down) = (Some(true), Some(false));
        assert_eq!(*seen.0.lock().unwrap(), [down, up, down, up, up, down, None]);
        assert!(shards.none());
    }
}
