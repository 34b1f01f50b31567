//! The worker pool: one claimer that takes tasks from the queue while fewer
//! than `turns` of them are in flight, and serves each claimed task as a
//! tokio task of its own; a shutdown that drains turns in flight before
//! handing unfinished tasks back to the queue.
//!
//! Why one claimer and not N looping workers: a turn spends most of its
//! time waiting (on the model, on a platform's rate limit, on a script), and
//! a worker that waits serves nobody else. Here the only bound on turns in
//! flight is a number of permits, sized by the binary from what the model
//! endpoint can take (`llm.max_concurrency`), and waiting costs a parked
//! future, not a worker. Order within a conversation is the queue's
//! promise: it hands out only a conversation's head task, and only when no
//! lease on that conversation is live.

use std::sync::Arc;
use std::time::Duration;

use herald_core::ClaimFilter;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info_span, warn};

use super::Agent;

/// The most tasks one claim takes: enough that a backlog costs a claim per
/// batch, few enough that several processes on one queue share a burst.
const MAX_CLAIM: usize = 16;

/// Serves claimed tasks, at most `turns` at once, until told to stop.
pub struct WorkerPool {
    stop_claiming: CancellationToken,
    abort: CancellationToken,
    claimer: tokio::task::JoinHandle<JoinSet<()>>,
}

impl WorkerPool {
    /// Starts claiming for `filter`; `turns` (at least 1) bounds the turns
    /// in flight.
    pub fn start(agent: Arc<Agent>, filter: ClaimFilter, turns: usize) -> Self {
        let stop_claiming = CancellationToken::new();
        let abort = CancellationToken::new();
        let claimer = tokio::spawn(
            claim_loop(agent, filter, turns.max(1), stop_claiming.clone(), abort.clone())
                .instrument(info_span!("claimer")),
        );
        Self {
            stop_claiming,
            abort,
            claimer,
        }
    }

    /// Stops claiming, waits for turns in flight up to `drain`, then gives
    /// the leases of unfinished turns back to the queue.
    pub async fn shutdown(self, drain: Duration) {
        self.stop_claiming.cancel();
        let mut turns = match self.claimer.await {
            Ok(turns) => turns,
            Err(err) => {
                warn!(error = %err, "the claimer ended abnormally");
                return;
            }
        };
        let drained = tokio::time::timeout(drain, async { while turns.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            warn!(
                ?drain,
                "turns still running at the drain deadline; releasing their tasks"
            );
            self.abort.cancel();
            while turns.join_next().await.is_some() {}
        }
    }
}

/// Claims while a permit is free and serves each task on its own; returns
/// the turns still in flight when told to stop claiming.
async fn claim_loop(
    agent: Arc<Agent>,
    filter: ClaimFilter,
    turns: usize,
    stop: CancellationToken,
    abort: CancellationToken,
) -> JoinSet<()> {
    let permits = Arc::new(Semaphore::new(turns));
    let mut in_flight = JoinSet::new();
    let mut error_backoff = Duration::from_millis(200);
    loop {
        // Reap finished turns so the set does not grow with the run.
        while in_flight.try_join_next().is_some() {}
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = stop.cancelled() => break,
        };
        if stop.is_cancelled() {
            break;
        }
        // Every free permit is room for a turn: one claim fills them all
        // (up to `MAX_CLAIM`), so a backlog costs a claim per batch, not
        // per task.
        let mut room = vec![permit];
        while room.len() < MAX_CLAIM
            && let Ok(permit) = permits.clone().try_acquire_owned()
        {
            room.push(permit);
        }
        match agent.parts.queue.claim_up_to(&filter, room.len()).await {
            Ok(leases) if !leases.is_empty() => {
                error_backoff = Duration::from_millis(200);
                for (lease, permit) in leases.into_iter().zip(room) {
                    let agent = agent.clone();
                    let abort = abort.clone();
                    in_flight.spawn(
                        async move {
                            let _permit = permit;
                            tokio::select! {
                                () = agent.serve(lease.clone()) => {}
                                () = abort.cancelled() => {
                                    if let Err(err) = agent.parts.queue.release(&lease).await {
                                        warn!(error = %err, task = %lease.task.id, "could not release task at shutdown");
                                    }
                                }
                            }
                        }
                        .in_current_span(),
                    );
                }
            }
            Ok(_) => {
                drop(room);
                tokio::select! {
                    () = agent.parts.queue.wait_for_work(Duration::from_secs(30)) => {}
                    () = stop.cancelled() => break,
                }
            }
            Err(err) => {
                drop(room);
                warn!(error = %err, "claiming a task failed");
                tokio::select! {
                    () = tokio::time::sleep(error_backoff) => {}
                    () = stop.cancelled() => break,
                }
                error_backoff = (error_backoff * 2).min(Duration::from_secs(10));
            }
        }
    }
    in_flight
}
