//! Due runs: what the scheduler does when a schedule's time has come, and the
//! key that makes each run enter the queue once.
//!
//! A run missed while Herald was down fires once when it is noticed (or not
//! at all, by configuration), never once per missed interval: the next run is
//! always computed from the time the run was noticed, not from the time it
//! was due.

use std::time::Duration;

use herald_core::{ConversationId, Timestamp, time::to_millis};
use serde::{Deserialize, Serialize};

use crate::spec::ScheduleSpec;

/// What happens to runs that fell due while no Herald was running.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MissedRuns {
    /// The missed run fires once at start; further missed runs are dropped.
    #[default]
    RunOnce,
    /// Missed runs are dropped; the schedule continues with its next run.
    Skip,
}

/// The `schedules:` section of herald.yaml.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScheduleConfig {
    /// `run_once` or `skip`.
    pub missed_runs: MissedRuns,
    /// A run noticed later than this after its time counts as missed.
    #[serde(with = "herald_core::duration::serde")]
    pub grace: Duration,
    /// How often the scheduler looks for due runs and heartbeats.
    #[serde(with = "herald_core::duration::serde")]
    pub tick: Duration,
    /// The shortest time between two runs of a schedule a non-admin creates.
    #[serde(with = "herald_core::duration::serde")]
    pub min_interval: Duration,
    /// How many schedules with runs to come one non-admin may have.
    pub max_per_user: usize,
}

impl Default for ScheduleConfig {
    fn default() -> Self {
        Self {
            missed_runs: MissedRuns::RunOnce,
            grace: Duration::from_secs(120),
            tick: Duration::from_secs(1),
            min_interval: Duration::from_secs(300),
            max_per_user: 10,
        }
    }
}

impl ScheduleConfig {
    /// What bounds the schedules of non-admins.
    pub fn limits(&self) -> ScheduleLimits {
        ScheduleLimits {
            min_interval: self.min_interval,
            max_per_user: self.max_per_user,
        }
    }
}

/// What bounds the schedules a non-admin creates; admins and operators are
/// not bounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScheduleLimits {
    pub min_interval: Duration,
    pub max_per_user: usize,
}

impl Default for ScheduleLimits {
    fn default() -> Self {
        ScheduleConfig::default().limits()
    }
}

/// The scheduler's decision about one due run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DueRun {
    /// When the run was due; with the schedule id, its run key.
    pub due: Timestamp,
    /// Whether a task enters the queue for it.
    pub fire: bool,
    /// Whether it was noticed too late to count as on time.
    pub missed: bool,
    /// The schedule's next run; `None` when the schedule is finished.
    pub next: Option<Timestamp>,
}

/// Decides a run that was due at `due` and is noticed at `now`.
pub fn settle(spec: &ScheduleSpec, due: Timestamp, now: Timestamp, config: &ScheduleConfig) -> DueRun {
    let late_by = (now - due).to_std().unwrap_or_default();
    let missed = late_by > config.grace;
    DueRun {
        due,
        fire: !(missed && config.missed_runs == MissedRuns::Skip),
        missed,
        next: spec.next_after(now.max(due)),
    }
}

/// The queue's dedup key for a schedule's run due at `due`: every process
/// that notices the run computes the same key, so the run is queued once.
pub fn run_key(schedule_id: i64, due: Timestamp) -> String {
    format!("schedule:{schedule_id}:{}", to_millis(due))
}

/// The dedup key of the heartbeat for `target` in the interval starting at
/// `slot`.
pub fn heartbeat_run_key(target: &ConversationId, slot: Timestamp) -> String {
    format!("heartbeat:{target}:{}", to_millis(slot))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zone::utc;

    fn hourly() -> ScheduleSpec {
        ScheduleSpec::Every {
            every: Duration::from_secs(3600),
            start: utc("2026-06-01T00:00:00Z"),
            timezone: None,
        }
    }

    #[test]
    fn missed_runs_fire_once_or_not_at_all_and_the_schedule_moves_past_them() {
        let on_time = utc("2026-06-01T10:00:00Z");
        for (what, policy, now, fire, missed, next) in [
            (
                "noticed on time",
                MissedRuns::RunOnce,
                "2026-06-01T10:00:01Z",
                true,
                false,
                "2026-06-01T11:00:00Z",
            ),
            (
                "noticed on time, skip policy: still fires",
                MissedRuns::Skip,
                "2026-06-01T10:01:00Z",
                true,
                false,
                "2026-06-01T11:00:00Z",
            ),
            (
                "down for five hours: fires once, next run is after now",
                MissedRuns::RunOnce,
                "2026-06-01T15:20:00Z",
                true,
                true,
                "2026-06-01T16:00:00Z",
            ),
            (
                "down for five hours, skip policy",
                MissedRuns::Skip,
                "2026-06-01T15:20:00Z",
                false,
                true,
                "2026-06-01T16:00:00Z",
            ),
        ] {
            let decision = settle(
                &hourly(),
                on_time,
                utc(now),
                &ScheduleConfig {
                    missed_runs: policy,
                    ..ScheduleConfig::default()
                },
            );
            assert_eq!(
                decision,
                DueRun {
                    due: on_time,
                    fire,
                    missed,
                    next: Some(utc(next)),
                },
                "{what}"
            );
        }
    }

    #[test]
    fn a_one_off_run_finishes_its_schedule() {
        let at = utc("2026-06-01T10:00:00Z");
        let decision = settle(
            &ScheduleSpec::At { at },
            at,
            utc("2026-06-03T08:00:00Z"),
            &ScheduleConfig::default(),
        );
        assert!(decision.fire && decision.missed);
        assert_eq!(decision.next, None);
    }

    #[test]
    fn run_keys_name_the_schedule_and_the_due_time() {
        let due = utc("2026-06-01T10:00:00Z");
        assert_eq!(run_key(7, due), "schedule:7:1780308000000");
        assert_ne!(run_key(7, due), run_key(8, due));
        assert_ne!(run_key(7, due), run_key(7, utc("2026-06-01T11:00:00Z")));
        assert_eq!(
            heartbeat_run_key(&ConversationId::new("telegram:42"), due),
            "heartbeat:telegram:42:1780308000000"
        );
    }

    #[test]
    fn config_reads_from_yaml() {
        let config: ScheduleConfig = serde_yaml::from_str("missed_runs: skip\ngrace: 5m\n").unwrap();
        assert_eq!(config.missed_runs, MissedRuns::Skip);
        assert_eq!(config.grace, Duration::from_secs(300));
        assert_eq!(config.tick, Duration::from_secs(1));
        let err = serde_yaml::from_str::<ScheduleConfig>("missed: skip\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `missed`"), "{err}");
    }
}
