//! Exclusive locks: how several Herald processes sharing one database agree
//! that exactly one of them runs an ingress that must have a single consumer
//! (see [`crate::ChannelIngress::exclusive`]).
//!
//! A lock lives as long as the holder's process: when the process dies, the
//! database (PostgreSQL's advisory locks) or the kernel (SQLite's file locks)
//! frees it, so a standby process can take over without waiting for a lease
//! to run out.

use async_trait::async_trait;

use crate::store::StoreError;

/// Hands out named locks that at most one process holds at a time.
#[async_trait]
pub trait ExclusiveLocks: Send + Sync {
    /// Takes `name` if nobody holds it; `None` when another holder has it.
    async fn try_acquire(&self, name: &str) -> Result<Option<Box<dyn HeldLock>>, StoreError>;

    /// Takes `name`, waiting up to `patience` for its holder to let it go;
    /// `None` when it is still held then. An engine that can wait on the
    /// lock itself wakes the moment the holder's process dies, so a standby
    /// takes over without a polling gap; the default asks every 100 ms.
    async fn acquire_within(
        &self,
        name: &str,
        patience: std::time::Duration,
    ) -> Result<Option<Box<dyn HeldLock>>, StoreError> {
        const POLL: std::time::Duration = std::time::Duration::from_millis(100);
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            if let Some(held) = self.try_acquire(name).await? {
                return Ok(Some(held));
            }
            if tokio::time::Instant::now() + POLL > deadline {
                return Ok(None);
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// A lock this process holds until it is released or dropped.
#[async_trait]
pub trait HeldLock: Send + Sync {
    /// Whether the lock is still held. `false` once the connection that
    /// holds it was lost: the database may have handed it to another process.
    async fn still_held(&mut self) -> bool;

    /// Gives the lock back.
    async fn release(self: Box<Self>);
}
