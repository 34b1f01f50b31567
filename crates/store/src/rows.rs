//! Turning rows into core's types, shared by both engines: the columns are
//! the same, only the row type differs.

use std::time::Duration;

use crate::error;
use crate::statement::Columns;
use herald_core::time::from_millis;
use herald_core::{
    ActorId, ChannelName, ConversationId, ConversationRef, DeliveryReceipt, HistoryEntry, Role, StoreError, Task,
    TaskId, TaskPayload,
};

fn count(value: i64, column: &str) -> Result<u32, StoreError> {
    u32::try_from(value).map_err(|_| StoreError::Corrupt(format!("{column} out of range: {value}")))
}

/// A task from the columns of `sql::task_columns!`.
pub(crate) fn task(row: &impl Columns) -> Result<Task, StoreError> {
    let id = row.int("id")?;
    let payload: TaskPayload =
        serde_json::from_str(&row.text("payload")?).map_err(|e| error::json(&format!("payload of task {id}"), e))?;
    Ok(Task {
        id: TaskId(id),
        conversation: ConversationId::new(row.text("conversation_id")?),
        channel: ChannelName::new(row.text("channel")?),
        payload,
        attempt: count(row.int("attempts")?, "attempts")?,
        max_attempts: count(row.int("max_attempts")?, "max_attempts")?,
        enqueued_at: from_millis(row.int("created_at")?),
        last_error: row.opt_text("last_error")?,
    })
}

/// A history entry from the columns `sql::HISTORY` and `sql::TASK_ENTRIES` read.
pub(crate) fn history_entry(row: &impl Columns) -> Result<HistoryEntry, StoreError> {
    Ok(HistoryEntry {
        id: row.int("id")?,
        task: row.opt_int("task_id")?.map(TaskId),
        role: role_named(&row.text("role")?)?,
        actor: row.opt_text("actor")?.map(ActorId::new),
        text: row.text("text")?,
        at: from_millis(row.int("at")?),
    })
}

/// The entries of an `Engine::HISTORY_AND_STATE` array, oldest first.
pub(crate) fn history_json(json: &str) -> Result<Vec<HistoryEntry>, StoreError> {
    type Entry = (i64, Option<i64>, String, Option<String>, String, i64);
    let entries: Vec<Entry> = serde_json::from_str(json).map_err(|e| error::json("history", e))?;
    let mut history = entries
        .into_iter()
        .map(|(id, task, role, actor, text, at)| {
            Ok(HistoryEntry {
                id,
                task: task.map(TaskId),
                role: role_named(&role)?,
                actor: actor.map(ActorId::new),
                text,
                at: from_millis(at),
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    history.sort_unstable_by_key(|entry| entry.id);
    Ok(history)
}

fn role_named(role: &str) -> Result<Role, StoreError> {
    Role::parse(role).ok_or_else(|| StoreError::Corrupt(format!("unknown history role `{role}`")))
}

pub(crate) fn delivery(row: &impl Columns) -> Result<DeliveryReceipt, StoreError> {
    let ids = row.text("platform_message_ids")?;
    Ok(DeliveryReceipt {
        task: TaskId(row.int("task_id")?),
        slot: row.text("slot")?,
        conversation: ConversationId::new(row.text("conversation_id")?),
        platform_message_ids: serde_json::from_str(&ids).map_err(|e| error::json("delivery message ids", e))?,
        delivered_at: from_millis(row.int("delivered_at")?),
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
