//! Herald's clock-driven work: scheduled tasks and the heartbeat.
//!
//! Both end as ordinary tasks on the queue, served by the same agent loop as
//! chat messages; this crate only decides *when* a task is due and *what* it
//! asks. The pure parts — next run times across time zones and clock
//! changes, missed-run policy, run keys, active hours, empty checklists and
//! the `HEARTBEAT_OK` rule — are tested here without any clock but the one
//! they are given.
//!
//! Architecture invariant: each due run is named by a run key (schedule and
//! due time) that every Herald process computes alike, and enters the queue
//! under that key, so several processes sharing one database queue it once.

pub mod command;
pub mod conversation;
pub mod cron;
pub mod heartbeat;
pub mod runs;
pub mod scheduler;
pub mod service;
pub mod spec;
pub mod zone;

pub use command::{ScheduleCommand, parse_schedule_command};
pub use conversation::{ScheduleCommands, schedule_skills};
pub use cron::{CronError, CronExpression};
pub use heartbeat::{ActiveHours, ClockTime, HeartbeatConfig, HeartbeatTarget, checklist_is_empty, heartbeat_slot};
pub use herald_core::heartbeat::{DEFAULT_ACK_MAX_CHARS, HEARTBEAT_OK, strip_ok_token};
pub use runs::{DueRun, MissedRuns, ScheduleConfig, ScheduleLimits, heartbeat_run_key, run_key, settle};
pub use scheduler::{HEARTBEAT_PRIORITY, HeartbeatOutcome, SCHEDULE_PRIORITY, Scheduler, TickReport};
pub use service::{Listed, ScheduleError, Schedules};
pub use spec::{ScheduleSpec, SpecError, parse_time};
pub use zone::{Timezone, UnknownTimezone};
