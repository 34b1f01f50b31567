//! The `/schedule` chat command: one closed enum, one parser. Admins manage
//! schedules in chat with it; the binary answers it without a model call.

use herald_core::ScheduleId;

pub const USAGE: &str = "Usage: /schedule list, /schedule add at 2026-12-24T18:00 [ZONE] INSTRUCTION, \
/schedule add every 30m INSTRUCTION, /schedule add cron \"0 9 * * 1-5\" [ZONE] INSTRUCTION, /schedule cancel ID";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScheduleCommand {
    /// `/schedule` or `/schedule list`.
    List,
    /// `/schedule add WHEN INSTRUCTION`: the text after `add`.
    Add(String),
    Cancel(ScheduleId),
}

/// `None` when the text is not this command; `Some(Err(usage))` when it is,
/// badly formed.
pub fn parse_schedule_command(text: &str) -> Option<Result<ScheduleCommand, String>> {
    let command = herald_core::command::slash_command(text)?;
    if command.name != "schedule" {
        return None;
    }
    let rest = command.rest;
    let (verb, arguments) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let arguments = arguments.trim();
    let usage = || Err(USAGE.to_owned());
    Some(match (verb, arguments) {
        ("" | "list", "") => Ok(ScheduleCommand::List),
        ("add", arguments) if !arguments.is_empty() => Ok(ScheduleCommand::Add(arguments.to_owned())),
        ("cancel", id) => match id.trim_start_matches('#').parse::<i64>() {
            Ok(id) => Ok(ScheduleCommand::Cancel(ScheduleId(id))),
            Err(_) => usage(),
        },
        _ => usage(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_into_one_enum() {
        use ScheduleCommand::*;
        for (text, expected) in [
            ("/schedule", Some(Ok(List))),
            (" /schedule list ", Some(Ok(List))),
            ("/schedule@other_bot list", None),
            (
                "/schedule add every 30m Check the deploy",
                Some(Ok(Add("every 30m Check the deploy".into()))),
            ),
            (
                "/schedule add cron \"0 9 * * 1-5\" Europe/Berlin Standup",
                Some(Ok(Add("cron \"0 9 * * 1-5\" Europe/Berlin Standup".into()))),
            ),
            ("/schedule cancel 7", Some(Ok(Cancel(ScheduleId(7))))),
            ("/schedule cancel #7", Some(Ok(Cancel(ScheduleId(7))))),
            ("/schedule cancel seven", Some(Err(USAGE.to_owned()))),
            ("/schedule cancel", Some(Err(USAGE.to_owned()))),
            ("/schedule add", Some(Err(USAGE.to_owned()))),
            ("/schedule list all", Some(Err(USAGE.to_owned()))),
            ("/schedule frobnicate", Some(Err(USAGE.to_owned()))),
            ("/schedules", None),
            ("please /schedule list", None),
            ("", None),
        ] {
            assert_eq!(parse_schedule_command(text), expected, "{text:?}");
        }
    }
}
