//! Conversations, history, delivery receipts and state, on either engine:
//! reads on the engine's read connections, writes on its write connections.
//!
//! A turn is recorded once: its first entry, `(task, 0)`, is unique, so an
//! earlier or concurrent recording of the same task makes this one write
//! nothing (on PostgreSQL the second waits for the first on that key; on
//! SQLite the write lock orders them). A turn of a few entries (a person's
//! has two) is one statement, and with the prompt's accounting beside it
//! one round trip; a longer one, a transaction.

use async_trait::async_trait;
use herald_core::time::to_millis;
use herald_core::{
    ConversationId, ConversationRef, ConversationStore, DeliveryReceipt, HistoryEntry, NewHistoryEntry, StateWrite,
    StoreError, TaskId,
};

use crate::engine::Engine;
use crate::statement::{Columns, Sql, Statement};
use crate::store::Store;
use crate::{error, rows, sql, statement, text};

#[async_trait]
impl<E: Engine> ConversationStore for Store<E> {
    async fn history(&self, conversation: &ConversationId, limit: usize) -> Result<Vec<HistoryEntry>, StoreError> {
        let found = Statement::<E::Db>::new(sql::HISTORY)
            .text(conversation.as_str())
            .int(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(self.engine.reads())
            .await?;
        found.iter().map(rows::history_entry).collect()
    }

    async fn history_and_state(
        &self,
        conversation: &ConversationId,
        limit: usize,
        scope: &str,
    ) -> Result<(Vec<HistoryEntry>, Option<serde_json::Value>), StoreError> {
        let row = Statement::<E::Db>::new(E::HISTORY_AND_STATE)
            .text(conversation.as_str())
            .int(i64::try_from(limit).unwrap_or(i64::MAX))
            .text(scope)
            .fetch_one(self.engine.reads())
            .await?;
        let history = rows::history_json(&row.text("history")?)?;
        let state = row.opt_text("value")?.as_deref().map(rows::state_value).transpose()?;
        Ok((history, state))
    }

    async fn conversation(&self, id: &ConversationId) -> Result<Option<ConversationRef>, StoreError> {
        let row = Statement::<E::Db>::new(sql::CONVERSATION)
            .text(id.as_str())
            .fetch_optional(self.engine.reads())
            .await?;
        row.map(|row| rows::conversation_ref(&row.text("ref")?)).transpose()
    }

    async fn task_entries(&self, task: TaskId) -> Result<Vec<HistoryEntry>, StoreError> {
        let found = Statement::<E::Db>::new(sql::TASK_ENTRIES)
            .int(task.0)
            .fetch_all(self.engine.reads())
            .await?;
        found.iter().map(rows::history_entry).collect()
    }

    async fn record_turn(
        &self,
        conversation: &ConversationId,
        task: TaskId,
        entries: &[NewHistoryEntry],
    ) -> Result<bool, StoreError> {
        let now = self.now();
        if let Some(sql) = sql::record_turn(entries.len()) {
            let inserted = entry_params(Statement::<E::Db>::new(sql), conversation, task, now, entries)
                .execute(self.engine.writes())
                .await?;
            return Ok(inserted == entries.len() as u64);
        }
        let mut tx = self.engine.begin_write().await.map_err(error::db)?;
        if entries.is_empty() {
            let recorded = Statement::<E::Db>::new(sql::TASK_HAS_ENTRIES)
                .int(task.0)
                .fetch_one(&mut tx)
                .await?
                .int("entries")?;
            statement::rollback(tx).await?;
            return Ok(recorded == 0);
        }
        for (seq, entry) in entries.iter().enumerate() {
            let inserted = Statement::new(sql::INSERT_ENTRY)
                .text(conversation.as_str())
                .int(task.0)
                .int(i64::try_from(seq).unwrap_or(i64::MAX))
                .text(entry.role.as_str())
                .opt_text(entry.actor.as_ref().map(|actor| actor.as_str()))
                .text(&entry.text)
                .int(now)
                .execute(&mut tx)
                .await?;
            if seq == 0 && inserted == 0 {
                statement::rollback(tx).await?;
                return Ok(false);
            }
        }
        statement::commit(tx).await?;
        Ok(true)
    }

    async fn record_turn_with_state(
        &self,
        conversation: &ConversationId,
        task: TaskId,
        entries: &[NewHistoryEntry],
        state: StateWrite<'_>,
    ) -> Result<bool, StoreError> {
        let Some(sql) = E::record_turn_and_state(entries.len()) else {
            let first = self.record_turn(conversation, task, entries).await?;
            self.put_state(state.scope, state.key, state.value).await?;
            return Ok(first);
        };
        let written = entry_params(Statement::<E::Db>::new(sql), conversation, task, self.now(), entries)
            .text(state.scope)
            .text(state.key)
            .text(&text::json(state.value, "state value")?)
            .fetch_all(self.engine.writes())
            .await?;
        Ok(written.len() == entries.len())
    }

    async fn delivery(&self, task: TaskId, slot: &str) -> Result<Option<DeliveryReceipt>, StoreError> {
        let row = Statement::<E::Db>::new(sql::DELIVERY)
            .int(task.0)
            .text(slot)
            .fetch_optional(self.engine.reads())
            .await?;
        row.as_ref().map(rows::delivery).transpose()
    }

    async fn record_delivery(&self, receipt: &DeliveryReceipt) -> Result<(), StoreError> {
        let ids = text::json(&receipt.platform_message_ids, "message ids")?;
        Statement::<E::Db>::new(sql::INSERT_DELIVERY)
            .int(receipt.task.0)
            .text(&receipt.slot)
            .text(receipt.conversation.as_str())
            .text(&ids)
            .int(to_millis(receipt.delivered_at))
            .execute(self.engine.writes())
            .await?;
        Ok(())
    }

    async fn get_state(&self, scope: &str, key: &str) -> Result<Option<serde_json::Value>, StoreError> {
        let row = Statement::<E::Db>::new(sql::GET_STATE)
            .text(scope)
            .text(key)
            .fetch_optional(self.engine.reads())
            .await?;
        row.map(|row| rows::state_value(&row.text("value")?)).transpose()
    }

    async fn put_state(&self, scope: &str, key: &str, value: &serde_json::Value) -> Result<(), StoreError> {
        Statement::<E::Db>::new(sql::PUT_STATE)
            .text(scope)
            .text(key)
            .text(&text::json(value, "state value")?)
            .int(self.now())
            .execute(self.engine.writes())
            .await?;
        Ok(())
    }

    async fn delete_state(&self, scope: &str, key: &str) -> Result<(), StoreError> {
        Statement::<E::Db>::new(sql::DELETE_STATE)
            .text(scope)
            .text(key)
            .execute(self.engine.writes())
            .await?;
        Ok(())
    }

    async fn list_state(&self, scope: &str) -> Result<Vec<(String, serde_json::Value)>, StoreError> {
        let found = Statement::<E::Db>::new(sql::LIST_STATE)
            .text(scope)
            .fetch_all(self.engine.reads())
            .await?;
        found
            .iter()
            .map(|row| Ok((row.text("key")?, rows::state_value(&row.text("value")?)?)))
            .collect()
    }
}

/// Binds [`sql::record_turn`]'s parameters: conversation, task, time, then
/// role, actor and text of each entry.
fn entry_params<DB: Sql>(
    statement: Statement<DB>,
    conversation: &ConversationId,
    task: TaskId,
    now: i64,
    entries: &[NewHistoryEntry],
) -> Statement<DB> {
    let mut statement = statement.text(conversation.as_str()).int(task.0).int(now);
    for entry in entries {
        statement = statement
            .text(entry.role.as_str())
            .opt_text(entry.actor.as_ref().map(|actor| actor.as_str()))
            .text(&entry.text);
    }
    statement
}
