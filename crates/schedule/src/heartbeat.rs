//! The heartbeat: at a steady interval Herald reads a checklist
//! (`HEARTBEAT.md`) and asks the model whether anything on it needs
//! attention. The model answers `HEARTBEAT_OK` when nothing does, and then
//! nobody hears from Herald.
//!
//! This module holds the pure rules: the configuration, when a heartbeat is
//! due (one per interval, aligned to the clock so every Herald process names
//! the same interval), active hours, and when a checklist is effectively
//! empty so no model call is made at all. Stripping the token from replies
//! is [`herald_core::heartbeat`]'s job, because the agent applies it.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use chrono::Timelike;
use herald_core::{ActorId, Admins, ConversationId, Timestamp, time::from_millis, time::to_millis};
use serde::{Deserialize, Serialize};

use crate::zone::Timezone;

pub use herald_core::heartbeat::{DEFAULT_ACK_MAX_CHARS, HEARTBEAT_OK, strip_ok_token};

pub const DEFAULT_PROMPT: &str = "This is a scheduled heartbeat, not a message from a person. \
Read the checklist below and check each item it asks about. Do not repeat old tasks from earlier \
conversations. If nothing needs attention, reply with exactly HEARTBEAT_OK and nothing else. If \
something needs attention, reply with a short alert for the user, without HEARTBEAT_OK.";

/// The `heartbeat:` section of herald.yaml.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HeartbeatConfig {
    /// Time between heartbeats; `0` disables them.
    #[serde(with = "herald_core::duration::serde")]
    pub every: Duration,
    /// The checklist the prompt includes. A missing or effectively empty file
    /// means there is nothing to check, and no model call is made.
    pub file: PathBuf,
    /// The instruction the model gets, before the checklist.
    pub prompt: String,
    /// The conversation alerts go to; by default the first admin's direct
    /// conversation (a group is never the default).
    pub target: Option<ConversationId>,
    /// Outside these hours no heartbeat runs.
    pub active_hours: Option<ActiveHours>,
    /// A reply that is `HEARTBEAT_OK` plus at most this many characters is
    /// not sent.
    pub ack_max_chars: usize,
}

impl Default for HeartbeatConfig {
    fn default() -> Self {
        Self {
            every: Duration::from_secs(30 * 60),
            file: PathBuf::from("HEARTBEAT.md"),
            prompt: DEFAULT_PROMPT.to_owned(),
            target: None,
            active_hours: None,
            ack_max_chars: DEFAULT_ACK_MAX_CHARS,
        }
    }
}

impl HeartbeatConfig {
    pub fn enabled(&self) -> bool {
        !self.every.is_zero()
    }

    /// Rules the types do not express, as (key under `heartbeat`, message).
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if self.enabled() && self.every < Duration::from_secs(1) {
            return Err(("every", "must be at least 1s (or 0 to disable heartbeats)".into()));
        }
        if let Some(target) = &self.target
            && !target.as_str().contains(':')
        {
            return Err((
                "target",
                format!("`{target}` is not a conversation id such as telegram:123456789"),
            ));
        }
        if let Some(hours) = &self.active_hours
            && hours.start == hours.end
        {
            return Err((
                "active_hours",
                "start and end are the same; leave active_hours out to run at any hour".into(),
            ));
        }
        Ok(())
    }

    /// The conversation heartbeats go to: the configured target, else the
    /// first admin's direct conversation (whose id on every channel that has
    /// one is the admin's own id).
    pub fn target_or_default(&self, admins: &Admins) -> Option<HeartbeatTarget> {
        match &self.target {
            Some(target) => Some(HeartbeatTarget {
                conversation: target.clone(),
                is_default: false,
            }),
            None => admins.iter().next().map(|admin: &ActorId| HeartbeatTarget {
                conversation: ConversationId::new(admin.as_str()),
                is_default: true,
            }),
        }
    }

    /// The instruction of a heartbeat turn: the prompt, then the checklist.
    pub fn instruction(&self, checklist: &str) -> String {
        format!(
            "{}\n\n--- {} ---\n{}",
            self.prompt.trim_end(),
            self.file.display(),
            checklist.trim()
        )
    }
}

/// Where heartbeats go, and whether configuration chose it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeartbeatTarget {
    pub conversation: ConversationId,
    /// Chosen by default: such a target must be a direct conversation.
    pub is_default: bool,
}

/// The interval a heartbeat at `now` belongs to, named by its start. Aligned
/// to the Unix epoch, so processes that share a queue agree on it.
pub fn heartbeat_slot(every: Duration, now: Timestamp) -> Timestamp {
    let every_ms = i64::try_from(every.as_millis()).unwrap_or(i64::MAX).max(1);
    let now_ms = to_millis(now);
    from_millis(now_ms - now_ms.rem_euclid(every_ms))
}

/// Hours of the day during which heartbeats run, in a time zone. A window
/// whose end is before its start runs across midnight (`22:00`–`06:00`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActiveHours {
    pub start: ClockTime,
    /// Not included; `24:00` is the end of the day.
    pub end: ClockTime,
    #[serde(default)]
    pub timezone: Timezone,
}

impl ActiveHours {
    pub fn contains(&self, at: Timestamp) -> bool {
        let local = self.timezone.local(at);
        let minute = (local.hour() * 60 + local.minute()) as u16;
        let (start, end) = (self.start.0, self.end.0);
        if start <= end {
            start <= minute && minute < end
        } else {
            minute >= start || minute < end
        }
    }
}

/// A time of day, `HH:MM`, from `00:00` to `24:00`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ClockTime(u16);

impl ClockTime {
    pub fn minutes(self) -> u16 {
        self.0
    }
}

impl FromStr for ClockTime {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || format!("`{text}` is not a time of day: write HH:MM, from 00:00 to 24:00");
        let (hours, minutes) = text.trim().split_once(':').ok_or_else(invalid)?;
        let hours: u16 = hours.parse().map_err(|_| invalid())?;
        let minutes: u16 = minutes.parse().map_err(|_| invalid())?;
        if minutes >= 60 || hours > 24 || (hours == 24 && minutes > 0) {
            return Err(invalid());
        }
        Ok(ClockTime(hours * 60 + minutes))
    }
}

impl TryFrom<String> for ClockTime {
    type Error = String;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        text.parse()
    }
}

impl From<ClockTime> for String {
    fn from(time: ClockTime) -> Self {
        time.to_string()
    }
}

impl fmt::Display for ClockTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02}:{:02}", self.0 / 60, self.0 % 60)
    }
}

/// Whether a checklist asks for nothing: only blank lines, headings,
/// `<!-- comments -->`, rules and check boxes or bullets with nothing after
/// them. Such a heartbeat is skipped without a model call.
pub fn checklist_is_empty(text: &str) -> bool {
    let mut rest = text;
    let mut visible = String::with_capacity(text.len());
    while let Some(start) = rest.find("<!--") {
        visible.push_str(&rest[..start]);
        rest = match rest[start..].find("-->") {
            Some(end) => &rest[start + end + 3..],
            // An unclosed comment hides the rest, as it does in Markdown.
            None => "",
        };
    }
    visible.push_str(rest);
    visible.lines().all(|line| {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return true;
        }
        if line.len() >= 3 && line.chars().all(|c| matches!(c, '-' | '*' | '_' | ' ')) {
            return true;
        }
        let Some(item) = line
            .strip_prefix("- ")
            .or_else(|| line.strip_prefix("* "))
            .or_else(|| line.strip_prefix("+ "))
            .or_else(|| (["-", "*", "+"].contains(&line)).then_some(""))
        else {
            return false;
        };
        let item = item.trim();
        let item = ["[ ]", "[x]", "[X]", "[]"]
            .iter()
            .find_map(|box_| item.strip_prefix(box_))
            .unwrap_or(item);
        item.trim().is_empty()
    })
}

#[cfg(test)]
mod tests;
