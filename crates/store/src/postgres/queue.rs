//! The task queue on PostgreSQL, shared safely by several processes.
//!
//! The claim is one `UPDATE … WHERE id = (SELECT … FOR NO KEY UPDATE SKIP
//! LOCKED)`. Under READ COMMITTED the subquery sees the statement's snapshot
//! and keeps each conversation's head (its lowest-id task still queued or
//! leased) when that head is due: queued with `run_at` passed, or leased with
//! the lease expired. Why two workers never lease two tasks of one
//! conversation at once:
//! - Both may pick the same head; the row lock lets one take it. The other
//!   skips it (SKIP LOCKED), or, if the winner already committed, re-checks
//!   the new row version and finds it leased and not expired.
//! - A task behind a head stays unclaimable while the head is queued or
//!   leased, since the head only leaves those states for `done`/`dead`, which
//!   are final.
//! - A claimer's snapshot cannot hold a conversation's later task without its
//!   earlier one: enqueue locks the conversation row before it takes a task id
//!   (`sql::UPSERT_CONVERSATION`), so one conversation's ids follow commit order.
//!
//! SKIP LOCKED also means a head that another worker is claiming right now
//! does not make this claim wait: it moves on to the next conversation. The
//! lock is `FOR NO KEY UPDATE` because the claim changes no key, so it does
//! not conflict with the key-share locks that foreign-key checks take.

use std::time::Duration;

use async_trait::async_trait;
use herald_core::time::{from_millis, to_millis};
use herald_core::{
    ClaimFilter, Enqueued, FailOutcome, Lease, NewTask, QueueStats, StoreError, Task, TaskId, TaskQueue,
};
use sqlx::Row;
use tracing::debug;

use super::PgStore;
use crate::sql::{self, task_columns};
use crate::{error, rows};

/// `herald_claim_task` (migration 0003) walks `tasks_unfinished_by_priority`
/// in order, planned with sorts off, and takes the first claimable
/// conversation head, skipping rows another worker is claiming.
const CLAIM: &str = concat!(
    "SELECT ",
    task_columns!(),
    " FROM herald_claim_task($1, $2, $3, $4, $5)"
);

const PENDING: &str = "\
SELECT COUNT(*) FROM tasks
WHERE state IN ('queued', 'leased')
  AND ($1::text[] IS NULL OR channel = ANY($1))
  AND ($2::text[] IS NULL OR conversation_id = ANY($2))";

const NOTIFY: &str = "SELECT pg_notify('herald_tasks', $1)";

fn filter_lists(filter: &ClaimFilter) -> (Option<Vec<String>>, Option<Vec<String>>) {
    (
        filter
            .channels
            .as_ref()
            .map(|list| list.iter().map(|c| c.as_str().to_owned()).collect()),
        filter
            .conversations
            .as_ref()
            .map(|list| list.iter().map(|c| c.as_str().to_owned()).collect()),
    )
}

type PgQuery<'q> = sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>;

impl PgStore {
    /// Runs a lease-guarded update (no row changed means the lease is gone)
    /// and tells every process that the conversation may have a task to claim.
    async fn guarded(&self, query: PgQuery<'_>, task: &Task) -> Result<(), StoreError> {
        let changed = query.execute(&self.pool).await.map_err(error::db)?;
        if changed.rows_affected() == 0 {
            return Err(StoreError::LeaseLost(task.id));
        }
        // Sent after the update committed, so a woken worker sees the change.
        // A lost notification only delays a worker until its next wait ends.
        if let Err(err) = sqlx::query(NOTIFY)
            .bind(task.conversation.as_str())
            .execute(&self.pool)
            .await
        {
            debug!(error = %err, "could not notify other workers");
        }
        // This process's own waiters need no round trip.
        self.wakeup.wake();
        Ok(())
    }

    async fn next_due(&self) -> Option<Duration> {
        let now = self.now();
        match sqlx::query_scalar::<_, Option<i64>>(sql::NEXT_DUE)
            .bind(now)
            .fetch_one(&self.pool)
            .await
        {
            Ok(due) => rows::until(now, due),
            Err(err) => {
                debug!(error = %err, "could not read the next due task");
                None
            }
        }
    }
}

#[async_trait]
impl TaskQueue for PgStore {
    async fn enqueue(&self, task: NewTask) -> Result<Enqueued, StoreError> {
        let now = self.now();
        let conversation = task.payload.conversation();
        let reference = serde_json::to_string(conversation).map_err(|e| error::json("conversation ref", e))?;
        let payload = serde_json::to_string(&task.payload).map_err(|e| error::json("task payload", e))?;
        let run_at = task.not_before.map(to_millis).unwrap_or(now);

        let mut tx = self.pool.begin().await.map_err(error::db)?;
        if let Some(key) = &task.dedup_key {
            let seen: Option<i64> = sqlx::query_scalar(sql::FIND_DEDUP)
                .bind(key)
                .fetch_optional(&mut *tx)
                .await
                .map_err(error::db)?;
            if let Some(id) = seen {
                tx.rollback().await.map_err(error::db)?;
                return Ok(Enqueued::Duplicate(TaskId(id)));
            }
        }
        sqlx::query(sql::UPSERT_CONVERSATION)
            .bind(conversation.id.as_str())
            .bind(conversation.channel.as_str())
            .bind(&reference)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(error::db)?;
        let id: i64 = sqlx::query_scalar(sql::INSERT_TASK)
            .bind(conversation.id.as_str())
            .bind(conversation.channel.as_str())
            .bind(&payload)
            .bind(i64::from(task.priority))
            .bind(i64::from(self.queue.max_attempts))
            .bind(run_at)
            .bind(now)
            .fetch_one(&mut *tx)
            .await
            .map_err(error::db)?;
        if let Some(key) = &task.dedup_key {
            let inserted = sqlx::query(sql::INSERT_DEDUP)
                .bind(key)
                .bind(id)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(error::db)?;
            if inserted.rows_affected() == 0 {
                // Another process stored the same key meanwhile (its
                // transaction committed while this one waited on the key).
                tx.rollback().await.map_err(error::db)?;
                let id: i64 = sqlx::query_scalar(sql::FIND_DEDUP)
                    .bind(key)
                    .fetch_one(&self.pool)
                    .await
                    .map_err(error::db)?;
                return Ok(Enqueued::Duplicate(TaskId(id)));
            }
        }
        sqlx::query(NOTIFY)
            .bind(conversation.id.as_str())
            .execute(&mut *tx)
            .await
            .map_err(error::db)?;
        tx.commit().await.map_err(error::db)?;
        self.wakeup.wake();
        Ok(Enqueued::New(TaskId(id)))
    }

    async fn claim(&self, filter: &ClaimFilter) -> Result<Option<Lease>, StoreError> {
        let now = self.now();
        let token = uuid::Uuid::new_v4().to_string();
        let expires_at = rows::later(now, self.queue.lease);
        let (channels, conversations) = filter_lists(filter);
        let row = sqlx::query(CLAIM)
            .bind(&token)
            .bind(expires_at)
            .bind(now)
            .bind(channels)
            .bind(conversations)
            .fetch_optional(&self.pool)
            .await
            .map_err(error::db)?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some(Lease {
            task: rows::task(&row)?,
            token,
            expires_at: from_millis(expires_at),
        }))
    }

    async fn extend(&self, lease: &mut Lease) -> Result<(), StoreError> {
        let now = self.now();
        let expires_at = rows::later(now, self.queue.lease);
        let done = sqlx::query(sql::EXTEND)
            .bind(expires_at)
            .bind(now)
            .bind(lease.task.id.0)
            .bind(&lease.token)
            .execute(&self.pool)
            .await
            .map_err(error::db)?;
        if done.rows_affected() == 0 {
            return Err(StoreError::LeaseLost(lease.task.id));
        }
        lease.expires_at = from_millis(expires_at);
        Ok(())
    }

    async fn complete(&self, lease: &Lease) -> Result<(), StoreError> {
        let query = sqlx::query(sql::COMPLETE)
            .bind(self.now())
            .bind(lease.task.id.0)
            .bind(&lease.token);
        self.guarded(query, &lease.task).await
    }

    async fn fail(&self, lease: &Lease, error: &str) -> Result<FailOutcome, StoreError> {
        let now = self.now();
        let task = &lease.task;
        match self.queue.backoff(task.max_attempts).delay_after(task.attempt) {
            Some(delay) => {
                let run_at = rows::later(now, delay);
                let query = sqlx::query(sql::RETRY)
                    .bind(run_at)
                    .bind(error)
                    .bind(now)
                    .bind(task.id.0)
                    .bind(&lease.token);
                self.guarded(query, task).await?;
                Ok(FailOutcome::Retry {
                    at: from_millis(run_at),
                    after: delay,
                })
            }
            None => {
                let query = sqlx::query(sql::BURY)
                    .bind(error)
                    .bind(now)
                    .bind(task.id.0)
                    .bind(&lease.token);
                self.guarded(query, task).await?;
                Ok(FailOutcome::Dead)
            }
        }
    }

    async fn kill(&self, lease: &Lease, error: &str) -> Result<(), StoreError> {
        let query = sqlx::query(sql::BURY)
            .bind(error)
            .bind(self.now())
            .bind(lease.task.id.0)
            .bind(&lease.token);
        self.guarded(query, &lease.task).await
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let query = sqlx::query(sql::RELEASE)
            .bind(self.now())
            .bind(lease.task.id.0)
            .bind(&lease.token);
        self.guarded(query, &lease.task).await
    }

    /// Sleeps until a NOTIFY, the next due time or `at_most`; it polls every
    /// `queue.poll_interval` only while the listener is disconnected.
    async fn wait_for_work(&self, at_most: Duration) {
        let cap = if self.listening() {
            at_most
        } else {
            at_most.min(self.queue.poll_interval)
        };
        self.wakeup.wait(cap, self.next_due()).await;
    }

    async fn pending(&self, filter: &ClaimFilter) -> Result<u64, StoreError> {
        let (channels, conversations) = filter_lists(filter);
        let count: i64 = sqlx::query_scalar(PENDING)
            .bind(channels)
            .bind(conversations)
            .fetch_one(&self.pool)
            .await
            .map_err(error::db)?;
        Ok(count.unsigned_abs())
    }

    async fn stats(&self) -> Result<QueueStats, StoreError> {
        let row = sqlx::query(sql::STATS).fetch_one(&self.pool).await.map_err(error::db)?;
        let count = |column: &str| row.try_get::<i64, _>(column).map(i64::unsigned_abs).map_err(error::db);
        Ok(QueueStats {
            queued: count("queued")?,
            leased: count("leased")?,
            dead: count("dead")?,
            oldest_queued_at: row
                .try_get::<Option<i64>, _>("oldest_queued_at")
                .map_err(error::db)?
                .map(from_millis),
        })
    }
}
