//! `herald pair …`: the operator's side of pairing, the same as an admin's
//! `/pair list` and `/pair approve CODE` in chat, for when no admin is on a
//! chat platform yet.

use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;
use herald_channels::access::Pairing;

use crate::app::App;

#[derive(Subcommand)]
pub enum PairCli {
    /// The senders waiting for access, with their codes.
    List,
    /// Let the sender who was given CODE talk to Herald.
    Approve { code: String },
}

pub async fn pair(app: App, command: PairCli) -> Result<ExitCode> {
    let store = app.storage.conversations();
    let pairing = Pairing { store: store.as_ref() };
    let now = app.clock.now();
    let code = match command {
        PairCli::List => {
            let pending = pairing.pending(now).await?;
            if pending.is_empty() {
                println!("no pairing requests are waiting");
            }
            for (code, request) in pending {
                println!(
                    "{code}  {}  {}  expires {}",
                    request.actor,
                    request.display_name,
                    request.expires_at.to_rfc3339()
                );
            }
            ExitCode::SUCCESS
        }
        PairCli::Approve { code } => match pairing.approve(&code, now).await? {
            Some(request) => {
                println!("approved {} ({})", request.actor, request.display_name);
                ExitCode::SUCCESS
            }
            None => {
                eprintln!("error: no pending pairing code {code} (codes expire)");
                ExitCode::FAILURE
            }
        },
    };
    app.storage.close().await;
    Ok(code)
}
