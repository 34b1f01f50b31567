//! The task queue on SQLite.
//!
//! The claim is one `UPDATE … WHERE id = (SELECT …) RETURNING`: SQLite takes
//! the write lock when the statement starts, so choosing the task and leasing
//! it are one atomic step, even against another process on the same file.
//! The subquery keeps only each conversation's head (its lowest-id task still
//! queued or leased) and of those the ones due now: queued with `run_at`
//! passed, or leased with the lease expired (its worker died). A
//! conversation whose head is leased and alive offers nothing, which is what
//! serves each conversation in arrival order.

use std::time::Duration;

use async_trait::async_trait;
use herald_core::time::{from_millis, to_millis};
use herald_core::{ClaimFilter, Enqueued, FailOutcome, Lease, NewTask, QueueStats, StoreError, TaskId, TaskQueue};
use sqlx::Row;
use tracing::debug;

use super::SqliteStore;
use crate::sql::{self, task_columns};
use crate::{error, rows};

/// Walks `tasks_unfinished_by_priority` in order and takes the first
/// claimable conversation head. `INDEXED BY` holds the planner to that walk:
/// without statistics it preferred to fetch and sort every unfinished task,
/// and a backlog of 10,000 made each claim take ~8 ms instead of ~0.3.
const CLAIM: &str = concat!(
    "UPDATE tasks SET state = 'leased', lease_token = $1, lease_expires_at = $2, attempts = attempts + 1, updated_at = $3
WHERE id = (
    SELECT t.id FROM tasks t INDEXED BY tasks_unfinished_by_priority
    WHERE t.state IN ('queued', 'leased')
      AND ((t.state = 'queued' AND t.run_at <= $3) OR (t.state = 'leased' AND t.lease_expires_at <= $3))
      AND ($4 IS NULL OR t.channel IN (SELECT value FROM json_each($4)))
      AND ($5 IS NULL OR t.conversation_id IN (SELECT value FROM json_each($5)))
      AND NOT EXISTS (
          SELECT 1 FROM tasks e
          WHERE e.conversation_id = t.conversation_id AND e.state IN ('queued', 'leased') AND e.id < t.id)
    ORDER BY t.priority, t.id
    LIMIT 1)
RETURNING ",
    task_columns!()
);

const PENDING: &str = "\
SELECT COUNT(*) FROM tasks
WHERE state IN ('queued', 'leased')
  AND ($1 IS NULL OR channel IN (SELECT value FROM json_each($1)))
  AND ($2 IS NULL OR conversation_id IN (SELECT value FROM json_each($2)))";

/// A claim filter's lists as JSON arrays for `json_each`; `None` allows all.
fn filter_lists(filter: &ClaimFilter) -> (Option<String>, Option<String>) {
    let channels = filter
        .channels
        .as_ref()
        .map(|list| serde_json::Value::from(list.iter().map(|c| c.as_str()).collect::<Vec<_>>()).to_string());
    let conversations = filter
        .conversations
        .as_ref()
        .map(|list| serde_json::Value::from(list.iter().map(|c| c.as_str()).collect::<Vec<_>>()).to_string());
    (channels, conversations)
}

impl SqliteStore {
    /// Runs one of the lease-guarded updates; no row changed means the lease is gone.
    async fn guarded(
        &self,
        query: sqlx::query::Query<'_, sqlx::Sqlite, sqlx::sqlite::SqliteArguments>,
        task: TaskId,
    ) -> Result<(), StoreError> {
        let done = query.execute(&self.write).await.map_err(error::db)?;
        if done.rows_affected() == 0 {
            return Err(StoreError::LeaseLost(task));
        }
        Ok(())
    }

    async fn next_due(&self) -> Option<Duration> {
        let now = self.now();
        match sqlx::query_scalar::<_, Option<i64>>(sql::NEXT_DUE)
            .bind(now)
            .fetch_one(&self.read)
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
impl TaskQueue for SqliteStore {
    async fn enqueue(&self, task: NewTask) -> Result<Enqueued, StoreError> {
        let now = self.now();
        let conversation = task.payload.conversation();
        let reference = serde_json::to_string(conversation).map_err(|e| error::json("conversation ref", e))?;
        let payload = serde_json::to_string(&task.payload).map_err(|e| error::json("task payload", e))?;
        let run_at = task.not_before.map(to_millis).unwrap_or(now);

        let mut tx = self.write.begin_with("BEGIN IMMEDIATE").await.map_err(error::db)?;
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
            sqlx::query(sql::INSERT_DEDUP)
                .bind(key)
                .bind(id)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(error::db)?;
        }
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
            .fetch_optional(&self.write)
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
        let query = sqlx::query(sql::EXTEND)
            .bind(expires_at)
            .bind(now)
            .bind(lease.task.id.0)
            .bind(&lease.token);
        self.guarded(query, lease.task.id).await?;
        lease.expires_at = from_millis(expires_at);
        Ok(())
    }

    async fn complete(&self, lease: &Lease) -> Result<(), StoreError> {
        let query = sqlx::query(sql::COMPLETE)
            .bind(self.now())
            .bind(lease.task.id.0)
            .bind(&lease.token);
        self.guarded(query, lease.task.id).await?;
        // The conversation's next task, if any, is its head now.
        self.wakeup.wake();
        Ok(())
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
                self.guarded(query, task.id).await?;
                self.wakeup.wake();
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
                self.guarded(query, task.id).await?;
                self.wakeup.wake();
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
        self.guarded(query, lease.task.id).await?;
        self.wakeup.wake();
        Ok(())
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let query = sqlx::query(sql::RELEASE)
            .bind(self.now())
            .bind(lease.task.id.0)
            .bind(&lease.token);
        self.guarded(query, lease.task.id).await?;
        self.wakeup.wake();
        Ok(())
    }

    async fn wait_for_work(&self, at_most: Duration) {
        self.wakeup
            .wait(at_most.min(self.queue.poll_interval), self.next_due())
            .await;
    }

    async fn pending(&self, filter: &ClaimFilter) -> Result<u64, StoreError> {
        let (channels, conversations) = filter_lists(filter);
        let count: i64 = sqlx::query_scalar(PENDING)
            .bind(channels)
            .bind(conversations)
            .fetch_one(&self.read)
            .await
            .map_err(error::db)?;
        Ok(count.unsigned_abs())
    }

    async fn stats(&self) -> Result<QueueStats, StoreError> {
        let row = sqlx::query(sql::STATS).fetch_one(&self.read).await.map_err(error::db)?;
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
