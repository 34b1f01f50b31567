use super::*;
use crate::zone::utc;

#[test]
fn effectively_empty_checklists_are_recognised() {
    for (what, text, empty) in [
        ("nothing at all", "", true),
        ("blank lines", "\n\n   \n", true),
        ("headings only", "# Heartbeat\n\n## Every morning\n", true),
        ("a comment", "# Heartbeat\n<!-- add things to check here -->\n", true),
        (
            "a comment over several lines",
            "<!--\n- [ ] check the disk\n-->\n",
            true,
        ),
        ("empty check boxes", "# Todo\n- [ ]\n- [ ]   \n* [x]\n- []\n", true),
        ("bare bullets and rules", "-\n* \n---\n***\n", true),
        (
            "a check box with something to do",
            "# Todo\n- [ ] Check the backup ran\n",
            false,
        ),
        ("a bullet with text", "- disk space on /var\n", false),
        ("plain text", "Look at the error rate.", false),
        (
            "text after a comment on the same line",
            "<!-- note --> check the queue",
            false,
        ),
        (
            "an unclosed comment hides the rest",
            "<!-- draft\n- [ ] check the disk\n",
            true,
        ),
    ] {
        assert_eq!(checklist_is_empty(text), empty, "{what}");
    }
}

#[test]
fn active_hours_are_read_in_their_time_zone_and_may_cross_midnight() {
    let window = |start: &str, end: &str, zone: &str| ActiveHours {
        start: start.parse().unwrap(),
        end: end.parse().unwrap(),
        timezone: zone.parse().unwrap(),
    };
    for (what, hours, at, inside) in [
        (
            "08-22 Berlin, 07:30 UTC is 09:30 summer time",
            window("08:00", "22:00", "Europe/Berlin"),
            "2026-07-01T07:30:00Z",
            true,
        ),
        (
            "08-22 Berlin, 06:30 UTC is 07:30 winter time",
            window("08:00", "22:00", "Europe/Berlin"),
            "2026-01-15T06:30:00Z",
            false,
        ),
        (
            "08-22 Berlin, 06:30 UTC is 08:30 summer time",
            window("08:00", "22:00", "Europe/Berlin"),
            "2026-07-01T06:30:00Z",
            true,
        ),
        (
            "the end is not included",
            window("08:00", "22:00", "Europe/Berlin"),
            "2026-07-01T20:00:00Z",
            false,
        ),
        (
            "the start is included",
            window("08:00", "22:00", "Europe/Berlin"),
            "2026-07-01T06:00:00Z",
            true,
        ),
        (
            "09-17 New York at 13:59 UTC in winter is 08:59",
            window("09:00", "17:00", "America/New_York"),
            "2026-01-15T13:59:00Z",
            false,
        ),
        (
            "09-17 New York at 14:00 UTC in winter is 09:00",
            window("09:00", "17:00", "America/New_York"),
            "2026-01-15T14:00:00Z",
            true,
        ),
        (
            "09-17 New York at 13:00 UTC in summer is 09:00",
            window("09:00", "17:00", "America/New_York"),
            "2026-07-01T13:00:00Z",
            true,
        ),
        (
            "across midnight: 22-06 Berlin at 23:30 local",
            window("22:00", "06:00", "Europe/Berlin"),
            "2026-07-01T21:30:00Z",
            true,
        ),
        (
            "across midnight: 22-06 Berlin at 02:00 local",
            window("22:00", "06:00", "Europe/Berlin"),
            "2026-07-02T00:00:00Z",
            true,
        ),
        (
            "across midnight: 22-06 Berlin at 12:00 local",
            window("22:00", "06:00", "Europe/Berlin"),
            "2026-07-01T10:00:00Z",
            false,
        ),
        (
            "across midnight: 22-06 Berlin at 06:00 local",
            window("22:00", "06:00", "Europe/Berlin"),
            "2026-07-02T04:00:00Z",
            false,
        ),
        (
            "until the end of the day",
            window("18:00", "24:00", "UTC"),
            "2026-07-01T23:59:00Z",
            true,
        ),
        (
            "a UTC date boundary inside a local window",
            window("00:00", "03:00", "Asia/Tokyo"),
            "2026-07-01T16:30:00Z",
            true,
        ),
    ] {
        assert_eq!(hours.contains(utc(at)), inside, "{what}");
    }
}

#[test]
fn times_of_day_are_checked() {
    for (text, minutes) in [
        ("08:00", Some(480)),
        ("24:00", Some(1440)),
        ("0:05", Some(5)),
        ("23:59", Some(1439)),
    ] {
        assert_eq!(
            text.parse::<ClockTime>().ok().map(ClockTime::minutes),
            minutes,
            "{text}"
        );
    }
    for text in ["8", "24:01", "12:60", "noon", "-1:00"] {
        let err = text.parse::<ClockTime>().unwrap_err();
        assert!(err.contains("HH:MM"), "{text}: {err}");
    }
}

#[test]
fn heartbeat_intervals_are_aligned_to_the_clock() {
    let every = Duration::from_secs(1800);
    for (now, slot) in [
        ("2026-06-01T10:00:00Z", "2026-06-01T10:00:00Z"),
        ("2026-06-01T10:29:59Z", "2026-06-01T10:00:00Z"),
        ("2026-06-01T10:30:00Z", "2026-06-01T10:30:00Z"),
    ] {
        assert_eq!(heartbeat_slot(every, utc(now)), utc(slot), "{now}");
    }
    assert_eq!(
        heartbeat_slot(Duration::from_secs(2), utc("2026-06-01T10:00:03.5Z")),
        utc("2026-06-01T10:00:02Z")
    );
}

#[test]
fn config_defaults_and_checks() {
    let config: HeartbeatConfig = serde_yaml::from_str("{}").unwrap();
    assert_eq!(config, HeartbeatConfig::default());
    assert_eq!(config.every, Duration::from_secs(1800));
    assert_eq!(config.ack_max_chars, 300);
    assert!(config.prompt.contains(HEARTBEAT_OK));

    let config: HeartbeatConfig = serde_yaml::from_str(
        "every: 2s\nfile: ops/HEARTBEAT.md\ntarget: telegram:123456789\nactive_hours: {start: '08:00', end: '22:00', timezone: Europe/Berlin}\nack_max_chars: 40\n",
    )
    .unwrap();
    assert_eq!(config.every, Duration::from_secs(2));
    assert_eq!(config.active_hours.as_ref().unwrap().timezone.name(), "Europe/Berlin");
    assert_eq!(config.check(), Ok(()));

    let disabled: HeartbeatConfig = serde_yaml::from_str("every: 0").unwrap();
    assert!(!disabled.enabled());

    for (yaml, reason) in [
        ("every: 30", "missing unit"),
        ("evry: 30m", "unknown field `evry`"),
        ("active_hours: {start: '8', end: '22:00'}", "HH:MM"),
        (
            "active_hours: {start: '08:00', end: '22:00', timezone: Berlin}",
            "unknown time zone",
        ),
        (
            "active_hours: {start: '08:00', end: '22:00', tz: UTC}",
            "unknown field `tz`",
        ),
    ] {
        let err = serde_yaml::from_str::<HeartbeatConfig>(yaml).unwrap_err().to_string();
        assert!(err.contains(reason), "{yaml}: {err}");
    }
    for (yaml, key) in [
        ("every: 500ms", "every"),
        ("target: me", "target"),
        ("active_hours: {start: '08:00', end: '08:00'}", "active_hours"),
    ] {
        let config: HeartbeatConfig = serde_yaml::from_str(yaml).unwrap();
        assert_eq!(config.check().unwrap_err().0, key, "{yaml}");
    }
}

#[test]
fn the_default_target_is_the_first_admin_and_configuration_wins() {
    let admins = Admins::new([ActorId::new("telegram:111"), ActorId::new("local:owner")]);
    let config = HeartbeatConfig::default();
    assert_eq!(
        config.target_or_default(&admins),
        Some(HeartbeatTarget {
            conversation: ConversationId::new("telegram:111"),
            is_default: true
        })
    );
    assert_eq!(config.target_or_default(&Admins::default()), None);
    let chosen = HeartbeatConfig {
        target: Some(ConversationId::new("slack:C024BE91L")),
        ..HeartbeatConfig::default()
    };
    assert_eq!(
        chosen.target_or_default(&admins),
        Some(HeartbeatTarget {
            conversation: ConversationId::new("slack:C024BE91L"),
            is_default: false
        })
    );
}

#[test]
fn the_instruction_carries_the_prompt_and_the_checklist() {
    let config = HeartbeatConfig::default();
    let instruction = config.instruction("# Checks\n- [ ] Is the backup fresh?\n\n");
    assert!(instruction.starts_with(DEFAULT_PROMPT));
    assert!(instruction.ends_with("--- HEARTBEAT.md ---\n# Checks\n- [ ] Is the backup fresh?"));
}
