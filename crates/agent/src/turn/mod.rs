//! One turn of the agent: from a prepared prompt to a final text, calling
//! tools as the model asks, within the iteration limit, the loop guard and
//! the context window.
//!
//! A turn does no storage and sends nothing itself; the worker records and
//! delivers what the turn returns. Tools may send (through the toolbox), and
//! the turn reports what they delivered so the worker does not repeat it.
//!
//! The turn keeps what it was given (sections, tools, history, input) and
//! the tool rounds so far apart, and composes the messages for each model
//! call from them within the prompt budget. So when a server refuses a
//! prompt as longer than its window, the turn composes it again smaller —
//! a tighter budget, then without history — instead of failing the message,
//! and it learns the window the server named for every later turn.

mod answer;
mod round;

use herald_core::{
    ChatMessage, ChatModel, ChatRequest, HistoryEntry, LlmError, PromptSection, ToolChoice, ToolSpec, Toolbox,
    TurnScope,
};
use tracing::{info, warn};

pub use self::answer::{CUT_NOTE, EMPTY_ANSWER, OUT_OF_ROUNDS};
use self::answer::{Next, next_step};
use self::round::{LoopGuard, Round, dispatch, fit_rounds, message_tokens};
use crate::config::TurnLimits;
use crate::prompt::{PromptAccounting, PromptParts, TurnAttachments, assemble_prompt};

pub struct TurnRequest<'a> {
    pub scope: &'a TurnScope,
    pub system_prompt: &'a str,
    pub history: &'a [HistoryEntry],
    /// What the user typed, or the instruction of a scheduled task.
    pub input: Option<&'a str>,
    pub limits: &'a TurnLimits,
    pub max_identical_calls: u32,
    /// The message's images and document text, for the model only.
    pub attachments: Option<&'a TurnAttachments>,
    /// The conversation's value of the toolbox's
    /// [`Toolbox::conversation_state_scope`], when it was read with the
    /// history (inside: `None` when none is stored).
    pub toolbox_state: Option<Option<serde_json::Value>>,
    /// Told the answer's text while the model writes it (streaming into
    /// place); [`herald_core::NoText`] when nobody watches.
    pub text: &'a dyn herald_core::TextSink,
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

/// What the user is told when even the smallest prompt does not fit.
pub const TOO_LONG: &str = "This is too long for the model's context window, even shortened. \
                            Please send a shorter message.";

/// How often a prompt is composed again smaller after the server refused it:
/// half the budget, then without history, then a quarter without history.
const MAX_SHRINKS: u32 = 3;

/// Said to the model when tool use is over for the turn.
const TOOLS_OVER: &str = "Tool use is over for this turn. Answer the user now with what you have.";

pub async fn run_turn(
    model: &dyn ChatModel,
    toolbox: &dyn Toolbox,
    request: TurnRequest<'_>,
) -> Result<TurnOutcome, TurnError> {
    let preparation = match &request.toolbox_state {
        Some(state) => toolbox.prepare_with(request.scope, request.input, state.clone()).await,
        None => toolbox.prepare(request.scope, request.input).await,
    };
    let mut outcome = TurnOutcome {
        text: String::new(),
        notices: preparation.notices,
        delivered_by_tools: Vec::new(),
        accounting: PromptAccounting::default(),
        model_calls: 0,
        tool_calls: 0,
        direct: false,
    };
    if let Some(text) = preparation.direct_reply {
        outcome.text = text;
        outcome.direct = true;
        return Ok(outcome);
    }
    let mut turn = Turn {
        request: &request,
        sections: preparation.sections,
        input: preparation.model_input.or(request.input.map(str::to_owned)),
        tools: preparation.tools,
        tool_choice: ToolChoice::Auto,
        tools_over: false,
        rounds: Vec::new(),
        shrinks: 0,
    };
    let mut guard = LoopGuard::default();
    let mut retried_empty = false;
    loop {
        let Some(response) = turn.ask(model, &mut outcome).await? else {
            outcome.text = TOO_LONG.to_owned();
            return Ok(outcome);
        };
        let offered = !turn.tools.is_empty() && turn.tool_choice == ToolChoice::Auto;
        let silence_ok = !outcome.delivered_by_tools.is_empty() || request.scope.origin.quiet_limit().is_some();
        match next_step(response, offered, retried_empty, silence_ok) {
            Next::Answer(text) => {
                outcome.text = text;
                return Ok(outcome);
            }
            Next::AskWithoutCalls => {
                info!("the model answered nothing with tools on offer; asking again with tool calls off");
                retried_empty = true;
                outcome.accounting.empty_answer_retried = true;
                turn.tool_choice = ToolChoice::None;
            }
            Next::Tools(calls) => {
                request.text.tool_round();
                let plan = guard.plan(&calls, |tool| toolbox.repeat_budget(tool, request.max_identical_calls));
                let tripped = plan.guard_tripped();
                outcome.tool_calls += plan.runnable.len() as u32;
                let outputs = dispatch(toolbox, request.scope, &plan).await;
                let budget = request.limits.prompt_tokens();
                let (round, delivered) = Round::new(calls.clone(), None, plan, outputs, budget);
                outcome.delivered_by_tools.extend(delivered);
                turn.rounds.push(round);
                // Out of tool rounds, or the model keeps repeating itself:
                // one last call without tools demands a final answer.
                if turn.rounds.len() as u32 >= request.limits.max_tool_iterations || tripped {
                    turn.tools = Vec::new();
                    turn.tools_over = true;
                } else {
                    let called: Vec<String> = calls.iter().map(|call| call.name.clone()).collect();
                    if let Some(tools) = toolbox.tools_after_round(request.scope, &called).await {
                        turn.tools = tools;
                    }
                }
            }
        }
    }
}

/// What a turn has to compose each model call from.
struct Turn<'r> {
    request: &'r TurnRequest<'r>,
    sections: Vec<PromptSection>,
    input: Option<String>,
    tools: Vec<ToolSpec>,
    tool_choice: ToolChoice,
    tools_over: bool,
    rounds: Vec<Round>,
    /// How often the server refused the prompt as too long.
    shrinks: u32,
}

impl Turn<'_> {
    /// The messages for the next model call, within the budget as it stands.
    fn compose(&self) -> (Vec<ChatMessage>, PromptAccounting) {
        let full = self.request.limits.prompt_tokens();
        let (budget, history) = match self.shrinks {
            0 => (full, self.request.history),
            1 => (full / 2, self.request.history),
            2 => (full / 2, &[][..]),
            _ => (full / 4, &[][..]),
        };
        let (mut messages, mut accounting) = assemble_prompt(&PromptParts {
            system_prompt: self.request.system_prompt,
            sections: &self.sections,
            tools: &self.tools,
            history,
            input: self.input.as_deref(),
            attachments: self.request.attachments,
            budget_tokens: budget,
        });
        let note = self.tools_over.then_some(TOOLS_OVER);
        let left = budget.saturating_sub(accounting.total_tokens + note.map_or(0, message_tokens));
        messages.extend(fit_rounds(&self.rounds, left));
        messages.extend(note.map(ChatMessage::system));
        accounting.window_tokens = self.request.limits.window.tokens() as usize;
        accounting.history_dropped = self.request.history.len() - accounting.history_kept;
        accounting.shrunk = self.shrinks;
        accounting.total_chars = messages.iter().map(ChatMessage::chars).sum();
        (messages, accounting)
    }

    /// One model call. A prompt refused as too long is composed again
    /// smaller and sent again; `None` when even the smallest was refused.
    async fn ask(
        &mut self,
        model: &dyn ChatModel,
        outcome: &mut TurnOutcome,
    ) -> Result<Option<herald_core::ChatResponse>, TurnError> {
        loop {
            let (messages, accounting) = self.compose();
            let retried_empty = outcome.accounting.empty_answer_retried;
            outcome.accounting = PromptAccounting {
                empty_answer_retried: retried_empty,
                ..accounting
            };
            outcome.model_calls += 1;
            let request = ChatRequest {
                messages,
                tools: self.tools.clone(),
                tool_choice: self.tool_choice,
            };
            match model.complete_streaming(request, self.request.text).await {
                Ok(response) => return Ok(Some(response)),
                Err(LlmError::ContextOverflow { limit_tokens, message }) => {
                    // A window the server names is news for every later
                    // turn too, and the budget follows it at once.
                    if let Some(window) = limit_tokens
                        && self.request.limits.window.learn(window)
                    {
                        info!(
                            window,
                            "the model server named a smaller context window; using it from now on"
                        );
                        continue;
                    }
                    self.shrinks += 1;
                    if self.shrinks > MAX_SHRINKS {
                        warn!(error = %message, "the prompt does not fit the model's context even shortened");
                        return Ok(None);
                    }
                    warn!(
                        error = %message,
                        shrinks = self.shrinks,
                        "the model server refused the prompt as too long; composing it smaller"
                    );
                }
                Err(other) => return Err(other.into()),
            }
        }
    }
}
