use super::*;
use crate::zone::utc;

fn zone(name: &str) -> Timezone {
    name.parse().unwrap()
}

fn every(interval: &str, start: &str, timezone: Option<&str>) -> ScheduleSpec {
    ScheduleSpec::Every {
        every: herald_core::duration::parse(interval).unwrap(),
        start: utc(start),
        timezone: timezone.map(zone),
    }
}

fn runs(spec: &ScheduleSpec, after: &str, count: usize) -> Vec<Timestamp> {
    let mut at = utc(after);
    let mut out = Vec::new();
    for _ in 0..count {
        match spec.next_after(at) {
            Some(next) => {
                out.push(next);
                at = next;
            }
            None => break,
        }
    }
    out
}

#[test]
fn next_runs_of_each_kind() {
    for (what, spec, after, expected) in [
        (
            "at: once, and nothing after it",
            ScheduleSpec::At {
                at: utc("2026-12-24T18:00:00Z"),
            },
            "2026-12-01T00:00:00Z",
            &["2026-12-24T18:00:00Z"][..],
        ),
        (
            "every 90m counts from its start",
            every("90m", "2026-06-01T08:00:00Z", None),
            "2026-06-01T09:00:00Z",
            &["2026-06-01T09:30:00Z", "2026-06-01T11:00:00Z"][..],
        ),
        (
            "every: the start itself is the first run",
            every("1h", "2026-06-01T08:00:00Z", None),
            "2026-06-01T07:00:00Z",
            &["2026-06-01T08:00:00Z", "2026-06-01T09:00:00Z"][..],
        ),
        (
            "every 1d in Berlin keeps 09:00 local across spring-forward",
            every("1d", "2026-03-27T08:00:00Z", Some("Europe/Berlin")),
            "2026-03-27T08:00:00Z",
            &["2026-03-28T08:00:00Z", "2026-03-29T07:00:00Z", "2026-03-30T07:00:00Z"][..],
        ),
        (
            "every 1d in Berlin keeps 09:00 local across fall-back",
            every("1d", "2026-10-24T07:00:00Z", Some("Europe/Berlin")),
            "2026-10-24T07:00:00Z",
            &["2026-10-25T08:00:00Z", "2026-10-26T08:00:00Z"][..],
        ),
        (
            "every 1d in New York from a time in the skipped hour runs at 03:30 that day",
            every("1d", "2026-03-07T07:30:00Z", Some("America/New_York")),
            "2026-03-07T07:30:00Z",
            &["2026-03-08T07:30:00Z", "2026-03-09T06:30:00Z"][..],
        ),
        (
            "every 7d in New York stays on Monday 09:00 local across fall-back",
            every("7d", "2026-10-26T13:00:00Z", Some("America/New_York")),
            "2026-10-26T13:00:00Z",
            &["2026-11-02T14:00:00Z", "2026-11-09T14:00:00Z"][..],
        ),
        (
            "every 1d without a time zone is 24 hours: 09:00 in Berlin becomes 10:00 in summer",
            every("1d", "2026-03-28T08:00:00Z", None),
            "2026-03-28T08:00:00Z",
            &["2026-03-29T08:00:00Z"][..],
        ),
        (
            "a long way after the start",
            every("1d", "2020-01-01T09:00:00Z", Some("Europe/Berlin")),
            "2026-07-01T12:00:00Z",
            &["2026-07-02T08:00:00Z"][..],
        ),
    ] {
        let expected: Vec<Timestamp> = expected.iter().map(|t| utc(t)).collect();
        assert_eq!(runs(&spec, after, expected.len()), expected, "{what}");
    }
    let once = ScheduleSpec::At {
        at: utc("2026-12-24T18:00:00Z"),
    };
    assert_eq!(once.next_after(utc("2026-12-24T18:00:00Z")), None);
}

#[test]
fn typed_forms_are_read() {
    let now = utc("2026-06-01T12:00:00Z");
    for (text, expected, rest) in [
        (
            "at 2026-12-24T18:00:00Z Send greetings",
            ScheduleSpec::At {
                at: utc("2026-12-24T18:00:00Z"),
            },
            "Send greetings",
        ),
        (
            "at 2026-12-24 18:00 Europe/Berlin Send greetings",
            ScheduleSpec::At {
                at: utc("2026-12-24T17:00:00Z"),
            },
            "Send greetings",
        ),
        (
            "at 2026-07-01T09:00 America/New_York",
            ScheduleSpec::At {
                at: utc("2026-07-01T13:00:00Z"),
            },
            "",
        ),
        (
            "every 30m Check the deploy",
            every("30m", "2026-06-01T12:30:00Z", None),
            "Check the deploy",
        ),
        (
            "every 1d from 2026-06-02T09:00 Europe/Berlin Morning summary",
            every("1d", "2026-06-02T07:00:00Z", Some("Europe/Berlin")),
            "Morning summary",
        ),
        (
            "cron \"0 9 * * 1-5\" Europe/Berlin Standup reminder",
            ScheduleSpec::Cron {
                cron: "0 9 * * 1-5".parse().unwrap(),
                timezone: zone("Europe/Berlin"),
            },
            "Standup reminder",
        ),
        (
            "cron 0 9 * * 1-5 Standup reminder",
            ScheduleSpec::Cron {
                cron: "0 9 * * 1-5".parse().unwrap(),
                timezone: Timezone::UTC,
            },
            "Standup reminder",
        ),
        (
            "CRON @daily UTC Rotate logs",
            ScheduleSpec::Cron {
                cron: "@daily".parse().unwrap(),
                timezone: Timezone::UTC,
            },
            "Rotate logs",
        ),
    ] {
        let (spec, instruction) = ScheduleSpec::parse_words(text, now).unwrap_or_else(|err| panic!("{text}: {err}"));
        assert_eq!((spec, instruction), (expected, rest), "{text}");
    }
}

#[test]
fn mistakes_are_explained() {
    let now = utc("2026-06-01T12:00:00Z");
    for (text, reason) in [
        ("tomorrow Send greetings", "expected `at TIME`"),
        ("at noon Send greetings", "`noon` is not a time"),
        ("every 5x Check", "unknown unit"),
        ("cron \"0 9 * *\" Check", "expected five fields"),
        (
            "at 2026-12-24T18:00 Europe/Berln Hi",
            "unknown time zone `Europe/Berln`",
        ),
        ("cron \"0 9 * * 1", "expected `at TIME`"),
    ] {
        let err = ScheduleSpec::parse_words(text, now).unwrap_err().to_string();
        assert!(err.contains(reason), "{text}: {err}");
    }
    for (spec, reason) in [
        (
            ScheduleSpec::At {
                at: utc("2026-05-01T00:00:00Z"),
            },
            "in the past",
        ),
        (every("500ms", "2026-06-01T13:00:00Z", None), "at least one second"),
        (
            every("12h", "2026-06-01T13:00:00Z", Some("Europe/Berlin")),
            "whole days only",
        ),
        (
            ScheduleSpec::Cron {
                cron: "0 0 31 2 *".parse().unwrap(),
                timezone: Timezone::UTC,
            },
            "never runs",
        ),
    ] {
        let err = spec.check(now).unwrap_err().to_string();
        assert!(err.contains(reason), "{spec}: {err}");
    }
    assert_eq!(
        every("1d", "2026-06-02T07:00:00Z", Some("Europe/Berlin")).check(now),
        Ok(())
    );
}

#[test]
fn specs_are_stored_as_json_and_described_plainly() {
    for (spec, json, described) in [
        (
            ScheduleSpec::At {
                at: utc("2026-12-24T18:00:00Z"),
            },
            r#"{"kind":"at","at":"2026-12-24T18:00:00Z"}"#,
            "at 2026-12-24 18:00 UTC",
        ),
        (
            every("1d", "2026-06-02T07:00:00Z", Some("Europe/Berlin")),
            r#"{"kind":"every","every":"1d","start":"2026-06-02T07:00:00Z","timezone":"Europe/Berlin"}"#,
            "every 1d from 2026-06-02 09:00 Europe/Berlin",
        ),
        (
            every("30m", "2026-06-02T07:00:00Z", None),
            r#"{"kind":"every","every":"30m","start":"2026-06-02T07:00:00Z"}"#,
            "every 30m from 2026-06-02 07:00 UTC",
        ),
        (
            ScheduleSpec::Cron {
                cron: "0 9 * * 1-5".parse().unwrap(),
                timezone: zone("America/New_York"),
            },
            r#"{"kind":"cron","cron":"0 9 * * 1-5","timezone":"America/New_York"}"#,
            "cron \"0 9 * * 1-5\" America/New_York",
        ),
    ] {
        assert_eq!(serde_json::to_string(&spec).unwrap(), json);
        assert_eq!(serde_json::from_str::<ScheduleSpec>(json).unwrap(), spec);
        assert_eq!(spec.to_string(), described);
    }
    for bad in [
        r#"{"kind":"cron","cron":"0 9 * *","timezone":"UTC"}"#,
        r#"{"kind":"cron","cron":"0 9 * * *","timezone":"Nowhere/Town"}"#,
        r#"{"kind":"every","every":"5","start":"2026-06-02T07:00:00Z"}"#,
        r#"{"kind":"weekly"}"#,
    ] {
        assert!(serde_json::from_str::<ScheduleSpec>(bad).is_err(), "{bad}");
    }
}

/// Rows: spec words → the shortest time between two of its runs.
#[test]
fn the_shortest_gap_between_runs_is_found() {
    let now = utc("2026-07-01T06:00:00Z");
    let minutes = |m: u64| Some(Duration::from_secs(m * 60));
    for (words, shortest) in [
        ("at 2026-07-02T09:00:00Z", None),
        ("every 1s", Some(Duration::from_secs(1))),
        ("every 1d from 2026-07-02T09:00 Europe/Berlin", minutes(24 * 60)),
        ("cron \"* * * * *\"", minutes(1)),
        ("cron \"*/15 * * * *\"", minutes(15)),
        ("cron \"0 9 * * 1-5\"", minutes(24 * 60)),
        ("cron \"0,2 9 * * *\"", minutes(2)),
        // The last run of one day and the first of the next.
        ("cron \"58 23 * * *\"", minutes(24 * 60)),
        ("cron \"0,58 0,23 * * *\"", minutes(2)),
        // Only where the 31st meets the 1st, months from now.
        ("cron \"59 23 31 * *\"", minutes(31 * 24 * 60)),
        ("cron \"59 23 31 * *\" Europe/Berlin", minutes(31 * 24 * 60)),
    ] {
        let (spec, _) = ScheduleSpec::parse_words(words, now).unwrap();
        assert_eq!(spec.shortest_gap(now, Duration::ZERO), shortest, "{words}");
    }
}
