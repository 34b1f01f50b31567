//! The skill registry's chat commands: one closed enum, one parser. The
//! toolbox answers them in `prepare` without calling the model; commands
//! that change anything are refused for non-admins.

pub const USAGE: &str = "Usage: /skills, /skills info NAME, /skills enable NAME, /skills disable NAME, \
                         /skills reload, /approve CODE, /deny CODE";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SkillCommand {
    /// `/skills` or `/skills list`.
    List,
    Info(String),
    Enable(String),
    Disable(String),
    Reload,
    /// `/approve CODE`: run the dangerous call waiting under this code.
    Approve(String),
    /// `/deny CODE`: drop it.
    Deny(String),
}

impl SkillCommand {
    /// Whether only admins may give it.
    pub fn changes_state(&self) -> bool {
        !matches!(self, SkillCommand::List | SkillCommand::Info(_))
    }
}

/// `None` when the text is not one of these commands; `Some(Err(usage))`
/// when it is one, badly formed.
pub fn parse_command(text: &str) -> Option<Result<SkillCommand, String>> {
    let command = herald_core::command::slash_command(text)?;
    let rest: Vec<&str> = command.rest.split_whitespace().collect();
    let usage = || Err(USAGE.to_owned());
    let parsed = match (command.name, rest.as_slice()) {
        ("skills", [] | ["list"]) => Ok(SkillCommand::List),
        ("skills", ["info", name]) => Ok(SkillCommand::Info((*name).to_owned())),
        ("skills", ["enable", name]) => Ok(SkillCommand::Enable((*name).to_owned())),
        ("skills", ["disable", name]) => Ok(SkillCommand::Disable((*name).to_owned())),
        ("skills", ["reload"]) => Ok(SkillCommand::Reload),
        ("skills", _) => usage(),
        ("approve", [code]) => Ok(SkillCommand::Approve(code.to_ascii_uppercase())),
        ("deny", [code]) => Ok(SkillCommand::Deny(code.to_ascii_uppercase())),
        ("approve" | "deny", _) => usage(),
        _ => return None,
    };
    Some(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_into_one_enum() {
        use SkillCommand::*;
        for (text, expected) in [
            ("/skills", Some(Ok(List))),
            ("  /skills   list ", Some(Ok(List))),
            // Telegram's adapter strips its own `@bot`; another bot's command is not ours.
            ("/skills@other_bot", None),
            ("/skills info pdf", Some(Ok(Info("pdf".into())))),
            ("/skills enable pdf", Some(Ok(Enable("pdf".into())))),
            ("/skills disable pdf", Some(Ok(Disable("pdf".into())))),
            ("/skills reload", Some(Ok(Reload))),
            ("/approve k7q2m9", Some(Ok(Approve("K7Q2M9".into())))),
            ("/deny K7Q2M9", Some(Ok(Deny("K7Q2M9".into())))),
            ("/skills frobnicate", Some(Err(USAGE.to_owned()))),
            ("/skills enable", Some(Err(USAGE.to_owned()))),
            ("/approve", Some(Err(USAGE.to_owned()))),
            ("/approve a b", Some(Err(USAGE.to_owned()))),
            ("/skillsx", None),
            ("/pdf do it", None),
            ("please /skills", None),
            ("", None),
        ] {
            assert_eq!(parse_command(text), expected, "{text:?}");
        }
    }

    #[test]
    fn only_listing_is_open_to_everyone() {
        for (command, changes) in [
            (SkillCommand::List, false),
            (SkillCommand::Info("x".into()), false),
            (SkillCommand::Enable("x".into()), true),
            (SkillCommand::Disable("x".into()), true),
            (SkillCommand::Reload, true),
            (SkillCommand::Approve("X".into()), true),
            (SkillCommand::Deny("X".into()), true),
        ] {
            assert_eq!(command.changes_state(), changes, "{command:?}");
        }
    }
}
