//! What operators look at: Prometheus metrics, liveness and readiness, on
//! `observability.listen`.
//!
//! Libraries record through the `metrics` facade (as they log through
//! `tracing`); this module installs the recorder that renders them as
//! Prometheus text, adds the queue's gauges at scrape time, and serves
//! `/metrics`, `/healthz` (the process answers) and `/readyz` (storage
//! answers and every channel this process receives from is connected).
//! Nothing here is on a message's path: a scrape never blocks a turn.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use anyhow::{Context, Result};
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use herald_core::{ChannelStatus, Clock};
use herald_store::Storage;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObservabilityConfig {
    /// Where `/metrics`, `/healthz` and `/readyz` are served; unset: not served.
    #[serde(default)]
    pub listen: Option<SocketAddr>,
}

/// Latency buckets, in seconds, for every `*_seconds` histogram: from a
/// millisecond (the gateway's own overhead) to two minutes (a slow model).
const SECONDS_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

/// The process-wide recorder; installed once, on first use.
pub fn recorder() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let builder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)
            .expect("the bucket list is not empty");
        let handle = builder.install_recorder().unwrap_or_else(|err| {
            // Another recorder is installed (only possible in tests that
            // install their own): render an empty one rather than fail.
            warn!(error = %err, "metrics recorder not installed");
            PrometheusBuilder::new().build_recorder().handle()
        });
        describe();
        handle
    })
}

fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_gauge!(
        "herald_queue_tasks",
        "Tasks on the queue by state (queued, leased, dead)"
    );
    describe_gauge!(
        "herald_queue_oldest_age_seconds",
        Unit::Seconds,
        "Age of the oldest queued task; 0 when none waits"
    );
    describe_histogram!(
        "herald_queue_wait_seconds",
        Unit::Seconds,
        "Time from enqueue to a worker claiming the task"
    );
    describe_counter!(
        "herald_store_statements_total",
        "Round trips to the database, by the statement's first line"
    );
    describe_histogram!(
        "herald_store_group_commit_writes",
        "Writes committed together in one SQLite transaction, per group (writes alone are not counted)"
    );
    describe_histogram!(
        "herald_turn_duration_seconds",
        Unit::Seconds,
        "One task served: prompt, model calls, tools, delivery"
    );
    describe_counter!(
        "herald_turns_total",
        "Tasks served, by outcome (completed, retried, dead)"
    );
    describe_histogram!(
        "herald_model_request_duration_seconds",
        Unit::Seconds,
        "One model request (each retry counts), by outcome"
    );
    describe_counter!("herald_model_requests_total", "Model requests, by outcome");
    describe_counter!(
        "herald_model_tokens_total",
        "Tokens the model reported, by kind (prompt, completion)"
    );
    describe_counter!(
        "herald_inbound_messages_total",
        "Platform messages by channel and outcome"
    );
    describe_counter!(
        "herald_messages_sent_total",
        "Messages (chunks) the platform accepted, by channel"
    );
    describe_counter!("herald_send_failures_total", "Sends given up, by channel");
    describe_counter!(
        "herald_platform_rate_limited_total",
        "429 answers from platforms, by channel"
    );
    describe_counter!(
        "herald_skill_calls_refused_total",
        "Tool calls policy or validation stopped before they ran, by reason"
    );
    describe_gauge!(
        "herald_channel_connected",
        "1 when a channel's ingress is connected in this process"
    );
}

#[derive(Clone)]
struct Observed {
    storage: Storage,
    status: ChannelStatus,
    clock: Arc<dyn Clock>,
}

/// Serves the endpoints on `listen` until `shutdown`.
pub async fn serve(
    listen: SocketAddr,
    storage: Storage,
    status: ChannelStatus,
    clock: Arc<dyn Clock>,
    shutdown: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>> {
    recorder();
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on observability.listen = {listen}"))?;
    let app = Router::new()
        .route("/metrics", get(metrics_text))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .with_state(Observed { storage, status, clock });
    info!(%listen, "serving /metrics, /healthz and /readyz");
    Ok(tokio::spawn(async move {
        if let Err(err) = herald_net::serve(listener, app, herald_net::PublicLimits::PROBES, shutdown).await {
            warn!(error = %err, "the observability endpoint stopped");
        }
    }))
}

async fn metrics_text(State(observed): State<Observed>) -> impl IntoResponse {
    match observed.storage.queue().stats().await {
        Ok(stats) => {
            for (state, count) in [("queued", stats.queued), ("leased", stats.leased), ("dead", stats.dead)] {
                metrics::gauge!("herald_queue_tasks", "state" => state).set(count as f64);
            }
            let age = stats
                .oldest_queued_at
                .and_then(|at| (observed.clock.now() - at).to_std().ok())
                .unwrap_or_default();
            metrics::gauge!("herald_queue_oldest_age_seconds").set(age.as_secs_f64());
        }
        Err(err) => warn!(error = %err, "queue statistics unavailable for /metrics"),
    }
    for (channel, connected) in observed.status.snapshot() {
        metrics::gauge!("herald_channel_connected", "channel" => channel.to_string())
            .set(f64::from(u8::from(connected)));
    }
    let handle = recorder();
    handle.run_upkeep();
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        handle.render(),
    )
}

/// 200 when storage answers and every expected channel is connected; 503
/// with one line per problem otherwise.
async fn ready(State(observed): State<Observed>) -> impl IntoResponse {
    let mut problems = Vec::new();
    if let Err(err) = observed.storage.ping().await {
        problems.push(format!("storage: {err}"));
    }
    for (channel, connected) in observed.status.snapshot() {
        if !connected {
            problems.push(format!("{channel}: not connected"));
        }
    }
    if problems.is_empty() {
        (StatusCode::OK, "ready\n".to_owned())
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, problems.join("\n") + "\n")
    }
}
