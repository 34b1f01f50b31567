//! The worker pool: workers that claim tasks from the queue and serve them
//! until told to stop, and a shutdown that drains turns in flight before
//! handing unfinished tasks back to the queue.

use std::sync::Arc;
use std::time::Duration;

use herald_core::ClaimFilter;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info_span, warn};

use super::Agent;

/// Workers claiming from the queue until told to stop.
pub struct WorkerPool {
    stop_claiming: CancellationToken,
    abort: CancellationToken,
    workers: JoinSet<()>,
}

impl WorkerPool {
    pub fn start(agent: Arc<Agent>, filter: ClaimFilter, count: usize) -> Self {
        let stop_claiming = CancellationToken::new();
        let abort = CancellationToken::new();
        let mut workers = JoinSet::new();
        for index in 0..count.max(1) {
            let agent = agent.clone();
            let filter = filter.clone();
            let stop = stop_claiming.clone();
            let abort = abort.clone();
            workers.spawn(
                async move { worker_loop(agent, filter, stop, abort).await }.instrument(info_span!("worker", index)),
            );
        }
        Self {
            stop_claiming,
            abort,
            workers,
        }
    }

    /// Stops claiming, waits for turns in flight up to `drain`, then gives
    /// the leases of unfinished turns back to the queue.
    pub async fn shutdown(mut self, drain: Duration) {
        self.stop_claiming.cancel();
        let drained = tokio::time::timeout(drain, async { while self.workers.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            warn!(
                ?drain,
                "turns still running at the drain deadline; releasing their tasks"
            );
            self.abort.cancel();
            while self.workers.join_next().await.is_some() {}
        }
    }
}

async fn worker_loop(agent: Arc<Agent>, filter: ClaimFilter, stop: CancellationToken, abort: CancellationToken) {
    let mut error_backoff = Duration::from_millis(200);
    while !stop.is_cancelled() {
        match agent.parts.queue.claim(&filter).await {
            Ok(Some(lease)) => {
                error_backoff = Duration::from_millis(200);
                tokio::select! {
                    _ = agent.serve(lease.clone()) => {}
                    _ = abort.cancelled() => {
                        if let Err(err) = agent.parts.queue.release(&lease).await {
                            warn!(error = %err, task = %lease.task.id, "could not release task at shutdown");
                        }
                        return;
                    }
                }
            }
            Ok(None) => {
                tokio::select! {
                    _ = agent.parts.queue.wait_for_work(Duration::from_secs(30)) => {}
                    _ = stop.cancelled() => {}
                }
            }
            Err(err) => {
                warn!(error = %err, "claiming a task failed");
                tokio::select! {
                    _ = tokio::time::sleep(error_backoff) => {}
                    _ = stop.cancelled() => {}
                }
                error_backoff = (error_backoff * 2).min(Duration::from_secs(10));
            }
        }
    }
}
