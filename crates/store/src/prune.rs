//! Pruning: finished tasks do not pile up forever.
//!
//! Done and dead tasks that finished more than `queue.retention` ago are
//! deleted, and their delivery receipts with them (`ON DELETE CASCADE`).
//! Their history stays: a conversation's history belongs to the
//! conversation, not to the queue, so its entries only lose their task link
//! (`ON DELETE SET NULL`).
//!
//! A dedup key lives on its task and goes with it, but never sooner than
//! [`REDELIVERY_WINDOW`] after the event came, so a platform that redelivers
//! an event late still finds its key: a finished task with a key is kept
//! until both the retention and that window have passed.
//! Unfinished tasks are never touched.
//!
//! Every statement deletes at most [`BATCH`] rows, so on SQLite the one writer
//! is held for one short statement at a time and other writes go in between.
//! Each store runs a pass every [`EVERY`] in the background; `Storage::prune`
//! runs one at once.

use std::sync::Arc;
use std::time::Duration;

use herald_core::StoreError;
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};
use tracing::{debug, info, warn};

use crate::engine::Engine;
use crate::statement::Statement;
use crate::store::Store;

/// The longest a platform is known to deliver an event again: Telegram keeps
/// an update that was not confirmed for 24 hours. Doubled, for margin.
pub(crate) const REDELIVERY_WINDOW: Duration = Duration::from_secs(2 * 24 * 3600);

/// Rows one statement deletes at most.
const BATCH: i64 = 200;

/// How often each store prunes, after its first pass a minute after start
/// (a short-lived command such as `herald doctor` never prunes).
const EVERY: Duration = Duration::from_secs(10 * 60);
const FIRST: Duration = Duration::from_secs(60);

/// Walks `tasks_finished`; a task whose dedup key must still be recognised
/// stays (`$2`: before which a key may go).
pub(crate) const PRUNE_TASKS: &str = "\
DELETE FROM tasks WHERE id IN (
    SELECT t.id FROM tasks t
    WHERE t.state IN ('done', 'dead') AND t.updated_at < $1
      AND (t.dedup_key IS NULL OR t.created_at < $2)
    LIMIT $3)";

/// What a pass removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Finished tasks, with their dedup keys and receipts.
    pub tasks: u64,
}

/// Before which times (unix milliseconds) finished tasks and dedup keys go;
/// `None` when `retention` is zero (keep everything).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cutoffs {
    tasks: i64,
    dedup_keys: i64,
}

fn cutoffs(now: i64, retention: Duration) -> Option<Cutoffs> {
    if retention.is_zero() {
        return None;
    }
    let before = |age: Duration| now.saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX));
    Some(Cutoffs {
        tasks: before(retention),
        dedup_keys: before(retention.max(REDELIVERY_WINDOW)),
    })
}

impl<E: Engine> Store<E> {
    /// One pass, in batches.
    pub(crate) async fn prune(&self) -> Result<Pruned, StoreError> {
        let Some(cutoffs) = cutoffs(self.now(), self.queue.retention) else {
            return Ok(Pruned::default());
        };
        let mut tasks = 0;
        loop {
            let batch = Statement::<E::Db>::new(PRUNE_TASKS)
                .int(cutoffs.tasks)
                .int(cutoffs.dedup_keys)
                .int(BATCH)
                .execute(self.engine.writes())
                .await?;
            tasks += batch;
            if batch < BATCH.unsigned_abs() {
                return Ok(Pruned { tasks });
            }
            // Let the writes that queued meanwhile go first.
            tokio::task::yield_now().await;
        }
    }
}

/// Prunes `store` every [`EVERY`] until it is dropped (or the handle aborted).
pub(crate) fn start<E: Engine>(store: &Arc<Store<E>>) -> JoinHandle<()> {
    let store = Arc::downgrade(store);
    tokio::spawn(async move {
        let mut every = tokio::time::interval_at(Instant::now() + FIRST, EVERY);
        every.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            let Some(store) = store.upgrade() else { break };
            match store.prune().await {
                Ok(pruned) if pruned != Pruned::default() => info!(tasks = pruned.tasks, "pruned finished tasks"),
                Ok(_) => debug!("nothing to prune"),
                Err(err) => warn!(error = %err, "pruning finished tasks failed; trying again later"),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);
    const DAY: Duration = Duration::from_secs(24 * 3600);

    #[test]
    fn dedup_keys_outlive_the_retention_and_the_redelivery_window() {
        let now = 30 * 86_400_000;
        let ago = |age: Duration| now - i64::try_from(age.as_millis()).unwrap();
        for (retention, expected) in [
            (Duration::ZERO, None),
            (
                7 * DAY,
                Some(Cutoffs {
                    tasks: ago(7 * DAY),
                    dedup_keys: ago(7 * DAY),
                }),
            ),
            (
                HOUR,
                Some(Cutoffs {
                    tasks: ago(HOUR),
                    dedup_keys: ago(REDELIVERY_WINDOW),
                }),
            ),
            (
                Duration::MAX,
                Some(Cutoffs {
                    tasks: now - i64::MAX,
                    dedup_keys: now - i64::MAX,
                }),
            ),
        ] {
            assert_eq!(cutoffs(now, retention), expected, "{retention:?}");
        }
    }
}
