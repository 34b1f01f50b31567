//! Starting gateway sessions without angering Discord, pure: what
//! `GET /gateway/bot` says (the shard count Discord recommends, the
//! session-start budget, the identify concurrency), whether the budget
//! allows another IDENTIFY, which identify bucket a shard is in, and how
//! long to wait after invalid sessions in a row.
//!
//! Discord allows a bot `session_start_limit.total` IDENTIFYs a day
//! (1,000 for most bots) and resets the token of a bot that uses them up;
//! it allows one IDENTIFY per 5 seconds in each of `max_concurrency`
//! buckets (a shard's bucket is `shard_id % max_concurrency`). A loop of
//! invalid sessions, each answered by a fresh IDENTIFY, would burn the day's
//! budget in an hour, so Herald backs off exponentially and stops before
//! the budget is gone, saying when it resets.

use std::time::Duration;

use serde::Deserialize;

/// How long Discord wants between two IDENTIFYs in one bucket.
pub const IDENTIFY_INTERVAL: Duration = Duration::from_secs(5);

/// The longest wait between identifies after invalid sessions in a row.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// `GET /gateway/bot`'s answer.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct GatewayBot {
    pub url: String,
    /// The shard count Discord recommends for the bot's guilds.
    pub shards: u32,
    pub session_start_limit: SessionStartLimit,
}

/// How many sessions the bot may still start today.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct SessionStartLimit {
    pub total: u32,
    pub remaining: u32,
    /// Milliseconds until `remaining` is `total` again.
    pub reset_after: u64,
    /// How many identify buckets the bot has (1 for most bots).
    #[serde(default = "one")]
    pub max_concurrency: u32,
}

fn one() -> u32 {
    1
}

/// Whether another session may be started now.
#[derive(Debug, PartialEq, Eq)]
pub enum Budget {
    Start,
    /// Too little is left: wait this long, until Discord resets it.
    WaitForReset {
        remaining: u32,
        total: u32,
        reset_after: Duration,
    },
}

impl SessionStartLimit {
    /// The starts Herald leaves untouched: a twentieth of the day's
    /// budget, at least one, so the bot's token is never reset by Discord
    /// and an operator can still start it by hand after fixing whatever
    /// made the sessions fail.
    pub fn reserve(&self) -> u32 {
        (self.total / 20).max(1)
    }

    pub fn budget(&self) -> Budget {
        if self.remaining > self.reserve() {
            Budget::Start
        } else {
            Budget::WaitForReset {
                remaining: self.remaining,
                total: self.total,
                reset_after: Duration::from_millis(self.reset_after.max(1_000)),
            }
        }
    }

    /// `max_concurrency`, at least 1 (a zero would divide by zero).
    pub fn buckets(&self) -> u32 {
        self.max_concurrency.max(1)
    }
}

/// The identify bucket of `shard` when the bot has `buckets` of them.
pub fn bucket(shard: u32, buckets: u32) -> u32 {
    shard % buckets.max(1)
}

/// The shard a guild's events arrive on: `(guild_id >> 22) % shards`, as
/// Discord documents it. Direct messages arrive on shard 0.
pub fn shard_of_guild(guild_id: u64, shards: u32) -> u32 {
    ((guild_id >> 22) % u64::from(shards.max(1))) as u32
}

/// Invalid sessions in a row, and the wait before the next IDENTIFY.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Backoff {
    failures: u32,
}

impl Backoff {
    /// One more session refused before it was ready; the wait before the
    /// next IDENTIFY: 5 s doubled for every refusal in a row before (Discord
    /// asks for 1 to 5 s after one), at most [`MAX_BACKOFF`], plus
    /// `jitter` (in `[0, 1)`) of a second so shards do not retry together.
    pub fn refused(&mut self, jitter: f64) -> Duration {
        self.failures = self.failures.saturating_add(1);
        let doublings = self.failures.saturating_sub(1).min(16);
        let base = IDENTIFY_INTERVAL.saturating_mul(1 << doublings).min(MAX_BACKOFF);
        base + Duration::from_secs(1).mul_f64(jitter.clamp(0.0, 1.0))
    }

    /// A session became ready: the next refusal starts from the bottom.
    pub fn ready(&mut self) {
        self.failures = 0;
    }

    pub fn failures(&self) -> u32 {
        self.failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(total: u32, remaining: u32) -> SessionStartLimit {
        SessionStartLimit {
            total,
            remaining,
            reset_after: 3_600_000,
            max_concurrency: 1,
        }
    }

    #[test]
    fn gateway_bot_decodes_as_discord_documents_it() {
        let text = r#"{"url": "wss://gateway.discord.gg", "shards": 9,
            "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 14400000, "max_concurrency": 1}}"#;
        let bot: GatewayBot = serde_json::from_str(text).unwrap();
        assert_eq!(bot.shards, 9);
        assert_eq!(bot.session_start_limit, limit(1000, 999).with_reset(14_400_000));
    }

    impl SessionStartLimit {
        fn with_reset(mut self, reset_after: u64) -> Self {
            self.reset_after = reset_after;
            self
        }
    }

    #[test]
    fn starting_stops_before_the_budget_is_gone() {
        assert_eq!(limit(1000, 999).budget(), Budget::Start);
        assert_eq!(limit(1000, 51).budget(), Budget::Start);
        assert_eq!(
            limit(1000, 50).budget(),
            Budget::WaitForReset {
                remaining: 50,
                total: 1000,
                reset_after: Duration::from_secs(3600)
            }
        );
        // A small budget still keeps one start back.
        assert_eq!(limit(10, 2).budget(), Budget::Start);
        assert!(matches!(limit(10, 1).budget(), Budget::WaitForReset { .. }));
        assert!(matches!(limit(10, 0).budget(), Budget::WaitForReset { .. }));
    }

    #[test]
    fn a_reset_that_is_due_is_still_waited_for_a_second() {
        let Budget::WaitForReset { reset_after, .. } = limit(1000, 0).with_reset(0).budget() else {
            panic!("an empty budget waits");
        };
        assert_eq!(reset_after, Duration::from_secs(1));
    }

    #[test]
    fn shards_share_buckets_by_their_id() {
        assert_eq!(bucket(0, 1), 0);
        assert_eq!(bucket(5, 1), 0);
        assert_eq!(bucket(5, 16), 5);
        assert_eq!(bucket(17, 16), 1);
        assert_eq!(bucket(3, 0), 0, "a zero concurrency counts as one bucket");
    }

    #[test]
    fn guilds_map_to_shards_as_discord_documents() {
        // Two guilds whose ids differ by one in the bits above the
        // timestamp's low 22 land on different shards of two.
        let guild = 197_038_439_483_310_086u64;
        assert_eq!(shard_of_guild(guild, 1), 0);
        assert_eq!(u64::from(shard_of_guild(guild, 2)), (guild >> 22) % 2);
        assert_eq!(u64::from(shard_of_guild(guild + (1 << 22), 2)), ((guild >> 22) + 1) % 2);
    }

    #[test]
    fn invalid_sessions_in_a_row_double_the_wait_up_to_five_minutes() {
        let mut backoff = Backoff::default();
        let waits: Vec<u64> = (0..9).map(|_| backoff.refused(0.0).as_secs()).collect();
        assert_eq!(waits, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(backoff.failures(), 9);
        assert!(backoff.refused(0.99) < MAX_BACKOFF + Duration::from_secs(1));
        backoff.ready();
        assert_eq!(backoff.refused(0.5), Duration::from_millis(5_500));
    }

    #[test]
    fn a_storm_of_a_thousand_refusals_costs_few_starts_a_day() {
        // What the backoff protects: with 300 s between identifies, a bot
        // refused forever starts at most 288 sessions a day, under the
        // budget of 1,000, so Discord never resets its token.
        let mut backoff = Backoff::default();
        let day: Duration = (0..1000).map(|_| backoff.refused(0.0)).sum();
        assert!(day > Duration::from_secs(86_400 * 3), "{day:?}");
    }
}
