//! `herald explain --conversation ID`: how the last prompt of a conversation
//! was built — estimated tokens per part (tool schemas included), what
//! history was kept, cut and dropped, which tools were offered — so an
//! operator can see where the context window goes.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::{Context, Result};
use herald_agent::PromptAccounting;
use herald_agent::worker::EXPLAIN_SCOPE;

use crate::app::open_storage;
use crate::config::Config;

pub async fn explain(config: &Config, conversation: &str) -> Result<ExitCode> {
    let storage = open_storage(config, std::sync::Arc::new(herald_core::SystemClock)).await?;
    let stored = storage
        .conversations()
        .get_state(EXPLAIN_SCOPE, conversation)
        .await
        .context("reading the store")?;
    storage.close().await;
    let Some(value) = stored else {
        eprintln!("no prompt recorded for conversation {conversation} (it has had no model turn yet)");
        return Ok(ExitCode::FAILURE);
    };
    let accounting: PromptAccounting = serde_json::from_value(value).context("reading the recorded accounting")?;
    print!("{}", render(conversation, &accounting));
    Ok(ExitCode::SUCCESS)
}

/// The report, as printed.
pub fn render(conversation: &str, a: &PromptAccounting) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "last prompt of {conversation}: about {} of {} tokens ({} characters); context window {} tokens",
        a.total_tokens, a.budget_tokens, a.total_chars, a.window_tokens
    );
    let row = |out: &mut String, label: &str, tokens: usize, note: String| {
        let _ = writeln!(out, "  {label:<36} {tokens:>8}{note}");
    };
    row(&mut out, "system prompt", a.system_prompt_tokens, String::new());
    for (label, tokens) in &a.sections {
        row(&mut out, label, *tokens, String::new());
    }
    row(
        &mut out,
        "tool schemas",
        a.tool_schema_tokens,
        format!("  ({} tools)", a.tools.len()),
    );
    row(
        &mut out,
        "history",
        a.history_tokens,
        format!(
            "  ({} entries kept, {} of them cut, {} dropped)",
            a.history_kept, a.history_cut, a.history_dropped
        ),
    );
    row(&mut out, "current input", a.input_tokens, {
        let mut note = Vec::new();
        if a.image_parts > 0 {
            note.push(format!("{} image part(s)", a.image_parts));
        }
        if a.transcripts > 0 {
            note.push(format!("{} transcript(s)", a.transcripts));
        }
        if a.input_cut {
            note.push("cut to fit".into());
        }
        if note.is_empty() {
            String::new()
        } else {
            format!("  ({})", note.join(", "))
        }
    });
    if a.tools.is_empty() {
        let _ = writeln!(out, "  tools offered: none");
    } else {
        let _ = writeln!(out, "  tools offered ({}): {}", a.tools.len(), a.tools.join(", "));
    }
    if a.shrunk > 0 {
        let _ = writeln!(
            out,
            "  the server refused the prompt as too long; it was built again smaller {} time(s)",
            a.shrunk
        );
    }
    if a.empty_answer_retried {
        let _ = writeln!(
            out,
            "  the model answered nothing at first and was asked again with tool calls off"
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_names_every_part() {
        let accounting = PromptAccounting {
            window_tokens: 4096,
            budget_tokens: 2991,
            system_prompt_tokens: 10,
            sections: vec![("skill catalog".into(), 40), ("active skills".into(), 130)],
            tools: vec!["activate_skill".into(), "send_message".into()],
            tool_schema_tokens: 210,
            history_kept: 3,
            history_dropped: 7,
            history_cut: 1,
            history_tokens: 100,
            input_tokens: 7,
            total_tokens: 497,
            total_chars: 1300,
            shrunk: 1,
            image_parts: 2,
            transcripts: 1,
            ..PromptAccounting::default()
        };
        let report = render("local:ann", &accounting);
        for expected in [
            "last prompt of local:ann: about 497 of 2991 tokens (1300 characters); context window 4096 tokens",
            "skill catalog",
            "tool schemas                              210  (2 tools)",
            "(3 entries kept, 1 of them cut, 7 dropped)",
            "tools offered (2): activate_skill, send_message",
            "built again smaller 1 time(s)",
            "(2 image part(s), 1 transcript(s))",
        ] {
            assert!(report.contains(expected), "missing {expected:?} in\n{report}");
        }
    }
}
