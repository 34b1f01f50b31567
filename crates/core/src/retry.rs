//! Retry classification and exponential backoff, shared by the queue, the
//! model client and the channels so there is one policy and not three.

use std::time::Duration;

/// How an error should be treated by whoever may retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryClass {
    /// The other side asked us to wait this long.
    RetryAfter(Duration),
    /// Worth another try after a backoff.
    Transient,
    /// Trying again will not help.
    Fatal,
}

/// Exponential backoff: `base * 2^(attempt-1)`, capped at `max_delay`, for at
/// most `max_attempts` attempts in all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    pub base: Duration,
    pub max_delay: Duration,
    pub max_attempts: u32,
}

impl Backoff {
    /// The wait after failed attempt number `attempt` (1-based), or `None`
    /// when no attempts are left.
    pub fn delay_after(&self, attempt: u32) -> Option<Duration> {
        if attempt >= self.max_attempts {
            return None;
        }
        let exponent = attempt.saturating_sub(1).min(30);
        let delay = self.base.saturating_mul(1u32 << exponent);
        Some(delay.min(self.max_delay))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_until_the_cap_then_stops() {
        let backoff = Backoff {
            base: Duration::from_secs(1),
            max_delay: Duration::from_secs(5),
            max_attempts: 5,
        };
        let delays: Vec<_> = (1..=5).map(|a| backoff.delay_after(a)).collect();
        assert_eq!(
            delays,
            vec![
                Some(Duration::from_secs(1)),
                Some(Duration::from_secs(2)),
                Some(Duration::from_secs(4)),
                Some(Duration::from_secs(5)),
                None
            ]
        );
    }

    #[test]
    fn huge_attempt_numbers_do_not_overflow() {
        let backoff = Backoff {
            base: Duration::from_secs(1),
            max_delay: Duration::from_secs(60),
            max_attempts: u32::MAX,
        };
        assert_eq!(backoff.delay_after(1000), Some(Duration::from_secs(60)));
    }
}
