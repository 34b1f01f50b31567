//! Keeping a lease alive while its turn runs, so a slow model does not let a
//! second worker serve the same task, and telling the turn when the lease
//! was lost anyway (this process stalled past it, or the store said so), or
//! forfeit: the store lost the hold that tells other processes this one is
//! alive, and they will take the task over in seconds.

use std::sync::Arc;
use std::time::Duration;

use herald_core::{Lease, StoreError, TaskQueue};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, warn};

/// The task that keeps one lease alive while its turn runs.
pub(super) struct LeaseKeeper {
    /// Cancelled by the worker when the turn is over.
    pub stop: CancellationToken,
    /// Cancelled by the keeper when the store says the lease is gone.
    pub lost: CancellationToken,
}

impl LeaseKeeper {
    /// Extends `lease` every third of `lease_time` until stopped.
    pub fn start(queue: Arc<dyn TaskQueue>, mut lease: Lease, lease_time: Duration) -> Self {
        let keeper = LeaseKeeper {
            stop: CancellationToken::new(),
            lost: CancellationToken::new(),
        };
        let every = (lease_time / 3).max(Duration::from_millis(100));
        let (stopped, lost) = (keeper.stop.clone(), keeper.lost.clone());
        tokio::spawn(
            async move {
                loop {
                    tokio::select! {
                        _ = stopped.cancelled() => return,
                        () = queue.forfeited(&lease) => {
                            warn!("this process lost its hold on the queue; the lease is forfeit");
                            lost.cancel();
                            return;
                        }
                        _ = tokio::time::sleep(every) => {}
                    }
                    if let Err(err) = queue.extend(&mut lease).await {
                        warn!(error = %err, "could not extend lease");
                        if matches!(err, StoreError::LeaseLost(_)) {
                            lost.cancel();
                            return;
                        }
                    }
                }
            }
            .in_current_span(),
        );
        keeper
    }
}
