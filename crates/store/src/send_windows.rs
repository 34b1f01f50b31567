//! The platforms' send windows kept in PostgreSQL, so that several Herald
//! processes on one database keep a platform's limits for the bot as a
//! whole: core's [`SendLimiter`] over the `send_windows` table.
//!
//! Each key's row holds the unix-ms times of its latest sends.
//! `herald_take_send` (migration 0007) locks the rows of every key a send
//! must fit (in key order, so two processes never deadlock), and takes a
//! place in all of them or returns how long to wait: one statement, one
//! round trip. Under READ COMMITTED, `FOR UPDATE` waits for a concurrent
//! taker and then reads the row it wrote, so two processes never both see
//! the last place free. `herald_sent` moves a send to the moment it
//! finished, as [`herald_core::rate`] explains.
//!
//! SQLite serves one process, whose [`herald_core::LocalLimiter`] is exact
//! and costs no round trip; this store exists only on PostgreSQL.
//!
//! Time comes from the injected clock, like every time the store keeps.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use herald_core::rate::{SendLimit, SendLimiter, SendSlot, finished_now};
use herald_core::time::to_millis;
use herald_core::{Clock, StoreError};
use sqlx::Postgres;
use sqlx::postgres::PgPool;

use crate::statement::{Columns, Statement};

const TAKE: &str = "SELECT herald_take_send($1, $2, $3, $4) AS wait_ms";
const SENT: &str = "SELECT herald_sent($1, $2, $3)";

pub(crate) struct SharedSendWindows {
    pool: PgPool,
    clock: Arc<dyn Clock>,
}

impl SharedSendWindows {
    pub(crate) fn new(pool: PgPool, clock: Arc<dyn Clock>) -> Self {
        Self { pool, clock }
    }
}

/// Each key once, in key order: the order rows are locked in.
fn distinct_sorted(limits: &[SendLimit]) -> Vec<&SendLimit> {
    let mut sorted: Vec<&SendLimit> = limits.iter().collect();
    sorted.sort_by(|a, b| a.key.cmp(&b.key));
    sorted.dedup_by(|a, b| a.key == b.key);
    sorted
}

fn span_ms(limit: &SendLimit) -> i64 {
    i64::try_from(limit.window.per.as_millis()).unwrap_or(i64::MAX)
}

#[async_trait]
impl SendLimiter for SharedSendWindows {
    async fn take(&self, limits: &[SendLimit]) -> Result<SendSlot, StoreError> {
        let now_ms = to_millis(self.clock.now());
        let limits = distinct_sorted(limits);
        if limits.is_empty() {
            return Ok(SendSlot::Taken { at_ms: now_ms });
        }
        let keys: Vec<String> = limits.iter().map(|l| l.key.clone()).collect();
        let counts: Vec<i32> = limits
            .iter()
            .map(|l| i32::try_from(l.window.count.max(1)).unwrap_or(i32::MAX))
            .collect();
        let spans: Vec<i64> = limits.iter().map(|l| span_ms(l)).collect();
        let row = Statement::<Postgres>::new(TAKE)
            .bind(keys)
            .bind(counts)
            .bind(spans)
            .int(now_ms)
            .fetch_one(&self.pool)
            .await?;
        let wait_ms = row.int("wait_ms")?;
        Ok(if wait_ms > 0 {
            SendSlot::Wait(Duration::from_millis(wait_ms.unsigned_abs()))
        } else {
            SendSlot::Taken { at_ms: now_ms }
        })
    }

    async fn sent(&self, limits: &[SendLimit], taken_ms: i64) -> Result<(), StoreError> {
        let keys: Vec<String> = distinct_sorted(limits).iter().map(|l| l.key.clone()).collect();
        if keys.is_empty() {
            return Ok(());
        }
        Statement::<Postgres>::new(SENT)
            .bind(keys)
            .int(taken_ms)
            .int(finished_now(self.clock.as_ref()))
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
