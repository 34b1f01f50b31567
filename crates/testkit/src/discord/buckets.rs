//! Discord's rate limits as the fake enforces them: a per-route bucket per
//! top-level resource (the channel), a global limit per bot, a wait after
//! every 429, and 429s a test forces. Every request that breaks a rule the
//! client was told about is recorded as a violation.
//!
//! Pure bookkeeping: the caller passes the time, so the rules are tested
//! without a server or a clock.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

/// One bucket's shape: `limit` requests per `window`, named by `hash` (what
/// `X-RateLimit-Bucket` says).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BucketRule {
    pub limit: u32,
    pub window: Duration,
    pub hash: String,
}

/// The `X-RateLimit-*` values of one answer.
#[derive(Clone, Debug, PartialEq)]
pub struct RateHeaders {
    pub limit: u32,
    pub remaining: u32,
    /// Until the bucket is full again, rounded up to the millisecond.
    pub reset_after: Duration,
    pub bucket: String,
}

/// What the fake answers to one request.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Allow(RateHeaders),
    Limited {
        retry_after: Duration,
        global: bool,
        /// `user`, `shared` or `global`, for `X-RateLimit-Scope`.
        scope: &'static str,
        headers: RateHeaders,
    },
}

struct Window {
    started: Instant,
    used: u32,
    /// An answer in this window said `X-RateLimit-Remaining: 0` to the
    /// client now running. A request into the empty bucket is refused either
    /// way; it is a violation only when the client had been told.
    told_empty: bool,
}

/// Every bucket of one bot.
pub struct Buckets {
    windows: HashMap<String, Window>,
    /// Keys a 429 told the client to leave alone until then.
    blocked_until: HashMap<String, (Instant, &'static str)>,
    recent: VecDeque<Instant>,
    global_limit: u32,
    forced: VecDeque<Duration>,
    violations: Vec<String>,
}

/// Rounds up to whole milliseconds, as Discord's three-decimal headers do.
pub fn ceil_millis(duration: Duration) -> Duration {
    let micros = duration.as_micros();
    Duration::from_millis(micros.div_ceil(1000) as u64)
}

impl Buckets {
    pub fn new(global_limit: u32) -> Self {
        Self {
            windows: HashMap::new(),
            blocked_until: HashMap::new(),
            recent: VecDeque::new(),
            global_limit,
            forced: VecDeque::new(),
            violations: Vec::new(),
        }
    }

    /// The next `count` requests that accept forced limits get a 429 asking
    /// for `retry_after`.
    pub fn force(&mut self, count: usize, retry_after: Duration) {
        self.forced.extend(std::iter::repeat_n(ceil_millis(retry_after), count));
    }

    /// Requests per second the whole bot may make.
    pub fn set_global_limit(&mut self, limit: u32) {
        self.global_limit = limit;
    }

    pub fn violations(&self) -> &[String] {
        &self.violations
    }

    pub fn record_violation(&mut self, violation: String) {
        self.violations.push(violation);
    }

    /// Decides one request to `key` (method, route and top-level resource)
    /// under `rule`. `forceable` requests take a forced 429 when one is due.
    pub fn check(&mut self, key: &str, rule: &BucketRule, forceable: bool, now: Instant) -> Verdict {
        let window = self.windows.entry(key.to_owned()).or_insert(Window {
            started: now,
            used: 0,
            told_empty: false,
        });
        if now >= window.started + rule.window {
            window.started = now;
            window.used = 0;
            window.told_empty = false;
        }
        let reset_at = window.started + rule.window;
        let headers = |used: u32| RateHeaders {
            limit: rule.limit,
            remaining: rule.limit.saturating_sub(used),
            reset_after: ceil_millis(reset_at.saturating_duration_since(now)),
            bucket: rule.hash.clone(),
        };
        let used = window.used;
        let told_empty = window.told_empty;

        if let Some(&(until, scope)) = self.blocked_until.get(key)
            && now < until
        {
            let early = until - now;
            self.violations.push(format!(
                "{key}: sent {early:?} before the retry_after of an earlier 429 had passed"
            ));
            return Verdict::Limited {
                retry_after: ceil_millis(early),
                global: false,
                scope,
                headers: headers(used),
            };
        }

        while let Some(&oldest) = self.recent.front() {
            if now.saturating_duration_since(oldest) >= Duration::from_secs(1) {
                self.recent.pop_front();
            } else {
                break;
            }
        }
        if self.recent.len() as u32 >= self.global_limit {
            let oldest = *self.recent.front().expect("the global window is full");
            let retry_after = ceil_millis((oldest + Duration::from_secs(1)).saturating_duration_since(now));
            self.violations.push(format!(
                "{key}: more than {} requests in one second (the global limit)",
                self.global_limit
            ));
            return Verdict::Limited {
                retry_after,
                global: true,
                scope: "global",
                headers: headers(used),
            };
        }

        if used >= rule.limit {
            let retry_after = ceil_millis(reset_at - now);
            if told_empty {
                self.violations.push(format!(
                    "{key}: sent with 0 of {} remaining in bucket {} ({retry_after:?} before it reset)",
                    rule.limit, rule.hash
                ));
            }
            self.blocked_until.insert(key.to_owned(), (now + retry_after, "user"));
            return Verdict::Limited {
                retry_after,
                global: false,
                scope: "user",
                headers: headers(used),
            };
        }

        if forceable && let Some(retry_after) = self.forced.pop_front() {
            self.blocked_until.insert(key.to_owned(), (now + retry_after, "shared"));
            return Verdict::Limited {
                retry_after,
                global: false,
                scope: "shared",
                headers: headers(used),
            };
        }

        let window = self.windows.get_mut(key).expect("the window was inserted above");
        window.used += 1;
        window.told_empty = window.used >= rule.limit;
        self.recent.push_back(now);
        Verdict::Allow(headers(window.used))
    }

    /// The client was replaced by a new process, which knows nothing of what
    /// the old one was told. Its first request into an empty bucket gets a
    /// 429 as always, but is not its fault; the buckets themselves (what
    /// Discord counts) carry on.
    pub fn client_restarted(&mut self) {
        for window in self.windows.values_mut() {
            window.told_empty = false;
        }
        self.blocked_until.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> BucketRule {
        BucketRule {
            limit: 2,
            window: Duration::from_secs(1),
            hash: "abc".into(),
        }
    }

    fn remaining(verdict: &Verdict) -> Option<u32> {
        match verdict {
            Verdict::Allow(headers) => Some(headers.remaining),
            Verdict::Limited { .. } => None,
        }
    }

    #[test]
    fn a_client_that_reads_the_headers_is_never_refused() {
        let start = Instant::now();
        let mut buckets = Buckets::new(50);
        let at = |ms: u64| start + Duration::from_millis(ms);
        let answers: Vec<_> = [0, 10, 1000, 1001, 2000]
            .into_iter()
            .map(|ms| remaining(&buckets.check("POST /channels/1/messages", &rule(), true, at(ms))))
            .collect();
        assert_eq!(answers, [Some(1), Some(0), Some(1), Some(0), Some(1)]);
        assert!(buckets.violations().is_empty());
    }

    #[test]
    fn sending_with_nothing_remaining_is_refused_and_recorded() {
        let start = Instant::now();
        let mut buckets = Buckets::new(50);
        for _ in 0..2 {
            buckets.check("k", &rule(), false, start);
        }
        let verdict = buckets.check("k", &rule(), false, start + Duration::from_millis(400));
        assert!(matches!(
            verdict,
            Verdict::Limited { retry_after, global: false, .. } if retry_after == Duration::from_millis(600)
        ));
        assert_eq!(buckets.violations().len(), 1);
        // Another bucket key (another channel) is not affected.
        assert_eq!(remaining(&buckets.check("other", &rule(), false, start)), Some(1));
    }

    #[test]
    fn a_new_client_is_refused_without_blame_until_it_is_told() {
        let start = Instant::now();
        let mut buckets = Buckets::new(50);
        for _ in 0..2 {
            buckets.check("k", &rule(), false, start);
        }
        buckets.client_restarted();
        let uninformed = buckets.check("k", &rule(), false, start + Duration::from_millis(100));
        assert!(matches!(uninformed, Verdict::Limited { global: false, .. }));
        assert!(buckets.violations().is_empty(), "{:?}", buckets.violations());
        // The 429 told it; sending again before retry_after is its fault.
        buckets.check("k", &rule(), false, start + Duration::from_millis(200));
        assert_eq!(buckets.violations().len(), 1, "{:?}", buckets.violations());
    }

    #[test]
    fn a_forced_429_must_be_waited_out() {
        let start = Instant::now();
        let mut buckets = Buckets::new(50);
        buckets.force(1, Duration::from_millis(1500));
        let first = buckets.check("k", &rule(), true, start);
        assert!(matches!(first, Verdict::Limited { retry_after, .. } if retry_after == Duration::from_millis(1500)));
        assert!(buckets.violations().is_empty(), "a forced 429 is the fake's doing");
        let early = buckets.check("k", &rule(), true, start + Duration::from_millis(1000));
        assert!(matches!(early, Verdict::Limited { .. }));
        assert_eq!(buckets.violations().len(), 1, "{:?}", buckets.violations());
        let on_time = buckets.check("k", &rule(), true, start + Duration::from_millis(1500));
        assert!(matches!(on_time, Verdict::Allow(_)));
    }

    #[test]
    fn the_global_limit_counts_every_route() {
        let start = Instant::now();
        let mut buckets = Buckets::new(3);
        for n in 0..3 {
            assert!(matches!(
                buckets.check(&format!("k{n}"), &rule(), false, start),
                Verdict::Allow(_)
            ));
        }
        assert!(matches!(
            buckets.check("k9", &rule(), false, start),
            Verdict::Limited { global: true, .. }
        ));
        assert!(matches!(
            buckets.check("k9", &rule(), false, start + Duration::from_secs(1)),
            Verdict::Allow(_)
        ));
    }

    #[test]
    fn header_times_round_up_to_the_millisecond() {
        for (micros, millis) in [(0, 0), (1, 1), (999, 1), (1000, 1), (1001, 2)] {
            assert_eq!(
                ceil_millis(Duration::from_micros(micros)),
                Duration::from_millis(millis)
            );
        }
    }
}
