//! Liveness: a dead process's tasks are taken over in seconds, not after
//! their lease (`queue.lease`), and two live workers never serve one task.
//!
//! Every open store is a *holder*: it has a random holder id and holds a
//! liveness lock keyed on it for as long as it is open (`locks.rs`: an
//! advisory lock on a connection of its own on PostgreSQL, a file lock on
//! SQLite). Its claims record the holder id on the task and in the lease
//! token. The lock goes when the process dies, so:
//!
//! - Each store looks every second (at most) for holders of leased tasks
//!   whose lock is free ([`Engine::dead_holders`]), and makes their leases
//!   expire now; the ordinary claim then takes the tasks. The claim itself
//!   pays nothing for this.
//! - A holder id is never locked again once its lock is lost: a free lock
//!   means that holder is over for good.
//!
//! On SQLite only the process's death frees the lock, so a free one is
//! taken over at once. On PostgreSQL a live process can lose its lock too,
//! when its connection drops; then it must stop serving before anyone takes
//! its tasks:
//!
//! - The holder confirms its lock every quarter of `queue.liveness_timeout`
//!   (and before each lease extension). A confirmation that fails, or none
//!   that succeeded within the timeout, *fences* the holder: every turn
//!   under its leases is told to stop ([`TaskQueue::forfeited`]), every
//!   change under them fails as lost, and the store takes a new holder id
//!   and lock for later claims. Its validity is counted from the moment its
//!   last successful confirmation was *sent*, so it never outlives the lock.
//! - Others take over a free holder's tasks only once they have seen it
//!   free for 1.5 × `queue.liveness_timeout` (the holder's own, which its
//!   id carries, if longer than theirs): by then the holder, which lost its
//!   lock before they first saw it free, has fenced itself, with half a
//!   timeout to spare for a slow scheduler.
//!
//! The lease stays the backstop: a process that stops without losing its
//! lock (frozen, or an older binary that records no holder) loses its tasks
//! when their leases expire, as before.
//!
//! [`TaskQueue::forfeited`]: herald_core::TaskQueue::forfeited

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use herald_core::{HeldLock, StoreError};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::engine::Engine;
use crate::statement::{Columns, Statement};
use crate::store::Store;

/// Makes a dead holder's leases expire now, so the claim takes its tasks;
/// `$1` now, `$2` the holder.
const TAKE_OVER: &str = "\
UPDATE tasks SET lease_expires_at = $1, updated_at = $1
WHERE state = 'leased' AND lease_holder = $2 AND lease_expires_at > $1
RETURNING conversation_id";

/// One open store's identity on the queue and the lock that vouches for it.
pub(crate) struct Holder {
    pub(crate) id: String,
    /// Cancelled when the holder is fenced (or the store closed).
    lost: CancellationToken,
    lock: tokio::sync::Mutex<Option<Box<dyn HeldLock>>>,
    /// When the last successful confirmation was sent; `None` when the lock
    /// cannot be lost while the process lives.
    confirmed: Mutex<Option<Instant>>,
}

impl Holder {
    fn new(id: String, lock: Box<dyn HeldLock>, can_be_lost: bool) -> Arc<Self> {
        Arc::new(Self {
            id,
            lost: CancellationToken::new(),
            lock: tokio::sync::Mutex::new(Some(lock)),
            confirmed: Mutex::new(can_be_lost.then(Instant::now)),
        })
    }

    /// Until when this holder may act, unless confirmed again.
    fn valid_until(&self, timeout: Duration) -> Option<Instant> {
        self.confirmed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .map(|at| at + timeout)
    }

    fn vouches(&self, timeout: Duration) -> bool {
        !self.lost.is_cancelled() && self.valid_until(timeout).is_none_or(|until| Instant::now() < until)
    }

    /// Whether `token` is a lease token this holder handed out.
    fn issued(&self, token: &str) -> bool {
        token
            .strip_prefix(self.id.as_str())
            .is_some_and(|rest| rest.starts_with('/'))
    }
}

/// A fresh holder id: random, then the holder's `queue.liveness_timeout` in
/// milliseconds, so whoever finds it dead waits out *its* timeout even when
/// processes are configured differently.
pub(crate) fn new_id(timeout: Duration) -> String {
    format!("{}.{}", uuid::Uuid::new_v4().simple(), timeout.as_millis())
}

/// The liveness timeout a holder id carries, if it carries one.
fn timeout_of(id: &str) -> Option<Duration> {
    let (_, millis) = id.rsplit_once('.')?;
    millis.parse().ok().map(Duration::from_millis)
}

/// A lease token of `holder`: its id, then a random part.
pub(crate) fn token(holder: &Holder) -> String {
    format!("{}/{}", holder.id, uuid::Uuid::new_v4().simple())
}

/// The store's holder, the holders it saw dead, and its background tasks.
pub(crate) struct Liveness {
    current: Mutex<Option<Arc<Holder>>>,
    timeout: Duration,
    /// Dead holders and when this store first saw each one dead.
    seen_dead: Mutex<HashMap<String, Instant>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    closed: AtomicBool,
}

impl Liveness {
    pub(crate) fn new(id: String, lock: Box<dyn HeldLock>, can_be_lost: bool, timeout: Duration) -> Self {
        Self {
            current: Mutex::new(Some(Holder::new(id, lock, can_be_lost))),
            timeout,
            seen_dead: Mutex::new(HashMap::new()),
            tasks: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
        }
    }

    /// The holder to claim under now: `None` between a fence and the next
    /// lock, an error once the store is closed.
    pub(crate) fn claimer(&self) -> Result<Option<Arc<Holder>>, StoreError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(StoreError::Unavailable("the storage was closed".into()));
        }
        Ok(self.holder())
    }

    /// The holder this store acts under now; `None` between a fence and the
    /// next lock, or once closed.
    pub(crate) fn holder(&self) -> Option<Arc<Holder>> {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .filter(|holder| holder.vouches(self.timeout))
    }

    /// The live holder that issued `token`, if any.
    fn issuer(&self, token: &str) -> Option<Arc<Holder>> {
        self.holder().filter(|holder| holder.issued(token))
    }

    /// Whether this store still vouches for the lease `token`, from what it
    /// knows without asking the database.
    pub(crate) fn vouches(&self, token: &str) -> bool {
        self.issuer(token).is_some()
    }

    /// Returns once the lease `token` is forfeit (at once if it already is):
    /// its holder was fenced, or went unconfirmed past its timeout.
    pub(crate) async fn forfeited(&self, token: &str) {
        while let Some(holder) = self.issuer(token) {
            match holder.valid_until(self.timeout) {
                Some(until) => tokio::select! {
                    () = holder.lost.cancelled() => return,
                    () = tokio::time::sleep_until(until) => {}
                },
                None => return holder.lost.cancelled().await,
            }
        }
    }

    /// Confirms the holder that issued `token` still holds its lock, asking
    /// the database; fences it when it does not.
    pub(crate) async fn confirm(&self, token: &str) -> bool {
        match self.issuer(token) {
            Some(holder) => self.confirm_holder(&holder).await,
            None => false,
        }
    }

    async fn confirm_holder(&self, holder: &Arc<Holder>) -> bool {
        let Some(until) = holder.valid_until(self.timeout) else {
            return !holder.lost.is_cancelled();
        };
        let sent = Instant::now();
        let held = tokio::time::timeout_at(until, async {
            match holder.lock.lock().await.as_mut() {
                Some(lock) => lock.still_held().await,
                None => false,
            }
        })
        .await;
        match held {
            Ok(true) if !holder.lost.is_cancelled() => {
                let mut confirmed = holder.confirmed.lock().unwrap_or_else(PoisonError::into_inner);
                *confirmed = (*confirmed).max(Some(sent));
                true
            }
            Ok(true) => false,
            Ok(false) => {
                self.fence(holder, "its connection is gone");
                false
            }
            Err(_) => {
                self.fence(holder, "it could not be confirmed in time");
                false
            }
        }
    }

    /// Stops everything done under `holder`: its turns are told to stop and
    /// its leases are no longer vouched for. Its lock is dropped.
    fn fence(&self, holder: &Arc<Holder>, why: &str) {
        if holder.lost.is_cancelled() {
            return;
        }
        holder.lost.cancel();
        {
            let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
            if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, holder)) {
                *current = None;
            }
        }
        if let Ok(mut lock) = holder.lock.try_lock() {
            lock.take();
        }
        warn!(
            holder = %holder.id,
            why,
            "lost this process's liveness lock; abandoning its turns so that another process can take them over"
        );
        metrics::counter!("herald_queue_liveness_lost_total").increment(1);
    }

    /// How long this store waits after seeing `holder`'s lock free before
    /// taking its tasks: 1.5 times the longer of its timeout and this one's.
    fn grace<E: Engine>(&self, holder: &str) -> Duration {
        if E::LIVENESS_CAN_BE_LOST {
            let timeout = timeout_of(holder).map_or(self.timeout, |theirs| theirs.max(self.timeout));
            timeout + timeout / 2
        } else {
            Duration::ZERO
        }
    }

    /// When the grace of the first holder seen dead and not yet taken over ends.
    fn next_grace_end<E: Engine>(&self) -> Option<Instant> {
        let seen = self.seen_dead.lock().unwrap_or_else(PoisonError::into_inner);
        seen.iter()
            .map(|(holder, since)| *since + self.grace::<E>(holder))
            .min()
    }

    /// Releases the lock and stops the background tasks (closing the store).
    pub(crate) async fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.stop_tasks();
        let holder = self.current.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(holder) = holder {
            holder.lost.cancel();
            if let Some(lock) = holder.lock.lock().await.take() {
                lock.release().await;
            }
        }
    }

    pub(crate) fn stop_tasks(&self) {
        for task in self.tasks.lock().unwrap_or_else(PoisonError::into_inner).drain(..) {
            task.abort();
        }
    }
}

impl<E: Engine> Store<E> {
    /// Takes over the tasks of holders seen dead for the grace: their leases
    /// expire now and idle workers here and elsewhere are told. Returns how
    /// many tasks were taken over.
    pub(crate) async fn take_over_dead_holders(&self) -> Result<u64, StoreError> {
        let liveness = &self.liveness;
        let me = liveness.holder().map(|h| h.id.clone()).unwrap_or_default();
        let dead = self.engine.dead_holders(&me).await?;
        let due: Vec<String> = {
            let mut seen = liveness.seen_dead.lock().unwrap_or_else(PoisonError::into_inner);
            let now = Instant::now();
            for holder in dead {
                seen.entry(holder).or_insert(now);
            }
            seen.iter()
                .filter(|(holder, since)| now.duration_since(**since) >= liveness.grace::<E>(holder))
                .map(|(holder, _)| holder.clone())
                .collect()
        };
        let mut taken = 0;
        let mut announce = None;
        for holder in due {
            let rows = Statement::<E::Db>::new(TAKE_OVER)
                .int(self.now())
                .text(&holder)
                .fetch_all(self.engine.writes())
                .await?;
            liveness
                .seen_dead
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&holder);
            if let Some(row) = rows.first() {
                info!(holder = %holder, tasks = rows.len(), "took over the tasks of a process that is gone");
                metrics::counter!("herald_queue_taken_over_total").increment(rows.len() as u64);
                announce = Some(row.text("conversation_id")?);
                taken += rows.len() as u64;
            }
        }
        if let Some(conversation) = announce {
            let conversation = herald_core::ConversationId::new(conversation);
            if let Err(err) = self.engine.announce(&conversation, self.engine.writes()).await {
                debug!(error = %err, "could not notify other workers");
            }
            self.wakeup.wake();
        }
        Ok(taken)
    }

    /// Takes a new holder id and lock after a fence; the store claims
    /// nothing until it has one.
    async fn renew_holder(&self) -> Result<(), StoreError> {
        let id = new_id(self.liveness.timeout);
        let lock = self.engine.hold(&id).await?;
        let holder = Holder::new(id, lock, E::LIVENESS_CAN_BE_LOST);
        info!(holder = %holder.id, "took a new liveness lock");
        *self.liveness.current.lock().unwrap_or_else(PoisonError::into_inner) = Some(holder);
        self.wakeup.wake();
        Ok(())
    }
}

/// Starts the store's liveness tasks: the probe for dead holders, and on
/// PostgreSQL the confirmation of its own lock. They end with the store.
pub(crate) fn start<E: Engine>(store: &Arc<Store<E>>) {
    let timeout = store.liveness.timeout;
    let mut tasks = vec![tokio::spawn(probe(
        Arc::downgrade(store),
        (timeout / 2).min(PROBE_EVERY),
    ))];
    if E::LIVENESS_CAN_BE_LOST {
        tasks.push(tokio::spawn(keep_alive(Arc::downgrade(store), timeout / 4)));
    }
    store
        .liveness
        .tasks
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .extend(tasks);
}

/// How often a store looks for dead holders, at most.
const PROBE_EVERY: Duration = Duration::from_secs(1);

/// Probes every `every`, and also right when a holder seen dead has been
/// so for its grace, so its tasks move the moment they may.
async fn probe<E: Engine>(store: Weak<Store<E>>, every: Duration) {
    let mut next = Instant::now();
    loop {
        tokio::time::sleep_until(next).await;
        let Some(store) = store.upgrade() else { return };
        // Before migrations ran, or while the database is away: next time.
        if let Err(err) = store.take_over_dead_holders().await {
            debug!(error = %err, "could not look for dead holders");
        }
        // Never sooner than an eighth of the interval: a takeover that
        // failed is not retried in a tight loop.
        let (soonest, regular) = (Instant::now() + every / 8, Instant::now() + every);
        next = store
            .liveness
            .next_grace_end::<E>()
            .map_or(regular, |due| due.clamp(soonest, regular));
    }
}

async fn keep_alive<E: Engine>(store: Weak<Store<E>>, every: Duration) {
    loop {
        tokio::time::sleep(every).await;
        let Some(store) = store.upgrade() else { return };
        let current = store
            .liveness
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match current {
            Some(holder) => {
                store.liveness.confirm_holder(&holder).await;
            }
            None => {
                if let Err(err) = store.renew_holder().await {
                    debug!(error = %err, "could not take a new liveness lock yet");
                }
            }
        }
    }
}
