//! The one HTTP server set-up for endpoints strangers can reach.
//!
//! A stranger who knows no secret can still open connections and send
//! bytes. What that costs Herald is bounded here, before a handler runs:
//! - at most [`PublicLimits::max_connections`] connections at once; one
//!   more is closed as soon as it is accepted;
//! - a request's headers must arrive within
//!   [`PublicLimits::header_timeout`] (also the most a kept-alive
//!   connection idles), and at most 16 KiB of them are buffered;
//! - a body is read only when the handler asks, after it checked what the
//!   headers prove, with [`read_body`]: whole within
//!   [`PublicLimits::body_timeout`] (not per chunk: a trickle is cut off),
//!   at most [`PublicLimits::max_body_bytes`] (a larger `Content-Length` is
//!   refused unread), and all bodies being read at once within
//!   [`PublicLimits::body_budget_bytes`], so a crowd of unauthenticated
//!   senders holds a few megabytes, never their bodies' sum.
//!
//! Architecture invariant: no public endpoint is served any other way
//! (`axum::serve` has none of these bounds).

use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tower_http::limit::RequestBodyLimitLayer;
use tracing::{debug, info, warn};

/// What one public server lets strangers cost it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PublicLimits {
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub body_timeout: Duration,
    pub max_body_bytes: usize,
    pub body_budget_bytes: usize,
}

/// Headers a connection may buffer (hyper's smallest read buffer is 8 KiB).
const MAX_HEADER_BUFFER: usize = 16 * 1024;
/// How long in-flight requests may finish after shutdown was asked for.
const DRAIN: Duration = Duration::from_secs(5);

impl PublicLimits {
    /// For a platform's webhook: Telegram and Slack post updates of a few
    /// kilobytes (a Slack message of 40,000 characters with its blocks is
    /// under 512 KiB) and send them whole at once.
    pub const WEBHOOK: Self = Self {
        max_connections: 128,
        header_timeout: Duration::from_secs(5),
        body_timeout: Duration::from_secs(5),
        max_body_bytes: 1024 * 1024,
        body_budget_bytes: 4 * 1024 * 1024,
    };

    /// For `/metrics` and the health checks: requests without bodies.
    pub const PROBES: Self = Self {
        max_connections: 32,
        header_timeout: Duration::from_secs(5),
        body_timeout: Duration::from_secs(5),
        max_body_bytes: 16 * 1024,
        body_budget_bytes: 256 * 1024,
    };
}

/// The bodies a server is reading, for [`read_body`]; every request
/// carries it in its extensions.
#[derive(Clone, Debug)]
pub struct BodyBudget {
    bytes: Arc<Semaphore>,
    timeout: Duration,
}

impl BodyBudget {
    fn new(limits: &PublicLimits) -> Self {
        Self {
            bytes: Arc::new(Semaphore::new(limits.body_budget_bytes)),
            timeout: limits.body_timeout,
        }
    }
}

/// Why a body was not read; each is an HTTP answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyError {
    /// Over the endpoint's cap (`413`).
    TooLarge,
    /// Not whole within the body timeout (`408`).
    TimedOut,
    /// The budget for bodies being read is used up (`503`: the platform
    /// sends it again later).
    Busy,
    /// The connection broke or the request was served without the budget.
    Failed,
}

impl BodyError {
    pub fn status(&self) -> StatusCode {
        match self {
            BodyError::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            BodyError::TimedOut => StatusCode::REQUEST_TIMEOUT,
            BodyError::Busy => StatusCode::SERVICE_UNAVAILABLE,
            BodyError::Failed => StatusCode::BAD_REQUEST,
        }
    }
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BodyError::TooLarge => "the body is over the endpoint's limit",
            BodyError::TimedOut => "the body did not arrive within the body timeout",
            BodyError::Busy => "too many bodies are being read at once",
            BodyError::Failed => "the body could not be read",
        })
    }
}

impl std::error::Error for BodyError {}

impl IntoResponse for BodyError {
    fn into_response(self) -> Response {
        self.status().into_response()
    }
}

/// A body read whole; its bytes count against the budget until it is dropped.
#[derive(Debug)]
pub struct BodyRead {
    bytes: Bytes,
    _held: Option<OwnedSemaphorePermit>,
}

impl std::ops::Deref for BodyRead {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

/// Reads `body` whole within the bounds of the server `extensions` came
/// from (see the module documentation). Call it only once the headers
/// showed the request may be genuine.
pub async fn read_body(extensions: &axum::http::Extensions, body: Body) -> Result<BodyRead, BodyError> {
    let Some(budget) = extensions.get::<BodyBudget>() else {
        warn!("a request body was read outside a bounded server");
        return Err(BodyError::Failed);
    };
    match tokio::time::timeout(budget.timeout, collect(budget, body)).await {
        Ok(read) => read,
        Err(_) => Err(BodyError::TimedOut),
    }
}

async fn collect(budget: &BodyBudget, mut body: Body) -> Result<BodyRead, BodyError> {
    let mut held: Option<OwnedSemaphorePermit> = None;
    // Grown to exactly what arrived: the budget counts bytes, so the
    // buffer must not hold twice as many (as doubling growth would).
    let mut bytes: Vec<u8> = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|err| {
            // tower-http's limit answers an over-long stream with this error.
            if is_length_limit(&err) {
                BodyError::TooLarge
            } else {
                BodyError::Failed
            }
        })?;
        let Ok(data) = frame.into_data() else { continue };
        if data.is_empty() {
            continue;
        }
        let size = u32::try_from(data.len()).map_err(|_| BodyError::TooLarge)?;
        let permit = Arc::clone(&budget.bytes)
            .try_acquire_many_owned(size)
            .map_err(|_| BodyError::Busy)?;
        match &mut held {
            Some(held) => held.merge(permit),
            None => held = Some(permit),
        }
        bytes.reserve_exact(data.len());
        bytes.extend_from_slice(&data);
    }
    Ok(BodyRead {
        bytes: Bytes::from(bytes),
        _held: held,
    })
}

fn is_length_limit(err: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(err) = source {
        if err.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = err.source();
    }
    false
}

/// Serves `router` on `listener` within `limits` until `shutdown`; then
/// lets requests in flight finish for a few seconds.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: PublicLimits,
    shutdown: CancellationToken,
) -> io::Result<()> {
    let app = router
        .layer(RequestBodyLimitLayer::new(limits.max_body_bytes))
        .layer(axum::Extension(BodyBudget::new(&limits)));
    let connections = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(MAX_HEADER_BUFFER);
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(err) => {
                // Out of file descriptors, most likely: let some close.
                warn!(error = %err, "could not accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&connections).try_acquire_owned() else {
            debug!(
                limit = limits.max_connections,
                "connection cap reached; a new connection is closed"
            );
            metrics::counter!("herald_http_connections_refused_total").increment(1);
            continue;
        };
        let service = TowerToHyperService::new(app.clone());
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                debug!(error = %err, "connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(DRAIN) => info!("requests still in flight at shutdown were cut off"),
    }
    Ok(())
}

#[cfg(test)]
mod tests;
