//! The one retry and reconnect policy of the channels, built on
//! [`herald_core::Backoff`] and [`RetryClass`].
//!
//! Every loop in an adapter that tries again — reconnecting a gateway, a
//! socket or a mailbox, a long poll that failed, handing a message to a sink
//! whose store is down, sending a chunk — waits through [`Retry`]:
//!
//! - a [`RetryClass::RetryAfter`] is waited out exactly as long as the
//!   platform asked (no jitter, no cap: asking again earlier is a violation);
//! - a [`RetryClass::Transient`] failure waits `base * 2^(n-1)`, capped at
//!   [`MAX_DELAY`] (30 s), with the upper half jittered so that processes
//!   cut off by the same outage do not all come back in the same instant;
//! - a [`RetryClass::Fatal`] error is not retried;
//! - every wait ends early when the shutdown token is cancelled.
//!
//! Architecture invariant: adapters never sleep in a loop of their own; a
//! second policy with another cap is how the channels ended up with five.

use std::future::Future;
use std::time::Duration;

use herald_core::{Admission, Backoff, ChannelError, ChannelName, InboundMessage, InboundSink, RetryClass};
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// The longest wait after a transient failure, for every channel.
pub const MAX_DELAY: Duration = Duration::from_secs(30);

/// Reconnecting, polling again, handing a message to the sink again: tried
/// until it works or shutdown, starting at half a second.
pub const PERSIST: Backoff = Backoff {
    base: Duration::from_millis(500),
    max_delay: MAX_DELAY,
    max_attempts: u32::MAX,
};

/// One chunk of a reply: six tries in all, then the error goes to the queue,
/// which retries the whole delivery on its own schedule.
pub const SEND: Backoff = Backoff {
    max_attempts: 6,
    ..PERSIST
};

/// A lookup that has a fallback (Discord's channel kind): three tries.
pub const LOOKUP: Backoff = Backoff {
    max_attempts: 3,
    ..PERSIST
};

/// The wait before the next try, or `None` when there is none: a fatal
/// error, or no attempts left. `attempt` counts the tries made so far
/// (1-based); `jitter` is a number in `[0, 1)` that spreads the upper half
/// of a transient delay (0 gives half the delay, just under 1 the whole).
pub fn delay_for(backoff: &Backoff, class: RetryClass, attempt: u32, jitter: f64) -> Option<Duration> {
    match class {
        RetryClass::Fatal => None,
        RetryClass::RetryAfter(wait) => (attempt < backoff.max_attempts).then_some(wait),
        RetryClass::Transient => {
            let full = backoff.delay_after(attempt)?;
            let jitter = jitter.clamp(0.0, 1.0);
            Some(full.mul_f64(0.5 + jitter / 2.0))
        }
    }
}

/// The state of one retry loop: how many tries failed since the last success.
#[derive(Clone, Debug)]
pub struct Retry {
    backoff: Backoff,
    failures: u32,
}

impl Retry {
    pub fn new(backoff: Backoff) -> Self {
        Self { backoff, failures: 0 }
    }

    /// A try worked: the next failure waits the shortest delay again.
    pub fn succeeded(&mut self) {
        self.failures = 0;
    }

    /// How many tries failed since the last success.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Records a failure of `class` and returns the wait before the next
    /// try, or `None` when there is to be no next try.
    pub fn next_delay(&mut self, class: RetryClass) -> Option<Duration> {
        self.failures = self.failures.saturating_add(1);
        delay_for(&self.backoff, class, self.failures, rand::random::<f64>())
    }

    /// Records a failure and waits before the next try. Returns `false`
    /// when there is to be none: the error is fatal, the attempts are used
    /// up, or shutdown came first.
    pub async fn wait(&mut self, class: RetryClass, shutdown: &CancellationToken) -> bool {
        match self.next_delay(class) {
            Some(delay) => pause(delay, shutdown).await,
            None => false,
        }
    }
}

/// Waits `delay` unless shutdown comes first; returns whether to go on.
pub async fn pause(delay: Duration, shutdown: &CancellationToken) -> bool {
    tokio::select! {
        () = shutdown.cancelled() => false,
        () = tokio::time::sleep(delay) => true,
    }
}

/// Runs `call` until it succeeds, waiting out rate limits and transient
/// failures by [`PERSIST`]; a fatal error ends it. `None` means shutdown came
/// first (a call in flight is dropped then). `what` names the call in logs.
pub async fn persist<T, F, Fut>(
    what: &str,
    shutdown: &CancellationToken,
    mut call: F,
) -> Option<Result<T, ChannelError>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ChannelError>>,
{
    let mut retry = Retry::new(PERSIST);
    loop {
        let result = tokio::select! {
            () = shutdown.cancelled() => return None,
            result = call() => result,
        };
        let err = match result {
            Ok(value) => return Some(Ok(value)),
            Err(err @ ChannelError::Fatal(_)) => return Some(Err(err)),
            Err(err) => err,
        };
        let Some(delay) = retry.next_delay(err.retry_class()) else {
            return Some(Err(err));
        };
        warn!(error = %err, ?delay, "{what} failed; trying again");
        if !pause(delay, shutdown).await {
            return None;
        }
    }
}

/// A session that stayed up this long counts as a success: the next loss
/// starts the delays over.
const STABLE_SESSION: Duration = Duration::from_secs(60);

/// Runs `session` (one connection's life: a gateway session, an IMAP
/// login) again and again by [`PERSIST`] until it ends by itself (`Ok`: a
/// shutdown) or with a fatal error (a refused token), which is returned.
/// After every end the channel is reported disconnected to `sink`.
pub async fn reconnect<F, Fut>(
    what: &str,
    channel: &ChannelName,
    sink: &dyn InboundSink,
    shutdown: &CancellationToken,
    mut session: F,
) -> Result<(), ChannelError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), ChannelError>>,
{
    let mut retry = Retry::new(PERSIST);
    loop {
        let started = tokio::time::Instant::now();
        let ended = session().await;
        sink.connected(channel, false);
        match ended {
            Ok(()) => return Ok(()),
            Err(err @ ChannelError::Fatal(_)) => return Err(err),
            Err(err) => {
                if started.elapsed() >= STABLE_SESSION {
                    retry.succeeded();
                }
                let Some(delay) = retry.next_delay(err.retry_class()) else {
                    return Err(err);
                };
                warn!(error = %err, ?delay, "{what} ended; connecting again");
                if !pause(delay, shutdown).await {
                    return Ok(());
                }
            }
        }
    }
}

/// Hands `message` to the sink until the store has it: a message is only
/// safe (and may be acknowledged to its platform) once the queue holds it,
/// so a store that is down is waited for, by [`PERSIST`]. `None` means
/// shutdown came first and the message was not taken.
pub async fn hand_over(
    sink: &dyn InboundSink,
    message: &InboundMessage,
    shutdown: &CancellationToken,
) -> Option<Admission> {
    hand_over_all(sink, std::slice::from_ref(message), shutdown)
        .await?
        .pop()
}

/// Hands `messages` to the sink, in order, until the store has them all, as
/// [`hand_over`] does one: a burst is one round trip where the sink can.
/// Returns the admissions in order, or `None` when shutdown came first.
pub async fn hand_over_all(
    sink: &dyn InboundSink,
    messages: &[InboundMessage],
    shutdown: &CancellationToken,
) -> Option<Vec<Admission>> {
    let mut retry = Retry::new(PERSIST);
    let mut admissions = Vec::with_capacity(messages.len());
    while admissions.len() < messages.len() {
        let taken = sink.accept_all(messages[admissions.len()..].to_vec()).await;
        admissions.extend(taken.admissions);
        let Some(err) = taken.error else { continue };
        let Some(waiting) = messages.get(admissions.len()) else {
            break;
        };
        // Every store error is waited out: what is not stored stays
        // unacknowledged, and skipping it would lose it.
        let delay = retry.next_delay(RetryClass::Transient)?;
        warn!(
            error = %err,
            conversation = %waiting.conversation.id,
            waiting = messages.len() - admissions.len(),
            ?delay,
            "could not store incoming messages; they stay unacknowledged"
        );
        if !pause(delay, shutdown).await {
            return None;
        }
    }
    Some(admissions)
}

#[cfg(test)]
mod tests;
