//! Turning rows into core's types, shared by both engines: the columns are
//! the same, only the row type differs.

use std::time::Duration;

use herald_core::time::from_millis;
use herald_core::{
    ActorId, ChannelName, ConversationId, ConversationRef, DeliveryReceipt, HistoryEntry, Role, StoreError, Task,
    TaskId, TaskPayload,
};
use sqlx::{ColumnIndex, Decode, Row, Type};

use crate::error;

fn get<'r, R, T>(row: &'r R, column: &str) -> Result<T, StoreError>
where
    R: Row,
    T: Decode<'r, R::Database> + Type<R::Database>,
    for<'a> &'a str: ColumnIndex<R>,
{
    row.try_get(column).map_err(error::db)
}

fn count(value: i64, column: &str) -> Result<u32, StoreError> {
    u32::try_from(value).map_err(|_| StoreError::Corrupt(format!("{column} out of range: {value}")))
}

/// A task from the columns of `sql::TASK_COLUMNS`.
pub(crate) fn task<'r, R>(row: &'r R) -> Result<Task, StoreError>
where
    R: Row,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    for<'a> &'a str: ColumnIndex<R>,
{
    let id: i64 = get(row, "id")?;
    let payload: String = get(row, "payload")?;
    let payload: TaskPayload =
        serde_json::from_str(&payload).map_err(|e| error::json(&format!("payload of task {id}"), e))?;
    Ok(Task {
        id: TaskId(id),
        conversation: ConversationId::new(get::<_, String>(row, "conversation_id")?),
        channel: ChannelName::new(get::<_, String>(row, "channel")?),
        payload,
        attempt: count(get(row, "attempts")?, "attempts")?,
        max_attempts: count(get(row, "max_attempts")?, "max_attempts")?,
        enqueued_at: from_millis(get(row, "created_at")?),
        last_error: get(row, "last_error")?,
    })
}

/// A history entry from the columns of `sql::HISTORY_COLUMNS`.
pub(crate) fn history_entry<'r, R>(row: &'r R) -> Result<HistoryEntry, StoreError>
where
    R: Row,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    for<'a> &'a str: ColumnIndex<R>,
{
    let role: String = get(row, "role")?;
    Ok(HistoryEntry {
        id: get(row, "id")?,
        task: get::<_, Option<i64>>(row, "task_id")?.map(TaskId),
        role: Role::parse(&role).ok_or_else(|| StoreError::Corrupt(format!("unknown history role `{role}`")))?,
        actor: get::<_, Option<String>>(row, "actor")?.map(ActorId::new),
        text: get(row, "text")?,
        at: from_millis(get(row, "at")?),
    })
}

pub(crate) fn delivery<'r, R>(row: &'r R) -> Result<DeliveryReceipt, StoreError>
where
    R: Row,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    for<'a> &'a str: ColumnIndex<R>,
{
    let ids: String = get(row, "platform_message_ids")?;
    Ok(DeliveryReceipt {
        task: TaskId(get(row, "task_id")?),
        slot: get(row, "slot")?,
        conversation: ConversationId::new(get::<_, String>(row, "conversation_id")?),
        platform_message_ids: serde_json::from_str(&ids).map_err(|e| error::json("delivery message ids", e))?,
        delivered_at: from_millis(get(row, "delivered_at")?),
    })
}

pub(crate) fn conversation_ref(json: &str) -> Result<ConversationRef, StoreError> {
    serde_json::from_str(json).map_err(|e| error::json("conversation ref", e))
}

pub(crate) fn state_value(json: &str) -> Result<serde_json::Value, StoreError> {
    serde_json::from_str(json).map_err(|e| error::json("state value", e))
}

/// `at + by` in milliseconds, saturating instead of overflowing.
pub(crate) fn later(at: i64, by: Duration) -> i64 {
    at.saturating_add(i64::try_from(by.as_millis()).unwrap_or(i64::MAX))
}

/// How long from `now` until `due`, both in milliseconds; `None` when past.
pub(crate) fn until(now: i64, due: Option<i64>) -> Option<Duration> {
    let millis = due?.checked_sub(now)?;
    (millis > 0).then(|| Duration::from_millis(millis.unsigned_abs()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_arithmetic_saturates_and_ignores_the_past() {
        assert_eq!(later(1_000, Duration::from_secs(2)), 3_000);
        assert_eq!(later(i64::MAX - 1, Duration::from_secs(2)), i64::MAX);
        assert_eq!(until(1_000, Some(3_500)), Some(Duration::from_millis(2_500)));
        assert_eq!(until(1_000, Some(1_000)), None);
        assert_eq!(until(1_000, Some(10)), None);
        assert_eq!(until(1_000, None), None);
    }
}
