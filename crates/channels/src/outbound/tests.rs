//! The shared outbound path: chunk order, 429s waited out, and the send
//! windows kept exactly, on tokio's paused clock.

use std::sync::Mutex;

use herald_core::ConversationId;

use crate::chunk::LengthUnit;

use super::*;
use herald_core::rate::LocalLimiter;

#[test]
fn rates_parse_as_written() {
    for (text, expected) in [
        (
            "30/s",
            Ok(Some(Rate {
                count: 30,
                per: Duration::from_secs(1),
            })),
        ),
        (
            "20/m",
            Ok(Some(Rate {
                count: 20,
                per: Duration::from_secs(60),
            })),
        ),
        ("off", Ok(None)),
        ("0", Ok(None)),
    ] {
        assert_eq!(Rate::parse(text), expected, "{text}");
    }
    for bad in ["30", "x/s", "3/d", "3/0s", "3/5x"] {
        assert!(Rate::parse(bad).is_err(), "{bad}");
    }
}

/// A platform that answers 429 to its first `limited` requests.
struct Flaky {
    limited: Mutex<u32>,
    sent: Mutex<Vec<(String, Option<String>, tokio::time::Instant)>>,
}

#[async_trait]
impl PlatformSender for Flaky {
    fn channel(&self) -> ChannelName {
        ChannelName::new("flaky")
    }
    fn chunks(&self, text: &str) -> Vec<Chunk> {
        Chunk::verbatim(
            text,
            Limit {
                max: 10,
                unit: LengthUnit::Chars,
            },
        )
    }
    async fn send_chunk(
        &self,
        _: &ConversationRef,
        chunk: &Chunk,
        reply_to: Option<&str>,
        _: Option<&str>,
    ) -> Result<String, ChannelError> {
        let text = &chunk.text;
        let mut limited = self.limited.lock().unwrap();
        if *limited > 0 {
            *limited -= 1;
            return Err(ChannelError::RateLimited {
                retry_after: Duration::from_secs(3),
            });
        }
        let mut sent = self.sent.lock().unwrap();
        sent.push((
            text.to_owned(),
            reply_to.map(str::to_owned),
            tokio::time::Instant::now(),
        ));
        Ok(sent.len().to_string())
    }
}

fn conversation() -> ConversationRef {
    ConversationRef {
        id: ConversationId::new("flaky:1"),
        channel: ChannelName::new("flaky"),
        kind: ConversationKind::Direct,
        chat: "1".into(),
        thread: None,
    }
}

#[tokio::test(start_paused = true)]
async fn chunks_go_in_order_and_a_429_is_waited_out() {
    let sender = Arc::new(Flaky {
        limited: Mutex::new(1),
        sent: Mutex::new(Vec::new()),
    });
    let delivery = Delivery::new(sender.clone(), &RateLimits::default());
    let start = tokio::time::Instant::now();
    let message = OutboundMessage {
        conversation: conversation(),
        text: "aaaa bbbb cccc dddd".into(),
        reply_to: Some("42".into()),
        idempotency_key: None,
        files: Vec::new(),
    };
    let sent = delivery.send(&message).await.unwrap();
    assert_eq!(sent.platform_message_ids, ["1", "2"]);
    let log = sender.sent.lock().unwrap();
    let texts: Vec<_> = log.iter().map(|(t, r, _)| (t.as_str(), r.as_deref())).collect();
    assert_eq!(texts, [("aaaa bbbb", Some("42")), ("cccc dddd", None)]);
    assert!(
        log[0].2 - start >= Duration::from_secs(3),
        "the first send waited for retry_after"
    );
}

#[tokio::test(start_paused = true)]
async fn a_platform_that_keeps_refusing_is_reported_not_dropped() {
    let sender = Arc::new(Flaky {
        limited: Mutex::new(100),
        sent: Mutex::new(Vec::new()),
    });
    let delivery = Delivery::new(sender, &RateLimits::default());
    let message = OutboundMessage {
        conversation: conversation(),
        text: "hi".into(),
        reply_to: None,
        idempotency_key: None,
        files: Vec::new(),
    };
    assert!(matches!(
        delivery.send(&message).await,
        Err(ChannelError::RateLimited { .. })
    ));
}

/// Herald's clock, following tokio's (paused) time, so the limiter and the
/// sleeps it asks for agree.
#[derive(Debug)]
struct TokioClock {
    start: herald_core::Timestamp,
    origin: tokio::time::Instant,
}

impl TokioClock {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            start: chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap(),
            origin: tokio::time::Instant::now(),
        })
    }
}

impl herald_core::Clock for TokioClock {
    fn now(&self) -> herald_core::Timestamp {
        self.start + chrono::Duration::from_std(self.origin.elapsed()).unwrap()
    }
}

/// A platform that enforces its windows exactly, as the real one counts:
/// every other request arrives `before` after it is made (the others at
/// once) and is answered `after` later; a send that would make `count` + 1
/// within a window is a 429.
struct Windowed {
    rules: Vec<(u32, Duration)>,
    before: Duration,
    after: Duration,
    arrivals: Mutex<Vec<tokio::time::Instant>>,
    refused: Mutex<u32>,
    calls: Mutex<u32>,
}

impl Windowed {
    fn new(rules: Vec<(u32, Duration)>, before: Duration, after: Duration) -> Arc<Self> {
        Arc::new(Self {
            rules,
            before,
            after,
            arrivals: Mutex::new(Vec::new()),
            refused: Mutex::new(0),
            calls: Mutex::new(0),
        })
    }

    /// Seconds since `start` of each accepted send, rounded to the millisecond.
    fn times(&self, start: tokio::time::Instant) -> Vec<f64> {
        self.arrivals
            .lock()
            .unwrap()
            .iter()
            .map(|at| ((*at - start).as_secs_f64() * 1000.0).round() / 1000.0)
            .collect()
    }
}

#[async_trait]
impl PlatformSender for Windowed {
    fn channel(&self) -> ChannelName {
        ChannelName::new("windowed")
    }
    fn chunks(&self, text: &str) -> Vec<Chunk> {
        Chunk::verbatim(
            text,
            Limit {
                max: 1000,
                unit: LengthUnit::Chars,
            },
        )
    }
    async fn send_chunk(
        &self,
        _: &ConversationRef,
        _: &Chunk,
        _: Option<&str>,
        _: Option<&str>,
    ) -> Result<String, ChannelError> {
        let slow = {
            let mut calls = self.calls.lock().unwrap();
            *calls += 1;
            *calls % 2 == 1
        };
        if slow {
            tokio::time::sleep(self.before).await;
        }
        let now = tokio::time::Instant::now();
        let verdict = {
            let mut arrivals = self.arrivals.lock().unwrap();
            let over = self.rules.iter().any(|&(count, per)| {
                arrivals.iter().filter(|at| now.duration_since(**at) < per).count() >= count as usize
            });
            if !over {
                arrivals.push(now);
            }
            over
        };
        tokio::time::sleep(self.after).await;
        if verdict {
            *self.refused.lock().unwrap() += 1;
            return Err(ChannelError::RateLimited {
                retry_after: Duration::from_secs(1),
            });
        }
        Ok("1".into())
    }
}

fn group() -> ConversationRef {
    ConversationRef {
        id: ConversationId::new("windowed:-5"),
        channel: ChannelName::new("windowed"),
        kind: ConversationKind::Group,
        chat: "-5".into(),
        thread: None,
    }
}

fn reply(conversation: ConversationRef, n: usize) -> OutboundMessage {
    OutboundMessage {
        conversation,
        text: format!("reply {n}"),
        reply_to: None,
        idempotency_key: None,
        files: Vec::new(),
    }
}

fn limits(per_chat: Option<&str>, per_group: Option<&str>) -> RateLimits {
    RateLimits {
        per_chat: per_chat.and_then(|r| Rate::parse(r).unwrap()),
        per_group: per_group.and_then(|r| Rate::parse(r).unwrap()),
        per_bot: None,
    }
}

#[tokio::test(start_paused = true)]
async fn a_group_gets_its_burst_at_once_and_the_next_reply_when_the_first_leaves() {
    let platform = Windowed::new(vec![(20, Duration::from_secs(60))], Duration::ZERO, Duration::ZERO);
    let limiter = Arc::new(LocalLimiter::new(TokioClock::new()));
    let delivery = Delivery::with_limiter(platform.clone(), &limits(None, Some("20/m")), limiter);
    let start = tokio::time::Instant::now();
    for n in 0..22 {
        delivery.send(&reply(group(), n)).await.unwrap();
    }
    let mut expected = vec![0.0; 20];
    expected.extend([60.0, 60.0]);
    assert_eq!(platform.times(start), expected);
    assert_eq!(*platform.refused.lock().unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn per_chat_and_per_group_windows_both_hold_in_a_group() {
    let platform = Windowed::new(
        vec![(1, Duration::from_secs(1)), (20, Duration::from_secs(60))],
        Duration::ZERO,
        Duration::ZERO,
    );
    let limiter = Arc::new(LocalLimiter::new(TokioClock::new()));
    let delivery = Delivery::with_limiter(platform.clone(), &limits(Some("1/s"), Some("20/m")), limiter);
    let start = tokio::time::Instant::now();
    for n in 0..22 {
        delivery.send(&reply(group(), n)).await.unwrap();
    }
    let mut expected: Vec<f64> = (0..20).map(f64::from).collect();
    // The 21st waits for the first to leave the minute; the 22nd a second more.
    expected.extend([60.0, 61.0]);
    assert_eq!(platform.times(start), expected);
    assert_eq!(*platform.refused.lock().unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn slow_requests_never_make_the_platform_count_one_too_many() {
    // Every other request arrives 120 ms after it is made, and each is
    // answered 80 ms after it arrived: a limiter that counted sends from
    // their start would let a fast one arrive inside the window of a slow one.
    let platform = Windowed::new(
        vec![(3, Duration::from_secs(3))],
        Duration::from_millis(120),
        Duration::from_millis(80),
    );
    let limiter: Arc<dyn SendLimiter> = Arc::new(LocalLimiter::new(TokioClock::new()));
    let delivery = Arc::new(Delivery::with_limiter(
        platform.clone(),
        &limits(Some("3/3s"), None),
        limiter,
    ));
    // Four senders at once, as four workers would be.
    let mut sends = tokio::task::JoinSet::new();
    for worker in 0..4 {
        let delivery = delivery.clone();
        sends.spawn(async move {
            for n in 0..5 {
                let mut conversation = group();
                conversation.kind = ConversationKind::Direct;
                delivery.send(&reply(conversation, worker * 10 + n)).await.unwrap();
            }
        });
    }
    while let Some(done) = sends.join_next().await {
        done.unwrap();
    }
    assert_eq!(*platform.refused.lock().unwrap(), 0, "no send was refused");
    assert_eq!(platform.arrivals.lock().unwrap().len(), 20);
}

/// A platform that takes two files a request, with the last chunk of text.
#[derive(Default)]
struct Uploader {
    requests: Mutex<Vec<(Option<String>, Vec<String>)>>,
}

#[async_trait]
impl PlatformSender for Uploader {
    fn channel(&self) -> ChannelName {
        ChannelName::new("uploader")
    }
    fn chunks(&self, text: &str) -> Vec<Chunk> {
        Chunk::verbatim(
            text,
            Limit {
                max: 10,
                unit: LengthUnit::Chars,
            },
        )
    }
    async fn send_chunk(
        &self,
        _: &ConversationRef,
        chunk: &Chunk,
        _: Option<&str>,
        _: Option<&str>,
    ) -> Result<String, ChannelError> {
        let text = &chunk.text;
        let mut requests = self.requests.lock().unwrap();
        requests.push((Some(text.to_owned()), Vec::new()));
        Ok(requests.len().to_string())
    }
    fn uploads(&self) -> Option<FileUploads> {
        Some(FileUploads {
            max_file_bytes: 4,
            max_files_per_send: 2,
            with_text: true,
        })
    }
    async fn send_files(
        &self,
        _: &ConversationRef,
        text: Option<&str>,
        files: &[OutboundFile],
        _: Option<&str>,
        _: Option<&str>,
    ) -> Result<String, ChannelError> {
        let mut requests = self.requests.lock().unwrap();
        requests.push((
            text.map(str::to_owned),
            files.iter().map(|file| file.name.clone()).collect(),
        ));
        Ok(requests.len().to_string())
    }
}

fn file(name: &str, bytes: &[u8]) -> OutboundFile {
    OutboundFile {
        name: name.into(),
        content_type: "text/plain".into(),
        bytes: herald_core::InlineBytes(bytes.into()),
    }
}

fn with_files(files: Vec<OutboundFile>) -> OutboundMessage {
    OutboundMessage {
        conversation: conversation(),
        text: "aaaa bbbb cccc dddd".into(),
        reply_to: None,
        idempotency_key: None,
        files,
    }
}

#[tokio::test(start_paused = true)]
async fn files_follow_the_text_in_groups_the_platform_takes_with_its_last_chunk() {
    let sender = Arc::new(Uploader::default());
    let delivery = Delivery::new(sender.clone(), &RateLimits::default());
    let files = vec![file("a", b"1"), file("b", b"22"), file("c", b"333")];
    let sent = delivery.send(&with_files(files)).await.unwrap();
    assert_eq!(sent.platform_message_ids, ["1", "2", "3"]);
    let requests = sender.requests.lock().unwrap().clone();
    let expected: Vec<(Option<String>, Vec<String>)> = vec![
        (Some("aaaa bbbb".into()), vec![]),
        (Some("cccc dddd".into()), vec!["a".into(), "b".into()]),
        (None, vec!["c".into()]),
    ];
    assert_eq!(requests, expected);
}

#[tokio::test(start_paused = true)]
async fn files_a_platform_cannot_take_are_refused_before_anything_is_sent() {
    let uploader = Arc::new(Uploader::default());
    let delivery = Delivery::new(uploader.clone(), &RateLimits::default());
    let refused = delivery.send(&with_files(vec![file("big", b"12345")])).await;
    assert!(
        matches!(&refused, Err(ChannelError::Fatal(why)) if why.contains("big is 5 bytes, over what uploader takes (4 bytes)")),
        "{refused:?}"
    );
    assert!(uploader.requests.lock().unwrap().is_empty());

    let flaky = Arc::new(Flaky {
        limited: Mutex::new(0),
        sent: Mutex::new(Vec::new()),
    });
    let delivery = Delivery::new(flaky.clone(), &RateLimits::default());
    let refused = delivery.send(&with_files(vec![file("a", b"1")])).await;
    assert!(
        matches!(&refused, Err(ChannelError::Fatal(why)) if why == "flaky cannot send files yet; nothing was sent"),
        "{refused:?}"
    );
    assert!(flaky.sent.lock().unwrap().is_empty());
}

/// A platform that edits its messages, recording every request; it answers
/// 429 (3 s) to its first `limited` edits, and may limit edits on its own.
#[derive(Default)]
struct Editor {
    requests: Mutex<Vec<String>>,
    limited: Mutex<u32>,
    edit_window: Option<Window>,
}

#[async_trait]
impl PlatformSender for Editor {
    fn channel(&self) -> ChannelName {
        ChannelName::new("editor")
    }
    fn chunks(&self, text: &str) -> Vec<Chunk> {
        Chunk::verbatim(
            text,
            Limit {
                max: 10,
                unit: LengthUnit::Chars,
            },
        )
    }
    async fn send_chunk(
        &self,
        _: &ConversationRef,
        chunk: &Chunk,
        _: Option<&str>,
        _: Option<&str>,
    ) -> Result<String, ChannelError> {
        let mut requests = self.requests.lock().unwrap();
        requests.push(format!("send {}", chunk.text));
        let sends = requests.iter().filter(|request| request.starts_with("send")).count();
        Ok(format!("m{sends}"))
    }
    fn edits(&self) -> bool {
        true
    }
    async fn edit_chunk(&self, _: &ConversationRef, id: &str, chunk: &Chunk) -> Result<(), ChannelError> {
        self.requests.lock().unwrap().push(format!("edit {id} {}", chunk.text));
        let mut limited = self.limited.lock().unwrap();
        if *limited > 0 {
            *limited -= 1;
            return Err(ChannelError::RateLimited {
                retry_after: Duration::from_secs(3),
            });
        }
        Ok(())
    }
    fn edit_window(&self) -> Option<Window> {
        self.edit_window
    }
}

#[tokio::test(start_paused = true)]
async fn a_429_on_a_partial_answer_pauses_them_for_as_long_as_asked() {
    let editor = Arc::new(Editor {
        limited: Mutex::new(1),
        ..Editor::default()
    });
    let limiter = Arc::new(LocalLimiter::new(TokioClock::new()));
    let delivery = Delivery::with_limiter(editor.clone(), &RateLimits::default(), limiter).with_streaming(true);
    let message = reply(conversation(), 0);
    let show = |text: &'static str| delivery.show_partial(&message, Some("m1"), text);
    assert_eq!(show("a").await.unwrap(), Partial::Skipped, "refused with a 429");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(show("a b").await.unwrap(), Partial::Skipped, "paused: no request");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(show("a b c").await.unwrap(), Partial::Shown("m1".into()));
    assert_eq!(*editor.requests.lock().unwrap(), ["edit m1 a", "edit m1 a b c"]);
}

#[tokio::test(start_paused = true)]
async fn edits_keep_the_platforms_own_edit_window() {
    let editor = Arc::new(Editor {
        edit_window: Some(Window {
            count: 2,
            per: Duration::from_secs(60),
        }),
        ..Editor::default()
    });
    let limiter = Arc::new(LocalLimiter::new(TokioClock::new()));
    let delivery = Delivery::with_limiter(editor.clone(), &RateLimits::default(), limiter).with_streaming(true);
    let message = reply(conversation(), 0);
    for text in ["a", "a b"] {
        assert_eq!(
            delivery.show_partial(&message, Some("m1"), text).await.unwrap(),
            Partial::Shown("m1".into())
        );
    }
    assert_eq!(
        delivery.show_partial(&message, Some("m1"), "a b c").await.unwrap(),
        Partial::Skipped
    );
    // The final edit waits for the window instead.
    let started = tokio::time::Instant::now();
    delivery
        .finish(
            &OutboundMessage {
                text: "a b c d".into(),
                ..message
            },
            "m1",
        )
        .await
        .unwrap();
    assert_eq!(started.elapsed(), Duration::from_secs(60));
    assert_eq!(editor.requests.lock().unwrap().len(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_partial_answer_is_shown_then_edited_and_finished_in_place() {
    let editor = Arc::new(Editor::default());
    let limiter = Arc::new(LocalLimiter::new(TokioClock::new()));
    let delivery = Delivery::with_limiter(editor.clone(), &limits(Some("1/s"), None), limiter).with_streaming(true);
    assert!(delivery.streams());
    let message = reply(conversation(), 0);
    let shown = delivery.show_partial(&message, None, "Sure.").await.unwrap();
    assert_eq!(shown, Partial::Shown("m1".into()));
    // Within the chat's second the window is full: skipped, not waited for.
    let started = tokio::time::Instant::now();
    assert_eq!(
        delivery.show_partial(&message, Some("m1"), "Sure. Here").await.unwrap(),
        Partial::Skipped
    );
    assert_eq!(started.elapsed(), Duration::ZERO);
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Outgrowing one message: its first part shows, the rest waits.
    assert_eq!(
        delivery
            .show_partial(&message, Some("m1"), "Sure. Here is more")
            .await
            .unwrap(),
        Partial::Full("m1".into())
    );
    let finished = delivery
        .finish(
            &OutboundMessage {
                text: "Sure. Here is all of it".into(),
                ..message
            },
            "m1",
        )
        .await
        .unwrap();
    assert_eq!(finished.platform_message_ids, ["m1", "m2", "m3"]);
    assert_eq!(
        *editor.requests.lock().unwrap(),
        [
            "send Sure.",
            "edit m1 Sure.",
            "edit m1 Sure.",
            "send Here is",
            "send all of it"
        ]
    );
}

#[tokio::test]
async fn a_channel_streams_only_when_configured_and_able() {
    let limiter: Arc<dyn SendLimiter> = Arc::new(LocalLimiter::new(TokioClock::new()));
    let editor = Delivery::with_limiter(Arc::new(Editor::default()), &RateLimits::default(), limiter.clone());
    assert!(!editor.streams(), "streaming: off");
    let flaky = Delivery::with_limiter(
        Arc::new(Flaky {
            limited: Mutex::new(0),
            sent: Mutex::new(Vec::new()),
        }),
        &RateLimits::default(),
        limiter,
    )
    .with_streaming(true);
    assert!(!flaky.streams(), "a platform that cannot edit does not stream");
}
