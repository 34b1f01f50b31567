//! Telegram's documented send limits against a fake that enforces them
//! exactly and answers 429 with `retry_after` as the Bot API does.
//!
//! A busy group: replies as fast as turns finish get no 429 (the group's
//! minute window lets them go; the per-chat second spaces them).
//!
//! One bot, several processes: two delivery paths, as two Herald processes
//! on one PostgreSQL database have (each its own connections), reply in one
//! Telegram chat at the same time. With the send windows kept in the
//! database, the two paths together never get a 429; each keeping its own
//! windows (as a lone process does), they do, which shows the fake would
//! catch a shared limiter that leaks.

use std::sync::Arc;
use std::time::Duration;

use herald_channels::telegram::{self, TelegramConfig};
use herald_core::{
    ChannelName, ChannelOutbound, ConversationId, ConversationKind, ConversationRef, LocalLimiter, OutboundMessage,
    SendLimiter, SteadyClock, SystemClock,
};
use herald_store::{QueueConfig, Storage, StorageConfig};
use herald_testkit::postgres::TestDatabase;
use herald_testkit::telegram::{FakeTelegram, FakeTelegramOptions};
use herald_testkit::{FakePlatform, FakeUser, GroupTarget};

async fn storage(url: &str) -> Storage {
    let storage = Storage::connect(
        &StorageConfig {
            url: url.to_owned().into(),
            ..StorageConfig::default()
        },
        &QueueConfig::default(),
        Arc::new(SystemClock),
    )
    .await
    .expect("PostgreSQL connects");
    storage.migrate().await.expect("migrations apply");
    storage
}

fn outbound(fake: &FakeTelegram, limiter: Arc<dyn SendLimiter>) -> Arc<dyn ChannelOutbound> {
    let config: TelegramConfig = serde_yaml::from_str(&fake.channel_yaml()).expect("the fake's yaml");
    telegram::build(&config, None, limiter, &Default::default())
        .expect("the channel builds")
        .outbound
}

fn in_group(target: &GroupTarget, text: String) -> OutboundMessage {
    OutboundMessage {
        conversation: ConversationRef {
            id: ConversationId::new(format!("telegram:{}", target.chat)),
            channel: ChannelName::new("telegram"),
            kind: ConversationKind::Group,
            chat: target.chat.clone(),
            thread: target.thread.clone(),
        },
        text,
        reply_to: None,
        idempotency_key: None,
        files: Vec::new(),
    }
}

#[tokio::test]
async fn a_busy_group_gets_every_reply_and_no_429() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fake = FakeTelegram::start_with(FakeTelegramOptions::realistic()).await;
    let limiter: Arc<dyn SendLimiter> = Arc::new(LocalLimiter::new(Arc::new(SteadyClock::new())));
    let path = outbound(&fake, limiter);
    let group = fake.plain_group();
    // Replies as fast as turns finish, in the group and in a direct chat
    // beside it, as one worker after another hands them over.
    fake.send_dm(&fake.admin(), "hi").await;
    let admin = fake.admin();
    let (group_path, direct_path) = (path.clone(), path);
    let in_group_sends = async {
        for n in 0..4 {
            group_path
                .send(&in_group(&group, format!("g{n}")))
                .await
                .expect("delivered");
        }
    };
    let direct_sends = async {
        for n in 0..3 {
            direct_path
                .send(&reply(&admin, format!("d{n}")))
                .await
                .expect("delivered");
        }
    };
    tokio::join!(in_group_sends, direct_sends);
    let sent = fake.sent();
    assert_eq!(sent.iter().filter(|m| m.chat == group.chat).count(), 4);
    assert_eq!(sent.len(), 7, "every reply arrived once");
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

fn reply(user: &FakeUser, text: String) -> OutboundMessage {
    OutboundMessage {
        conversation: ConversationRef {
            id: ConversationId::new(format!("telegram:{}", user.id)),
            channel: ChannelName::new("telegram"),
            kind: ConversationKind::Direct,
            chat: user.id.clone(),
            thread: None,
        },
        text,
        reply_to: None,
        idempotency_key: None,
        files: Vec::new(),
    }
}

/// Both paths send `each` replies to the admin's chat at once; returns the
/// fake's violations (every 429 it had to give).
async fn two_paths_send(
    fake: &FakeTelegram,
    first: Arc<dyn ChannelOutbound>,
    second: Arc<dyn ChannelOutbound>,
    each: usize,
) -> Vec<String> {
    let admin = fake.admin();
    let mut sending = tokio::task::JoinSet::new();
    for (name, path) in [("a", first), ("b", second)] {
        let admin = admin.clone();
        sending.spawn(async move {
            for n in 0..each {
                path.send(&reply(&admin, format!("{name}{n}")))
                    .await
                    .expect("delivered");
            }
        });
    }
    while let Some(done) = sending.join_next().await {
        done.expect("a sender finished");
    }
    assert_eq!(fake.sent().len(), 2 * each, "every reply arrived once");
    fake.violations()
}

#[tokio::test]
async fn two_processes_on_one_postgres_keep_the_per_chat_window_together() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let Some(database) = TestDatabase::from_env("herald_shared_limits").await else {
        return;
    };
    let fake = FakeTelegram::start_with(FakeTelegramOptions::realistic()).await;
    fake.send_dm(&fake.admin(), "hi").await;
    // Two processes: two connection pools, each with the database's windows.
    let one = storage(&database.url).await;
    let two = storage(&database.url).await;
    let violations = two_paths_send(
        &fake,
        outbound(&fake, one.send_limiter().expect("PostgreSQL keeps shared windows")),
        outbound(&fake, two.send_limiter().expect("PostgreSQL keeps shared windows")),
        3,
    )
    .await;
    assert!(violations.is_empty(), "{violations:?}");
    one.close().await;
    two.close().await;
}

#[tokio::test]
async fn two_processes_with_windows_of_their_own_are_refused() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fake = FakeTelegram::start_with(FakeTelegramOptions::realistic()).await;
    fake.send_dm(&fake.admin(), "hi").await;
    let own = || -> Arc<dyn SendLimiter> { Arc::new(LocalLimiter::new(Arc::new(SteadyClock::new()))) };
    let violations = two_paths_send(&fake, outbound(&fake, own()), outbound(&fake, own()), 2).await;
    assert!(
        violations.iter().any(|v| v.contains("the chat rate")),
        "each path alone keeps 1/s, together they do not: {violations:?}"
    );
}

#[tokio::test]
async fn sqlite_keeps_no_shared_windows() {
    let dir = tempfile::tempdir().unwrap();
    let storage = storage(&format!("sqlite://{}", dir.path().join("herald.db").display())).await;
    assert!(storage.send_limiter().is_none(), "one process: its own windows");
    storage.close().await;
}

#[tokio::test]
async fn the_shared_windows_grant_a_burst_and_then_the_exact_wait() {
    let Some(database) = TestDatabase::from_env("herald_shared_windows").await else {
        return;
    };
    let start = chrono::DateTime::from_timestamp_millis(1_800_000_000_000).unwrap();
    let clock = Arc::new(herald_core::ManualClock::new(start));
    let storage = Storage::connect(
        &StorageConfig {
            url: database.url.clone().into(),
            ..StorageConfig::default()
        },
        &QueueConfig::default(),
        clock.clone(),
    )
    .await
    .unwrap();
    storage.migrate().await.unwrap();
    let limiter = storage.send_limiter().unwrap();
    let group = [
        herald_core::SendLimit {
            key: "telegram:group:-1".into(),
            window: herald_core::Window {
                count: 20,
                per: Duration::from_secs(60),
            },
        },
        herald_core::SendLimit {
            key: "telegram:bot".into(),
            window: herald_core::Window {
                count: 30,
                per: Duration::from_secs(1),
            },
        },
    ];
    for n in 0..20 {
        match limiter.take(&group).await.unwrap() {
            herald_core::SendSlot::Taken { at_ms } => limiter.sent(&group, at_ms).await.unwrap(),
            other => panic!("send {n} of the burst: {other:?}"),
        }
        clock.advance(Duration::from_millis(100));
    }
    // 2 s later, the first send (finished when it started) leaves the
    // minute in exactly 58 s; a millisecond before, there is still no room.
    assert_eq!(
        limiter.take(&group).await.unwrap(),
        herald_core::SendSlot::Wait(Duration::from_secs(58))
    );
    clock.advance(Duration::from_millis(57_999));
    assert_eq!(
        limiter.take(&group).await.unwrap(),
        herald_core::SendSlot::Wait(Duration::from_millis(1))
    );
    clock.advance(Duration::from_millis(1));
    assert!(matches!(
        limiter.take(&group).await.unwrap(),
        herald_core::SendSlot::Taken { .. }
    ));
    storage.close().await;
}
