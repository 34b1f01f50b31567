//! Conversations, history, delivery receipts and state on SQLite: reads on
//! the read pool, writes on the one write connection.

use async_trait::async_trait;
use herald_core::time::to_millis;
use herald_core::{
    ConversationId, ConversationRef, ConversationStore, DeliveryReceipt, HistoryEntry, NewHistoryEntry, StoreError,
    TaskId,
};
use sqlx::Row;

use super::SqliteStore;
use crate::{error, rows, sql};

#[async_trait]
impl ConversationStore for SqliteStore {
    async fn history(&self, conversation: &ConversationId, limit: usize) -> Result<Vec<HistoryEntry>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let found = sqlx::query(sql::HISTORY)
            .bind(conversation.as_str())
            .bind(limit)
            .fetch_all(&self.read)
            .await
            .map_err(error::db)?;
        found.iter().map(rows::history_entry).collect()
    }

    async fn conversation(&self, id: &ConversationId) -> Result<Option<ConversationRef>, StoreError> {
        let json: Option<String> = sqlx::query_scalar(sql::CONVERSATION)
            .bind(id.as_str())
            .fetch_optional(&self.read)
            .await
            .map_err(error::db)?;
        json.as_deref().map(rows::conversation_ref).transpose()
    }

    async fn task_entries(&self, task: TaskId) -> Result<Vec<HistoryEntry>, StoreError> {
        let found = sqlx::query(sql::TASK_ENTRIES)
            .bind(task.0)
            .fetch_all(&self.read)
            .await
            .map_err(error::db)?;
        found.iter().map(rows::history_entry).collect()
    }

    async fn record_turn(
        &self,
        conversation: &ConversationId,
        task: TaskId,
        entries: &[NewHistoryEntry],
    ) -> Result<bool, StoreError> {
        let now = self.now();
        let mut tx = self.write.begin_with("BEGIN IMMEDIATE").await.map_err(error::db)?;
        let recorded: i64 = sqlx::query_scalar(sql::TASK_HAS_ENTRIES)
            .bind(task.0)
            .fetch_one(&mut *tx)
            .await
            .map_err(error::db)?;
        if recorded > 0 {
            tx.rollback().await.map_err(error::db)?;
            return Ok(false);
        }
        for (seq, entry) in entries.iter().enumerate() {
            sqlx::query(sql::INSERT_ENTRY)
                .bind(conversation.as_str())
                .bind(task.0)
                .bind(i64::try_from(seq).unwrap_or(i64::MAX))
                .bind(entry.role.as_str())
                .bind(entry.actor.as_ref().map(|actor| actor.as_str()))
                .bind(&entry.text)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(error::db)?;
        }
        tx.commit().await.map_err(error::db)?;
        Ok(true)
    }

    async fn delivery(&self, task: TaskId, slot: &str) -> Result<Option<DeliveryReceipt>, StoreError> {
        let row = sqlx::query(sql::DELIVERY)
            .bind(task.0)
            .bind(slot)
            .fetch_optional(&self.read)
            .await
            .map_err(error::db)?;
        row.as_ref().map(rows::delivery).transpose()
    }

    async fn record_delivery(&self, receipt: &DeliveryReceipt) -> Result<(), StoreError> {
        let ids = serde_json::to_string(&receipt.platform_message_ids).map_err(|e| error::json("message ids", e))?;
        sqlx::query(sql::INSERT_DELIVERY)
            .bind(receipt.task.0)
            .bind(&receipt.slot)
            .bind(receipt.conversation.as_str())
            .bind(ids)
            .bind(to_millis(receipt.delivered_at))
            .execute(&self.write)
            .await
            .map_err(error::db)?;
        Ok(())
    }

    async fn get_state(&self, scope: &str, key: &str) -> Result<Option<serde_json::Value>, StoreError> {
        let json: Option<String> = sqlx::query_scalar(sql::GET_STATE)
            .bind(scope)
            .bind(key)
            .fetch_optional(&self.read)
            .await
            .map_err(error::db)?;
        json.as_deref().map(rows::state_value).transpose()
    }

    async fn put_state(&self, scope: &str, key: &str, value: &serde_json::Value) -> Result<(), StoreError> {
        sqlx::query(sql::PUT_STATE)
            .bind(scope)
            .bind(key)
            .bind(value.to_string())
            .bind(self.now())
            .execute(&self.write)
            .await
            .map_err(error::db)?;
        Ok(())
    }

    async fn delete_state(&self, scope: &str, key: &str) -> Result<(), StoreError> {
        sqlx::query(sql::DELETE_STATE)
            .bind(scope)
            .bind(key)
            .execute(&self.write)
            .await
            .map_err(error::db)?;
        Ok(())
    }

    async fn list_state(&self, scope: &str) -> Result<Vec<(String, serde_json::Value)>, StoreError> {
        let found = sqlx::query(sql::LIST_STATE)
            .bind(scope)
            .fetch_all(&self.read)
            .await
            .map_err(error::db)?;
        found
            .iter()
            .map(|row| {
                let key: String = row.try_get("key").map_err(error::db)?;
                let value: String = row.try_get("value").map_err(error::db)?;
                Ok((key, rows::state_value(&value)?))
            })
            .collect()
    }
}
