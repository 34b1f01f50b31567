//! `herald run`: every configured channel, the workers and the scheduler,
//! until SIGINT or SIGTERM. Then ingress stops first (nothing new is
//! accepted), turns in flight are drained up to `agent.drain_timeout`, their
//! leases given back if they did not finish, and the process exits 0.
//!
//! `--role` splits a deployment: `ingress` processes receive from the
//! platforms and run the scheduler, `worker` processes serve the queue, and
//! `all` (the default) does both. Any number of processes may share one
//! PostgreSQL database; an ingress that must have a single consumer runs in
//! one of them at a time (see [`crate::channels::spawn_ingress`]).

use std::process::ExitCode;

use anyhow::Result;
use clap::ValueEnum;
use herald_agent::WorkerPool;
use herald_core::{ChannelStatus, ClaimFilter};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::app::App;
use crate::{channels, observability, shutdown};

/// What a `herald run` process does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Role {
    /// Receive from the platforms, schedule, and serve the queue.
    #[default]
    All,
    /// Receive from the platforms and schedule; no turns run here.
    Ingress,
    /// Serve the queue; nothing is received here.
    Worker,
}

impl Role {
    fn receives(self) -> bool {
        matches!(self, Role::All | Role::Ingress)
    }

    fn serves(self) -> bool {
        matches!(self, Role::All | Role::Worker)
    }

    fn name(self) -> &'static str {
        match self {
            Role::All => "all",
            Role::Ingress => "ingress",
            Role::Worker => "worker",
        }
    }
}

pub async fn run(app: App, role: Role) -> Result<ExitCode> {
    if role.serves() {
        app.warn_if_model_is_down(|message| warn!("{message}"));
    }
    let signal = shutdown::on_signal();
    let built = channels::build(
        &app.config.channels,
        Some(app.storage.conversations()),
        Some(app.storage.locks()),
        channels::send_limiter(&app),
        &app.config.client_tls,
    )?;
    let names: Vec<_> = built.outbound.names().cloned().collect();
    if names.is_empty() {
        warn!("no platform channels are configured; only `herald chat` can talk to this Herald");
    }
    let status = ChannelStatus::default();
    let stop_observability = CancellationToken::new();
    let observability = match app.config.observability.listen {
        Some(listen) => Some(
            observability::serve(
                listen,
                app.storage.clone(),
                status.clone(),
                app.clock.clone(),
                stop_observability.clone(),
            )
            .await?,
        ),
        None => None,
    };

    let intake = channels::attachment_intake(&app, built.fetchers.clone());
    let stop_ingress = CancellationToken::new();
    let mut ingress = tokio::task::JoinSet::new();
    let stop_scheduler = CancellationToken::new();
    let mut scheduler = None;
    let mut prune_files = None;
    if role.receives() {
        let sink = channels::gateway(&app, built.outbound.clone(), status.clone(), intake.clone());
        ingress = channels::spawn_ingress(
            &built.ingress,
            sink,
            app.storage.locks(),
            status.clone(),
            stop_ingress.clone(),
        );
        prune_files = Some(app.prune_files(stop_scheduler.clone()));
        let scheduler_loop = app.scheduler();
        let stop = stop_scheduler.clone();
        scheduler = Some(tokio::spawn(async move { scheduler_loop.run(stop).await }));
    }

    let pool = if role.serves() {
        let toolbox = app.skills(built.outbound.clone()).await?;
        // Eager MCP servers are listed before the first turn needs them.
        app.mcp.warm_up();
        let agent = app.agent(built.outbound, toolbox, Some(intake));
        Some(WorkerPool::start(
            agent,
            ClaimFilter::channels(names),
            app.config.turns_in_flight(),
        ))
    } else {
        None
    };
    info!(
        backend = app.storage.backend(),
        role = role.name(),
        turns = if role.serves() { app.config.turns_in_flight() } else { 0 },
        "herald is running"
    );
    let ingresses = if role.receives() { built.ingress.len() } else { 0 };
    let release = tokio::spawn(crate::memory::release_startup_code(status.clone(), ingresses));

    signal.cancelled().await;
    release.abort();
    stop_ingress.cancel();
    stop_scheduler.cancel();
    while ingress.join_next().await.is_some() {}
    if let Some(scheduler) = scheduler {
        let _ = scheduler.await;
    }
    if let Some(prune_files) = prune_files {
        let _ = prune_files.await;
    }
    if let Some(pool) = pool {
        pool.shutdown(app.config.agent.drain_timeout).await;
    }
    stop_observability.cancel();
    if let Some(observability) = observability {
        let _ = observability.await;
    }
    app.close().await;
    info!("stopped");
    Ok(ExitCode::SUCCESS)
}
