//! What a schedule says about time: once `at` an instant, `every` interval, or
//! on a `cron` expression in a time zone — and the one question the scheduler
//! asks of it, [`ScheduleSpec::next_after`].
//!
//! A spec is stored as JSON (`{"kind":"cron","cron":"0 9 * * 1-5",
//! "timezone":"Europe/Berlin"}`), so what survives a restart is exactly what
//! was checked when the schedule was created.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime};
use herald_core::Timestamp;
use serde::{Deserialize, Serialize};

use crate::cron::{CronError, CronExpression};
use crate::zone::{Timezone, UnknownTimezone};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ScheduleSpec {
    /// Once, at this instant.
    At { at: Timestamp },
    /// Every `every`, counting from `start` (the first run).
    ///
    /// Without a time zone the interval is elapsed time, so `1d` drifts by an
    /// hour in local time when the clocks change. With one (allowed for whole
    /// days only) each run keeps the local wall-clock time of `start`.
    Every {
        #[serde(with = "herald_core::duration::serde")]
        every: Duration,
        start: Timestamp,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timezone: Option<Timezone>,
    },
    /// On a five-field cron expression, read in `timezone`.
    Cron {
        cron: CronExpression,
        #[serde(default)]
        timezone: Timezone,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error(transparent)]
    Cron(#[from] CronError),
    #[error(transparent)]
    Timezone(#[from] UnknownTimezone),
    #[error("{0}")]
    Duration(String),
    #[error("`{0}` is not a time: write 2026-12-24T18:00 (local to the time zone) or 2026-12-24T18:00:00Z")]
    Time(String),
    #[error("an interval must be at least one second")]
    IntervalTooShort,
    #[error("a time zone applies to intervals of whole days only (such as 1d or 7d), not {0}")]
    TimezoneNeedsWholeDays(String),
    #[error("{0} is in the past")]
    InThePast(String),
    #[error("this schedule never runs")]
    Never,
    #[error(
        "expected `at TIME`, `every INTERVAL` or `cron \"EXPRESSION\"`, optionally followed by a time zone; got `{0}`"
    )]
    Unreadable(String),
}

const DAY: Duration = Duration::from_secs(86_400);

/// Runs of a cron expression looked at to find its shortest gap: a year of
/// anything that runs up to 27 times a day. An expression that runs more
/// often shows its shortest gap within its first days.
pub const MAX_RUNS_WALKED: usize = 10_000;

impl ScheduleSpec {
    /// The first run strictly after `after`, or `None` when no run is left.
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        match self {
            ScheduleSpec::At { at } => (*at > after).then_some(*at),
            ScheduleSpec::Every { every, start, timezone } => {
                if *start > after {
                    return Some(*start);
                }
                match timezone.filter(|_| is_whole_days(*every)) {
                    Some(zone) => next_in_local_days(*every, *start, zone, after),
                    None => {
                        let every_ms = i64::try_from(every.as_millis()).ok().filter(|ms| *ms > 0)?;
                        let elapsed = (after - *start).num_milliseconds();
                        let runs = elapsed / every_ms + 1;
                        Some(*start + chrono::Duration::milliseconds(runs.checked_mul(every_ms)?))
                    }
                }
            }
            ScheduleSpec::Cron { cron, timezone } => cron.next_after(*timezone, after),
        }
    }

    /// The shortest time between two runs to come after `now`, `None` for a
    /// schedule that runs at most once. For a cron expression the runs of
    /// the next year are walked on the wall clock (at most
    /// [`MAX_RUNS_WALKED`] of them), stopping at the first gap shorter than
    /// `stop_below`.
    pub fn shortest_gap(&self, now: Timestamp, stop_below: Duration) -> Option<Duration> {
        match self {
            ScheduleSpec::At { .. } => None,
            ScheduleSpec::Every { every, .. } => Some(*every),
            ScheduleSpec::Cron { cron, timezone } => {
                cron.shortest_gap_after(timezone.local(now), MAX_RUNS_WALKED, stop_below)
            }
        }
    }

    /// Checks a spec made at `now`: intervals long enough, time zones where
    /// they mean something, and at least one run to come.
    pub fn check(&self, now: Timestamp) -> Result<(), SpecError> {
        if let ScheduleSpec::Every { every, timezone, .. } = self {
            if *every < Duration::from_secs(1) {
                return Err(SpecError::IntervalTooShort);
            }
            if timezone.is_some() && !is_whole_days(*every) {
                return Err(SpecError::TimezoneNeedsWholeDays(herald_core::duration::format(*every)));
            }
        }
        if let ScheduleSpec::At { at } = self
            && *at <= now
        {
            return Err(SpecError::InThePast(at.to_rfc3339()));
        }
        match self.next_after(now) {
            Some(_) => Ok(()),
            None => Err(SpecError::Never),
        }
    }

    /// Reads the forms people type in chat and on the command line:
    /// `at 2026-12-24T18:00 [ZONE]`, `every 30m [from TIME] [ZONE]`,
    /// `cron "0 9 * * 1-5" [ZONE]` (the quotes may be left out). Returns the
    /// spec and the words after it (a chat command's instruction).
    ///
    /// `every` without `from` starts one interval after `now`.
    pub fn parse_words(text: &str, now: Timestamp) -> Result<(ScheduleSpec, &str), SpecError> {
        let unreadable = || SpecError::Unreadable(text.trim().to_owned());
        let (kind, rest) = next_word(text).ok_or_else(unreadable)?;
        match kind.to_ascii_lowercase().as_str() {
            "at" => {
                let (first, rest) = next_word(rest).ok_or_else(unreadable)?;
                // `at 2026-12-24 18:00` as two words.
                let (time, rest) = match next_word(rest) {
                    Some((clock, after)) if looks_like_clock(clock) && !first.contains('T') => {
                        (format!("{first}T{clock}"), after)
                    }
                    _ => (first.to_owned(), rest),
                };
                let (zone, rest) = optional_zone(rest)?;
                let at = parse_time(&time, zone.unwrap_or_default())?;
                Ok((ScheduleSpec::At { at }, rest.trim()))
            }
            "every" => {
                let (interval, rest) = next_word(rest).ok_or_else(unreadable)?;
                let every = herald_core::duration::parse(interval).map_err(SpecError::Duration)?;
                let (start, rest) = match next_word(rest) {
                    Some((word, after)) if word.eq_ignore_ascii_case("from") => {
                        let (time, after) = next_word(after).ok_or_else(unreadable)?;
                        (Some(time.to_owned()), after)
                    }
                    _ => (None, rest),
                };
                let (timezone, rest) = optional_zone(rest)?;
                let start = match start {
                    Some(time) => parse_time(&time, timezone.unwrap_or_default())?,
                    None => now + chrono::Duration::from_std(every).map_err(|_| SpecError::Never)?,
                };
                Ok((ScheduleSpec::Every { every, start, timezone }, rest.trim()))
            }
            "cron" => {
                let rest = rest.trim_start();
                let (expression, rest) = match rest.strip_prefix('"') {
                    Some(quoted) => quoted.split_once('"').ok_or_else(unreadable)?,
                    None => {
                        let mut end = rest;
                        let mut fields = Vec::new();
                        let count = if rest.starts_with('@') { 1 } else { 5 };
                        for _ in 0..count {
                            let (field, after) = next_word(end).ok_or_else(unreadable)?;
                            fields.push(field);
                            end = after;
                        }
                        let consumed = rest.len() - end.len();
                        (&rest[..consumed], end)
                    }
                };
                let cron: CronExpression = expression.parse()?;
                let (timezone, rest) = optional_zone(rest)?;
                Ok((
                    ScheduleSpec::Cron {
                        cron,
                        timezone: timezone.unwrap_or_default(),
                    },
                    rest.trim(),
                ))
            }
            _ => Err(unreadable()),
        }
    }
}

impl fmt::Display for ScheduleSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScheduleSpec::At { at } => write!(f, "at {}", at.format("%Y-%m-%d %H:%M UTC")),
            ScheduleSpec::Every { every, start, timezone } => {
                write!(f, "every {}", herald_core::duration::format(*every))?;
                match timezone {
                    Some(zone) => write!(f, " from {} {zone}", zone.local(*start).format("%Y-%m-%d %H:%M")),
                    None => write!(f, " from {}", start.format("%Y-%m-%d %H:%M UTC")),
                }
            }
            ScheduleSpec::Cron { cron, timezone } => write!(f, "cron \"{cron}\" {timezone}"),
        }
    }
}

fn is_whole_days(every: Duration) -> bool {
    !every.is_zero() && every.as_millis().is_multiple_of(DAY.as_millis())
}

/// Runs `days` calendar days apart at the local time of `start`.
fn next_in_local_days(every: Duration, start: Timestamp, zone: Timezone, after: Timestamp) -> Option<Timestamp> {
    let days = i64::try_from(every.as_secs() / DAY.as_secs()).ok()?;
    let local_start = zone.local(start);
    let run = |k: i64| -> Option<Timestamp> {
        let local = local_start.checked_add_signed(chrono::Duration::days(k.checked_mul(days)?))?;
        Some(zone.resolve(local))
    };
    // Elapsed days give a guess one or two runs short (an offset change
    // moves a run by at most a few hours); step forward from there.
    let mut k = ((after - start).num_days() / days - 1).max(0);
    loop {
        let at = run(k)?;
        if at > after {
            return Some(at);
        }
        k += 1;
    }
}

fn next_word(text: &str) -> Option<(&str, &str)> {
    let text = text.trim_start();
    if text.is_empty() {
        return None;
    }
    let end = text.find(char::is_whitespace).unwrap_or(text.len());
    Some((&text[..end], &text[end..]))
}

/// A time zone as the next word, if the next word is one.
fn optional_zone(text: &str) -> Result<(Option<Timezone>, &str), SpecError> {
    match next_word(text) {
        Some((word, rest)) if word.contains('/') || word.eq_ignore_ascii_case("utc") => Ok((Some(word.parse()?), rest)),
        _ => Ok((None, text)),
    }
}

fn looks_like_clock(word: &str) -> bool {
    NaiveTime::parse_from_str(word, "%H:%M").is_ok() || NaiveTime::parse_from_str(word, "%H:%M:%S").is_ok()
}

/// An instant from RFC 3339 (`2026-12-24T18:00:00Z`, `…+01:00`), or a local
/// time in `zone` (`2026-12-24T18:00`, `2026-12-24 18:00`, `2026-12-24`).
pub fn parse_time(text: &str, zone: Timezone) -> Result<Timestamp, SpecError> {
    let text = text.trim();
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Ok(at.to_utc());
    }
    let normalized = text.replacen(' ', "T", 1);
    for format in ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"] {
        if let Ok(local) = NaiveDateTime::parse_from_str(&normalized, format) {
            return Ok(zone.resolve(local));
        }
    }
    if let Ok(day) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return Ok(zone.resolve(day.and_time(NaiveTime::MIN)));
    }
    Err(SpecError::Time(text.to_owned()))
}

#[cfg(test)]
mod tests;
