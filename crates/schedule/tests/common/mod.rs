//! A fresh database (SQLite file, or a PostgreSQL database of its own), a
//! manual clock and a folder for the heartbeat checklist.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use herald_core::{
    ActorId, Admins, ChannelName, ClaimFilter, ConversationId, ConversationKind, ConversationRef, InboundMessage,
    ManualClock, NewTask, ScheduleStore, Sender, TaskQueue, Timestamp,
};
use herald_schedule::{HeartbeatConfig, Listed, ScheduleConfig, ScheduleSpec, Scheduler, Schedules};
use herald_store::{QueueConfig, Storage, StorageConfig};
use herald_testkit::postgres::TestDatabase;

pub fn utc(text: &str) -> Timestamp {
    chrono::DateTime::parse_from_rfc3339(text).unwrap().to_utc()
}

pub struct Harness {
    pub storage: Storage,
    pub clock: Arc<ManualClock>,
    pub storage_config: StorageConfig,
    pub dir: tempfile::TempDir,
    pub _cleanup: Option<Box<dyn Send + Sync>>,
}

pub async fn sqlite_harness(now: &str) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let storage_config = StorageConfig {
        url: format!("sqlite://{}", dir.path().join("herald.db").display()).into(),
        ..StorageConfig::default()
    };
    Harness::open(storage_config, dir, None, now).await
}

/// `None` when the PostgreSQL tests are skipped on purpose (see
/// `TestDatabase::from_env`).
pub async fn postgres_harness(now: &str) -> Option<Harness> {
    let database = TestDatabase::from_env("herald_s").await?;
    let storage_config = StorageConfig {
        url: database.url.clone().into(),
        ..StorageConfig::default()
    };
    Some(
        Harness::open(
            storage_config,
            tempfile::tempdir().unwrap(),
            Some(Box::new(database)),
            now,
        )
        .await,
    )
}

fn queue_config() -> QueueConfig {
    QueueConfig {
        poll_interval: Duration::from_secs(3600),
        ..QueueConfig::default()
    }
}

impl Harness {
    async fn open(
        storage_config: StorageConfig,
        dir: tempfile::TempDir,
        cleanup: Option<Box<dyn Send + Sync>>,
        now: &str,
    ) -> Self {
        let clock = Arc::new(ManualClock::new(utc(now)));
        let storage = Storage::connect(&storage_config, &queue_config(), clock.clone())
            .await
            .unwrap();
        storage.migrate().await.unwrap();
        Self {
            storage,
            clock,
            storage_config,
            dir,
            _cleanup: cleanup,
        }
    }

    /// The same database through a second set of connections, as a second
    /// Herald process has.
    pub async fn another_process(&self) -> Process {
        let storage = Storage::connect(&self.storage_config, &queue_config(), self.clock.clone())
            .await
            .unwrap();
        Process {
            storage,
            clock: self.clock.clone(),
        }
    }

    /// Closes the database and opens it again, as a restart does.
    pub async fn restart(&mut self) {
        self.storage.close().await;
        self.storage = Storage::connect(&self.storage_config, &queue_config(), self.clock.clone())
            .await
            .unwrap();
        self.storage.migrate().await.unwrap();
    }

    pub fn queue(&self) -> Arc<dyn TaskQueue> {
        self.storage.queue()
    }

    pub fn schedules(&self) -> Arc<dyn ScheduleStore> {
        self.storage.schedules()
    }

    pub fn service(&self) -> Schedules {
        Schedules::new(self.storage.schedules(), self.clock.clone())
    }

    pub fn checklist_path(&self) -> PathBuf {
        self.dir.path().join("HEARTBEAT.md")
    }

    pub fn scheduler(&self, config: ScheduleConfig, heartbeat: HeartbeatConfig) -> Scheduler {
        scheduler(&self.storage, &self.clock, config, heartbeat)
    }

    /// A schedule in `test:ann`, acting as `test:ann`.
    pub async fn add(&self, spec: ScheduleSpec, instruction: &str) -> Listed {
        self.service()
            .add(
                conversation("test:ann", ConversationKind::Direct),
                Some(ActorId::new("test:ann")),
                spec,
                instruction,
            )
            .await
            .unwrap()
    }

    /// Makes a conversation known to the store the way it becomes known in
    /// life: someone writes, and the message is answered.
    pub async fn make_known(&self, id: &str, kind: ConversationKind) {
        let queue = self.queue();
        let mut task = message(id, "hello");
        if let herald_core::TaskPayload::Message(message) = &mut task.payload {
            message.conversation.kind = kind;
            message.platform_message_id = format!("known-{id}");
        }
        task.dedup_key = Some(format!("known-{id}"));
        queue.enqueue(task).await.unwrap();
        let lease = queue
            .claim(&ClaimFilter::conversation(ConversationId::new(id)))
            .await
            .unwrap()
            .unwrap();
        queue.complete(&lease).await.unwrap();
    }
}

pub struct Process {
    pub storage: Storage,
    pub clock: Arc<ManualClock>,
}

impl Process {
    pub fn scheduler(&self, config: ScheduleConfig, heartbeat: HeartbeatConfig) -> Scheduler {
        scheduler(&self.storage, &self.clock, config, heartbeat)
    }
}

fn scheduler(
    storage: &Storage,
    clock: &Arc<ManualClock>,
    config: ScheduleConfig,
    heartbeat: HeartbeatConfig,
) -> Scheduler {
    Scheduler::new(
        storage.schedules(),
        storage.queue(),
        storage.conversations(),
        clock.clone(),
        Admins::new([ActorId::new("test:owner")]),
        config,
        heartbeat,
    )
}

/// A heartbeat every 30 minutes reading the harness's checklist.
pub fn heartbeat_config(h: &Harness) -> HeartbeatConfig {
    HeartbeatConfig {
        every: Duration::from_secs(30 * 60),
        file: h.checklist_path(),
        ..HeartbeatConfig::default()
    }
}

pub fn conversation(id: &str, kind: ConversationKind) -> ConversationRef {
    ConversationRef {
        id: ConversationId::new(id),
        channel: ChannelName::new("test"),
        kind,
        chat: id.rsplit(':').next().unwrap_or(id).to_owned(),
        thread: None,
    }
}

pub fn message(id: &str, text: &str) -> NewTask {
    let conversation = conversation(id, ConversationKind::Direct);
    NewTask::message(InboundMessage {
        sender: Sender {
            id: ActorId::new(id),
            display_name: "Someone".into(),
        },
        conversation,
        text: text.into(),
        platform_message_id: format!("{id}-{text}"),
        reply_to: None,
        mentions_bot: true,
        received_at: utc("2026-07-01T00:00:00Z"),
        attachments: Vec::new(),
    })
}
