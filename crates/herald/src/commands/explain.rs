//! `herald explain --conversation ID`: how the last prompt of a conversation
//! was built — characters per part, what history was kept and dropped, which
//! tools were offered — so an operator can see where the budget goes.

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
        "last prompt of {conversation}: {} of {} characters",
        a.total_chars, a.budget_chars
    );
    let _ = writeln!(out, "  {:<36} {:>8}", "system prompt", a.system_prompt_chars);
    for (label, chars) in &a.sections {
        let _ = writeln!(out, "  {:<36} {:>8}", label, chars);
    }
    let _ = writeln!(
        out,
        "  {:<36} {:>8}  ({} entries kept, {} dropped)",
        "history", a.history_chars, a.history_kept, a.history_dropped
    );
    let _ = writeln!(out, "  {:<36} {:>8}", "current input", a.input_chars);
    if a.tools.is_empty() {
        let _ = writeln!(out, "  tools offered: none");
    } else {
        let _ = writeln!(out, "  tools offered ({}): {}", a.tools.len(), a.tools.join(", "));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_names_every_part() {
        let accounting = PromptAccounting {
            budget_chars: 1000,
            system_prompt_chars: 30,
            sections: vec![("skill catalog".into(), 120), ("active skills".into(), 400)],
            history_kept: 3,
            history_dropped: 7,
            history_chars: 300,
            input_chars: 20,
            total_chars: 874,
            tools: vec!["activate_skill".into(), "send_message".into()],
        };
        let report = render("local:ann", &accounting);
        for expected in [
            "last prompt of local:ann: 874 of 1000 characters",
            "skill catalog",
            "(3 entries kept, 7 dropped)",
            "tools offered (2): activate_skill, send_message",
        ] {
            assert!(report.contains(expected), "missing {expected:?} in\n{report}");
        }
    }
}
