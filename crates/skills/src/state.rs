//! What the skill registry keeps in the store, in one place: the scopes and
//! keys of [`ConversationStore`] state, and the JSON shapes kept there.
//!
//! - `skill_switches` / skill name: `{"enabled": false}`. Skills without a
//!   switch are enabled, except that `install` writes a disabled one.
//! - `active_skills` / conversation id: the conversation's `ActiveSkills`.
//! - `skill_calls:<task>` / `<skill>:<hash of arguments>:<occurrence>`: a
//!   side effect's idempotency record, written before the effect runs.
//! - `skill_confirmations` / code: a dangerous call waiting for `/approve`.
//! - `skill_receipts:<conversation>` / `<task>:<call key>`: script receipts.

use std::collections::BTreeSet;

use herald_core::{ConversationId, ConversationStore, StoreError, TaskId, ToolOutput};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::budget::{STORED_OUTPUT_BYTES, cut_middle};
use crate::name::SkillName;

pub const SWITCHES: &str = "skill_switches";
pub const ACTIVE: &str = "active_skills";
pub const CONFIRMATIONS: &str = "skill_confirmations";

pub fn calls_scope(task: TaskId) -> String {
    format!("skill_calls:{task}")
}

pub fn receipts_scope(conversation: &ConversationId) -> String {
    format!("skill_receipts:{conversation}")
}

/// The name of one call within its task (the task is in the scope): skill,
/// a hash of the canonical arguments, and the occurrence of that same call
/// in its turn. It does not depend on the order of the turn's calls.
pub fn call_key(skill: &SkillName, canonical_arguments: &str, occurrence: u32) -> String {
    let digest = Sha256::digest(canonical_arguments.as_bytes());
    format!("{skill}:{}:{occurrence}", hex::encode(&digest[..12]))
}

/// The names switched off.
pub async fn disabled(store: &dyn ConversationStore) -> Result<BTreeSet<SkillName>, StoreError> {
    Ok(store
        .list_state(SWITCHES)
        .await?
        .into_iter()
        .filter(|(_, value)| value.get("enabled") == Some(&serde_json::Value::Bool(false)))
        .filter_map(|(key, _)| SkillName::new(key).ok())
        .collect())
}

/// A skill's switch as stored, `None` when it has none.
pub async fn switch(store: &dyn ConversationStore, name: &SkillName) -> Result<Option<serde_json::Value>, StoreError> {
    store.get_state(SWITCHES, name.as_str()).await
}

/// Puts back a switch read with [`switch`].
pub async fn restore_switch(
    store: &dyn ConversationStore,
    name: &SkillName,
    previous: Option<&serde_json::Value>,
) -> Result<(), StoreError> {
    match previous {
        Some(value) => store.put_state(SWITCHES, name.as_str(), value).await,
        None => store.delete_state(SWITCHES, name.as_str()).await,
    }
}

pub async fn set_enabled(store: &dyn ConversationStore, name: &SkillName, enabled: bool) -> Result<(), StoreError> {
    store
        .put_state(SWITCHES, name.as_str(), &serde_json::json!({ "enabled": enabled }))
        .await
}

/// A side effect's record: `Started` is written before it runs, `Done` after.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum CallRecord {
    Started,
    Done(StoredOutput),
}

/// A [`ToolOutput`] as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredOutput {
    pub content: String,
    pub is_error: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_to_conversation: Option<String>,
}

/// What is stored of a result: its content cut to
/// [`STORED_OUTPUT_BYTES`]; the text delivered to the conversation whole
/// (`send_message` texts are bounded by their schema), so a retried turn
/// still recognises it.
impl From<&ToolOutput> for StoredOutput {
    fn from(output: &ToolOutput) -> Self {
        Self {
            content: cut_middle(&output.content, STORED_OUTPUT_BYTES).0,
            is_error: output.is_error,
            delivered_to_conversation: output.delivered_to_conversation.clone(),
        }
    }
}

impl From<StoredOutput> for ToolOutput {
    fn from(stored: StoredOutput) -> Self {
        ToolOutput {
            content: stored.content,
            is_error: stored.is_error,
            delivered_to_conversation: stored.delivered_to_conversation,
        }
    }
}

pub async fn call_record(
    store: &dyn ConversationStore,
    task: TaskId,
    key: &str,
) -> Result<Option<CallRecord>, StoreError> {
    match store.get_state(&calls_scope(task), key).await? {
        Some(value) => serde_json::from_value(value)
            .map(Some)
            .map_err(|err| StoreError::Corrupt(format!("skill call record {key}: {err}"))),
        None => Ok(None),
    }
}

pub async fn put_call_record(
    store: &dyn ConversationStore,
    task: TaskId,
    key: &str,
    record: &CallRecord,
) -> Result<(), StoreError> {
    let value = serde_json::to_value(record).map_err(|err| StoreError::Corrupt(err.to_string()))?;
    store.put_state(&calls_scope(task), key, &value).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::MemoryStore;

    #[tokio::test]
    async fn switches_active_sets_and_call_records_round_trip() {
        let store = MemoryStore::default();
        let notes = SkillName::new("notes").unwrap();
        set_enabled(&store, &notes, false).await.unwrap();
        set_enabled(&store, &SkillName::new("pdf").unwrap(), true)
            .await
            .unwrap();
        assert_eq!(disabled(&store).await.unwrap(), BTreeSet::from([notes.clone()]));

        let key = call_key(&notes, r#"{"a":1}"#, 3);
        assert!(key.starts_with("notes:") && key.ends_with(":3"), "{key}");
        assert_ne!(key, call_key(&notes, r#"{"a":2}"#, 3));
        let record = CallRecord::Done(StoredOutput::from(&ToolOutput::ok("sent")));
        put_call_record(&store, TaskId(7), &key, &record).await.unwrap();
        assert_eq!(call_record(&store, TaskId(7), &key).await.unwrap(), Some(record));
        assert_eq!(call_record(&store, TaskId(8), &key).await.unwrap(), None);
    }
}
