//! Prompt assembly: pure, so every budgeting rule is tested without a model.
//!
//! Budgets are in estimated tokens ([`herald_core::tokens`]), and everything
//! the server will count is counted: the system prompt, the toolbox's
//! sections (skill catalog, active skill instructions), the tool schemas,
//! history, the current input, and each message's framing.
//!
//! Order: the system prompt, then the sections, then as much history as fits
//! (newest kept), then the current input. The system prompt and the
//! sections are never dropped. History is walked newest first and each entry
//! is kept whole or cut down to its share, so one long old message cannot
//! push out everything before it, nor one long new one everything else. The
//! input is cut only when it alone would not fit.

use herald_core::tokens::{self, MESSAGE_OVERHEAD};
use herald_core::{ChatMessage, HistoryEntry, ImagePart, PromptSection, Role, ToolSpec};
use serde::{Deserialize, Serialize};

/// How a prompt was built: what `herald explain` prints.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PromptAccounting {
    /// The model's context window when the prompt was built.
    pub window_tokens: usize,
    /// What the prompt could take: the window less the answer's room.
    pub budget_tokens: usize,
    pub system_prompt_tokens: usize,
    /// Estimated tokens per toolbox section, by label.
    pub sections: Vec<(String, usize)>,
    pub tools: Vec<String>,
    /// The tool schemas as sent.
    pub tool_schema_tokens: usize,
    pub history_kept: usize,
    pub history_dropped: usize,
    /// Entries kept but cut down to fit.
    pub history_cut: usize,
    pub history_tokens: usize,
    pub input_tokens: usize,
    /// Whether the input itself had to be cut.
    pub input_cut: bool,
    /// Images sent as image parts with the input.
    pub image_parts: usize,
    /// Voice notes and audio files whose transcript is the input's text.
    pub transcripts: usize,
    /// Everything above, framing included.
    pub total_tokens: usize,
    /// The characters of the messages sent, for comparison with the tokens.
    pub total_chars: usize,
    /// Times the prompt was built again smaller because the server said it
    /// did not fit.
    pub shrunk: u32,
    /// Whether an empty answer was asked for again without tool calls.
    pub empty_answer_retried: bool,
}

pub struct PromptParts<'a> {
    pub system_prompt: &'a str,
    pub sections: &'a [PromptSection],
    pub tools: &'a [ToolSpec],
    pub history: &'a [HistoryEntry],
    pub input: Option<&'a str>,
    /// This turn's attachments for the model alone: images, and the text
    /// of documents (appended to the input, cut with it).
    pub attachments: Option<&'a TurnAttachments>,
    pub budget_tokens: usize,
}

/// What a message's files add to its turn's model calls, and nothing else
/// (history keeps the input's reference lines only).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TurnAttachments {
    pub images: Vec<ImagePart>,
    pub documents: String,
}

/// Entries shorter than this are never cut, and no entry is cut shorter.
const MIN_ENTRY_TOKENS: usize = 64;

/// Appended where a text was cut to fit.
pub const CUT_MARKER: &str = "\n[… cut to fit the model's context]";

/// How many of the newest entries (sizes newest first) fit in `budget`, and
/// the cap each is cut to (`usize::MAX` when none is cut): the most entries
/// that fit with a cap of at least [`MIN_ENTRY_TOKENS`], then the largest
/// cap that fits them.
fn history_fit(sizes: &[usize], budget: usize) -> (usize, usize) {
    let within = |count: usize, cap: usize| sizes[..count].iter().map(|s| (*s).min(cap)).sum::<usize>() <= budget;
    for count in (1..=sizes.len()).rev() {
        if within(count, usize::MAX) {
            return (count, usize::MAX);
        }
        if !within(count, MIN_ENTRY_TOKENS) {
            continue;
        }
        let (mut low, mut high) = (MIN_ENTRY_TOKENS, sizes[..count].iter().copied().max().unwrap_or(0));
        while low < high {
            let middle = low + (high - low).div_ceil(2);
            if within(count, middle) {
                low = middle;
            } else {
                high = middle - 1;
            }
        }
        return (count, low);
    }
    (0, usize::MAX)
}

/// The estimated tokens of the tool schemas as they go on the wire.
pub fn tool_tokens(tools: &[ToolSpec]) -> usize {
    tools
        .iter()
        .map(|tool| {
            MESSAGE_OVERHEAD
                + tokens::estimate(&tool.name)
                + tokens::estimate(&tool.description)
                + tokens::estimate(&tool.parameters.to_string())
        })
        .sum()
}

/// `text` cut to at most `budget` estimated tokens, marker included.
pub fn cut_to(text: &str, budget: usize) -> String {
    if tokens::estimate(text) <= budget {
        return text.to_owned();
    }
    let room = budget.saturating_sub(tokens::estimate(CUT_MARKER));
    let mut cut = tokens::prefix_within(text, room).to_owned();
    cut.push_str(CUT_MARKER);
    cut
}

/// Builds the messages for a model call and accounts for every token.
pub fn assemble_prompt(parts: &PromptParts<'_>) -> (Vec<ChatMessage>, PromptAccounting) {
    let mut system = parts.system_prompt.trim_end().to_owned();
    let mut sections = Vec::with_capacity(parts.sections.len());
    for section in parts.sections.iter().filter(|s| !s.text.trim().is_empty()) {
        system.push_str("\n\n");
        system.push_str(section.text.trim_end());
        sections.push((section.label.clone(), tokens::estimate(section.text.trim_end())));
    }
    let system_tokens = MESSAGE_OVERHEAD + tokens::estimate(&system);
    let tool_schema_tokens = tool_tokens(parts.tools);

    // The input may take what the fixed parts leave, and at least a quarter
    // of the budget: a prompt that cannot fit anyway is refused by the
    // server and shrunk by the turn.
    let fixed = system_tokens + tool_schema_tokens;
    let input_room = parts
        .budget_tokens
        .saturating_sub(fixed + MESSAGE_OVERHEAD)
        .max(parts.budget_tokens / 4);
    let images = parts.attachments.map_or(&[][..], |a| &a.images[..]);
    let image_tokens = images.len() * tokens::IMAGE_TOKENS;
    let with_documents = match (parts.input, parts.attachments) {
        (Some(text), Some(attachments)) if !attachments.documents.is_empty() => {
            Some(format!("{text}{}", attachments.documents))
        }
        (input, _) => input.map(str::to_owned),
    };
    let input = with_documents
        .as_deref()
        .map(|text| cut_to(text, input_room.saturating_sub(image_tokens)));
    let input_cut = match (with_documents.as_deref(), &input) {
        (Some(original), Some(sent)) => original.len() != sent.len(),
        _ => false,
    };
    let input_tokens = input
        .as_deref()
        .map_or(0, |text| MESSAGE_OVERHEAD + tokens::estimate(text) + image_tokens);

    // History: as many of the newest entries as can be kept, each whole or
    // cut to a common cap, so short entries stay whole and long ones share
    // what is left.
    let history_budget = parts.budget_tokens.saturating_sub(fixed + input_tokens);
    let sizes: Vec<usize> = parts
        .history
        .iter()
        .rev()
        .map(|entry| MESSAGE_OVERHEAD + tokens::estimate(&entry.text))
        .collect();
    let (count, cap) = history_fit(&sizes, history_budget);
    let mut kept: Vec<(Role, String)> = Vec::with_capacity(count);
    let mut history_cut = 0;
    let mut history_tokens = 0;
    for (entry, size) in parts.history.iter().rev().zip(&sizes).take(count) {
        let text = if *size > cap {
            history_cut += 1;
            cut_to(&entry.text, cap - MESSAGE_OVERHEAD)
        } else {
            entry.text.clone()
        };
        history_tokens += MESSAGE_OVERHEAD + tokens::estimate(&text);
        kept.push((entry.role, text));
    }
    kept.reverse();

    let mut messages = Vec::with_capacity(kept.len() + 2);
    messages.push(ChatMessage::system(system));
    for (role, text) in &kept {
        messages.push(match role {
            Role::User => ChatMessage::user(text.clone()),
            Role::Assistant => ChatMessage::assistant(text.clone()),
        });
    }
    if let Some(input) = input {
        messages.push(ChatMessage::User {
            content: input,
            images: images.to_vec(),
        });
    }

    let accounting = PromptAccounting {
        budget_tokens: parts.budget_tokens,
        system_prompt_tokens: tokens::estimate(parts.system_prompt.trim_end()),
        sections,
        tools: parts.tools.iter().map(|t| t.name.clone()).collect(),
        tool_schema_tokens,
        history_kept: kept.len(),
        history_dropped: parts.history.len() - kept.len(),
        history_cut,
        history_tokens,
        input_tokens,
        input_cut,
        image_parts: images.len(),
        total_tokens: fixed + history_tokens + input_tokens,
        total_chars: messages.iter().map(ChatMessage::chars).sum(),
        ..PromptAccounting::default()
    };
    (messages, accounting)
}

#[cfg(test)]
mod tests {
    use herald_core::time::from_millis;
    use serde_json::json;

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
                ChatMessage::User { content, .. } => format!("U:{content}"),
                ChatMessage::Assistant { content, .. } => format!("A:{}", content.clone().unwrap_or_default()),
                ChatMessage::Tool { content, .. } => format!("T:{content}"),
            })
            .collect()
    }

    fn assemble(budget: usize, texts: &[&str], input: &str) -> (Vec<String>, PromptAccounting) {
        let history = history(texts);
        let (messages, accounting) = assemble_prompt(&PromptParts {
            system_prompt: "sys",
            sections: &[],
            tools: &[],
            history: &history,
            input: Some(input),
            attachments: None,
            budget_tokens: budget,
        });
        (contents(&messages), accounting)
    }

    /// `n` tokens of text: three ASCII characters make one.
    fn words(n: usize) -> String {
        "abc".repeat(n)
    }

    #[test]
    fn history_that_fits_is_sent_whole() {
        // system 4+1, input 4+1; each short entry 4+2.
        let (sent, accounting) = assemble(1000, &["aaaa", "bbbb", "cccc"], "now");
        assert_eq!(sent, ["S:sys", "U:aaaa", "A:bbbb", "U:cccc", "U:now"]);
        assert_eq!(
            (
                accounting.history_kept,
                accounting.history_dropped,
                accounting.history_cut
            ),
            (3, 0, 0)
        );
        assert_eq!(accounting.total_tokens, 5 + 5 + 3 * 6);
    }

    #[test]
    fn the_oldest_entries_go_first_and_the_rest_share_what_is_left() {
        let texts: Vec<String> = (0..5).map(|i| format!("{i}{}", words(100))).collect();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        // Fixed parts take 10; 200 are left for five entries of 105 each:
        // three fit when cut to a common 66.
        let (sent, accounting) = assemble(210, &texts, "now");
        assert_eq!(
            (
                accounting.history_kept,
                accounting.history_dropped,
                accounting.history_cut
            ),
            (3, 2, 3)
        );
        assert_eq!(sent.len(), 5, "{sent:?}");
        for (message, index) in sent[1..4].iter().zip(2..) {
            assert!(
                message[2..].starts_with(&index.to_string()),
                "newest kept, in order: {message}"
            );
            assert!(message.ends_with(CUT_MARKER), "{message}");
        }
        assert!(accounting.total_tokens <= 210, "{accounting:?}");
    }

    #[test]
    fn one_long_entry_is_cut_instead_of_hiding_everything_before_it() {
        let huge = words(5000);
        let (sent, accounting) = assemble(1000, &["first", &huge, "third"], "now");
        assert_eq!(sent.len(), 5, "the entry before the long one is kept too: {sent:?}");
        assert_eq!(sent[1], "U:first");
        assert!(sent[2].ends_with(CUT_MARKER));
        assert_eq!(sent[3], "U:third");
        assert_eq!(accounting.history_cut, 1);
        assert!(accounting.total_tokens <= 1000, "{accounting:?}");
        assert!(
            accounting.total_tokens >= 990,
            "what is left goes to the long entry: {accounting:?}"
        );
    }

    #[test]
    fn history_fits_the_most_entries_then_the_largest_cap() {
        for (sizes, budget, expected) in [
            (vec![], 100, (0, usize::MAX)),
            (vec![10, 10, 10], 30, (3, usize::MAX)),
            (vec![10, 500, 10], 200, (3, 180)),
            (vec![100, 100, 100], 200, (3, 66)),
            (vec![100, 100, 100, 100], 200, (3, 66)),
            (vec![100], 63, (0, usize::MAX)),
            (vec![100], 64, (1, 64)),
        ] {
            assert_eq!(history_fit(&sizes, budget), expected, "{sizes:?} in {budget}");
        }
    }

    #[test]
    fn an_input_that_alone_is_too_long_is_cut() {
        let huge = words(5000);
        let (sent, accounting) = assemble(400, &["old"], &huge);
        assert!(sent.last().unwrap().ends_with(CUT_MARKER));
        assert!(accounting.input_cut);
        assert!(accounting.total_tokens <= 400, "{accounting:?}");
    }

    #[test]
    fn sections_and_tool_schemas_count_against_the_budget() {
        let sections = vec![
            PromptSection {
                label: "catalog".into(),
                text: "skills: a, b\n".into(),
            },
            PromptSection {
                label: "empty".into(),
                text: "  ".into(),
            },
        ];
        let tools = vec![ToolSpec {
            name: "send_message".into(),
            description: "Send a message".into(),
            parameters: json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        }];
        let history = history(&["aaaa"]);
        let (messages, accounting) = assemble_prompt(&PromptParts {
            system_prompt: "You are Herald.\n",
            sections: &sections,
            tools: &tools,
            history: &history,
            input: None,
            attachments: None,
            budget_tokens: 1000,
        });
        assert_eq!(contents(&messages), vec!["S:You are Herald.\n\nskills: a, b", "U:aaaa"]);
        assert_eq!(accounting.sections, vec![("catalog".into(), 4)]);
        assert_eq!(accounting.tools, vec!["send_message"]);
        assert_eq!(accounting.tool_schema_tokens, tool_tokens(&tools));
        assert!(accounting.tool_schema_tokens > 20, "{accounting:?}");
        assert_eq!(
            accounting.total_tokens,
            4 + 10 + accounting.tool_schema_tokens + 6,
            "system, tools and history are all counted"
        );
        // With room for the tools and the system prompt only, history goes.
        let (_, tight) = assemble_prompt(&PromptParts {
            system_prompt: "You are Herald.\n",
            sections: &sections,
            tools: &tools,
            history: &history,
            input: None,
            attachments: None,
            budget_tokens: 14 + accounting.tool_schema_tokens,
        });
        assert_eq!(tight.history_dropped, 1);
    }

    #[test]
    fn non_ascii_text_counts_one_token_a_character() {
        let history = history(&["日本語のテキスト"]);
        let (messages, accounting) = assemble_prompt(&PromptParts {
            system_prompt: "s",
            sections: &[],
            tools: &[],
            history: &history,
            input: Some("ü"),
            attachments: None,
            budget_tokens: 1000,
        });
        assert_eq!(messages.len(), 3);
        assert_eq!(accounting.history_tokens, 4 + 8);
    }
}
