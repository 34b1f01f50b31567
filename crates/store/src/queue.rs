//! The task queue, on either engine.
//!
//! Only the claim (and the count of pending tasks) is the engine's own: see
//! `sqlite/claim.rs` and `postgres/claim.rs` for why each keeps a
//! conversation's tasks in order. Everything else is one statement or one
//! short transaction that both engines run alike:
//! - enqueue stores the conversation and the task, with its dedup key, in
//!   one round trip (`E::ENQUEUE`); a key seen before stores no task, and a
//!   key another process stored while this insert waited on it neither, so
//!   each platform event becomes one task;
//! - the last receipt of a task and its completion are one round trip too
//!   (`complete_delivered`), the receipt kept even when the lease is not;
//! - every change after the claim names the lease token, so a worker whose
//!   lease expired and was claimed by another changes nothing and learns it;
//! - the claim records the store's holder and the token starts with it, so
//!   a dead holder's tasks are taken over early and a fenced holder's
//!   changes are refused without a round trip (`liveness.rs`);
//! - a change that may make a task claimable is announced to other processes
//!   and wakes this process's idle workers.

use std::time::Duration;

use async_trait::async_trait;
use herald_core::time::{from_millis, to_millis};
use herald_core::{
    ClaimFilter, ConversationStore, DeliveryReceipt, Enqueued, FailOutcome, Lease, NewTask, QueueStats, StoreError,
    TaskId, TaskQueue,
};
use tracing::debug;

use crate::engine::Engine;
use crate::statement::{Columns, On, Statement};
use crate::store::Store;
use crate::{liveness, rows, sql, text};

impl<E: Engine> Store<E> {
    /// Runs a lease-guarded change, binding the task id and the lease token
    /// as its last two parameters: no row changed means the lease is gone.
    /// A lease this store no longer vouches for (its holder was fenced,
    /// `liveness.rs`) changes nothing either: another process may hold it.
    async fn guarded(&self, statement: Statement<E::Db>, lease: &Lease) -> Result<(), StoreError> {
        if !self.liveness.vouches(&lease.token) {
            return Err(StoreError::LeaseLost(lease.task.id));
        }
        let changed = statement
            .int(lease.task.id.0)
            .text(&lease.token)
            .execute(self.engine.writes())
            .await?;
        if changed == 0 {
            return Err(StoreError::LeaseLost(lease.task.id));
        }
        Ok(())
    }

    /// A guarded change that ends the lease (the task is done, dead, or back
    /// in the queue), after which a task of the conversation may be claimable:
    /// the task itself, or the next one now that its head finished.
    async fn finish(&self, statement: Statement<E::Db>, lease: &Lease) -> Result<(), StoreError> {
        self.guarded(statement, lease).await?;
        // A lost announcement only delays another process's worker until its
        // next wait ends.
        let conversation = &lease.task.conversation;
        if let Err(err) = self.engine.announce(conversation, self.engine.writes()).await {
            debug!(error = %err, "could not notify other workers");
        }
        // This process's own waiters need no round trip.
        self.wakeup.wake();
        Ok(())
    }

    /// How long until a task becomes due by itself: as the last empty claim
    /// found it when nothing woke the workers since, or read now.
    async fn next_due(&self) -> Option<Duration> {
        let now = self.now();
        if let Some(due) = self.wakeup.remembered_due(self.idle_memory()) {
            return rows::until(now, due);
        }
        let due = Statement::<E::Db>::new(sql::NEXT_DUE)
            .int(now)
            .fetch_one(self.engine.reads())
            .await
            .and_then(|row| row.opt_int("due"));
        match due {
            Ok(due) => rows::until(now, due),
            Err(err) => {
                debug!(error = %err, "could not read the next due task");
                None
            }
        }
    }

    /// How long what a claim found idle holds without a wake-up: for ever
    /// when other processes' changes wake this one, else a poll interval.
    fn idle_memory(&self) -> Duration {
        if self.engine.polls() {
            self.queue.poll_interval
        } else {
            Duration::MAX
        }
    }

    async fn find_dedup<'e>(&self, key: &str, on: impl Into<On<'e, E::Db>>) -> Result<Option<TaskId>, StoreError> {
        let row = Statement::<E::Db>::new(sql::FIND_DEDUP)
            .text(key)
            .fetch_optional(on)
            .await?;
        row.map(|row| row.int("id").map(TaskId)).transpose()
    }
}

#[async_trait]
impl<E: Engine> TaskQueue for Store<E> {
    async fn enqueue(&self, task: NewTask) -> Result<Enqueued, StoreError> {
        let now = self.now();
        let conversation = task.payload.conversation();
        let reference = text::json(conversation, "conversation ref")?;
        let payload = text::json(&task.payload, "task payload")?;
        let run_at = task.not_before.map(to_millis).unwrap_or(now);

        // A key seen before is found by its insert conflicting, not looked
        // up first: redeliveries are rare, and a look-up would be a round
        // trip on every message.
        let stored = Statement::<E::Db>::new(E::ENQUEUE)
            .text(conversation.id.as_str())
            .text(conversation.channel.as_str())
            .text(&reference)
            .int(now)
            .text(&payload)
            .int(i64::from(task.priority))
            .int(i64::from(self.queue.max_attempts))
            .int(run_at)
            .opt_text(task.dedup_key.as_deref())
            .fetch_all(self.engine.writes())
            .await?;
        match (stored.first(), &task.dedup_key) {
            (Some(row), _) => {
                self.wakeup.wake();
                Ok(Enqueued::New(TaskId(row.int("id")?)))
            }
            // Stored before, or by another process meanwhile (on PostgreSQL
            // the insert waited for that one to commit).
            (None, Some(key)) => self
                .find_dedup(key, self.engine.writes())
                .await?
                .map(Enqueued::Duplicate)
                .ok_or_else(|| StoreError::Database(format!("dedup key `{key}` conflicted but is not stored"))),
            (None, None) => Err(StoreError::Database("a task without a dedup key was not stored".into())),
        }
    }

    async fn enqueue_all(&self, tasks: Vec<NewTask>) -> Result<Vec<Enqueued>, StoreError> {
        // One task, an engine without a batch statement, or a task without a
        // dedup key (nothing to tell its row by): one by one.
        let batch = E::ENQUEUE_ALL.filter(|_| tasks.len() > 1 && tasks.iter().all(|task| task.dedup_key.is_some()));
        let Some(text) = batch else {
            let mut enqueued = Vec::with_capacity(tasks.len());
            for task in tasks {
                enqueued.push(self.enqueue(task).await?);
            }
            return Ok(enqueued);
        };
        let now = self.now();
        let mut rows = Vec::with_capacity(tasks.len());
        let mut keys = Vec::with_capacity(tasks.len());
        for task in &tasks {
            let conversation = task.payload.conversation();
            rows.push(serde_json::json!({
                "conversation": conversation.id.as_str(),
                "channel": conversation.channel.as_str(),
                "ref": text::json(conversation, "conversation ref")?,
                "payload": text::json(&task.payload, "task payload")?,
                "priority": task.priority,
                "max_attempts": self.queue.max_attempts,
                "run_at": task.not_before.map(to_millis).unwrap_or(now),
                "dedup_key": task.dedup_key,
            }));
            keys.push(task.dedup_key.clone().unwrap_or_default());
        }
        let stored = Statement::<E::Db>::new(text)
            .text(&serde_json::Value::from(rows).to_string())
            .int(now)
            .fetch_all(self.engine.writes())
            .await?;
        let mut ids = std::collections::HashMap::with_capacity(stored.len());
        for row in &stored {
            ids.insert(row.text("dedup_key")?, TaskId(row.int("id")?));
        }
        let mut enqueued = Vec::with_capacity(keys.len());
        let mut seen = std::collections::HashSet::with_capacity(keys.len());
        for key in &keys {
            let first = seen.insert(key.as_str());
            enqueued.push(match ids.get(key) {
                // The first of the batch with its key is the one stored.
                Some(id) if first => Enqueued::New(*id),
                Some(id) => Enqueued::Duplicate(*id),
                None => self
                    .find_dedup(key, self.engine.writes())
                    .await?
                    .map(Enqueued::Duplicate)
                    .ok_or_else(|| StoreError::Database(format!("dedup key `{key}` conflicted but is not stored")))?,
            });
        }
        if !stored.is_empty() {
            self.wakeup.wake();
        }
        Ok(enqueued)
    }

    async fn claim_up_to(&self, filter: &ClaimFilter, max: usize) -> Result<Vec<Lease>, StoreError> {
        let Some(holder) = self.liveness.claimer()? else {
            debug!("no liveness lock held right now; claiming nothing");
            return Ok(Vec::new());
        };
        let now = self.now();
        // The last claim found nothing more to claim and nothing woke the
        // workers since: no round trip to learn it again.
        if self.wakeup.known_idle(filter, now, self.idle_memory()) {
            return Ok(Vec::new());
        }
        let token = liveness::token(&holder);
        let expires_at = rows::later(now, self.queue.lease);
        let statement = Statement::new(E::CLAIM).text(&token).int(expires_at).int(now);
        let generation = self.wakeup.generation();
        let rows = E::bind_filter(statement, filter)
            .text(&holder.id)
            .int(i64::try_from(max.max(1)).unwrap_or(i64::MAX))
            .fetch_all(self.engine.writes())
            .await?;
        let mut tasks = Vec::with_capacity(rows.len());
        for row in &rows {
            if row.has("due") {
                self.wakeup.remember_idle(generation, filter, row.opt_int("due")?);
            } else {
                tasks.push((row.int("priority")?, rows::task(row)?));
            }
        }
        // The holder lost its lock while claiming: the tasks are left to the
        // takeover of dead holders' tasks (this process's own included).
        if tasks.is_empty() || !self.liveness.vouches(&token) {
            return Ok(Vec::new());
        }
        // An engine returns updated rows in an order of its own.
        tasks.sort_by_key(|(priority, task)| (*priority, task.id));
        let expires_at = from_millis(expires_at);
        Ok(tasks
            .into_iter()
            .map(|(_, task)| Lease {
                task,
                token: token.clone(),
                expires_at,
            })
            .collect())
    }

    /// Confirms the liveness lock first (a round trip on its own connection,
    /// once per extension): a holder that lost it extends nothing.
    async fn extend(&self, lease: &mut Lease) -> Result<(), StoreError> {
        if !self.liveness.confirm(&lease.token).await {
            return Err(StoreError::LeaseLost(lease.task.id));
        }
        let now = self.now();
        let expires_at = rows::later(now, self.queue.lease);
        self.guarded(Statement::new(sql::EXTEND).int(expires_at).int(now), lease)
            .await?;
        lease.expires_at = from_millis(expires_at);
        Ok(())
    }

    async fn forfeited(&self, lease: &Lease) {
        self.liveness.forfeited(&lease.token).await;
    }

    async fn complete(&self, lease: &Lease) -> Result<(), StoreError> {
        self.finish(Statement::new(sql::COMPLETE).int(self.now()), lease).await
    }

    async fn complete_delivered(&self, lease: &Lease, receipt: &DeliveryReceipt) -> Result<(), StoreError> {
        if !self.liveness.vouches(&lease.token) {
            // The message went out: its receipt stands whoever holds the task.
            self.record_delivery(receipt).await?;
            return Err(StoreError::LeaseLost(lease.task.id));
        }
        if receipt.task != lease.task.id {
            return Err(StoreError::Database(format!(
                "a receipt of task {} cannot complete task {}",
                receipt.task, lease.task.id
            )));
        }
        let ids = text::json(&receipt.platform_message_ids, "message ids")?;
        let completed = Statement::<E::Db>::new(E::COMPLETE_DELIVERED)
            .int(receipt.task.0)
            .text(&receipt.slot)
            .text(receipt.conversation.as_str())
            .text(&ids)
            .int(to_millis(receipt.delivered_at))
            .int(self.now())
            .text(&lease.token)
            .fetch_all(self.engine.writes())
            .await?;
        let Some(row) = completed.first() else {
            return Err(StoreError::LeaseLost(lease.task.id));
        };
        // A completion makes a task claimable only when one of its
        // conversation waits behind it; other processes heard that from the
        // statement itself. Waking for nothing would cost an empty claim.
        if row.int("next_waits")? == 1 {
            self.wakeup.wake();
        }
        Ok(())
    }

    async fn fail(&self, lease: &Lease, error: &str) -> Result<FailOutcome, StoreError> {
        let now = self.now();
        let task = &lease.task;
        let (statement, outcome) = match self.queue.backoff(task.max_attempts).delay_after(task.attempt) {
            Some(delay) => {
                let run_at = rows::later(now, delay);
                let retry = FailOutcome::Retry {
                    at: from_millis(run_at),
                    after: delay,
                };
                (Statement::new(sql::RETRY).int(run_at).text(error).int(now), retry)
            }
            None => (Statement::new(sql::BURY).text(error).int(now), FailOutcome::Dead),
        };
        self.finish(statement, lease).await?;
        Ok(outcome)
    }

    async fn kill(&self, lease: &Lease, error: &str) -> Result<(), StoreError> {
        self.finish(Statement::new(sql::BURY).text(error).int(self.now()), lease)
            .await
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.finish(Statement::new(sql::RELEASE).int(self.now()), lease).await
    }

    /// Sleeps until woken, the next due time or `at_most`; at most
    /// `queue.poll_interval` while the engine cannot hear other processes.
    async fn wait_for_work(&self, at_most: Duration) {
        let cap = if self.engine.polls() {
            at_most.min(self.queue.poll_interval)
        } else {
            at_most
        };
        self.wakeup.wait(cap, self.next_due()).await;
    }

    async fn pending(&self, filter: &ClaimFilter) -> Result<u64, StoreError> {
        let count = E::bind_filter(Statement::new(E::PENDING), filter)
            .fetch_one(self.engine.reads())
            .await?
            .int("pending")?;
        Ok(count.unsigned_abs())
    }

    async fn stats(&self) -> Result<QueueStats, StoreError> {
        let row = Statement::<E::Db>::new(sql::STATS)
            .fetch_one(self.engine.reads())
            .await?;
        let count = |column: &str| row.int(column).map(i64::unsigned_abs);
        Ok(QueueStats {
            queued: count("queued")?,
            leased: count("leased")?,
            dead: count("dead")?,
            oldest_queued_at: row.opt_int("oldest_queued_at")?.map(from_millis),
        })
    }
}
