use std::sync::atomic::{AtomicU32, Ordering};

use super::*;

#[test]
fn delays_follow_the_class_the_attempt_and_the_jitter() {
    let secs = Duration::from_secs;
    let millis = Duration::from_millis;
    for (backoff, class, attempt, jitter, expected) in [
        // Transient: doubling from half a second, the upper half jittered.
        (PERSIST, RetryClass::Transient, 1, 0.0, Some(millis(250))),
        (PERSIST, RetryClass::Transient, 1, 0.999_999, Some(millis(500))),
        (PERSIST, RetryClass::Transient, 3, 0.0, Some(secs(1))),
        (PERSIST, RetryClass::Transient, 3, 0.5, Some(millis(1500))),
        // The one cap, however long the outage.
        (PERSIST, RetryClass::Transient, 40, 0.999_999, Some(MAX_DELAY)),
        (PERSIST, RetryClass::Transient, u32::MAX - 1, 0.0, Some(secs(15))),
        // What the platform asked for, exactly, and beyond the cap.
        (PERSIST, RetryClass::RetryAfter(secs(3)), 1, 0.9, Some(secs(3))),
        (PERSIST, RetryClass::RetryAfter(secs(90)), 7, 0.0, Some(secs(90))),
        // Fatal is never retried; a bounded policy stops.
        (PERSIST, RetryClass::Fatal, 1, 0.0, None),
        (SEND, RetryClass::Transient, 5, 0.0, Some(secs(4))),
        (SEND, RetryClass::Transient, 6, 0.0, None),
        (SEND, RetryClass::RetryAfter(secs(1)), 6, 0.0, None),
        (LOOKUP, RetryClass::Transient, 3, 0.0, None),
    ] {
        let got = delay_for(&backoff, class, attempt, jitter);
        let close = match (got, expected) {
            (Some(got), Some(expected)) => got.abs_diff(expected) < millis(1),
            (got, expected) => got == expected,
        };
        assert!(
            close,
            "{class:?} attempt {attempt} jitter {jitter}: {got:?}, expected {expected:?}"
        );
    }
}

#[test]
fn a_success_starts_the_delays_over() {
    let mut retry = Retry::new(PERSIST);
    for _ in 0..10 {
        retry.next_delay(RetryClass::Transient);
    }
    assert_eq!(retry.failures(), 10);
    retry.succeeded();
    let delay = retry.next_delay(RetryClass::Transient).unwrap();
    assert!(delay <= Duration::from_millis(500), "{delay:?}");
}

#[tokio::test(start_paused = true)]
async fn persist_waits_out_failures_and_stops_at_a_fatal_error() {
    let calls = AtomicU32::new(0);
    let shutdown = CancellationToken::new();
    let start = tokio::time::Instant::now();
    let result = persist("the test call", &shutdown, || async {
        match calls.fetch_add(1, Ordering::SeqCst) {
            0 => Err(ChannelError::Transient("502".into())),
            1 => Err(ChannelError::RateLimited {
                retry_after: Duration::from_secs(5),
            }),
            _ => Ok("answered"),
        }
    })
    .await;
    assert_eq!(result.map(|r| r.unwrap()), Some("answered"));
    assert!(
        start.elapsed() >= Duration::from_secs(5),
        "the retry-after was honoured"
    );

    let result = persist("the test call", &shutdown, || async {
        Err::<(), _>(ChannelError::Fatal("bad token".into()))
    })
    .await;
    assert!(matches!(result, Some(Err(ChannelError::Fatal(_)))));
}

#[tokio::test(start_paused = true)]
async fn shutdown_ends_a_wait_at_once() {
    let shutdown = CancellationToken::new();
    let mut retry = Retry::new(PERSIST);
    let cancel = shutdown.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        cancel.cancel();
    });
    let start = tokio::time::Instant::now();
    let went_on = retry
        .wait(RetryClass::RetryAfter(Duration::from_secs(3600)), &shutdown)
        .await;
    assert!(!went_on);
    assert!(start.elapsed() < Duration::from_secs(2));

    let result = persist("never answers", &shutdown, || {
        std::future::pending::<Result<(), ChannelError>>()
    })
    .await;
    assert!(result.is_none(), "a call in flight is dropped at shutdown");
}
