//! Which of the bot's shards this process runs, when several Herald
//! processes share one database: each shard is run by the process holding
//! its exclusive lock (`discord:shard:<id>-of-<count>`), and the processes
//! spread the shards evenly among themselves.
//!
//! Every process takes a *seat*, the lowest free lock `discord:seat:<n>`
//! (`n` below the shard count); the seats taken say how many processes
//! there are and each one's rank among them. A process's fair share is
//! `ceil(shards / processes)`, and it prefers the shards whose id modulo
//! the process count is its rank. Every round (a few seconds) it gives back
//! one shard beyond its share and takes free ones up to it, preferred first;
//! a shard given back, or freed by a process that died, is resumed by its
//! next holder from the session in the store, so nothing written meanwhile
//! is missed. A process without a seat (more processes than shards) stands
//! by and takes a shard only when one is free.
//!
//! The rules are pure ([`fair_share`], [`to_release`], [`to_take`]); the
//! rounds are [`Rounds`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use herald_core::{ChannelError, ExclusiveLocks, HeldLock, InboundSink};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info, info_span, warn};

use super::gateway::ShardId;
use super::shard::Shard;
use super::status::{ShardSink, ShardsUp};

/// How often a process looks at the seats and shards.
pub const ROUND: Duration = Duration::from_secs(3);

/// The shards one process should run when `members` share `count`.
pub fn fair_share(count: u32, members: u32) -> u32 {
    count.div_ceil(members.max(1))
}

fn preferred(shard: u32, members: u32, rank: u32) -> bool {
    shard % members.max(1) == rank
}

/// The shard to give back this round, if the process holds more than its
/// share: one it does not prefer, the highest first.
pub fn to_release(count: u32, members: u32, rank: u32, held: &BTreeSet<u32>) -> Option<u32> {
    if held.len() as u32 <= fair_share(count, members) {
        return None;
    }
    held.iter()
        .rev()
        .find(|shard| !preferred(**shard, members, rank))
        .or_else(|| held.iter().next_back())
        .copied()
}

/// The shards to try to take this round, in order (preferred first), while
/// the process holds fewer than its share.
pub fn to_take(count: u32, members: u32, rank: u32, held: &BTreeSet<u32>) -> Vec<u32> {
    if held.len() as u32 >= fair_share(count, members) {
        return Vec::new();
    }
    let (mut first, rest): (Vec<u32>, Vec<u32>) = (0..count)
        .filter(|shard| !held.contains(shard))
        .partition(|shard| preferred(*shard, members, rank));
    first.extend(rest);
    first
}

/// A shard this process runs.
struct Running {
    stop: CancellationToken,
    lock: Option<Box<dyn HeldLock>>,
    /// Asked to stop: no longer counted as held.
    stopping: bool,
}

/// This process's seat and the shards it runs.
pub(super) struct Rounds<'a> {
    pub(super) locks: &'a dyn ExclusiveLocks,
    pub(super) count: u32,
    /// Starts one shard's run; it ends when the token is cancelled.
    pub(super) shard: &'a (dyn Fn(u32) -> Shard<'a> + Sync),
    pub(super) sink: &'a dyn InboundSink,
    /// Which of the shards run here are up.
    pub(super) status: &'a ShardsUp,
}

type ShardRun<'a> = BoxFuture<'a, (u32, Result<(), ChannelError>)>;

impl<'a> Rounds<'a> {
    /// Runs rounds until `shutdown`, or until a shard fails for good.
    pub(super) async fn run(&self, shutdown: &CancellationToken) -> Result<(), ChannelError> {
        let mut seat: Option<(u32, Box<dyn HeldLock>)> = None;
        let mut running: BTreeMap<u32, Running> = BTreeMap::new();
        let mut runs: FuturesUnordered<ShardRun<'a>> = FuturesUnordered::new();
        let mut ticks = tokio::time::interval(ROUND);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failed = None;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => break,
                Some((id, ended)) = runs.next(), if !runs.is_empty() => {
                    if let Some(mut shard) = running.remove(&id)
                        && let Some(lock) = shard.lock.take()
                    {
                        lock.release().await;
                    }
                    if let Err(err @ ChannelError::Fatal(_)) = ended {
                        failed = Some(err);
                        break;
                    }
                }
                _ = ticks.tick() => {
                    // Shards are taken in the round the seat is: a peer
                    // that starts a moment later is given its share back
                    // within a few rounds, by a RESUME.
                    if seat.is_none() {
                        seat = self.take_seat().await;
                    }
                    let (members, rank) = match &seat {
                        Some((mine, _)) => self.members(*mine).await,
                        // A standby counts as one more than the shards: a
                        // share of one, taken only when a shard is free.
                        None => (self.count + 1, self.count),
                    };
                    self.round(members, rank, &mut running, &mut runs, shutdown).await;
                }
            }
        }
        for shard in running.values() {
            shard.stop.cancel();
        }
        while let Some((id, _)) = runs.next().await {
            if let Some(mut shard) = running.remove(&id)
                && let Some(lock) = shard.lock.take()
            {
                lock.release().await;
            }
        }
        if let Some((_, lock)) = seat {
            lock.release().await;
        }
        failed.map_or(Ok(()), Err)
    }

    async fn round(
        &self,
        members: u32,
        rank: u32,
        running: &mut BTreeMap<u32, Running>,
        runs: &mut FuturesUnordered<ShardRun<'a>>,
        shutdown: &CancellationToken,
    ) {
        for (id, shard) in running.iter_mut() {
            if shard.stopping {
                continue;
            }
            if let Some(lock) = &mut shard.lock
                && !lock.still_held().await
            {
                warn!(
                    shard = id,
                    "lost the lock of a discord shard; stopping it so its new holder can resume it"
                );
                shard.stopping = true;
                shard.stop.cancel();
            }
        }
        let held: BTreeSet<u32> = running.iter().filter(|(_, s)| !s.stopping).map(|(id, _)| *id).collect();
        if let Some(id) = to_release(self.count, members, rank, &held)
            && let Some(shard) = running.get_mut(&id)
        {
            info!(shard = id, members, "giving a discord shard to another Herald process");
            shard.stopping = true;
            shard.stop.cancel();
            return;
        }
        if held.is_empty() && self.status.none() {
            // Nothing to run here (more processes than shards): the
            // others receive; this one does not count as disconnected.
            self.sink
                .standing_by(&herald_core::ChannelName::new(super::payload::CHANNEL));
        }
        let share = fair_share(self.count, members) as usize;
        let mut holding = held.len();
        for id in to_take(self.count, members, rank, &held) {
            if holding >= share {
                break;
            }
            if running.contains_key(&id) {
                continue;
            }
            let lock = match self.locks.try_acquire(&shard_lock(id, self.count)).await {
                Ok(Some(lock)) => lock,
                Ok(None) => continue,
                Err(err) => {
                    warn!(error = %err, "could not ask for a discord shard's lock");
                    return;
                }
            };
            info!(shard = id, members, share, "running a discord shard");
            let stop = shutdown.child_token();
            running.insert(
                id,
                Running {
                    stop: stop.clone(),
                    lock: Some(lock),
                    stopping: false,
                },
            );
            let shard = (self.shard)(id);
            let (sink, status) = (self.sink, self.status);
            let span = info_span!("shard", shard = %ShardId { id, count: self.count });
            runs.push(Box::pin(
                async move {
                    let sink = ShardSink::new(sink, id, status);
                    let ended = shard.run(&sink, &stop).await;
                    (id, ended)
                }
                .instrument(span),
            ));
            holding += 1;
        }
    }

    /// The lowest free seat, held.
    async fn take_seat(&self) -> Option<(u32, Box<dyn HeldLock>)> {
        for seat in 0..self.count {
            match self.locks.try_acquire(&seat_lock(seat)).await {
                Ok(Some(lock)) => return Some((seat, lock)),
                Ok(None) => {}
                Err(err) => {
                    warn!(error = %err, "could not ask for a discord seat lock");
                    return None;
                }
            }
        }
        None
    }

    /// How many processes hold seats, and how many of them sit below
    /// `mine`.
    async fn members(&self, mine: u32) -> (u32, u32) {
        let (mut members, mut rank) = (1, 0);
        for seat in (0..self.count).filter(|seat| *seat != mine) {
            match self.locks.try_acquire(&seat_lock(seat)).await {
                Ok(Some(free)) => free.release().await,
                Ok(None) => {
                    members += 1;
                    if seat < mine {
                        rank += 1;
                    }
                }
                // Unknown: counted as empty, which at worst takes one
                // shard too many for a round.
                Err(_) => {}
            }
        }
        (members, rank)
    }
}

fn seat_lock(seat: u32) -> String {
    format!("discord:seat:{seat}")
}

fn shard_lock(id: u32, count: u32) -> String {
    format!("discord:shard:{id}-of-{count}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[u32]) -> BTreeSet<u32> {
        ids.iter().copied().collect()
    }

    #[test]
    fn a_lone_process_runs_every_shard() {
        assert_eq!(fair_share(4, 1), 4);
        assert_eq!(to_take(4, 1, 0, &set(&[])), [0, 1, 2, 3]);
        assert_eq!(to_release(4, 1, 0, &set(&[0, 1, 2, 3])), None);
    }

    #[test]
    fn two_processes_split_the_shards_by_rank() {
        assert_eq!(fair_share(2, 2), 1);
        assert_eq!(to_take(2, 2, 0, &set(&[])), [0, 1]);
        assert_eq!(to_take(2, 2, 1, &set(&[])), [1, 0], "the preferred shard first");
        assert_eq!(to_take(2, 2, 1, &set(&[1])), Vec::<u32>::new());
        // The first process took both before the second arrived: it gives
        // back the one the second prefers.
        assert_eq!(to_release(2, 2, 0, &set(&[0, 1])), Some(1));
        assert_eq!(to_release(2, 2, 1, &set(&[0, 1])), Some(0));
    }

    #[test]
    fn an_uneven_count_gives_some_processes_one_more() {
        assert_eq!(fair_share(5, 2), 3);
        assert_eq!(fair_share(5, 3), 2);
        assert_eq!(
            to_release(5, 3, 2, &set(&[0, 1, 2])),
            Some(1),
            "2 % 3 == 2 stays; the highest other goes"
        );
        assert_eq!(to_take(5, 3, 2, &set(&[2])), [0, 1, 3, 4]);
    }

    #[test]
    fn a_standby_takes_only_a_free_shard() {
        // Three processes, two shards: the third has no seat and counts
        // itself as one more than the shards.
        assert_eq!(fair_share(2, 3), 1);
        assert_eq!(to_take(2, 3, 2, &set(&[])), [0, 1]);
        assert_eq!(to_take(2, 3, 2, &set(&[0])), Vec::<u32>::new());
    }
}
