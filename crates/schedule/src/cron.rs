//! Cron expressions as people write them in a crontab, evaluated in a time
//! zone.
//!
//! The `cron` crate does the field matching; this module keeps the crontab
//! meaning where that crate differs from it:
//! - five fields (minute, hour, day of month, month, day of week) and the
//!   `@daily`-style shorthands; no seconds field;
//! - day of week `0`–`7` with both `0` and `7` Sunday (the crate counts
//!   `1` = Sunday);
//! - when day of month and day of week are both restricted, a day matching
//!   either fires (the crate requires both).
//!
//! Clock changes follow [`crate::zone`]: a time skipped by spring-forward runs
//! shifted by the gap, a time repeated by fall-back runs once — except for
//! expressions that fire every hour (`*/15 * * * *`), which keep running
//! through the repeated hour so they never pause for an hour.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::NaiveDateTime;
use cron::TimeUnitSpec;
use herald_core::Timestamp;

use crate::zone::Timezone;

/// A checked five-field cron expression.
#[derive(Clone, Debug)]
pub struct CronExpression {
    source: String,
    /// One schedule, or two whose union is the expression (day of month or
    /// day of week).
    schedules: Vec<cron::Schedule>,
    every_hour: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid cron expression `{expression}`: {reason}")]
pub struct CronError {
    pub expression: String,
    pub reason: String,
}

impl CronExpression {
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// The first run strictly after `after`, in `zone`'s wall-clock time.
    pub fn next_after(&self, zone: Timezone, after: Timestamp) -> Option<Timestamp> {
        // A repeated hour can put a run's second occurrence up to this far
        // before the local time of `after`.
        let fold = chrono::Duration::hours(3);
        let mut cursor = zone.local(after) - fold;
        let mut best: Option<Timestamp> = None;
        // The first occurrences of successive local times never decrease, so
        // once one is past the best run found, nothing later can beat it.
        for _ in 0..100_000 {
            let Some(local) = self.next_local_after(cursor) else {
                break;
            };
            cursor = local;
            let (first, second) = zone.occurrences(local);
            if best.is_some_and(|best| first > best) {
                break;
            }
            let second = second.filter(|_| self.every_hour);
            for at in std::iter::once(first).chain(second) {
                if at > after && best.is_none_or(|best| at < best) {
                    best = Some(at);
                }
            }
        }
        best
    }

    /// The shortest wall-clock time between consecutive runs after `local`,
    /// over at most `max_runs` runs within a year, stopping at the first gap
    /// shorter than `stop_below`. Clock changes are ignored: they move a run
    /// by an hour twice a year.
    pub fn shortest_gap_after(&self, local: NaiveDateTime, max_runs: usize, stop_below: Duration) -> Option<Duration> {
        let horizon = local + chrono::Duration::days(400);
        let mut runs: Vec<_> = self
            .schedules
            .iter()
            .map(|schedule| schedule.after(&local.and_utc()).map(|at| at.naive_utc()).peekable())
            .collect();
        // The union of the schedules' runs, in order, each time once.
        let mut next = || {
            let earliest = runs.iter_mut().filter_map(|run| run.peek().copied()).min()?;
            for run in &mut runs {
                if run.peek() == Some(&earliest) {
                    run.next();
                }
            }
            (earliest <= horizon).then_some(earliest)
        };
        let mut previous = next()?;
        let mut shortest: Option<Duration> = None;
        for _ in 1..max_runs {
            let Some(at) = next() else { break };
            let gap = (at - previous).to_std().unwrap_or_default();
            shortest = Some(shortest.map_or(gap, |s| s.min(gap)));
            if gap < stop_below {
                break;
            }
            previous = at;
        }
        shortest
    }

    /// The next matching wall-clock time after `local`, ignoring time zones.
    fn next_local_after(&self, local: NaiveDateTime) -> Option<NaiveDateTime> {
        self.schedules
            .iter()
            .filter_map(|schedule| schedule.after(&local.and_utc()).next())
            .map(|at| at.naive_utc())
            .min()
    }
}

impl PartialEq for CronExpression {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for CronExpression {}

impl fmt::Display for CronExpression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl FromStr for CronExpression {
    type Err = CronError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let error = |reason: String| CronError {
            expression: text.to_owned(),
            reason,
        };
        let source = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let expanded = match source.as_str() {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            other if other.starts_with('@') => return Err(error(format!("unknown shorthand `{other}`"))),
            other => other,
        };
        let fields: Vec<&str> = expanded.split(' ').collect();
        let [minute, hour, day_of_month, month, day_of_week] = fields[..] else {
            return Err(error(format!(
                "expected five fields (minute hour day-of-month month day-of-week), found {}",
                fields.len()
            )));
        };
        let day_of_month = if day_of_month == "?" { "*" } else { day_of_month };
        let day_of_week = crate_day_of_week(day_of_week).map_err(error)?;
        let patterns = if day_of_month != "*" && day_of_week != "*" {
            vec![
                format!("0 {minute} {hour} {day_of_month} {month} *"),
                format!("0 {minute} {hour} * {month} {day_of_week}"),
            ]
        } else {
            vec![format!("0 {minute} {hour} {day_of_month} {month} {day_of_week}")]
        };
        let schedules = patterns
            .iter()
            .map(|pattern| cron::Schedule::from_str(pattern).map_err(|err| error(err.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        let every_hour = schedules.iter().all(|s| (0..24).all(|h| s.hours().includes(h)));
        Ok(Self {
            source,
            schedules,
            every_hour,
        })
    }
}

impl serde::Serialize for CronExpression {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.source)
    }
}

impl<'de> serde::Deserialize<'de> for CronExpression {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

const DAY_NAMES: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// Rewrites a crontab day-of-week field (`0`–`7`, names, ranges, steps) as the
/// list of day names the `cron` crate reads unambiguously.
fn crate_day_of_week(field: &str) -> Result<String, String> {
    if field == "*" || field == "?" {
        return Ok("*".into());
    }
    let mut days = [false; 7];
    for item in field.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => {
                let step: u32 = step
                    .parse()
                    .ok()
                    .filter(|s| *s > 0)
                    .ok_or_else(|| format!("invalid step `{step}` in day of week"))?;
                (range, step)
            }
            None => (item, 1),
        };
        let (first, last) = match range {
            "*" => (0, 6),
            _ => match range.split_once('-') {
                Some((a, b)) => (day_number(a)?, day_number(b)?),
                // `5/2` means from Friday to the end of the week.
                None if item.contains('/') => (day_number(range)?, 6),
                None => {
                    let day = day_number(range)?;
                    (day, day)
                }
            },
        };
        if first > last {
            return Err(format!("day-of-week range `{range}` runs backwards"));
        }
        for day in (first..=last).step_by(step as usize) {
            days[day as usize % 7] = true;
        }
    }
    if days.iter().all(|d| *d) {
        return Ok("*".into());
    }
    Ok(DAY_NAMES
        .iter()
        .zip(days)
        .filter(|(_, on)| *on)
        .map(|(name, _)| *name)
        .collect::<Vec<_>>()
        .join(","))
}

fn day_number(text: &str) -> Result<u32, String> {
    if let Ok(number) = text.parse::<u32>() {
        return if number <= 7 {
            Ok(number)
        } else {
            Err(format!(
                "day of week `{number}` is out of range (0-7, 0 and 7 are Sunday)"
            ))
        };
    }
    let lower = text.to_ascii_lowercase();
    DAY_NAMES
        .iter()
        .position(|name| lower.len() >= 3 && name.to_ascii_lowercase() == lower[..3] && full_name_ok(&lower))
        .map(|index| index as u32)
        .ok_or_else(|| format!("`{text}` is not a day of the week"))
}

fn full_name_ok(lower: &str) -> bool {
    lower.len() == 3
        || [
            "sunday",
            "monday",
            "tuesday",
            "wednesday",
            "thursday",
            "friday",
            "saturday",
        ]
        .contains(&lower)
}

#[cfg(test)]
mod tests;
