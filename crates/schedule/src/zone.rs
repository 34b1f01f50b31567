//! Time zones and local wall-clock times.
//!
//! Schedules are written in local time ("every weekday at 09:00 in Berlin"),
//! but a local time does not always name exactly one instant: when clocks jump
//! forward some local times never happen, and when they fall back some happen
//! twice. This module is the one place that decides what such a time means,
//! so cron schedules, daily intervals and active hours all agree:
//! - a local time inside a spring-forward gap is moved forward by the length of
//!   the gap (02:30 becomes 03:30 when 02:00 jumps to 03:00), so a daily run
//!   still happens that day;
//! - a local time that happens twice means its first occurrence.

use std::fmt;
use std::str::FromStr;

use chrono::{LocalResult, NaiveDateTime, Offset, TimeZone as _};
use herald_core::Timestamp;
use serde::{Deserialize, Serialize};

/// An IANA time zone such as `Europe/Berlin`, `America/New_York` or `UTC`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Timezone(chrono_tz::Tz);

impl Timezone {
    pub const UTC: Timezone = Timezone(chrono_tz::Tz::UTC);

    pub fn name(&self) -> &'static str {
        self.0.name()
    }

    pub fn tz(&self) -> chrono_tz::Tz {
        self.0
    }

    /// The wall-clock time at `at` in this zone.
    pub fn local(&self, at: Timestamp) -> NaiveDateTime {
        at.with_timezone(&self.0).naive_local()
    }

    /// The instant a local time stands for, by the rules in the module docs.
    pub fn resolve(&self, local: NaiveDateTime) -> Timestamp {
        self.occurrences(local).0
    }

    /// Every instant a local time names: the first, and a second one when the
    /// clocks fell back over it.
    pub fn occurrences(&self, local: NaiveDateTime) -> (Timestamp, Option<Timestamp>) {
        match self.0.from_local_datetime(&local) {
            LocalResult::Single(at) => (at.to_utc(), None),
            LocalResult::Ambiguous(a, b) => {
                let (a, b) = (a.to_utc(), b.to_utc());
                (a.min(b), Some(a.max(b)))
            }
            LocalResult::None => {
                // Inside a gap: read the local time with the offset in force
                // before the jump. No zone changes its offset twice within 36
                // hours, so that instant is safely before the gap.
                let before = local.and_utc() - chrono::Duration::hours(36);
                let offset = self.0.offset_from_utc_datetime(&before.naive_utc()).fix();
                (
                    local.and_utc() - chrono::Duration::seconds(i64::from(offset.local_minus_utc())),
                    None,
                )
            }
        }
    }
}

impl Default for Timezone {
    fn default() -> Self {
        Timezone::UTC
    }
}

impl fmt::Display for Timezone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown time zone `{0}`: expected an IANA name such as Europe/Berlin, America/New_York or UTC")]
pub struct UnknownTimezone(pub String);

impl FromStr for Timezone {
    type Err = UnknownTimezone;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        text.trim()
            .parse::<chrono_tz::Tz>()
            .map(Timezone)
            .map_err(|_| UnknownTimezone(text.to_owned()))
    }
}

impl TryFrom<String> for Timezone {
    type Error = UnknownTimezone;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        text.parse()
    }
}

impl From<Timezone> for String {
    fn from(zone: Timezone) -> Self {
        zone.name().to_owned()
    }
}

#[cfg(test)]
pub(crate) fn utc(text: &str) -> Timestamp {
    chrono::DateTime::parse_from_rfc3339(text)
        .unwrap_or_else(|err| panic!("{text}: {err}"))
        .to_utc()
}

#[cfg(test)]
pub(crate) fn naive(text: &str) -> NaiveDateTime {
    NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M").unwrap_or_else(|err| panic!("{text}: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_times_resolve_across_clock_changes() {
        for (zone, local, first, second) in [
            // Ordinary times.
            ("Europe/Berlin", "2026-07-01 09:00", "2026-07-01T07:00:00Z", None),
            ("America/New_York", "2026-01-15 09:00", "2026-01-15T14:00:00Z", None),
            // Spring forward: 02:00 jumps to 03:00; 02:30 is read as 03:30.
            ("Europe/Berlin", "2026-03-29 02:30", "2026-03-29T01:30:00Z", None),
            ("Europe/Berlin", "2026-03-29 02:00", "2026-03-29T01:00:00Z", None),
            ("America/New_York", "2026-03-08 02:30", "2026-03-08T07:30:00Z", None),
            // Fall back: 02:30 happens twice in Berlin, 01:30 in New York.
            (
                "Europe/Berlin",
                "2026-10-25 02:30",
                "2026-10-25T00:30:00Z",
                Some("2026-10-25T01:30:00Z"),
            ),
            (
                "America/New_York",
                "2026-11-01 01:30",
                "2026-11-01T05:30:00Z",
                Some("2026-11-01T06:30:00Z"),
            ),
            ("UTC", "2026-03-29 02:30", "2026-03-29T02:30:00Z", None),
        ] {
            let zone: Timezone = zone.parse().unwrap();
            let (a, b) = zone.occurrences(naive(local));
            assert_eq!((a, b), (utc(first), second.map(utc)), "{zone} {local}");
            assert_eq!(zone.resolve(naive(local)), utc(first));
        }
    }

    #[test]
    fn names_parse_and_unknown_names_are_explained() {
        assert_eq!("Europe/Berlin".parse::<Timezone>().unwrap().name(), "Europe/Berlin");
        assert_eq!(" UTC ".parse::<Timezone>().unwrap(), Timezone::UTC);
        let err = "Europe/Berln".parse::<Timezone>().unwrap_err().to_string();
        assert!(err.contains("`Europe/Berln`") && err.contains("IANA"), "{err}");
        let zone: Timezone = serde_json::from_str("\"America/New_York\"").unwrap();
        assert_eq!(serde_json::to_string(&zone).unwrap(), "\"America/New_York\"");
        assert!(serde_json::from_str::<Timezone>("\"Mars/Olympus\"").is_err());
    }
}
