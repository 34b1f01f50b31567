//! Prompt assembly: pure, so every budgeting rule is tested without a model.
//!
//! Order: the system prompt, then the toolbox's sections (skill catalog,
//! active skill instructions), then as much history as fits, newest kept,
//! then the current input. The system prompt, the sections and the current
//! input are never dropped; history goes oldest first.

use herald_core::{ChatMessage, HistoryEntry, PromptSection, Role};
use serde::{Deserialize, Serialize};

/// How a prompt was built: what `herald explain` prints.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptAccounting {
    pub budget_chars: usize,
    pub system_prompt_chars: usize,
    /// Characters per toolbox section, by label.
    pub sections: Vec<(String, usize)>,
    pub history_kept: usize,
    pub history_dropped: usize,
    pub history_chars: usize,
    pub input_chars: usize,
    pub total_chars: usize,
    pub tools: Vec<String>,
}

pub struct PromptParts<'a> {
    pub system_prompt: &'a str,
    pub sections: &'a [PromptSection],
    pub history: &'a [HistoryEntry],
    pub input: Option<&'a str>,
    pub budget_chars: usize,
}

/// Builds the messages for a model call and accounts for every character.
pub fn assemble_prompt(parts: &PromptParts<'_>) -> (Vec<ChatMessage>, PromptAccounting) {
    let mut system = parts.system_prompt.trim_end().to_owned();
    let mut sections = Vec::with_capacity(parts.sections.len());
    for section in parts.sections.iter().filter(|s| !s.text.trim().is_empty()) {
        system.push_str("\n\n");
        system.push_str(section.text.trim_end());
        sections.push((section.label.clone(), section.text.trim_end().chars().count()));
    }
    let system_chars = system.chars().count();
    let input_chars = parts.input.map_or(0, |text| text.chars().count());

    // Walk history newest first, keeping entries while they fit.
    let fixed = system_chars + input_chars;
    let mut remaining = parts.budget_chars.saturating_sub(fixed);
    let mut kept = 0usize;
    let mut history_chars = 0usize;
    for entry in parts.history.iter().rev() {
        let chars = entry.text.chars().count();
        if chars > remaining {
            break;
        }
        remaining -= chars;
        history_chars += chars;
        kept += 1;
    }
    let first_kept = parts.history.len() - kept;

    let mut messages = Vec::with_capacity(kept + 2);
    messages.push(ChatMessage::system(system));
    for entry in &parts.history[first_kept..] {
        messages.push(match entry.role {
            Role::User => ChatMessage::user(entry.text.clone()),
            Role::Assistant => ChatMessage::assistant(entry.text.clone()),
        });
    }
    if let Some(input) = parts.input {
        messages.push(ChatMessage::user(input));
    }

    let accounting = PromptAccounting {
        budget_chars: parts.budget_chars,
        system_prompt_chars: parts.system_prompt.trim_end().chars().count(),
        sections,
        history_kept: kept,
        history_dropped: first_kept,
        history_chars,
        input_chars,
        total_chars: fixed + history_chars,
        tools: Vec::new(),
    };
    (messages, accounting)
}

#[cfg(test)]
mod tests {
    use herald_core::time::from_millis;

    use super::*;

    fn entry(id: i64, role: Role, text: &str) -> HistoryEntry {
        HistoryEntry {
            id,
            task: None,
            role,
            actor: None,
            text: text.into(),
            at: from_millis(id),
        }
    }

    fn history(texts: &[&str]) -> Vec<HistoryEntry> {
        texts
            .iter()
            .enumerate()
            .map(|(i, t)| entry(i as i64, if i % 2 == 0 { Role::User } else { Role::Assistant }, t))
            .collect()
    }

    fn contents(messages: &[ChatMessage]) -> Vec<String> {
        messages
            .iter()
            .map(|m| match m {
                ChatMessage::System { content } => format!("S:{content}"),
                ChatMessage::User { content } => format!("U:{content}"),
                ChatMessage::Assistant { content, .. } => format!("A:{}", content.clone().unwrap_or_default()),
                ChatMessage::Tool { content, .. } => format!("T:{content}"),
            })
            .collect()
    }

    #[test]
    fn history_is_trimmed_oldest_first_to_the_budget() {
        // system "sys" (3) + input "now" (3) = 6 fixed.
        let cases: &[(usize, &[&str], &[&str], usize)] = &[
            (
                100,
                &["aaaa", "bbbb", "cccc"],
                &["S:sys", "U:aaaa", "A:bbbb", "U:cccc", "U:now"],
                0,
            ),
            (
                14,
                &["aaaa", "bbbb", "cccc"],
                &["S:sys", "A:bbbb", "U:cccc", "U:now"],
                1,
            ),
            (13, &["aaaa", "bbbb", "cccc"], &["S:sys", "U:cccc", "U:now"], 2),
            (6, &["aaaa", "bbbb", "cccc"], &["S:sys", "U:now"], 3),
            // Over budget with the fixed parts alone: they are still sent whole.
            (2, &["aaaa"], &["S:sys", "U:now"], 1),
            // A long old entry stops the walk: nothing older than it is kept either.
            (
                16,
                &["a", "bbbbbbbbbbbbbbbbbbbbbbbbbb", "cc"],
                &["S:sys", "U:cc", "U:now"],
                2,
            ),
        ];
        for (budget, texts, expected, dropped) in cases {
            let history = history(texts);
            let (messages, accounting) = assemble_prompt(&PromptParts {
                system_prompt: "sys",
                sections: &[],
                history: &history,
                input: Some("now"),
                budget_chars: *budget,
            });
            assert_eq!(contents(&messages), *expected, "budget {budget}");
            assert_eq!(accounting.history_dropped, *dropped, "budget {budget}");
            assert_eq!(accounting.history_kept + accounting.history_dropped, texts.len());
        }
    }

    #[test]
    fn sections_join_the_system_prompt_and_are_accounted() {
        let sections = vec![
            PromptSection {
                label: "catalog".into(),
                text: "skills: a, b\n".into(),
            },
            PromptSection {
                label: "empty".into(),
                text: "  ".into(),
            },
            PromptSection {
                label: "active".into(),
                text: "<skill>x</skill>".into(),
            },
        ];
        let (messages, accounting) = assemble_prompt(&PromptParts {
            system_prompt: "You are Herald.\n",
            sections: &sections,
            history: &[],
            input: None,
            budget_chars: 1000,
        });
        assert_eq!(
            contents(&messages),
            vec!["S:You are Herald.\n\nskills: a, b\n\n<skill>x</skill>"]
        );
        assert_eq!(accounting.sections, vec![("catalog".into(), 12), ("active".into(), 16)]);
        assert_eq!(accounting.system_prompt_chars, 15);
        assert_eq!(accounting.total_chars, 15 + 2 + 12 + 2 + 16);
    }

    #[test]
    fn budget_counts_characters_not_bytes() {
        let history = history(&["ééééé"]);
        let (messages, _) = assemble_prompt(&PromptParts {
            system_prompt: "s",
            sections: &[],
            history: &history,
            input: Some("ü"),
            budget_chars: 7,
        });
        assert_eq!(messages.len(), 3);
    }
}
