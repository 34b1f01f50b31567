//! One tool round: the calls of one model answer, from the loop guard to
//! the messages that carry their results back.
//!
//! The steps are kept apart so each can be tested alone: [`LoopGuard::plan`]
//! (pure) decides which calls run and with which occurrence number,
//! [`dispatch`] runs them (together when every one is parallel-safe), and
//! [`Round::new`] (pure) stitches the results in call order, each capped to
//! its share of the prompt budget. [`fit_rounds`] (pure) shrinks the results
//! of older rounds when a turn's rounds outgrow what the prompt has left.

use std::collections::HashMap;

use futures::future::join_all;
use herald_core::tokens::{self, MESSAGE_OVERHEAD};
use herald_core::{ChatMessage, ToolCall, ToolOutput, Toolbox, TurnScope};

/// The share of the prompt budget one round's results may take together.
const ROUND_SHARE: usize = 4;
/// No result is capped below this many tokens.
const MIN_RESULT_TOKENS: usize = 128;
/// What a result of an older round becomes when the prompt has no room.
const DROPPED_RESULT: &str = "[result left out to fit the model's context; call the tool again if it is needed]";

/// Counts identical calls (same tool, same canonical arguments) in a turn
/// and refuses those over their budget.
#[derive(Debug, Default)]
pub(crate) struct LoopGuard {
    seen: HashMap<(String, String), u32>,
}

/// Which calls of an answer run, and what the refused ones are told.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Plan<'c> {
    /// Index in the answer, the call, its occurrence in the turn.
    pub runnable: Vec<(usize, &'c ToolCall, u32)>,
    /// The result of each refused call, by index.
    pub refused: Vec<(usize, String)>,
}

impl Plan<'_> {
    pub fn guard_tripped(&self) -> bool {
        !self.refused.is_empty()
    }
}

impl LoopGuard {
    /// `budget(tool)` is how often one identical call of `tool` may run.
    pub fn plan<'c>(&mut self, calls: &'c [ToolCall], budget: impl Fn(&str) -> u32) -> Plan<'c> {
        let mut plan = Plan {
            runnable: Vec::new(),
            refused: Vec::new(),
        };
        for (index, call) in calls.iter().enumerate() {
            let seen = self
                .seen
                .entry((call.name.clone(), herald_core::json::canonical_text(&call.arguments)))
                .or_default();
            *seen += 1;
            let allowed = budget(&call.name);
            if *seen > allowed {
                tracing::warn!(tool = %call.name, "loop guard refused a repeated identical tool call");
                plan.refused.push((
                    index,
                    format!(
                        "error: `{}` was already called {allowed} times with these arguments in this turn; \
                         use the earlier results and answer the user",
                        call.name
                    ),
                ));
            } else {
                plan.runnable.push((index, call, *seen));
            }
        }
        plan
    }
}

/// Runs the planned calls: all at once when every one is parallel-safe,
/// else one after the other in the model's order.
pub(crate) async fn dispatch(toolbox: &dyn Toolbox, scope: &TurnScope, plan: &Plan<'_>) -> Vec<ToolOutput> {
    let parallel = plan.runnable.len() > 1
        && plan
            .runnable
            .iter()
            .all(|(_, call, _)| toolbox.parallel_safe(&call.name));
    if parallel {
        return join_all(
            plan.runnable
                .iter()
                .map(|(_, call, occurrence)| toolbox.invoke(scope, call, *occurrence)),
        )
        .await;
    }
    let mut outputs = Vec::with_capacity(plan.runnable.len());
    for (_, call, occurrence) in &plan.runnable {
        outputs.push(toolbox.invoke(scope, call, *occurrence).await);
    }
    outputs
}

/// One model answer that called tools, and the results that answer it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Round {
    pub calls: Vec<ToolCall>,
    pub text: Option<String>,
    /// One per call, in call order.
    pub results: Vec<String>,
}

impl Round {
    /// Stitches the outputs of the runnable calls and the refusals into one
    /// result per call, in call order, each capped so the round's results
    /// take at most a quarter of `budget_tokens`. Returns the round and the
    /// texts tools delivered to the conversation themselves.
    pub fn new(
        calls: Vec<ToolCall>,
        text: Option<String>,
        plan: Plan<'_>,
        outputs: Vec<ToolOutput>,
        budget_tokens: usize,
    ) -> (Self, Vec<String>) {
        let cap = (budget_tokens / ROUND_SHARE / calls.len().max(1)).max(MIN_RESULT_TOKENS);
        let mut results: Vec<Option<String>> = vec![None; calls.len()];
        let mut delivered = Vec::new();
        for ((index, call, _), output) in plan.runnable.iter().zip(outputs) {
            tracing::debug!(tool = %call.name, is_error = output.is_error, "tool call finished");
            delivered.extend(output.delivered_to_conversation);
            let content = if output.is_error {
                format!("error: {}", output.content)
            } else {
                output.content
            };
            results[*index] = Some(cap_result(&content, cap));
        }
        for (index, refusal) in plan.refused {
            results[index] = Some(refusal);
        }
        let round = Round {
            calls,
            text,
            results: results.into_iter().map(Option::unwrap_or_default).collect(),
        };
        (round, delivered)
    }

    fn tokens(&self) -> usize {
        self.messages().iter().map(ChatMessage::tokens).sum()
    }

    /// The assistant message that made the calls, then one tool message each.
    pub fn messages(&self) -> Vec<ChatMessage> {
        let mut messages = Vec::with_capacity(self.calls.len() + 1);
        messages.push(ChatMessage::Assistant {
            content: self.text.clone().filter(|c| !c.is_empty()),
            tool_calls: self.calls.clone(),
        });
        for (call, result) in self.calls.iter().zip(&self.results) {
            messages.push(ChatMessage::Tool {
                tool_call_id: call.id.clone(),
                content: result.clone(),
            });
        }
        messages
    }
}

/// A tool's output within `cap` estimated tokens: its start and its end
/// (where errors and summaries usually are), with a note of what was cut.
pub(crate) fn cap_result(content: &str, cap: usize) -> String {
    if tokens::estimate(content) <= cap {
        return content.to_owned();
    }
    let total = content.chars().count();
    let note_room = 24;
    let room = cap.saturating_sub(note_room);
    let head = tokens::prefix_within(content, room * 2 / 3);
    let tail_budget = room - tokens::estimate(head);
    // The tail: the longest suffix within its budget, on a character boundary.
    let (mut ascii, mut other, mut tail_start) = (0usize, 0usize, content.len());
    for (index, c) in content.char_indices().rev() {
        if index < head.len() {
            break;
        }
        if c.is_ascii() {
            ascii += 1;
        } else {
            other += 1;
        }
        if ascii.div_ceil(tokens::ASCII_CHARS_PER_TOKEN) + other > tail_budget {
            break;
        }
        tail_start = index;
    }
    let tail = &content[tail_start..];
    let cut = total - head.chars().count() - tail.chars().count();
    format!("{head}\n[… {cut} characters cut to fit the model's context …]\n{tail}")
}

/// The turn's rounds as messages within `budget_tokens`: newest rounds
/// whole; the results of older ones replaced by a short note until they fit.
/// The calls themselves stay, so every tool message still answers its call.
pub(crate) fn fit_rounds(rounds: &[Round], budget_tokens: usize) -> Vec<ChatMessage> {
    let mut fitted: Vec<Round> = rounds.to_vec();
    let mut total: usize = fitted.iter().map(Round::tokens).sum();
    for round in fitted.iter_mut() {
        if total <= budget_tokens {
            break;
        }
        let before = round.tokens();
        for result in &mut round.results {
            if tokens::estimate(result) > tokens::estimate(DROPPED_RESULT) {
                *result = DROPPED_RESULT.to_owned();
            }
        }
        total -= before - round.tokens();
    }
    fitted.iter().flat_map(Round::messages).collect()
}

/// Tokens one more message of `text` costs.
pub(crate) fn message_tokens(text: &str) -> usize {
    MESSAGE_OVERHEAD + tokens::estimate(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn the_guard_counts_identical_calls_across_rounds_and_refuses_past_the_budget() {
        let mut guard = LoopGuard::default();
        let first = [
            call("1", "get_weather", r#"{"city":"Oslo"}"#),
            call("2", "get_weather", r#"{ "city" : "Oslo" }"#),
            call("3", "get_weather", r#"{"city":"Rome"}"#),
        ];
        let plan = guard.plan(&first, |_| 2);
        let occurrences: Vec<(usize, u32)> = plan.runnable.iter().map(|(i, _, n)| (*i, *n)).collect();
        assert_eq!(
            occurrences,
            [(0, 1), (1, 2), (2, 1)],
            "the same arguments in another spelling are the same call"
        );
        assert!(!plan.guard_tripped());

        let second = [call("4", "get_weather", r#"{"city":"Oslo"}"#), call("5", "read", "{}")];
        let plan = guard.plan(&second, |tool| if tool == "read" { 6 } else { 2 });
        assert_eq!(plan.runnable.len(), 1);
        assert_eq!(plan.runnable[0].0, 1);
        assert_eq!(plan.refused.len(), 1);
        assert_eq!(plan.refused[0].0, 0);
        assert!(plan.refused[0].1.contains("already called 2 times"));
        assert!(plan.guard_tripped());
    }

    #[test]
    fn results_come_back_in_call_order_capped_with_refusals_in_place() {
        let calls = vec![call("a", "one", "{}"), call("b", "two", "{}"), call("c", "three", "{}")];
        let plan = Plan {
            runnable: vec![(0, &calls[0], 1), (2, &calls[2], 1)],
            refused: vec![(1, "error: refused".into())],
        };
        let huge = "x".repeat(30_000);
        let outputs = vec![
            ToolOutput {
                content: "sent".into(),
                is_error: false,
                delivered_to_conversation: Some("hello".into()),
            },
            ToolOutput::error(huge.clone()),
        ];
        let (round, delivered) = Round::new(calls.clone(), None, plan, outputs, 6000);
        assert_eq!(delivered, ["hello"]);
        assert_eq!(round.results[0], "sent");
        assert_eq!(round.results[1], "error: refused");
        assert!(
            round.results[2].starts_with("error: xxx"),
            "{}",
            &round.results[2][..20]
        );
        // Three calls share a quarter of 6000 tokens: 500 each.
        assert!(
            tokens::estimate(&round.results[2]) <= 500,
            "{}",
            tokens::estimate(&round.results[2])
        );
        assert!(round.results[2].contains("characters cut to fit"));
        let messages = round.messages();
        assert_eq!(messages.len(), 4);
        assert!(matches!(&messages[0], ChatMessage::Assistant { tool_calls, .. } if tool_calls.len() == 3));
    }

    #[test]
    fn a_capped_result_keeps_its_start_and_its_end() {
        let content = format!("BEGIN {} END", "m".repeat(10_000));
        let capped = cap_result(&content, 200);
        assert!(tokens::estimate(&capped) <= 200, "{}", tokens::estimate(&capped));
        assert!(capped.starts_with("BEGIN ") && capped.ends_with(" END"), "{capped}");
        assert_eq!(cap_result("short", 200), "short");
        let wide = "日本語".repeat(1000);
        let capped = cap_result(&wide, 150);
        assert!(tokens::estimate(&capped) <= 150);
        assert!(capped.starts_with('日') && capped.ends_with('語'));
    }

    #[test]
    fn older_results_make_room_first_and_every_call_keeps_its_answer() {
        let round = |id: &str, size: usize| Round {
            calls: vec![call(id, "read", "{}")],
            text: None,
            results: vec!["r".repeat(size)],
        };
        let rounds = vec![round("old", 3000), round("new", 3000)];
        let whole: usize = rounds.iter().map(Round::tokens).sum();
        assert_eq!(fit_rounds(&rounds, whole).len(), 4);
        let fitted = fit_rounds(&rounds, whole - 10);
        let results: Vec<&str> = fitted
            .iter()
            .filter_map(|m| match m {
                ChatMessage::Tool { content, .. } => Some(content.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(results[0], DROPPED_RESULT);
        assert_eq!(results[1].len(), 3000, "the newest round stays whole");
        assert_eq!(fitted.len(), 4, "calls and results stay paired");
    }
}
