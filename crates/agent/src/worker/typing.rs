//! The typing indicator while a turn runs: shown once the turn has taken
//! longer than a glance, renewed before the platform lets it fade, and
//! never sent after the turn is over.
//!
//! Platforms show "typing…" for a few seconds only (Telegram 5, Discord
//! 10), and a model takes 1–30 s; one indicator at the start would vanish
//! long before the answer. A turn that answers within [`TYPING_AFTER`] needs
//! none (the answer itself arrives): no platform request is spent on it,
//! and the turn never waits for the indicator's round trip.

use std::future::Future;
use std::time::Duration;

use herald_core::{ChannelOutbound, ConversationRef};
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};
use tracing::debug;

/// How long a turn runs before the indicator is first shown.
pub(crate) const TYPING_AFTER: Duration = Duration::from_millis(500);

/// Runs `work` to its end; while it runs, shows the typing indicator in
/// `conversation` from `first` on, renewed at four fifths of how long the
/// platform shows it, until `text_visible` says the answer itself shows
/// (streamed into place). A failed indicator is not tried again (it is a
/// courtesy; the turn goes on), and none is started after `work` finished.
pub(crate) async fn while_running<T>(
    channel: Option<&dyn ChannelOutbound>,
    conversation: &ConversationRef,
    first: Duration,
    mut text_visible: watch::Receiver<bool>,
    work: impl Future<Output = T>,
) -> T {
    let Some(channel) = channel else {
        return work.await;
    };
    tokio::pin!(work);
    let mut next = Instant::now() + first;
    loop {
        tokio::select! {
            biased;
            done = &mut work => return done,
            // Once text shows, typing would only blink over it.
            () = shows(&mut text_visible) => return work.await,
            () = sleep_until(next) => {}
        }
        // The turn goes on while the indicator's request is out.
        let shown = tokio::select! {
            biased;
            done = &mut work => return done,
            shown = channel.typing(conversation) => shown,
        };
        match shown {
            Ok(Some(lasts)) => next = Instant::now() + (lasts * 4 / 5).max(Duration::from_secs(1)),
            Ok(None) => return work.await,
            Err(err) => {
                debug!(error = %err, "typing indicator failed");
                return work.await;
            }
        }
    }
}

/// Returns once `visible` turns true; never when it stays false.
async fn shows(visible: &mut watch::Receiver<bool>) {
    if visible.wait_for(|visible| *visible).await.is_err() {
        std::future::pending::<()>().await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use async_trait::async_trait;
    use herald_core::{ChannelError, ChannelName, ConversationId, ConversationKind, OutboundMessage, SentMessage};

    use super::*;

    /// Records when each indicator was asked for, on tokio's clock.
    struct Indicator {
        lasts: Option<Duration>,
        fails: bool,
        shown: Mutex<Vec<Duration>>,
        started: Instant,
    }

    impl Indicator {
        fn new(lasts: Option<Duration>) -> Self {
            Self {
                lasts,
                fails: false,
                shown: Mutex::new(Vec::new()),
                started: Instant::now(),
            }
        }

        fn shown_at(&self) -> Vec<u64> {
            self.shown
                .lock()
                .unwrap()
                .iter()
                .map(|d| d.as_millis() as u64)
                .collect()
        }
    }

    #[async_trait]
    impl ChannelOutbound for Indicator {
        fn channel(&self) -> ChannelName {
            ChannelName::new("test")
        }

        async fn send(&self, _message: &OutboundMessage) -> Result<SentMessage, ChannelError> {
            unreachable!("the indicator sends no messages")
        }

        async fn typing(&self, _conversation: &ConversationRef) -> Result<Option<Duration>, ChannelError> {
            self.shown.lock().unwrap().push(self.started.elapsed());
            // The platform's round trip.
            tokio::time::sleep(Duration::from_millis(100)).await;
            if self.fails {
                return Err(ChannelError::Fatal("forbidden".into()));
            }
            Ok(self.lasts)
        }
    }

    fn conversation() -> ConversationRef {
        ConversationRef {
            channel: ChannelName::new("test"),
            id: ConversationId::new("test:1"),
            kind: ConversationKind::Direct,
            chat: "1".into(),
            thread: None,
        }
    }

    /// A turn of `length` with the indicator in `channel`.
    async fn turn_of(channel: &Indicator, length: Duration) -> &'static str {
        let turn = async {
            tokio::time::sleep(length).await;
            "answer"
        };
        let (_visible, never) = watch::channel(false);
        while_running(Some(channel), &conversation(), TYPING_AFTER, never, turn).await
    }

    #[tokio::test(start_paused = true)]
    async fn typing_stops_once_the_answer_shows() {
        let channel = Indicator::new(Some(Duration::from_secs(5)));
        let (visible, text_visible) = watch::channel(false);
        let turn = async {
            tokio::time::sleep(Duration::from_secs(6)).await;
            // The streamed answer shows from here on.
            visible.send_replace(true);
            tokio::time::sleep(Duration::from_secs(10)).await;
        };
        while_running(Some(&channel), &conversation(), TYPING_AFTER, text_visible, turn).await;
        assert_eq!(channel.shown_at(), [500, 4_600]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_quick_answer_shows_no_indicator() {
        let channel = Indicator::new(Some(Duration::from_secs(5)));
        let answer = turn_of(&channel, Duration::from_millis(300)).await;
        assert_eq!(answer, "answer");
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(channel.shown_at().is_empty(), "{:?}", channel.shown_at());
    }

    #[tokio::test(start_paused = true)]
    async fn a_long_turn_keeps_the_indicator_up_until_it_ends() {
        // Telegram shows it for 5 s: renewed every 4 s after each answer.
        let channel = Indicator::new(Some(Duration::from_secs(5)));
        turn_of(&channel, Duration::from_secs(13)).await;
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(channel.shown_at(), [500, 4_600, 8_700, 12_800]);
    }

    #[tokio::test(start_paused = true)]
    async fn the_renewal_follows_how_long_the_platform_shows_it() {
        // Discord shows it for 10 s.
        let channel = Indicator::new(Some(Duration::from_secs(10)));
        turn_of(&channel, Duration::from_secs(20)).await;
        assert_eq!(channel.shown_at(), [500, 8_600, 16_700]);
    }

    #[tokio::test(start_paused = true)]
    async fn the_turn_ends_while_the_indicator_is_on_its_way() {
        let channel = Indicator::new(Some(Duration::from_secs(5)));
        let started = Instant::now();
        turn_of(&channel, Duration::from_millis(550)).await;
        assert!(
            started.elapsed() < Duration::from_millis(600),
            "the turn does not wait for the indicator's round trip: {:?}",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(channel.shown_at(), [500]);
    }

    #[tokio::test(start_paused = true)]
    async fn channels_without_an_indicator_or_with_a_failing_one_are_asked_once() {
        for fails in [false, true] {
            let mut channel = Indicator::new(if fails { Some(Duration::from_secs(5)) } else { None });
            channel.fails = fails;
            let answer = turn_of(&channel, Duration::from_secs(20)).await;
            assert_eq!(answer, "answer");
            assert_eq!(channel.shown_at(), [500], "fails: {fails}");
        }
    }
}
