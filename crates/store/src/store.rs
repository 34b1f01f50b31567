//! [`Store`]: the queue, the conversation store and the schedule store over
//! one [`Engine`], written once for both. `queue.rs`, `conversations.rs` and
//! `schedules.rs` implement core's traits on it; [`Backend`] is what
//! `Storage` holds, whichever the engine.

use std::sync::Arc;

use async_trait::async_trait;
use herald_core::{Clock, ConversationStore, ExclusiveLocks, ScheduleStore, StoreError, TaskQueue};

use crate::config::QueueConfig;
use crate::engine::Engine;
use crate::wake::Wakeup;

pub(crate) struct Store<E> {
    pub(crate) engine: E,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) queue: QueueConfig,
    /// Wakes this process's idle workers; the engine may wake it too (for
    /// PostgreSQL, on a notification from another process).
    pub(crate) wakeup: Arc<Wakeup>,
}

impl<E: Engine> Store<E> {
    pub(crate) fn new(engine: E, clock: Arc<dyn Clock>, queue: &QueueConfig, wakeup: Arc<Wakeup>) -> Self {
        Self {
            engine,
            clock,
            queue: queue.clone(),
            wakeup,
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
pub(crate) trait Backend: TaskQueue + ConversationStore + ScheduleStore {
    fn name(&self) -> &'static str;
    fn locks(&self) -> Arc<dyn ExclusiveLocks>;
    async fn migrate(&self) -> Result<(), StoreError>;
    async fn ping(&self) -> Result<(), StoreError>;
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

    async fn close(&self) {
        self.engine.close().await;
    }
}
