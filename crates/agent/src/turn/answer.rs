//! What a model's answer asks the turn to do next: pure rules, table-tested.
//!
//! Real servers answer in ways OpenAI does not. Offered tools with automatic
//! choice, llama.cpp-family servers let the model emit a call or end its
//! message, so a text answer comes back empty; the turn then asks once more
//! with tool calls off, and if that is empty too the user is told plainly,
//! never sent (or stored) an empty reply. An answer cut at the length limit
//! is delivered with a note saying so.

use herald_core::{ChatResponse, ToolCall};

/// What the user is told when the model had nothing to say, even asked again.
pub const EMPTY_ANSWER: &str = "The model returned an empty answer. Please try again, or ask in other words.";

/// Appended to an answer the model stopped at its length limit.
pub const CUT_NOTE: &str = "\n\n[The answer was cut off at the length limit.]";

/// Used when tool use had to end and the model still only wanted tools.
pub const OUT_OF_ROUNDS: &str =
    "I could not finish this within the limits of one turn. Please ask again, more narrowly.";

/// The next step of a turn after one answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// The final text.
    Answer(String),
    /// Empty, with tools offered: ask again with tool calls off.
    AskWithoutCalls,
    /// Run these calls and ask again.
    Tools(Vec<ToolCall>),
}

/// Reads one answer. `tools_offered`: the request offered tools and let the
/// model call them; `retried_empty`: this answer is the second try after an
/// empty one; `silence_ok`: an empty answer means there is nothing (more)
/// to say — tools already spoke in this turn, or it is a heartbeat, whose
/// silence means all is well.
pub(crate) fn next_step(response: ChatResponse, tools_offered: bool, retried_empty: bool, silence_ok: bool) -> Next {
    let cut = response.finish_reason.as_deref() == Some("length");
    let text = response.content.unwrap_or_default();
    let has_text = !text.trim().is_empty();
    if !response.tool_calls.is_empty() {
        if tools_offered {
            return Next::Tools(response.tool_calls);
        }
        // Tool use was over, or never offered, and the model asked for tools
        // anyway (some servers ignore an empty tool list): nothing runs, and
        // what text there is becomes the answer.
        tracing::warn!(
            calls = response.tool_calls.len(),
            "model asked for tools that were not offered; ignoring them"
        );
        return Next::Answer(if has_text { text } else { OUT_OF_ROUNDS.to_owned() });
    }
    if !has_text && silence_ok {
        return Next::Answer(String::new());
    }
    match (has_text, tools_offered && !retried_empty) {
        (true, _) if cut => Next::Answer(format!("{}{CUT_NOTE}", text.trim_end())),
        (true, _) => Next::Answer(text),
        (false, true) => Next::AskWithoutCalls,
        (false, false) => Next::Answer(EMPTY_ANSWER.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(content: Option<&str>, calls: usize, finish: &str) -> ChatResponse {
        ChatResponse {
            content: content.map(str::to_owned),
            tool_calls: (0..calls)
                .map(|i| ToolCall {
                    id: format!("call_{i}"),
                    name: "f".into(),
                    arguments: "{}".into(),
                })
                .collect(),
            finish_reason: Some(finish.into()),
            usage: None,
        }
    }

    #[test]
    fn each_answer_leads_to_one_next_step() {
        let cases = [
            (
                answer(Some("Hello."), 0, "stop"),
                true,
                false,
                Next::Answer("Hello.".into()),
            ),
            (
                answer(Some("Hello."), 0, "stop"),
                false,
                false,
                Next::Answer("Hello.".into()),
            ),
            // Empty with tools on offer: ask again once with calls off.
            (answer(Some(""), 0, "stop"), true, false, Next::AskWithoutCalls),
            (answer(None, 0, "stop"), true, false, Next::AskWithoutCalls),
            (answer(Some("  \n"), 0, "stop"), true, false, Next::AskWithoutCalls),
            // Still empty, or no tools to blame: say so plainly.
            (
                answer(Some(""), 0, "stop"),
                true,
                true,
                Next::Answer(EMPTY_ANSWER.into()),
            ),
            (answer(None, 0, "stop"), false, false, Next::Answer(EMPTY_ANSWER.into())),
            // Cut at the length limit: delivered with a note.
            (
                answer(Some("A long story "), 0, "length"),
                true,
                false,
                Next::Answer(format!("A long story{CUT_NOTE}")),
            ),
            (
                answer(Some(""), 0, "length"),
                false,
                false,
                Next::Answer(EMPTY_ANSWER.into()),
            ),
            // Calls run only when tools were offered.
            (
                answer(None, 2, "tool_calls"),
                true,
                false,
                Next::Tools(answer(None, 2, "").tool_calls),
            ),
            (
                answer(Some("Sunny."), 1, "tool_calls"),
                false,
                false,
                Next::Answer("Sunny.".into()),
            ),
            (
                answer(None, 1, "tool_calls"),
                false,
                true,
                Next::Answer(OUT_OF_ROUNDS.into()),
            ),
        ];
        for (response, offered, retried, expected) in cases {
            let label = format!("{response:?} offered={offered} retried={retried}");
            assert_eq!(next_step(response, offered, retried, false), expected, "{label}");
        }
    }

    #[test]
    fn nothing_more_to_say_after_tools_spoke_is_not_an_empty_answer() {
        assert_eq!(
            next_step(answer(Some(""), 0, "stop"), true, false, true),
            Next::Answer(String::new())
        );
        assert_eq!(
            next_step(answer(Some("Done."), 0, "stop"), true, false, true),
            Next::Answer("Done.".into())
        );
    }
}
