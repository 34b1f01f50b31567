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
    /// Sets `shard` (`None`: no longer run here) and says whether all are up.
    fn set(&self, shard: u32, up: Option<bool>) -> bool {
        let mut shards = self.up.lock().unwrap_or_else(PoisonError::into_inner);
        match up {
            Some(up) => shards.insert(shard, up),
            None => shards.remove(&shard),
        };
        !shards.is_empty() && shards.values().all(|up| *up)
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
        let all_up = self.shards.set(self.shard, None);
        self.inner.connected(&ChannelName::new(CHANNEL), all_up);
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
        let all_up = self.shards.set(self.shard, Some(connected));
        self.inner.connected(channel, all_up);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Seen(Mutex<Vec<bool>>);

    #[async_trait]
    impl InboundSink for Seen {
        async fn accept(&self, _message: InboundMessage) -> Result<Admission, StoreError> {
            Ok(Admission::Ignored)
        }

        fn connected(&self, _channel: &ChannelName, connected: bool) {
            self.0.lock().unwrap().push(connected);
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
        assert_eq!(*seen.0.lock().unwrap(), [false, true, false, true, true, false, false]);
    }
}
