//! `herald run`: every configured channel, the workers and the scheduler,
//! until SIGINT or SIGTERM. Then ingress stops first (nothing new is
//! accepted), turns in flight are drained up to `agent.drain_timeout`, their
//! leases given back if they did not finish, and the process exits 0.

use std::process::ExitCode;

use anyhow::Result;
use herald_agent::WorkerPool;
use herald_core::ClaimFilter;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::app::App;
use crate::{channels, shutdown};

pub async fn run(app: App) -> Result<ExitCode> {
    app.check_model().await?;
    let signal = shutdown::on_signal();
    let built = channels::build(&app.config.channels, Some(app.storage.conversations()))?;
    let names: Vec<_> = built.outbound.names().cloned().collect();
    if names.is_empty() {
        warn!("no platform channels are configured; only `herald chat` can talk to this Herald");
    }
    let sink = channels::gateway(&app, built.outbound.clone());
    let stop_ingress = CancellationToken::new();
    let mut ingress = channels::spawn_ingress(&built.ingress, sink, stop_ingress.clone());

    let toolbox = app.skills(built.outbound.clone()).await?;
    let agent = app.agent(built.outbound, toolbox);
    let pool = WorkerPool::start(agent, ClaimFilter::channels(names), app.config.agent.workers);
    let stop_scheduler = CancellationToken::new();
    let scheduler = {
        let scheduler = app.scheduler();
        let stop = stop_scheduler.clone();
        tokio::spawn(async move { scheduler.run(stop).await })
    };
    info!(
        backend = app.storage.backend(),
        workers = app.config.agent.workers,
        "herald is running"
    );

    signal.cancelled().await;
    stop_ingress.cancel();
    stop_scheduler.cancel();
    while ingress.join_next().await.is_some() {}
    let _ = scheduler.await;
    pool.shutdown(app.config.agent.drain_timeout).await;
    app.storage.close().await;
    info!("stopped");
    Ok(ExitCode::SUCCESS)
}
