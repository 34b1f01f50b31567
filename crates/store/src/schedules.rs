//! Schedules on both engines: the statements (the same text on SQLite and
//! PostgreSQL) and the row conversion. Each engine's `schedules.rs` runs them
//! on its own pool.
//!
//! `mark_fired` is a compare-and-set on `next_run_at`: of several processes
//! that noticed the same due run, exactly one moves the schedule on.

use herald_core::time::from_millis;
use herald_core::{ActorId, Schedule, ScheduleId, StoreError};
use sqlx::{ColumnIndex, Decode, Row, Type};

use crate::{error, rows};

macro_rules! schedule_columns {
    () => {
        "id, ref, actor, instruction, spec, next_run_at, last_run_at, created_at"
    };
}

pub(crate) const INSERT: &str = concat!(
    "INSERT INTO schedules (conversation_id, ref, actor, instruction, spec, next_run_at, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
RETURNING ",
    schedule_columns!()
);

pub(crate) const GET: &str = concat!("SELECT ", schedule_columns!(), " FROM schedules WHERE id = $1");

pub(crate) const LIST_ALL: &str = concat!(
    "SELECT ",
    schedule_columns!(),
    " FROM schedules WHERE next_run_at IS NOT NULL ORDER BY id"
);

pub(crate) const LIST_OF: &str = concat!(
    "SELECT ",
    schedule_columns!(),
    " FROM schedules WHERE next_run_at IS NOT NULL AND conversation_id = $1 ORDER BY id"
);

pub(crate) const DUE: &str = concat!(
    "SELECT ",
    schedule_columns!(),
    " FROM schedules WHERE next_run_at IS NOT NULL AND next_run_at <= $1 ORDER BY next_run_at, id LIMIT $2"
);

pub(crate) const CANCEL: &str = "DELETE FROM schedules WHERE id = $1";

pub(crate) const MARK_FIRED: &str = "\
UPDATE schedules SET next_run_at = $1, last_run_at = $2, updated_at = $3
WHERE id = $4 AND next_run_at = $2";

fn get<'r, R, T>(row: &'r R, column: &str) -> Result<T, StoreError>
where
    R: Row,
    T: Decode<'r, R::Database> + Type<R::Database>,
    for<'a> &'a str: ColumnIndex<R>,
{
    row.try_get(column).map_err(error::db)
}

/// A schedule from the columns of `schedule_columns!`.
pub(crate) fn schedule<'r, R>(row: &'r R) -> Result<Schedule, StoreError>
where
    R: Row,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    for<'a> &'a str: ColumnIndex<R>,
{
    let reference: String = get(row, "ref")?;
    Ok(Schedule {
        id: ScheduleId(get(row, "id")?),
        conversation: rows::conversation_ref(&reference)?,
        actor: get::<_, Option<String>>(row, "actor")?.map(ActorId::new),
        instruction: get(row, "instruction")?,
        spec: get(row, "spec")?,
        next_run_at: get::<_, Option<i64>>(row, "next_run_at")?.map(from_millis),
        last_run_at: get::<_, Option<i64>>(row, "last_run_at")?.map(from_millis),
        created_at: from_millis(get(row, "created_at")?),
    })
}

pub(crate) fn reference_json(schedule: &herald_core::NewSchedule) -> Result<String, StoreError> {
    serde_json::to_string(&schedule.conversation).map_err(|e| error::json("conversation ref", e))
}
