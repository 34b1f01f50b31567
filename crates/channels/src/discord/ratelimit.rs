//! Discord's per-route rate limits, kept from the response headers.
//!
//! Herald keeps the buckets here rather than letting a library retry 429s
//! out of sight of the shared outbound path, the same way in tests and in
//! production:
//! each route and top-level resource (`POST /channels/{id}/messages` for one
//! channel) has a bucket; requests on one bucket go one at a time; when a
//! response says `X-RateLimit-Remaining: 0`, the next request on that bucket
//! waits `X-RateLimit-Reset-After`; a 429 blocks its bucket (or, when
//! global, every bucket) for `retry_after` and is handed to the outbound
//! path, which waits exactly that long before trying again.
//!
//! No I/O here: the client passes the headers it got and the time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use reqwest::header::HeaderMap;
use serde::Deserialize;
use tokio::sync::OwnedMutexGuard;
use tokio::time::Instant;

/// What one response said about its bucket.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observed {
    pub limit: Option<u32>,
    pub remaining: Option<u32>,
    pub reset_after: Option<Duration>,
    pub bucket: Option<String>,
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|value| value.to_str().ok()).map(str::trim)
}

fn seconds(text: &str) -> Option<Duration> {
    let value: f64 = text.parse().ok()?;
    (value.is_finite() && value >= 0.0).then(|| Duration::from_secs_f64(value))
}

pub fn observe(headers: &HeaderMap) -> Observed {
    Observed {
        limit: header(headers, "x-ratelimit-limit").and_then(|v| v.parse().ok()),
        remaining: header(headers, "x-ratelimit-remaining").and_then(|v| v.parse().ok()),
        reset_after: header(headers, "x-ratelimit-reset-after").and_then(seconds),
        bucket: header(headers, "x-ratelimit-bucket").map(str::to_owned),
    }
}

/// A 429 as Discord explains it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TooManyRequests {
    pub retry_after: Duration,
    pub global: bool,
}

#[derive(Deserialize)]
struct RateLimitBody {
    retry_after: Option<f64>,
    #[serde(default)]
    global: bool,
}

/// Reads a 429: the body's `retry_after` (seconds, with fractions) first,
/// then the `Retry-After` header; one second when neither says.
pub fn too_many_requests(headers: &HeaderMap, body: &[u8]) -> TooManyRequests {
    let parsed: Option<RateLimitBody> = serde_json::from_slice(body).ok();
    let from_body = parsed
        .as_ref()
        .and_then(|b| b.retry_after)
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64);
    let from_header = header(headers, "retry-after").and_then(seconds);
    let global = parsed.is_some_and(|b| b.global)
        || header(headers, "x-ratelimit-global").is_some_and(|v| v.eq_ignore_ascii_case("true"))
        || header(headers, "x-ratelimit-scope") == Some("global");
    TooManyRequests {
        retry_after: from_body.or(from_header).unwrap_or(Duration::from_secs(1)),
        global,
    }
}

/// One bucket as Herald last heard of it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Bucket {
    remaining: Option<u32>,
    reset_at: Option<Instant>,
    /// The `X-RateLimit-Bucket` name, for logs.
    pub name: Option<String>,
}

impl Bucket {
    /// How long to wait before the next request, if at all.
    pub fn wait(&self, now: Instant) -> Option<Duration> {
        match (self.remaining, self.reset_at) {
            (Some(0), Some(reset_at)) if reset_at > now => Some(reset_at - now),
            _ => None,
        }
    }

    pub fn update(&mut self, observed: &Observed, now: Instant) {
        if let Some(remaining) = observed.remaining {
            self.remaining = Some(remaining);
        }
        if let Some(reset_after) = observed.reset_after {
            self.reset_at = Some(now + reset_after);
        }
        if observed.bucket.is_some() {
            self.name.clone_from(&observed.bucket);
        }
    }

    /// After a 429: nothing on this bucket until `retry_after` passed.
    pub fn block(&mut self, retry_after: Duration, now: Instant) {
        self.remaining = Some(0);
        self.reset_at = Some(now + retry_after);
    }
}

/// Every bucket of one bot, plus the global block.
#[derive(Default)]
pub struct RouteLimits {
    buckets: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Bucket>>>>,
    global_until: Mutex<Option<Instant>>,
}

impl RouteLimits {
    /// Takes the bucket of `route` (waiting for requests before on it) and
    /// waits until it and the global limit allow a request. The caller
    /// sends while holding the guard and updates it from the response.
    pub async fn acquire(&self, route: &str) -> OwnedMutexGuard<Bucket> {
        let bucket = {
            let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
            buckets.entry(route.to_owned()).or_default().clone()
        };
        let guard = bucket.lock_owned().await;
        loop {
            let now = Instant::now();
            let global = self
                .global_until
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .filter(|until| *until > now)
                .map(|until| until - now);
            match global.or_else(|| guard.wait(now)) {
                Some(delay) => tokio::time::sleep(delay).await,
                None => return guard,
            }
        }
    }

    /// A global 429: every route waits `retry_after`.
    pub fn block_global(&self, retry_after: Duration) {
        let until = Instant::now() + retry_after;
        let mut global = self.global_until.lock().unwrap_or_else(PoisonError::into_inner);
        if global.is_none_or(|current| current < until) {
            *global = Some(until);
        }
    }
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn the_documented_headers_are_read() {
        // The documentation's example response headers.
        let observed = observe(&headers(&[
            ("x-ratelimit-limit", "5"),
            ("x-ratelimit-remaining", "1"),
            ("x-ratelimit-reset", "1470173023.123"),
            ("x-ratelimit-reset-after", "1.2"),
            ("x-ratelimit-bucket", "abcd1234"),
        ]));
        assert_eq!(
            observed,
            Observed {
                limit: Some(5),
                remaining: Some(1),
                reset_after: Some(Duration::from_millis(1200)),
                bucket: Some("abcd1234".into()),
            }
        );
        assert_eq!(observe(&HeaderMap::new()), Observed::default());
    }

    #[test]
    fn a_429_is_read_from_its_body_then_its_headers() {
        let cases = [
            (
                headers(&[("retry-after", "2")]),
                &br#"{"message": "You are being rate limited.", "retry_after": 1.5, "global": false}"#[..],
                Duration::from_millis(1500),
                false,
            ),
            (
                headers(&[("retry-after", "3"), ("x-ratelimit-global", "true")]),
                &b"<html>cloudflare</html>"[..],
                Duration::from_secs(3),
                true,
            ),
            (
                headers(&[("x-ratelimit-scope", "global")]),
                &br#"{"message": "You are being rate limited.", "retry_after": 0.25, "global": true}"#[..],
                Duration::from_millis(250),
                true,
            ),
            (HeaderMap::new(), &b""[..], Duration::from_secs(1), false),
        ];
        for (headers, body, retry_after, global) in cases {
            assert_eq!(
                too_many_requests(&headers, body),
                TooManyRequests { retry_after, global }
            );
        }
    }

    #[test]
    fn an_exhausted_bucket_waits_for_its_reset_and_no_longer() {
        let now = Instant::now();
        let mut bucket = Bucket::default();
        assert_eq!(bucket.wait(now), None, "an unknown bucket does not wait");
        let exhausted = Observed {
            remaining: Some(0),
            reset_after: Some(Duration::from_millis(800)),
            ..Observed::default()
        };
        bucket.update(&exhausted, now);
        assert_eq!(bucket.wait(now), Some(Duration::from_millis(800)));
        assert_eq!(bucket.wait(now + Duration::from_millis(800)), None);
        let fresh = Observed {
            remaining: Some(3),
            ..Observed::default()
        };
        bucket.update(&fresh, now);
        assert_eq!(bucket.wait(now), None);
        bucket.block(Duration::from_secs(2), now);
        assert_eq!(bucket.wait(now), Some(Duration::from_secs(2)));
    }

    #[tokio::test(start_paused = true)]
    async fn requests_wait_for_the_bucket_and_the_global_limit() {
        let limits = RouteLimits::default();
        let start = Instant::now();
        {
            let mut bucket = limits.acquire("POST /channels/1/messages").await;
            let observed = Observed {
                remaining: Some(0),
                reset_after: Some(Duration::from_secs(1)),
                ..Observed::default()
            };
            bucket.update(&observed, Instant::now());
        }
        drop(limits.acquire("POST /channels/2/messages").await);
        assert_eq!(Instant::now(), start, "another channel's bucket is not held up");
        drop(limits.acquire("POST /channels/1/messages").await);
        assert_eq!(Instant::now() - start, Duration::from_secs(1));
        limits.block_global(Duration::from_secs(3));
        drop(limits.acquire("POST /channels/2/messages").await);
        assert_eq!(Instant::now() - start, Duration::from_secs(4));
    }
}
