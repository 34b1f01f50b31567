//! [`Store`]: the queue, the conversation store and the schedule store over
//! one [`Engine`], written once for both. `queue.rs`, `conversations.rs` and
//! `schedules.rs` implement core's traits on it; [`Backend`] is what
//! `Storage` holds, whichever the engine.

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use herald_core::{Clock, ConversationStore, ExclusiveLocks, FileStore, ScheduleStore, StoreError, TaskQueue};
use tokio::task::JoinHandle;

use crate::config::QueueConfig;
use crate::engine::Engine;
use crate::liveness::{self, Liveness};
use crate::prune::{self, Pruned};
use crate::wake::Wakeup;

pub(crate) struct Store<E> {
    pub(crate) engine: E,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) queue: QueueConfig,
    /// Wakes this process's idle workers; the engine may wake it too (for
    /// PostgreSQL, on a notification from another process).
    pub(crate) wakeup: Arc<Wakeup>,
    /// The background prune (`prune.rs`), stopped by `close` or drop.
    pruner: Mutex<Option<JoinHandle<()>>>,
    /// This store's holder id and liveness lock, and the takeover of dead
    /// holders' tasks (`liveness.rs`).
    pub(crate) liveness: Liveness,
}

impl<E: Engine> Store<E> {
    /// The store over `engine`, under a new holder whose liveness lock it
    /// takes first; pruning in the background unless `queue.retention`
    /// keeps everything.
    pub(crate) async fn open(
        engine: E,
        clock: Arc<dyn Clock>,
        queue: &QueueConfig,
        wakeup: Arc<Wakeup>,
    ) -> Result<Arc<Self>, StoreError> {
        let holder = liveness::new_id(queue.liveness_timeout);
        let lock = engine.hold(&holder).await?;
        let store = Arc::new(Self {
            engine,
            clock,
            queue: queue.clone(),
            wakeup,
            pruner: Mutex::new(None),
            liveness: Liveness::new(holder, lock, E::LIVENESS_CAN_BE_LOST, queue.liveness_timeout),
        });
        liveness::start(&store);
        if !queue.retention.is_zero() {
            *store.pruner.lock().unwrap_or_else(PoisonError::into_inner) = Some(prune::start(&store));
        }
        Ok(store)
    }

    fn stop_pruning(&self) {
        if let Some(pruner) = self.pruner.lock().unwrap_or_else(PoisonError::into_inner).take() {
            pruner.abort();
        }
    }

    /// Now, in unix milliseconds, from the injected clock.
    pub(crate) fn now(&self) -> i64 {
        herald_core::time::to_millis(self.clock.now())
    }
}

/// An open store of either engine: the three stores and the engine's
/// housekeeping behind one object, so `Storage` needs no `match` per call.
#[async_trait]
pub(crate) trait Backend: TaskQueue + ConversationStore + ScheduleStore + FileStore {
    fn name(&self) -> &'static str;
    fn locks(&self) -> Arc<dyn ExclusiveLocks>;
    async fn migrate(&self) -> Result<(), StoreError>;
    async fn ping(&self) -> Result<(), StoreError>;
    async fn prune(&self) -> Result<Pruned, StoreError>;
    async fn take_over_dead_holders(&self) -> Result<u64, StoreError>;
    async fn close(&self);
}

#[async_trait]
impl<E: Engine> Backend for Store<E> {
    fn name(&self) -> &'static str {
        E::NAME
    }

    fn locks(&self) -> Arc<dyn ExclusiveLocks> {
        self.engine.locks()
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        self.engine.migrate().await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.engine.ping().await
    }

    async fn prune(&self) -> Result<Pruned, StoreError> {
        Store::prune(self).await
    }

    async fn take_over_dead_holders(&self) -> Result<u64, StoreError> {
        Store::take_over_dead_holders(self).await
    }

    async fn close(&self) {
        self.stop_pruning();
        self.liveness.close().await;
        self.engine.close().await;
    }
}

impl<E> Drop for Store<E> {
    fn drop(&mut self) {
        if let Some(pruner) = self.pruner.get_mut().unwrap_or_else(PoisonError::into_inner).take() {
            pruner.abort();
        }
        self.liveness.stop_tasks();
    }
}
