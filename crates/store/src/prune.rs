//! Pruning: finished tasks do not pile up forever.
//!
//! Done and dead tasks that finished more than `queue.retention` ago are
//! deleted, and their delivery receipts with them (`ON DELETE CASCADE`).
//! Their history stays: a conversation's history belongs to the
//! conversation, not to the queue, so its entries only lose their task link
//! (`ON DELETE SET NULL`).
//!
//! A dedup key goes by its own age, never sooner than the retention and never
//! sooner than [`REDELIVERY_WINDOW`], so a platform that redelivers an event
//! late still finds its key; a task is kept while a dedup key names it.
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

pub(crate) const PRUNE_DEDUP_KEYS: &str = "\
DELETE FROM inbound_dedup WHERE key IN (SELECT key FROM inbound_dedup WHERE seen_at < $1 LIMIT $2)";

/// Walks `tasks_finished`; a task that a dedup key still names stays.
pub(crate) const PRUNE_TASKS: &str = "\
DELETE FROM tasks WHERE id IN (
    SELECT t.id FROM tasks t
    WHERE t.state IN ('done', 'dead') AND t.updated_at < $1
      AND NOT EXISTS (SELECT 1 FROM inbound_dedup d WHERE d.task_id = t.id)
    LIMIT $2)";

/// What a pass removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    pub tasks: u64,
    pub dedup_keys: u64,
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
    /// One pass: dedup keys first, so the tasks they held go in the same pass.
    pub(crate) async fn prune(&self) -> Result<Pruned, StoreError> {
        let Some(cutoffs) = cutoffs(self.now(), self.queue.retention) else {
            return Ok(Pruned::default());
        };
        let dedup_keys = self.delete_in_batches(PRUNE_DEDUP_KEYS, cutoffs.dedup_keys).await?;
        let tasks = self.delete_in_batches(PRUNE_TASKS, cutoffs.tasks).await?;
        Ok(Pruned { tasks, dedup_keys })
    }

    async fn delete_in_batches(&self, statement: &'static str, before: i64) -> Result<u64, StoreError> {
        let mut deleted = 0;
        loop {
            let batch = Statement::<E::Db>::new(statement)
                .int(before)
                .int(BATCH)
                .execute(self.engine.writes())
                .await?;
            deleted += batch;
            if batch < BATCH.unsigned_abs() {
                return Ok(deleted);
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
                Ok(pruned) if pruned != Pruned::default() => info!(
                    tasks = pruned.tasks,
                    dedup_keys = pruned.dedup_keys,
                    "pruned finished tasks"
                ),
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
