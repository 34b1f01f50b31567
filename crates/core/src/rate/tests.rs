//! The window's shapes, with a manual clock: a burst up to the limit goes at
//! once, the next send waits exactly until the oldest leaves the window, and
//! no span of the window ever holds one send more than the limit.

use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeZone, Utc};

use super::*;
use crate::time::ManualClock;

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(Utc.with_ymd_and_hms(2026, 12, 3, 12, 0, 0).unwrap()))
}

fn limit(key: &str, count: u32, per_secs: u64) -> SendLimit {
    SendLimit {
        key: key.into(),
        window: Window {
            count,
            per: Duration::from_secs(per_secs),
        },
    }
}

/// Takes and, when taken, finishes at once (as a send that took no time).
fn send(limiter: &LocalLimiter, limits: &[SendLimit]) -> SendSlot {
    let slot = limiter.take_now(limits);
    if let SendSlot::Taken { at_ms } = slot {
        limiter.sent_now(limits, at_ms);
    }
    slot
}

#[test]
fn a_burst_up_to_the_limit_goes_at_once_and_the_next_waits_for_the_oldest() {
    let clock = clock();
    let limiter = LocalLimiter::new(clock.clone());
    let group = [limit("telegram:group:-1", 20, 60)];
    for n in 0..20 {
        assert!(
            matches!(send(&limiter, &group), SendSlot::Taken { .. }),
            "send {n} of the burst"
        );
    }
    assert_eq!(send(&limiter, &group), SendSlot::Wait(Duration::from_secs(60)));
    clock.advance(Duration::from_secs(59));
    assert_eq!(send(&limiter, &group), SendSlot::Wait(Duration::from_secs(1)));
    clock.advance(Duration::from_millis(999));
    assert_eq!(send(&limiter, &group), SendSlot::Wait(Duration::from_millis(1)));
    clock.advance(Duration::from_millis(1));
    assert!(matches!(send(&limiter, &group), SendSlot::Taken { .. }));
    // The 21st went when the first left; the 22nd waits for the second,
    // which left at the same moment: the whole burst is free again, one by one.
    assert!(matches!(send(&limiter, &group), SendSlot::Taken { .. }));
}

#[test]
fn spread_sends_leave_the_window_one_by_one() {
    let clock = clock();
    let limiter = LocalLimiter::new(clock.clone());
    let window = [limit("k", 3, 10)];
    for _ in 0..3 {
        assert!(matches!(send(&limiter, &window), SendSlot::Taken { .. }));
        clock.advance(Duration::from_secs(2));
    }
    // Sends at 0, 2 and 4 s; now is 6 s: the one at 0 leaves at 10 s.
    assert_eq!(send(&limiter, &window), SendSlot::Wait(Duration::from_secs(4)));
    clock.advance(Duration::from_secs(4));
    assert!(matches!(send(&limiter, &window), SendSlot::Taken { .. }));
    assert_eq!(send(&limiter, &window), SendSlot::Wait(Duration::from_secs(2)));
}

#[test]
fn a_send_counts_from_when_it_finished() {
    let clock = clock();
    let limiter = LocalLimiter::new(clock.clone());
    let chat = [limit("telegram:chat:1", 1, 1)];
    let SendSlot::Taken { at_ms } = limiter.take_now(&chat) else {
        panic!("the first send is free")
    };
    // The request took 300 ms to come back.
    clock.advance(Duration::from_millis(300));
    limiter.sent_now(&chat, at_ms);
    assert_eq!(limiter.take_now(&chat), SendSlot::Wait(Duration::from_secs(1)));
    clock.advance(Duration::from_millis(999));
    assert_eq!(limiter.take_now(&chat), SendSlot::Wait(Duration::from_millis(1)));
}

#[test]
fn a_send_in_flight_holds_its_place() {
    let clock = clock();
    let limiter = LocalLimiter::new(clock.clone());
    let chat = [limit("c", 1, 1)];
    assert!(matches!(limiter.take_now(&chat), SendSlot::Taken { .. }));
    // Not finished yet, and a second sender asks: no room.
    assert!(matches!(limiter.take_now(&chat), SendSlot::Wait(_)));
}

#[test]
fn every_window_is_taken_or_none_is() {
    let clock = clock();
    let limiter = LocalLimiter::new(clock.clone());
    let bot = limit("bot", 2, 1);
    assert!(matches!(
        send(&limiter, &[limit("a", 1, 1), bot.clone()]),
        SendSlot::Taken { .. }
    ));
    // Chat `a` is full: the bot-wide window must not lose a place for it.
    assert!(matches!(
        send(&limiter, &[limit("a", 1, 1), bot.clone()]),
        SendSlot::Wait(_)
    ));
    assert!(matches!(
        send(&limiter, &[limit("b", 1, 1), bot.clone()]),
        SendSlot::Taken { .. }
    ));
    assert_eq!(
        send(&limiter, &[limit("c", 1, 1), bot]),
        SendSlot::Wait(Duration::from_secs(1)),
        "the bot-wide window is full after two"
    );
}

#[test]
fn keys_are_independent() {
    let clock = clock();
    let limiter = LocalLimiter::new(clock);
    for chat in 0..50 {
        let key = format!("telegram:chat:{chat}");
        assert!(matches!(send(&limiter, &[limit(&key, 1, 1)]), SendSlot::Taken { .. }));
    }
}

/// A small deterministic generator, so the property runs the same each time.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % below
    }
}

#[test]
fn no_window_ever_holds_one_send_too_many() {
    for (seed, count, per_ms) in [(1, 20, 60_000), (2, 1, 1_000), (3, 5, 3_000), (4, 30, 1_000)] {
        let clock = clock();
        let limiter = LocalLimiter::new(clock.clone());
        let window = [SendLimit {
            key: "k".into(),
            window: Window {
                count,
                per: Duration::from_millis(per_ms),
            },
        }];
        let mut random = Lcg(seed);
        // Each send as (taken, finished): the platform sees it somewhere between.
        let mut sends: Vec<(i64, i64)> = Vec::new();
        let mut waits = 0;
        for _ in 0..5_000 {
            match limiter.take_now(&window) {
                SendSlot::Taken { at_ms } => {
                    // Each send takes 0–50 ms to come back.
                    clock.advance(Duration::from_millis(random.next(51)));
                    limiter.sent_now(&window, at_ms);
                    sends.push((at_ms, to_millis(clock.now())));
                }
                SendSlot::Wait(wait) => {
                    waits += 1;
                    // Sometimes asked again before the wait is over.
                    let early = random.next(2) == 0;
                    let again = if early { wait / 2 } else { wait };
                    clock.advance(again.max(Duration::from_millis(1)));
                }
            }
            clock.advance(Duration::from_millis(random.next(per_ms / u64::from(count) + 1)));
        }
        assert!(waits > 0, "seed {seed}: the limit was reached");
        // Whenever within its span the platform saw each send, no window
        // holds more than `count`: every send starts a full window after the
        // send `count` places before it finished.
        let per = i64::try_from(per_ms).unwrap();
        let count = count as usize;
        assert!(sends.len() > count, "seed {seed}: enough sends");
        for index in count..sends.len() {
            let (taken, _) = sends[index];
            let (_, earlier_finished) = sends[index - count];
            assert!(
                taken >= earlier_finished + per,
                "seed {seed}: send {index} at {taken} is within {per_ms} ms of send {} finished at {earlier_finished}",
                index - count
            );
        }
    }
}

#[test]
fn finishes_round_up_to_the_millisecond() {
    let clock = clock();
    clock.advance(Duration::from_micros(1_500));
    assert_eq!(finished_now(clock.as_ref()), to_millis(clock.now()) + 1);
    clock.advance(Duration::from_micros(500));
    assert_eq!(finished_now(clock.as_ref()), to_millis(clock.now()));
}

#[test]
fn chats_that_went_quiet_are_forgotten() {
    let clock = clock();
    let limiter = LocalLimiter::new(clock.clone());
    for chat in 0..100 {
        send(&limiter, &[limit(&format!("chat:{chat}"), 1, 1)]);
    }
    assert_eq!(limiter.keys(), 100);
    clock.advance(Duration::from_secs(2));
    for _ in 0..SWEEP_EVERY {
        send(&limiter, &[limit("busy", 1_000_000, 1)]);
    }
    assert_eq!(limiter.keys(), 1, "only the chat still inside its window is kept");
}
