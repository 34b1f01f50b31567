//! Schedules, on either engine: the statements (the same text on SQLite and
//! PostgreSQL), the row conversion and the [`ScheduleStore`].
//!
//! `mark_fired` is a compare-and-set on `next_run_at`: of several processes
//! that noticed the same due run, exactly one moves the schedule on.

use async_trait::async_trait;
use herald_core::time::{from_millis, to_millis};
use herald_core::{ActorId, ConversationId, NewSchedule, Schedule, ScheduleId, ScheduleStore, StoreError, Timestamp};

use crate::engine::Engine;
use crate::statement::{Columns, Statement};
use crate::store::Store;
use crate::{rows, text};

macro_rules! schedule_columns {
    () => {
        "id, ref, actor, instruction, spec, next_run_at, last_run_at, created_at"
    };
}

const INSERT: &str = concat!(
    "INSERT INTO schedules (conversation_id, ref, actor, instruction, spec, next_run_at, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
RETURNING ",
    schedule_columns!()
);

const GET: &str = concat!("SELECT ", schedule_columns!(), " FROM schedules WHERE id = $1");

const LIST_ALL: &str = concat!(
    "SELECT ",
    schedule_columns!(),
    " FROM schedules WHERE next_run_at IS NOT NULL ORDER BY id"
);

const LIST_OF: &str = concat!(
    "SELECT ",
    schedule_columns!(),
    " FROM schedules WHERE next_run_at IS NOT NULL AND conversation_id = $1 ORDER BY id"
);

const DUE: &str = concat!(
    "SELECT ",
    schedule_columns!(),
    " FROM schedules WHERE next_run_at IS NOT NULL AND next_run_at <= $1 ORDER BY next_run_at, id LIMIT $2"
);

const CANCEL: &str = "DELETE FROM schedules WHERE id = $1";

const MARK_FIRED: &str = "\
UPDATE schedules SET next_run_at = $1, last_run_at = $2, updated_at = $3
WHERE id = $4 AND next_run_at = $2";

/// A schedule from the columns of `schedule_columns!`.
fn schedule(row: &impl Columns) -> Result<Schedule, StoreError> {
    Ok(Schedule {
        id: ScheduleId(row.int("id")?),
        conversation: rows::conversation_ref(&row.text("ref")?)?,
        actor: row.opt_text("actor")?.map(ActorId::new),
        instruction: row.text("instruction")?,
        spec: row.text("spec")?,
        next_run_at: row.opt_int("next_run_at")?.map(from_millis),
        last_run_at: row.opt_int("last_run_at")?.map(from_millis),
        created_at: from_millis(row.int("created_at")?),
    })
}

#[async_trait]
impl<E: Engine> ScheduleStore for Store<E> {
    async fn create(&self, new: NewSchedule) -> Result<Schedule, StoreError> {
        let reference = text::json(&new.conversation, "conversation ref")?;
        let row = Statement::<E::Db>::new(INSERT)
            .text(new.conversation.id.as_str())
            .text(&reference)
            .opt_text(new.actor.as_ref().map(|a| a.as_str()))
            .text(&new.instruction)
            .text(&new.spec)
            .int(to_millis(new.next_run_at))
            .int(self.now())
            .fetch_one(self.engine.writes())
            .await?;
        schedule(&row)
    }

    async fn get(&self, id: ScheduleId) -> Result<Option<Schedule>, StoreError> {
        let row = Statement::<E::Db>::new(GET)
            .int(id.0)
            .fetch_optional(self.engine.reads())
            .await?;
        row.as_ref().map(schedule).transpose()
    }

    async fn list(&self, conversation: Option<&ConversationId>) -> Result<Vec<Schedule>, StoreError> {
        let statement = match conversation {
            Some(id) => Statement::<E::Db>::new(LIST_OF).text(id.as_str()),
            None => Statement::new(LIST_ALL),
        };
        let found = statement.fetch_all(self.engine.reads()).await?;
        found.iter().map(schedule).collect()
    }

    async fn cancel(&self, id: ScheduleId) -> Result<bool, StoreError> {
        let deleted = Statement::<E::Db>::new(CANCEL)
            .int(id.0)
            .execute(self.engine.writes())
            .await?;
        Ok(deleted > 0)
    }

    async fn due(&self, now: Timestamp, limit: usize) -> Result<Vec<Schedule>, StoreError> {
        let found = Statement::<E::Db>::new(DUE)
            .int(to_millis(now))
            .int(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(self.engine.reads())
            .await?;
        found.iter().map(schedule).collect()
    }

    async fn mark_fired(&self, id: ScheduleId, due: Timestamp, next: Option<Timestamp>) -> Result<bool, StoreError> {
        let moved = Statement::<E::Db>::new(MARK_FIRED)
            .opt_int(next.map(to_millis))
            .int(to_millis(due))
            .int(self.now())
            .int(id.0)
            .execute(self.engine.writes())
            .await?;
        Ok(moved > 0)
    }
}
