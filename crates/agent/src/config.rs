//! The agent's configuration: the `agent:` section of herald.yaml, plus the
//! limits the binary takes from the `llm:` section.

use std::time::Duration;

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentConfig {
    /// The first thing in every prompt; never trimmed.
    pub system_prompt: String,
    /// Conversations served at once.
    pub workers: usize,
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
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            system_prompt: "You are Herald, a helpful assistant.".into(),
            workers: 4,
            history_limit: 200,
            max_identical_calls: 2,
            drain_timeout: Duration::from_secs(30),
            failure_notice: "Sorry, I could not handle your message. Please try again later.".into(),
        }
    }
}

/// Per-turn limits that come from the model's configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TurnLimits {
    /// Model calls that may ask for tools before a final answer is demanded.
    pub max_tool_iterations: u32,
    /// The context character budget prompt assembly stays within.
    pub context_chars: usize,
}

impl Default for TurnLimits {
    fn default() -> Self {
        Self {
            max_tool_iterations: 8,
            context_chars: 120_000,
        }
    }
}
