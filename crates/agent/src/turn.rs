//! One turn of the agent: from a prepared prompt to a final text, calling
//! tools as the model asks, within the iteration limit and the loop guard.
//!
//! A turn does no storage and sends nothing itself; the worker records and
//! delivers what the turn returns. Tools may send (through the toolbox), and
//! the turn reports what they delivered so the worker does not repeat it.

use std::collections::HashMap;

use futures::future::join_all;
use herald_core::{ChatMessage, ChatModel, ChatRequest, HistoryEntry, LlmError, ToolCall, Toolbox, TurnScope};
use tracing::{debug, warn};

use crate::config::TurnLimits;
use crate::prompt::{PromptAccounting, PromptParts, assemble_prompt};

pub struct TurnRequest<'a> {
    pub scope: &'a TurnScope,
    pub system_prompt: &'a str,
    pub history: &'a [HistoryEntry],
    /// What the user typed, or the instruction of a scheduled task.
    pub input: Option<&'a str>,
    pub limits: TurnLimits,
    pub max_identical_calls: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnOutcome {
    /// The final answer; empty when the model had nothing to add.
    pub text: String,
    /// Notices for the user from turn preparation, sent before the reply.
    pub notices: Vec<String>,
    /// Texts tools already delivered to this conversation.
    pub delivered_by_tools: Vec<String>,
    pub accounting: PromptAccounting,
    pub model_calls: u32,
    pub tool_calls: u32,
    /// Whether the answer came from the toolbox (a chat command), not the model.
    pub direct: bool,
}

impl TurnOutcome {
    /// The text still to send: empty when it is blank or a tool already sent it.
    pub fn reply_to_send(&self) -> Option<&str> {
        let text = self.text.trim();
        if text.is_empty() || self.delivered_by_tools.iter().any(|sent| sent.trim() == text) {
            None
        } else {
            Some(&self.text)
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    #[error(transparent)]
    Model(#[from] LlmError),
}

impl TurnError {
    /// Whether another attempt of the whole turn cannot do better. The model
    /// client has retried transient errors already.
    pub fn retry_class_fatal(&self) -> bool {
        match self {
            TurnError::Model(err) => err.retry_class() == herald_core::RetryClass::Fatal,
        }
    }
}

pub async fn run_turn(
    model: &dyn ChatModel,
    toolbox: &dyn Toolbox,
    request: TurnRequest<'_>,
) -> Result<TurnOutcome, TurnError> {
    let preparation = toolbox.prepare(request.scope, request.input).await;
    if let Some(text) = preparation.direct_reply {
        return Ok(TurnOutcome {
            text,
            notices: preparation.notices,
            delivered_by_tools: Vec::new(),
            accounting: PromptAccounting::default(),
            model_calls: 0,
            tool_calls: 0,
            direct: true,
        });
    }
    let input = preparation.model_input.as_deref().or(request.input);
    let (mut messages, mut accounting) = assemble_prompt(&PromptParts {
        system_prompt: request.system_prompt,
        sections: &preparation.sections,
        history: request.history,
        input,
        budget_chars: request.limits.context_chars,
    });
    accounting.tools = preparation.tools.iter().map(|t| t.name.clone()).collect();

    let mut tools = preparation.tools;
    let mut outcome = TurnOutcome {
        text: String::new(),
        notices: preparation.notices,
        delivered_by_tools: Vec::new(),
        accounting,
        model_calls: 0,
        tool_calls: 0,
        direct: false,
    };
    let mut seen_calls: HashMap<(String, String), u32> = HashMap::new();
    let mut tool_rounds = 0u32;
    loop {
        let response = model
            .complete(ChatRequest {
                messages: messages.clone(),
                tools: tools.clone(),
            })
            .await?;
        outcome.model_calls += 1;
        if response.tool_calls.is_empty() {
            outcome.text = response.content.unwrap_or_default();
            return Ok(outcome);
        }
        if tools.is_empty() {
            // Tool use was over, or never offered, and the model asked for
            // tools anyway (some servers ignore an empty tool list): nothing
            // runs, and what text there is becomes the answer.
            warn!(
                calls = response.tool_calls.len(),
                "model asked for tools that were not offered; ignoring them"
            );
            outcome.text = response.content.filter(|c| !c.trim().is_empty()).unwrap_or_else(|| {
                "I could not finish this within the limits of one turn. Please ask again, more narrowly.".into()
            });
            return Ok(outcome);
        }
        tool_rounds += 1;
        messages.push(ChatMessage::Assistant {
            content: response.content.filter(|c| !c.is_empty()),
            tool_calls: response.tool_calls.clone(),
        });

        let mut guard_tripped = false;
        let mut runnable: Vec<(usize, &ToolCall, u32)> = Vec::new();
        let mut results: Vec<Option<String>> = vec![None; response.tool_calls.len()];
        for (index, call) in response.tool_calls.iter().enumerate() {
            let seen = seen_calls
                .entry((call.name.clone(), herald_core::json::canonical_text(&call.arguments)))
                .or_default();
            *seen += 1;
            let budget = toolbox.repeat_budget(&call.name, request.max_identical_calls);
            if *seen > budget {
                warn!(tool = %call.name, "loop guard refused a repeated identical tool call");
                guard_tripped = true;
                results[index] = Some(format!(
                    "error: `{}` was already called {} times with these arguments in this turn; \
                     use the earlier results and answer the user",
                    call.name, budget
                ));
            } else {
                runnable.push((index, call, *seen));
            }
        }
        outcome.tool_calls += runnable.len() as u32;
        let parallel = runnable.len() > 1 && runnable.iter().all(|(_, call, _)| toolbox.parallel_safe(&call.name));
        let outputs = if parallel {
            join_all(
                runnable
                    .iter()
                    .map(|(_, call, occurrence)| toolbox.invoke(request.scope, call, *occurrence)),
            )
            .await
        } else {
            let mut outputs = Vec::with_capacity(runnable.len());
            for (_, call, occurrence) in &runnable {
                outputs.push(toolbox.invoke(request.scope, call, *occurrence).await);
            }
            outputs
        };
        for ((index, call, _), output) in runnable.iter().zip(outputs) {
            debug!(tool = %call.name, is_error = output.is_error, "tool call finished");
            if let Some(sent) = output.delivered_to_conversation {
                outcome.delivered_by_tools.push(sent);
            }
            results[*index] = Some(if output.is_error {
                format!("error: {}", output.content)
            } else {
                output.content
            });
        }
        for (call, result) in response.tool_calls.iter().zip(results) {
            messages.push(ChatMessage::Tool {
                tool_call_id: call.id.clone(),
                content: result.unwrap_or_default(),
            });
        }

        // Out of tool rounds, or the model keeps repeating itself: one last
        // call without tools demands a final answer.
        if tool_rounds >= request.limits.max_tool_iterations || guard_tripped {
            tools = Vec::new();
            messages.push(ChatMessage::system(
                "Tool use is over for this turn. Answer the user now with what you have.",
            ));
        }
    }
}
