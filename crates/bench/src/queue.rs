//! The queue alone, through herald-store's `Storage` as Herald opens it:
//! enqueue N message tasks spread over many conversations, then let
//! several workers claim and complete them until none is left. SQLite gets
//! a fresh file; PostgreSQL a fresh database on the server, dropped after.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use herald_core::{
    ActorId, ChannelName, ClaimFilter, ConversationId, ConversationKind, ConversationRef, InboundMessage, NewTask,
    Sender, SystemClock,
};
use herald_store::{QueueConfig, Storage, StorageConfig};
use herald_testkit::postgres::TestDatabase;
use serde::Serialize;

use crate::stats::Summary;

/// The shape of one queue run.
#[derive(Clone, Copy, Debug)]
pub struct QueueSpec {
    pub tasks: usize,
    pub conversations: usize,
    pub workers: usize,
}

/// What one queue run measured.
#[derive(Clone, Debug, Serialize)]
pub struct QueueResult {
    pub backend: String,
    pub tasks: usize,
    pub conversations: usize,
    pub workers: usize,
    /// Tasks stored per second, `workers` producers at once.
    pub enqueue_per_second: f64,
    /// Tasks claimed and completed per second, `workers` at once.
    pub claim_complete_per_second: f64,
    pub claim: Summary,
    pub complete: Summary,
    /// Claims that found nothing claimable (every head was leased).
    pub empty_claims: usize,
}

const CHANNEL: &str = "bench";

fn task(index: usize, conversations: usize) -> NewTask {
    let chat = format!("c{}", index % conversations);
    let channel = ChannelName::new(CHANNEL);
    NewTask::message(InboundMessage {
        conversation: ConversationRef {
            id: ConversationId::new(format!("{CHANNEL}:{chat}")),
            channel: channel.clone(),
            kind: ConversationKind::Direct,
            chat: chat.clone(),
            thread: None,
        },
        sender: Sender {
            id: ActorId::on(&channel, &chat),
            display_name: "Bench".into(),
        },
        text: format!("message {index}"),
        platform_message_id: format!("m{index}"),
        reply_to: None,
        mentions_bot: true,
        received_at: chrono::Utc::now(),
        attachments: Vec::new(),
    })
}

/// Runs `spec` against `storage` (fresh and migrated).
async fn measure(storage: &Storage, backend: &str, spec: QueueSpec) -> Result<QueueResult> {
    let queue = storage.queue();
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut producers = tokio::task::JoinSet::new();
    for _ in 0..spec.workers.max(1) {
        let (queue, next) = (queue.clone(), next.clone());
        producers.spawn(async move {
            loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= spec.tasks {
                    return Ok::<_, anyhow::Error>(());
                }
                queue.enqueue(task(index, spec.conversations)).await?;
            }
        });
    }
    while let Some(done) = producers.join_next().await {
        done??;
    }
    let enqueue_seconds = started.elapsed().as_secs_f64();

    let done = Arc::new(AtomicUsize::new(0));
    let empty = Arc::new(AtomicUsize::new(0));
    let claims = Arc::new(Mutex::new(Vec::with_capacity(spec.tasks)));
    let completes = Arc::new(Mutex::new(Vec::with_capacity(spec.tasks)));
    let filter = ClaimFilter::channels([ChannelName::new(CHANNEL)]);
    let started = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..spec.workers.max(1) {
        let (queue, filter) = (queue.clone(), filter.clone());
        let (done, empty, claims, completes) = (done.clone(), empty.clone(), claims.clone(), completes.clone());
        workers.spawn(async move {
            let (mut my_claims, mut my_completes) = (Vec::new(), Vec::new());
            while done.load(Ordering::Relaxed) < spec.tasks {
                let claimed_at = Instant::now();
                match queue.claim(&filter).await? {
                    Some(lease) => {
                        my_claims.push(claimed_at.elapsed());
                        let completed_at = Instant::now();
                        queue.complete(&lease).await?;
                        my_completes.push(completed_at.elapsed());
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    None => {
                        empty.fetch_add(1, Ordering::Relaxed);
                        queue.wait_for_work(Duration::from_millis(5)).await;
                    }
                }
            }
            claims.lock().expect("claims").extend(my_claims);
            completes.lock().expect("completes").extend(my_completes);
            Ok::<_, anyhow::Error>(())
        });
    }
    while let Some(finished) = workers.join_next().await {
        finished??;
    }
    let drain_seconds = started.elapsed().as_secs_f64();
    let pending = queue.pending(&ClaimFilter::any()).await?;
    anyhow::ensure!(pending == 0, "{pending} tasks left on the queue");
    let claims = claims.lock().expect("claims").clone();
    let completes = completes.lock().expect("completes").clone();
    Ok(QueueResult {
        backend: backend.to_owned(),
        tasks: spec.tasks,
        conversations: spec.conversations,
        workers: spec.workers,
        enqueue_per_second: spec.tasks as f64 / enqueue_seconds,
        claim_complete_per_second: spec.tasks as f64 / drain_seconds,
        claim: Summary::of(&claims),
        complete: Summary::of(&completes),
        empty_claims: empty.load(Ordering::Relaxed),
    })
}

async fn open(url: &str) -> Result<Storage> {
    let config = StorageConfig {
        url: url.to_owned().into(),
        ..StorageConfig::default()
    };
    let storage = Storage::connect(&config, &QueueConfig::default(), Arc::new(SystemClock))
        .await
        .context("opening the queue's storage")?;
    storage.migrate().await.context("migrating")?;
    Ok(storage)
}

/// The queue on a fresh SQLite file.
pub async fn sqlite(spec: QueueSpec) -> Result<QueueResult> {
    let dir = tempfile::tempdir()?;
    let storage = open(&format!("sqlite://{}", dir.path().join("queue.db").display())).await?;
    let result = measure(&storage, "sqlite", spec).await;
    storage.close().await;
    result
}

/// The queue on a fresh database of the PostgreSQL server at `server`,
/// dropped after.
pub async fn postgres(server: &str, spec: QueueSpec) -> Result<QueueResult> {
    let database = TestDatabase::create(server, "herald_bench")
        .await
        .context("creating the benchmark database (--postgres-url)")?;
    let storage = open(&database.url).await?;
    let result = measure(&storage, "postgres", spec).await;
    storage.close().await;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_spread_over_the_conversations() {
        let first = task(0, 3);
        let fourth = task(3, 3);
        assert_eq!(first.conversation(), fourth.conversation());
        assert_ne!(first.dedup_key, fourth.dedup_key);
    }
}
