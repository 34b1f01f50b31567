//! `herald chat`: the local channel. Each stdin line is a message from
//! `local:NAME`, queued like any platform message and answered by the same
//! agent loop; replies go to stdout.
//!
//! At end of input the command waits until every unfinished task of its
//! conversation is done — including tasks a previous, interrupted run left
//! behind — then exits 0.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use herald_agent::WorkerPool;
use herald_channels::clean;
use herald_channels::local::{self, LocalOutbound, ReplyFormat};
use herald_core::{ClaimFilter, NewTask, Outbound};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::app::App;
use crate::shutdown;

pub async fn chat(app: App, user: Option<String>, json: bool) -> Result<ExitCode> {
    let user = user.unwrap_or_else(os_user_name);
    if user.is_empty() || user.chars().any(|c| c.is_whitespace() || c == ':') {
        bail!("--user must be a name without spaces or `:` (got {user:?})");
    }
    app.warn_if_model_is_down(|message| eprintln!("warning: {message}"));
    let conversation = local::conversation(&user);
    let format = if json { ReplyFormat::Json } else { ReplyFormat::Plain };
    let outbound = Outbound::new().with(Arc::new(LocalOutbound::stdout(format)));
    let toolbox = app.skills(outbound.clone()).await?;
    // Eager MCP servers are listed before the first turn needs them.
    app.mcp.warm_up();
    // The local channel has no files to fetch.
    let agent = app.agent(outbound, toolbox, None);
    let mut finished = agent.subscribe();
    let filter = ClaimFilter::conversation(conversation.id.clone());
    // One conversation is served in order, so one worker is all it can use.
    let pool = WorkerPool::start(agent.clone(), filter.clone(), 1);
    let interrupted = shutdown::on_signal();

    let interactive = std::io::stdin().is_terminal();
    if interactive {
        eprintln!(
            "Herald local chat as {} — type a message and press Enter; Ctrl-D to quit.",
            conversation.id
        );
    }
    // Whatever happens while reading and waiting, the worker gives its
    // lease back and the store closes before the command returns.
    let result = converse(&app, &user, &filter, &interrupted, &mut finished).await;
    pool.shutdown(app.config.agent.drain_timeout).await;
    app.close().await;
    result.map(|()| ExitCode::SUCCESS)
}

/// Queues each line of stdin, then waits until every unfinished task of the
/// conversation is done (or the user interrupts).
async fn converse(
    app: &App,
    user: &str,
    filter: &ClaimFilter,
    interrupted: &tokio_util::sync::CancellationToken,
    finished: &mut tokio::sync::broadcast::Receiver<herald_agent::TaskFinished>,
) -> Result<()> {
    let queue = app.storage.queue();
    let mut stdin = BufReader::new(tokio::io::stdin());
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = tokio::select! {
            read = stdin.read_until(b'\n', &mut line) => read.context("reading stdin")?,
            _ = interrupted.cancelled() => break,
        };
        if read == 0 {
            break;
        }
        // Bytes that are not UTF-8 (a binary paste, a wrong terminal
        // encoding) become U+FFFD rather than ending the conversation.
        let decoded = String::from_utf8_lossy(&line);
        // What the gateway does to every channel's text: no control
        // characters, and no more than `channels.max_message_chars`.
        let cleaned = clean::strip_controls(&decoded);
        let text = cleaned.trim();
        if text.is_empty() {
            continue;
        }
        let (text, cut) = clean::cap(text, app.config.channels.max_message_chars);
        if cut {
            eprintln!(
                "warning: the message was cut to its first {} characters (channels.max_message_chars)",
                app.config.channels.max_message_chars
            );
        }
        let message = local::inbound(user, &text, uuid::Uuid::new_v4().to_string(), app.clock.now());
        queue
            .enqueue(NewTask::message(message))
            .await
            .context("queueing the message")?;
    }

    // Wait for every unfinished task of this conversation, then stop.
    while !interrupted.is_cancelled() && queue.pending(filter).await.context("reading the queue")? > 0 {
        tokio::select! {
            _ = finished.recv() => {}
            _ = interrupted.cancelled() => {}
            // A task retried with backoff finishes without an event of ours
            // until its retry; look again now and then.
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
    Ok(())
}

fn os_user_name() -> String {
    ["USER", "LOGNAME", "USERNAME"]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(|| "owner".into())
}
