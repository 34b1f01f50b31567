//! Helpers shared by this crate's tests: skill folders on disk, an in-memory
//! conversation store and an outbound channel that records what it sent.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use async_trait::async_trait;
use herald_core::{
    ChannelError, ChannelName, ChannelOutbound, ConversationId, ConversationKind, ConversationRef, ConversationStore,
    DeliveryReceipt, HistoryEntry, NewHistoryEntry, OutboundMessage, SentMessage, StoreError, TaskId,
};

/// Writes `dir/name/SKILL.md` with front matter and returns the folder.
pub fn write_skill(dir: &Path, name: &str, description: &str, body: &str) -> PathBuf {
    let folder = dir.join(name);
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: {description}\n---\n{body}\n"),
    )
    .unwrap();
    folder
}

pub fn conversation(id: &str) -> ConversationRef {
    let id = ConversationId::new(id);
    ConversationRef {
        channel: id.channel(),
        id,
        kind: ConversationKind::Direct,
        chat: "chat".into(),
        thread: None,
    }
}

/// Keeps state and conversations in memory.
#[derive(Default)]
pub struct MemoryStore {
    pub state: Mutex<BTreeMap<(String, String), serde_json::Value>>,
    pub conversations: Mutex<BTreeMap<ConversationId, ConversationRef>>,
    /// When set, `put_state` fails: a database that went away.
    pub fail_writes: Mutex<bool>,
    /// Called with scope and key before `put_state` stores: a test's way to
    /// make something happen between two steps of the code under test.
    pub before_put: Mutex<Option<PutHook>>,
}

pub type PutHook = Box<dyn Fn(&str, &str) + Send + Sync>;

#[async_trait]
impl ConversationStore for MemoryStore {
    async fn history(&self, _: &ConversationId, _: usize) -> Result<Vec<HistoryEntry>, StoreError> {
        Ok(Vec::new())
    }

    async fn conversation(&self, id: &ConversationId) -> Result<Option<ConversationRef>, StoreError> {
        Ok(self.conversations.lock().unwrap().get(id).cloned())
    }

    async fn task_entries(&self, _: TaskId) -> Result<Vec<HistoryEntry>, StoreError> {
        Ok(Vec::new())
    }

    async fn record_turn(&self, _: &ConversationId, _: TaskId, _: &[NewHistoryEntry]) -> Result<bool, StoreError> {
        Ok(true)
    }

    async fn delivery(&self, _: TaskId, _: &str) -> Result<Option<DeliveryReceipt>, StoreError> {
        Ok(None)
    }

    async fn record_delivery(&self, _: &DeliveryReceipt) -> Result<(), StoreError> {
        Ok(())
    }

    async fn get_state(&self, scope: &str, key: &str) -> Result<Option<serde_json::Value>, StoreError> {
        Ok(self.state.lock().unwrap().get(&(scope.into(), key.into())).cloned())
    }

    async fn put_state(&self, scope: &str, key: &str, value: &serde_json::Value) -> Result<(), StoreError> {
        if let Some(hook) = &*self.before_put.lock().unwrap() {
            hook(scope, key);
        }
        if *self.fail_writes.lock().unwrap() {
            return Err(StoreError::Unavailable("test store refuses writes".into()));
        }
        self.state
            .lock()
            .unwrap()
            .insert((scope.into(), key.into()), value.clone());
        Ok(())
    }

    async fn delete_state(&self, scope: &str, key: &str) -> Result<(), StoreError> {
        self.state.lock().unwrap().remove(&(scope.into(), key.into()));
        Ok(())
    }

    async fn list_state(&self, scope: &str) -> Result<Vec<(String, serde_json::Value)>, StoreError> {
        Ok(self
            .state
            .lock()
            .unwrap()
            .iter()
            .filter(|((s, _), _)| s == scope)
            .map(|((_, k), v)| (k.clone(), v.clone()))
            .collect())
    }
}

/// An outbound channel that records every message.
pub struct RecordingChannel {
    pub name: ChannelName,
    pub sent: Mutex<Vec<OutboundMessage>>,
}

impl RecordingChannel {
    pub fn new(name: &str) -> Self {
        Self {
            name: ChannelName::new(name),
            sent: Mutex::new(Vec::new()),
        }
    }

    pub fn texts(&self) -> Vec<String> {
        self.sent.lock().unwrap().iter().map(|m| m.text.clone()).collect()
    }
}

#[async_trait]
impl ChannelOutbound for RecordingChannel {
    fn channel(&self) -> ChannelName {
        self.name.clone()
    }

    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, ChannelError> {
        let mut sent = self.sent.lock().unwrap();
        sent.push(message.clone());
        Ok(SentMessage {
            platform_message_ids: vec![format!("m{}", sent.len())],
        })
    }
}
