//! The LISTEN side of the queue's wake-ups on PostgreSQL.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sqlx::postgres::{PgListener, PgPool};
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use super::CHANNEL;
use crate::wake::Wakeup;

/// Connects and listens before returning, so a notification sent after
/// `Storage::connect` returns is never missed; then keeps listening in the
/// background until `pool` is closed.
pub(crate) async fn start(
    pool: PgPool,
    wakeup: Arc<Wakeup>,
    listening: Arc<AtomicBool>,
    retry_every: Duration,
) -> Result<JoinHandle<()>, sqlx::Error> {
    let mut listener = PgListener::connect_with(&pool).await?;
    listener.listen(CHANNEL).await?;
    listening.store(true, Ordering::Release);
    Ok(tokio::spawn(async move {
        loop {
            match listener.try_recv().await {
                Ok(Some(_)) => wakeup.wake(),
                Ok(None) => {
                    debug!("task notifications reconnected");
                    wakeup.wake();
                }
                Err(sqlx::Error::PoolClosed) => break,
                Err(err) => {
                    // Waiters fall back to polling until the listener is back.
                    listening.store(false, Ordering::Release);
                    warn!(error = %err, "task notifications are interrupted; workers poll meanwhile");
                    wakeup.wake();
                    tokio::time::sleep(retry_every.max(Duration::from_millis(100))).await;
                    continue;
                }
            }
            listening.store(true, Ordering::Release);
        }
        listening.store(false, Ordering::Release);
    }))
}
