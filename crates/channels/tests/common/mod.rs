//! What the channel tests share: a sink that records what it is handed, as
//! the queue would take it, and a send limiter on the real clock.

#![allow(dead_code)]

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use herald_core::channel::accept_one_by_one;
use herald_core::{Admission, Enqueued, InboundMessage, InboundSink, StoreError, Taken, TaskId};

pub const WAIT: Duration = Duration::from_secs(10);

/// Records every message; refuses the first `failures` with a store error,
/// and answers a repeated dedup key as a duplicate, as the queue does.
#[derive(Default)]
pub struct Recorder {
    pub accepted: Mutex<Vec<InboundMessage>>,
    pub keys: Mutex<HashSet<String>>,
    pub failures: AtomicUsize,
    pub calls: AtomicUsize,
    pub changed: tokio::sync::Notify,
    /// How many messages each `accept_all` was handed.
    pub batches: Mutex<Vec<usize>>,
    /// Held for writing, it stalls the store: `accept_all` waits for it.
    pub gate: tokio::sync::RwLock<()>,
    /// `accept_all` calls begun, stalled or not: a hand-over waiting at the
    /// gate is one.
    pub handovers: AtomicUsize,
}

#[async_trait]
impl InboundSink for Recorder {
    async fn accept(&self, message: InboundMessage) -> Result<Admission, StoreError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self
            .failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(StoreError::Unavailable("the database is down".into()));
        }
        let new = self.keys.lock().unwrap().insert(message.dedup_key());
        let mut accepted = self.accepted.lock().unwrap();
        let id = TaskId(accepted.len() as i64 + 1);
        if new {
            accepted.push(message);
        }
        self.changed.notify_waiters();
        Ok(Admission::Queued(if new {
            Enqueued::New(id)
        } else {
            Enqueued::Duplicate(id)
        }))
    }

    async fn accept_all(&self, messages: Vec<InboundMessage>) -> Taken {
        self.handovers.fetch_add(1, Ordering::SeqCst);
        let _open = self.gate.read().await;
        self.batches.lock().unwrap().push(messages.len());
        accept_one_by_one(self, messages).await
    }
}

impl Recorder {
    pub fn messages(&self) -> Vec<InboundMessage> {
        self.accepted.lock().unwrap().clone()
    }

    pub async fn wait_for(&self, count: usize) -> Vec<InboundMessage> {
        let waited = tokio::time::timeout(WAIT, async {
            loop {
                let notified = self.changed.notified();
                if self.messages().len() >= count {
                    return;
                }
                notified.await;
            }
        })
        .await;
        assert!(waited.is_ok(), "expected {count} messages, got {:?}", self.messages());
        self.messages()
    }
}

pub fn local_limiter() -> Arc<dyn herald_core::SendLimiter> {
    Arc::new(herald_core::LocalLimiter::new(
        Arc::new(herald_core::SteadyClock::new()),
    ))
}
