//! `herald schedule …`: the operator's view of scheduled tasks, the same
//! operations admins have in chat (`/schedule …`).

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use herald_core::{ActorId, ConversationId, ScheduleId};
use herald_schedule::Listed;

use crate::app::App;

#[derive(Subcommand)]
pub enum ScheduleCli {
    /// Every schedule with a run to come, or those of one conversation.
    List {
        #[arg(long)]
        conversation: Option<String>,
    },
    /// Schedule an instruction: `at 2026-12-24T18:00 [ZONE] TEXT`, `every 30m TEXT`,
    /// `every 1d from 2026-06-02T09:00 ZONE TEXT` or `cron "0 9 * * 1-5" [ZONE] TEXT`.
    Add {
        /// Where the runs go: a conversation that has written to Herald before.
        #[arg(long)]
        conversation: String,
        /// Whose permissions the runs have (default: nobody's in particular).
        #[arg(long = "as")]
        actor: Option<String>,
        /// The timing, then the instruction.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        words: Vec<String>,
    },
    /// Cancel a schedule by id.
    Cancel { id: i64 },
}

pub async fn schedule(app: App, command: ScheduleCli) -> Result<ExitCode> {
    let schedules = app.schedules();
    match command {
        ScheduleCli::List { conversation } => {
            let conversation = conversation.map(ConversationId::new);
            let listed = schedules.list(conversation.as_ref()).await?;
            if listed.is_empty() {
                println!("no schedules");
            }
            for line in listed.iter().map(Listed::line) {
                println!("{line}");
            }
        }
        ScheduleCli::Add {
            conversation,
            actor,
            words,
        } => {
            let id = ConversationId::new(&conversation);
            let Some(reference) = app
                .storage
                .conversations()
                .conversation(&id)
                .await
                .context("reading conversations")?
            else {
                bail!("conversation `{conversation}` has never written to Herald, so where it lives is not known yet");
            };
            let listed = schedules
                .add_words(reference, actor.map(ActorId::new), &words.join(" "))
                .await?;
            println!("scheduled: {}", listed.line());
        }
        ScheduleCli::Cancel { id } => {
            let listed = schedules.cancel(ScheduleId(id), None).await?;
            println!("cancelled: {}", listed.line());
        }
    }
    app.storage.close().await;
    Ok(ExitCode::SUCCESS)
}
