use super::*;
use crate::zone::utc;

/// The first `expected.len()` runs after `after`, each found from the one
/// before, as the scheduler finds them.
fn runs(expression: &str, zone: &str, after: &str, count: usize) -> Vec<Timestamp> {
    let expression: CronExpression = expression.parse().unwrap();
    let zone: Timezone = zone.parse().unwrap();
    let mut at = utc(after);
    let mut out = Vec::new();
    for _ in 0..count {
        at = expression.next_after(zone, at).expect("a next run");
        out.push(at);
    }
    out
}

#[test]
fn next_runs_follow_local_time_across_clock_changes() {
    for (what, expression, zone, after, expected) in [
        (
            "weekdays at 09:00 in Berlin, across spring-forward (summer time starts Sunday 29 March)",
            "0 9 * * 1-5",
            "Europe/Berlin",
            "2026-03-26T12:00:00Z",
            &["2026-03-27T08:00:00Z", "2026-03-30T07:00:00Z", "2026-03-31T07:00:00Z"][..],
        ),
        (
            "daily at 09:00 in Berlin across fall-back (25 October)",
            "0 9 * * *",
            "Europe/Berlin",
            "2026-10-24T00:00:00Z",
            &["2026-10-24T07:00:00Z", "2026-10-25T08:00:00Z", "2026-10-26T08:00:00Z"][..],
        ),
        (
            "daily at 02:30 in Berlin: the skipped 02:30 runs at 03:30 summer time",
            "30 2 * * *",
            "Europe/Berlin",
            "2026-03-28T00:00:00Z",
            &["2026-03-28T01:30:00Z", "2026-03-29T01:30:00Z", "2026-03-30T00:30:00Z"][..],
        ),
        (
            "daily at 02:30 in Berlin: the repeated 02:30 runs once",
            "30 2 * * *",
            "Europe/Berlin",
            "2026-10-24T12:00:00Z",
            &["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"][..],
        ),
        (
            "hourly at :30 in Berlin keeps running through the repeated hour",
            "30 * * * *",
            "Europe/Berlin",
            "2026-10-24T23:00:00Z",
            &[
                "2026-10-24T23:30:00Z",
                "2026-10-25T00:30:00Z",
                "2026-10-25T01:30:00Z",
                "2026-10-25T02:30:00Z",
            ][..],
        ),
        (
            "every 15 minutes in Berlin does not run four times at 03:00 after spring-forward",
            "*/15 * * * *",
            "Europe/Berlin",
            "2026-03-29T00:40:00Z",
            &[
                "2026-03-29T00:45:00Z",
                "2026-03-29T01:00:00Z",
                "2026-03-29T01:15:00Z",
                "2026-03-29T01:30:00Z",
            ][..],
        ),
        (
            "daily at 09:00 in New York across spring-forward (8 March)",
            "0 9 * * *",
            "America/New_York",
            "2026-03-07T00:00:00Z",
            &["2026-03-07T14:00:00Z", "2026-03-08T13:00:00Z"][..],
        ),
        (
            "daily at 01:30 in New York: the repeated 01:30 (1 November) runs once",
            "30 1 * * *",
            "America/New_York",
            "2026-10-31T12:00:00Z",
            &["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"][..],
        ),
        (
            "daily at 02:15 in New York: the skipped 02:15 runs at 03:15 daylight time",
            "15 2 * * *",
            "America/New_York",
            "2026-03-07T12:00:00Z",
            &["2026-03-08T07:15:00Z", "2026-03-09T06:15:00Z"][..],
        ),
    ] {
        let expected: Vec<Timestamp> = expected.iter().map(|t| utc(t)).collect();
        assert_eq!(runs(expression, zone, after, expected.len()), expected, "{what}");
    }
}

#[test]
fn crontab_meanings_are_kept() {
    for (what, expression, after, expected) in [
        (
            "0 and 7 are both Sunday",
            "0 12 * * 0,7",
            "2026-06-01T00:00:00Z",
            &["2026-06-07T12:00:00Z", "2026-06-14T12:00:00Z"][..],
        ),
        (
            "1-5 is Monday to Friday (Friday 5 June, then Monday 8 June)",
            "0 12 * * 1-5",
            "2026-06-05T00:00:00Z",
            &["2026-06-05T12:00:00Z", "2026-06-08T12:00:00Z"][..],
        ),
        (
            "names and ranges ending on 7",
            "0 12 * * fri-7",
            "2026-06-05T13:00:00Z",
            &["2026-06-06T12:00:00Z", "2026-06-07T12:00:00Z", "2026-06-12T12:00:00Z"][..],
        ),
        (
            "day of month OR day of week when both are set: the 1st and every Monday",
            "0 8 1 * 1",
            "2026-06-25T00:00:00Z",
            &["2026-06-29T08:00:00Z", "2026-07-01T08:00:00Z", "2026-07-06T08:00:00Z"][..],
        ),
        (
            "shorthands",
            "@daily",
            "2026-06-05T10:00:00Z",
            &["2026-06-06T00:00:00Z", "2026-06-07T00:00:00Z"][..],
        ),
        (
            "steps over the week start at Sunday",
            "0 0 * * */3",
            "2026-06-01T00:00:00Z",
            &["2026-06-03T00:00:00Z", "2026-06-06T00:00:00Z", "2026-06-07T00:00:00Z"][..],
        ),
        (
            "leap day",
            "0 0 29 2 *",
            "2026-01-01T00:00:00Z",
            &["2028-02-29T00:00:00Z"][..],
        ),
    ] {
        let expected: Vec<Timestamp> = expected.iter().map(|t| utc(t)).collect();
        assert_eq!(runs(expression, "UTC", after, expected.len()), expected, "{what}");
    }
}

#[test]
fn bad_expressions_are_explained() {
    for (expression, reason) in [
        ("0 9 * *", "expected five fields"),
        ("0 0 9 * * *", "found 6"),
        ("0 9 * * 8", "out of range"),
        ("0 9 * * 5-1", "runs backwards"),
        ("0 9 * * funday", "not a day of the week"),
        ("0 9 * * */0", "invalid step"),
        ("61 * * * *", "invalid cron expression"),
        ("@sometimes", "unknown shorthand"),
    ] {
        let err = expression.parse::<CronExpression>().unwrap_err().to_string();
        assert!(err.contains(reason), "{expression}: {err}");
        assert!(err.contains(&format!("`{expression}`")), "{err}");
    }
}

#[test]
fn an_expression_that_never_matches_has_no_next_run() {
    let never: CronExpression = "0 0 30 2 *".parse().unwrap();
    assert_eq!(never.next_after(Timezone::UTC, utc("2026-01-01T00:00:00Z")), None);
}
