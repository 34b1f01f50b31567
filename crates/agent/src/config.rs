//! The agent's configuration: the `agent:` section of herald.yaml, plus the
//! limits the binary takes from the `llm:` section.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentConfig {
    /// The first thing in every prompt; never trimmed.
    pub system_prompt: String,
    /// Turns in flight at once (each a different conversation). Unset: the
    /// binary sizes it from the model's `llm.max_concurrency`, so that what
    /// bounds Herald is what the model endpoint can take.
    pub workers: Option<usize>,
    /// Most history entries loaded for a turn, before trimming to the budget.
    pub history_limit: usize,
    /// How often one identical tool call (same name and arguments) may run in
    /// a turn before the loop guard refuses it.
    pub max_identical_calls: u32,
    /// How long a shutdown waits for turns in flight.
    #[serde(with = "herald_core::duration::serde")]
    pub drain_timeout: Duration,
    /// Sent when a message could not be handled after every retry.
    pub failure_notice: String,
    /// How a message's files go into the prompt.
    pub attachments: crate::attachments::AttachmentPromptConfig,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            system_prompt: "You are Herald, a helpful assistant.".into(),
            workers: None,
            history_limit: 200,
            max_identical_calls: 2,
            drain_timeout: Duration::from_secs(30),
            failure_notice: "Sorry, I could not handle your message. Please try again later.".into(),
            attachments: Default::default(),
        }
    }
}

/// Per-turn limits that come from the model's configuration.
#[derive(Clone, Debug)]
pub struct TurnLimits {
    /// Model calls that may ask for tools before a final answer is demanded.
    pub max_tool_iterations: u32,
    /// The model's context window, corrected when a server refuses a prompt
    /// as too long. Shared by every turn of the process.
    pub window: Arc<ContextWindow>,
    /// Tokens kept free in the window for the answer (`llm.max_tokens`);
    /// `0` when unset, and then a quarter of the window is kept.
    pub answer_tokens: u32,
    /// An upper bound on the prompt in characters (`llm.context_chars`).
    pub max_prompt_chars: Option<usize>,
}

impl Default for TurnLimits {
    fn default() -> Self {
        Self {
            max_tool_iterations: 8,
            window: Arc::new(ContextWindow::new(32_768)),
            answer_tokens: 1024,
            max_prompt_chars: None,
        }
    }
}

impl TurnLimits {
    /// The tokens a prompt may take now: the window less the answer's room
    /// and a small margin for the template's own tokens, and no more than
    /// `max_prompt_chars` would allow.
    pub fn prompt_tokens(&self) -> usize {
        let window = self.window.tokens() as usize;
        let answer = match self.answer_tokens as usize {
            0 => window / 4,
            tokens => tokens.min(window / 2),
        };
        let margin = (window / 50).max(16);
        let mut budget = window.saturating_sub(answer + margin).max(MIN_PROMPT_TOKENS);
        if let Some(chars) = self.max_prompt_chars {
            budget = budget.min((chars / herald_core::tokens::ASCII_CHARS_PER_TOKEN).max(MIN_PROMPT_TOKENS));
        }
        budget
    }

    /// The prompt budget in characters of mostly-ASCII text, for budgets
    /// kept in characters (the skill registry's caps).
    pub fn prompt_chars(&self) -> usize {
        let chars = herald_core::tokens::chars_for(self.prompt_tokens());
        self.max_prompt_chars.map_or(chars, |max| chars.min(max))
    }
}

/// No prompt budget is smaller than this, whatever the window.
const MIN_PROMPT_TOKENS: usize = 256;

/// A model's context window in tokens. It starts as configured or as the
/// server said, and only ever shrinks: to the window a server names when it
/// refuses a prompt as too long.
#[derive(Debug)]
pub struct ContextWindow {
    tokens: AtomicU32,
}

impl ContextWindow {
    pub fn new(tokens: u32) -> Self {
        Self {
            tokens: AtomicU32::new(tokens.max(1)),
        }
    }

    pub fn tokens(&self) -> u32 {
        self.tokens.load(Ordering::Relaxed)
    }

    /// A server said its window is `tokens`; returns whether that is news.
    pub fn learn(&self, tokens: u32) -> bool {
        let tokens = tokens.max(1);
        self.tokens.fetch_min(tokens, Ordering::Relaxed) > tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(window: u32, answer: u32, chars: Option<usize>) -> TurnLimits {
        TurnLimits {
            window: Arc::new(ContextWindow::new(window)),
            answer_tokens: answer,
            max_prompt_chars: chars,
            ..TurnLimits::default()
        }
    }

    #[test]
    fn the_prompt_gets_the_window_less_the_answer_and_a_margin() {
        for (window, answer, chars, expected) in [
            (4096, 1024, None, 4096 - 1024 - 81),
            (4096, 0, None, 4096 - 1024 - 81),
            // An answer limit larger than half the window keeps half.
            (4096, 8000, None, 4096 - 2048 - 81),
            (128_000, 1024, None, 128_000 - 1024 - 2560),
            (128_000, 1024, Some(30_000), 10_000),
            // Never below the floor, however small the window.
            (300, 1024, None, MIN_PROMPT_TOKENS),
        ] {
            assert_eq!(
                limits(window, answer, chars).prompt_tokens(),
                expected,
                "{window} {answer} {chars:?}"
            );
        }
    }

    #[test]
    fn a_window_only_shrinks() {
        let window = ContextWindow::new(32_768);
        assert!(window.learn(4096));
        assert!(!window.learn(8192));
        assert!(!window.learn(4096));
        assert_eq!(window.tokens(), 4096);
    }
}
