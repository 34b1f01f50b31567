//! Whose turn it is to IDENTIFY, across the shards of this process and the
//! Herald processes sharing its database (the rules are
//! [`super::gateway::start`]).
//!
//! A shard that must open a new session asks for a turn before it connects:
//! it waits until its identify bucket's last IDENTIFY is 5 s old (in this
//! process: a timestamp per bucket; across processes: the store's exclusive
//! lock `discord:identify:<bucket>`, held for 5 s after each IDENTIFY), then
//! reads the session-start budget from `GET /gateway/bot`. When too little
//! of the budget is left, it logs an error that says so and when Discord
//! resets it, and waits for the reset instead of spending the last starts
//! (Discord resets the token of a bot that spends them all).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use herald_core::{ChannelError, ExclusiveLocks, HeldLock};
use tokio::sync::{Mutex, OwnedMutexGuard};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use super::client::DiscordApi;
use super::gateway::ShardId;
use super::gateway::start::{Budget, IDENTIFY_INTERVAL, bucket};
use crate::retry::pause;

/// How long a shard waits on another process's identify lock in one go.
const LOCK_PATIENCE: Duration = Duration::from_secs(30);

/// Hands out identify turns.
pub(super) struct Starts {
    api: Arc<DiscordApi>,
    locks: Option<Arc<dyn ExclusiveLocks>>,
    buckets: u32,
    /// When each bucket last identified in this process.
    last: std::sync::Mutex<HashMap<u32, Arc<Mutex<Option<Instant>>>>>,
}

/// A shard's turn to IDENTIFY; [`Turn::identified`] once it has.
pub(super) struct Turn {
    last: OwnedMutexGuard<Option<Instant>>,
    lock: Option<Box<dyn HeldLock>>,
}

impl Turn {
    /// The IDENTIFY went out: the bucket is busy for the next 5 s, here and
    /// (through its lock, given back only then) in the other processes.
    pub(super) fn identified(mut self) {
        *self.last = Some(Instant::now());
        if let Some(lock) = self.lock.take() {
            tokio::spawn(async move {
                tokio::time::sleep(IDENTIFY_INTERVAL).await;
                lock.release().await;
            });
        }
    }
}

impl Starts {
    /// `buckets` is `max_concurrency` from `GET /gateway/bot`.
    pub(super) fn new(api: Arc<DiscordApi>, locks: Option<Arc<dyn ExclusiveLocks>>, buckets: u32) -> Self {
        Self {
            api,
            locks,
            buckets: buckets.max(1),
            last: Default::default(),
        }
    }

    /// Waits for `shard`'s turn to IDENTIFY; `Ok(None)` at shutdown.
    pub(super) async fn turn(
        &self,
        shard: ShardId,
        shutdown: &CancellationToken,
    ) -> Result<Option<Turn>, ChannelError> {
        let bucket = bucket(shard.id, self.buckets);
        let slot = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(bucket)
            .or_default()
            .clone();
        let last = tokio::select! {
            () = shutdown.cancelled() => return Ok(None),
            last = slot.lock_owned() => last,
        };
        if let Some(at) = *last {
            let wait = (at + IDENTIFY_INTERVAL).saturating_duration_since(Instant::now());
            if !wait.is_zero() && !pause(wait, shutdown).await {
                return Ok(None);
            }
        }
        let lock = match &self.locks {
            None => None,
            Some(locks) => match self.bucket_lock(locks.as_ref(), bucket, shutdown).await {
                Some(lock) => Some(lock),
                None => return Ok(None),
            },
        };
        loop {
            let gateway = self.api.gateway_bot().await?;
            match gateway.session_start_limit.budget() {
                Budget::Start => break,
                Budget::WaitForReset {
                    remaining,
                    total,
                    reset_after,
                } => {
                    error!(
                        shard = %shard,
                        remaining,
                        total,
                        resets_in = ?reset_after,
                        "the discord session-start budget is almost spent (Discord resets the token of a bot that \
                         spends it all): Herald opens no new gateway session until Discord resets the budget"
                    );
                    if !pause(reset_after, shutdown).await {
                        return Ok(None);
                    }
                }
            }
        }
        info!(shard = %shard, bucket, "identifying to the discord gateway");
        Ok(Some(Turn { last, lock }))
    }

    /// The bucket's lock across processes; `None` at shutdown. A store
    /// that cannot be asked is logged and asked again.
    async fn bucket_lock(
        &self,
        locks: &dyn ExclusiveLocks,
        bucket: u32,
        shutdown: &CancellationToken,
    ) -> Option<Box<dyn HeldLock>> {
        let name = format!("discord:identify:{bucket}");
        loop {
            let asked = tokio::select! {
                () = shutdown.cancelled() => return None,
                asked = locks.acquire_within(&name, LOCK_PATIENCE) => asked,
            };
            match asked {
                Ok(Some(lock)) => return Some(lock),
                Ok(None) => {}
                Err(err) => {
                    warn!(error = %err, "could not ask for the discord identify lock");
                    if !pause(Duration::from_secs(2), shutdown).await {
                        return None;
                    }
                }
            }
        }
    }
}
