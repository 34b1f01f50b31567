//! The schedule store seam: scheduled tasks as the database keeps them, so
//! they survive restarts and several Herald processes share them.
//!
//! The timing (`at`, `every`, `cron`) is herald-schedule's business and is
//! stored as the JSON text it writes; the store only keeps it, and answers
//! which schedules are due.

use std::fmt;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::ids::{ActorId, ConversationId};
use crate::message::ConversationRef;
use crate::store::StoreError;
use crate::time::Timestamp;

/// A schedule's row id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ScheduleId(pub i64);

impl fmt::Display for ScheduleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A schedule to store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewSchedule {
    /// Where the runs' tasks go.
    pub conversation: ConversationRef,
    /// Whose permissions the runs have; `None` for none beyond the
    /// conversation's.
    pub actor: Option<ActorId>,
    /// What each run asks the agent to do.
    pub instruction: String,
    /// The timing, as herald-schedule writes it.
    pub spec: String,
    /// When the first run is due.
    pub next_run_at: Timestamp,
}

/// A stored schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    pub id: ScheduleId,
    pub conversation: ConversationRef,
    pub actor: Option<ActorId>,
    pub instruction: String,
    pub spec: String,
    /// `None` once the schedule has no run left.
    pub next_run_at: Option<Timestamp>,
    pub last_run_at: Option<Timestamp>,
    pub created_at: Timestamp,
}

#[async_trait]
pub trait ScheduleStore: Send + Sync {
    async fn create(&self, schedule: NewSchedule) -> Result<Schedule, StoreError>;

    async fn get(&self, id: ScheduleId) -> Result<Option<Schedule>, StoreError>;

    /// Schedules with a run to come, of one conversation or of all, by id.
    async fn list(&self, conversation: Option<&ConversationId>) -> Result<Vec<Schedule>, StoreError>;

    /// Removes a schedule; `false` when there was none with this id.
    async fn cancel(&self, id: ScheduleId) -> Result<bool, StoreError>;

    /// Schedules whose next run is at or before `now`, earliest first.
    async fn due(&self, now: Timestamp, limit: usize) -> Result<Vec<Schedule>, StoreError>;

    /// Moves a schedule past its run due at `due`: the next run becomes
    /// `next` (`None`: finished). Only if the next run is still `due`, so of
    /// several processes that noticed the run one moves it; the others get
    /// `false`.
    async fn mark_fired(&self, id: ScheduleId, due: Timestamp, next: Option<Timestamp>) -> Result<bool, StoreError>;
}
