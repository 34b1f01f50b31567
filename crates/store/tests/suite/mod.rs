//! The queue and store suite, written once and run against every engine:
//! `tests/sqlite.rs` and `tests/postgres.rs` each build a [`Harness`] and
//! call [`backend_suite!`] with it.

pub mod concurrency;
pub mod conversations;
pub mod files;
pub mod liveness;
pub mod locks;
pub mod queue;
pub mod retention;
pub mod schedules;

use std::sync::Arc;
use std::time::Duration;

use chrono::TimeZone;
use herald_core::{
    ActorId, ChannelName, ConversationId, ConversationKind, ConversationRef, InboundMessage, Lease, ManualClock,
    NewTask, Sender, Timestamp,
};
use herald_store::{QueueConfig, Storage, StorageConfig};

/// A fresh, migrated database with a clock that moves only when told.
pub struct Harness {
    pub storage: Storage,
    pub clock: Arc<ManualClock>,
    pub storage_config: StorageConfig,
    /// Keeps the database alive (a temporary directory, a test database) and
    /// removes it when the harness is dropped, passed or failed.
    pub _cleanup: Box<dyn Send + Sync>,
}

/// The queue settings every case runs with. Idle waits never end by polling
/// (`poll_interval`), so a test that sees a waiter return knows why it did.
pub fn queue_config() -> QueueConfig {
    QueueConfig {
        lease: Duration::from_secs(60),
        retry_base: Duration::from_secs(2),
        retry_max: Duration::from_secs(5),
        max_attempts: 4,
        poll_interval: Duration::from_secs(3600),
        retention: RETENTION,
        liveness_timeout: Duration::from_secs(2),
    }
}

/// How long the suite keeps finished tasks.
pub const RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

pub fn start_time() -> Timestamp {
    chrono::Utc.with_ymd_and_hms(2026, 1, 1, 9, 0, 0).unwrap()
}

impl Harness {
    pub async fn new(storage_config: StorageConfig, cleanup: Box<dyn Send + Sync>) -> Self {
        let clock = Arc::new(ManualClock::new(start_time()));
        let storage = Storage::connect(&storage_config, &queue_config(), clock.clone())
            .await
            .expect("connect");
        storage.migrate().await.expect("migrate");
        Self {
            storage,
            clock,
            storage_config,
            _cleanup: cleanup,
        }
    }

    /// Another process on the same database: its own connections, the same clock.
    pub async fn another_process(&self, queue: &QueueConfig) -> Storage {
        Storage::connect(&self.storage_config, queue, self.clock.clone())
            .await
            .expect("connect again")
    }

    /// Closes everything and opens the database again, as a restart does.
    pub async fn restart(&mut self) {
        self.storage.close().await;
        self.storage = Storage::connect(&self.storage_config, &queue_config(), self.clock.clone())
            .await
            .expect("reopen");
        self.storage.migrate().await.expect("migrate again");
    }

    pub fn clock_now(&self) -> Timestamp {
        herald_core::Clock::now(&*self.clock)
    }

    pub fn advance(&self, by: Duration) {
        self.clock.advance(by);
    }
}

/// Registers every case of the suite as a test, built by `$setup`, an async
/// fn returning `Option<Harness>` (`None`: the engine is not available here).
macro_rules! backend_suite {
    ($setup:path) => {
        backend_suite!(@cases $setup;
            queue::a_conversation_is_served_in_arrival_order,
            queue::different_conversations_are_served_in_parallel,
            queue::a_redelivered_event_is_stored_once,
            queue::an_expired_lease_is_redelivered_and_the_old_token_is_dead,
            queue::extending_keeps_the_task,
            queue::release_gives_the_task_back_without_counting_the_attempt,
            queue::failures_back_off_exponentially_then_the_task_is_dead,
            queue::a_killed_task_is_dead_at_once_and_does_not_block_its_conversation,
            queue::lower_priority_values_go_first_then_arrival,
            queue::claim_filters_limit_what_a_worker_takes,
            queue::not_before_delays_a_task,
            queue::a_batch_claim_takes_conversation_heads_in_order,
            queue::a_batch_is_enqueued_in_order_and_duplicates_are_told,
            concurrency::concurrent_claimers_never_share_a_conversation,
            concurrency::concurrent_batch_claimers_never_share_a_conversation,
            concurrency::concurrent_duplicates_store_one_task,
            concurrency::an_idle_worker_wakes_on_enqueue,
            concurrency::an_idle_worker_wakes_when_a_head_finishes,
            concurrency::an_idle_worker_wakes_when_a_retry_is_due,
            concurrency::an_idle_worker_sees_work_from_another_process,
            conversations::history_is_the_newest_entries_oldest_first,
            conversations::a_turn_is_recorded_once,
            conversations::history_comes_with_the_conversations_state,
            conversations::history_with_state_reads_any_text_back_as_written,
            conversations::deliveries_are_recorded_once_per_slot,
            conversations::the_last_receipt_is_written_with_the_completion,
            conversations::a_turn_is_recorded_with_a_state_value,
            conversations::state_is_kept_by_scope_and_key,
            conversations::the_conversation_ref_is_the_latest_enqueued,
            conversations::a_restart_keeps_history_and_queued_tasks,
            conversations::text_with_nul_is_stored_without_it,
            retention::old_finished_tasks_go_and_history_stays,
            retention::a_dedup_key_outlives_a_short_retention,
            schedules::schedules_are_kept_across_a_restart_and_listed_by_conversation,
            schedules::due_schedules_are_those_whose_run_has_come_earliest_first,
            schedules::a_fired_run_moves_the_schedule_once_and_a_finished_schedule_is_gone_from_lists,
            schedules::a_cancelled_schedule_is_removed,
            schedules::processes_sharing_the_database_fire_a_due_run_once,
            locks::a_lock_has_one_holder_until_it_is_released,
            locks::a_holder_that_goes_away_frees_its_lock,
            locks::a_standby_waiting_on_a_lock_takes_it_when_the_holder_goes,
            liveness::a_live_holders_task_is_never_taken_over,
            liveness::a_dead_holders_task_is_taken_over_before_its_lease_expires,
            liveness::a_closed_store_vouches_for_nothing,
            files::a_file_is_stored_once_and_found_after_a_restart_by_its_queued_task,
            files::files_not_stored_again_within_the_retention_are_pruned,
        );
    };
    (@cases $setup:path; $($module:ident :: $case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let Some(harness) = $setup().await else { return };
                suite::$module::$case(harness).await;
            }
        )*
    };
}

pub(crate) use backend_suite;

/// A conversation `channel:name` with a ref that says so.
pub fn conversation(id: &str) -> ConversationRef {
    let channel = id.split(':').next().unwrap_or("test");
    ConversationRef {
        id: ConversationId::new(id),
        channel: ChannelName::new(channel),
        kind: ConversationKind::Direct,
        chat: id.rsplit(':').next().unwrap_or(id).to_owned(),
        thread: None,
    }
}

/// A user's message `text` in conversation `id`, with `text` as its platform
/// message id too (so the dedup key is `channel:text`).
pub fn message(id: &str, text: &str) -> NewTask {
    message_in(conversation(id), text)
}

pub fn message_in(conversation: ConversationRef, text: &str) -> NewTask {
    NewTask::message(InboundMessage {
        sender: Sender {
            id: ActorId::on(&conversation.channel, "ann"),
            display_name: "Ann".into(),
        },
        conversation,
        text: text.into(),
        platform_message_id: text.into(),
        reply_to: None,
        mentions_bot: true,
        received_at: start_time(),
        attachments: Vec::new(),
    })
}

/// The text of the message a lease is for.
pub fn text(lease: &Lease) -> &str {
    match &lease.task.payload {
        herald_core::TaskPayload::Message(message) => &message.text,
        herald_core::TaskPayload::Instruction { instruction, .. } => instruction,
    }
}
