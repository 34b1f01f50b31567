//! Schedules on PostgreSQL, on the shared pool. Several processes may mark
//! the same due run at once; the compare-and-set in `MARK_FIRED` lets one win.

use async_trait::async_trait;
use herald_core::time::to_millis;
use herald_core::{ConversationId, NewSchedule, Schedule, ScheduleId, ScheduleStore, StoreError, Timestamp};

use super::PgStore;
use crate::error;
use crate::schedules::{self as sql, schedule};

#[async_trait]
impl ScheduleStore for PgStore {
    async fn create(&self, new: NewSchedule) -> Result<Schedule, StoreError> {
        let row = sqlx::query(sql::INSERT)
            .bind(new.conversation.id.as_str())
            .bind(sql::reference_json(&new)?)
            .bind(new.actor.as_ref().map(|a| a.as_str()))
            .bind(&new.instruction)
            .bind(&new.spec)
            .bind(to_millis(new.next_run_at))
            .bind(self.now())
            .fetch_one(&self.pool)
            .await
            .map_err(error::db)?;
        schedule(&row)
    }

    async fn get(&self, id: ScheduleId) -> Result<Option<Schedule>, StoreError> {
        let row = sqlx::query(sql::GET)
            .bind(id.0)
            .fetch_optional(&self.pool)
            .await
            .map_err(error::db)?;
        row.as_ref().map(schedule).transpose()
    }

    async fn list(&self, conversation: Option<&ConversationId>) -> Result<Vec<Schedule>, StoreError> {
        let query = match conversation {
            Some(id) => sqlx::query(sql::LIST_OF).bind(id.as_str()),
            None => sqlx::query(sql::LIST_ALL),
        };
        let found = query.fetch_all(&self.pool).await.map_err(error::db)?;
        found.iter().map(schedule).collect()
    }

    async fn cancel(&self, id: ScheduleId) -> Result<bool, StoreError> {
        let done = sqlx::query(sql::CANCEL)
            .bind(id.0)
            .execute(&self.pool)
            .await
            .map_err(error::db)?;
        Ok(done.rows_affected() > 0)
    }

    async fn due(&self, now: Timestamp, limit: usize) -> Result<Vec<Schedule>, StoreError> {
        let found = sqlx::query(sql::DUE)
            .bind(to_millis(now))
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(&self.pool)
            .await
            .map_err(error::db)?;
        found.iter().map(schedule).collect()
    }

    async fn mark_fired(&self, id: ScheduleId, due: Timestamp, next: Option<Timestamp>) -> Result<bool, StoreError> {
        let done = sqlx::query(sql::MARK_FIRED)
            .bind(next.map(to_millis))
            .bind(to_millis(due))
            .bind(self.now())
            .bind(id.0)
            .execute(&self.pool)
            .await
            .map_err(error::db)?;
        Ok(done.rows_affected() > 0)
    }
}
