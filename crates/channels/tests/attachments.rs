//! Files that come with messages, end to end without the model: the fake
//! Bot API serves them as Telegram does (`getFile`, then the file endpoint);
//! the real adapter and gateway check them at the door and queue them
//! waiting, and the intake fetches them, as a worker does at turn time,
//! within the caps into the real SQLite store. Hostile files (a size that
//! lies, a trickle, bytes that are not what they claim, a path out of the
//! file endpoint) end described, never fetched past a cap.

#![cfg(feature = "telegram")]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use herald_channels::access::{AccessConfig, PairingReplies};
use herald_channels::attachments::{AttachmentIntake, AttachmentsConfig};
use herald_channels::gateway::Gateway;
use herald_channels::telegram;
use herald_core::{
    ActorId, Admins, Attachment, AttachmentKind, ChannelName, ClaimFilter, InboundMessage, Outbound, SystemClock,
    TaskPayload,
};
use herald_store::{QueueConfig, Storage, StorageConfig};
use herald_testkit::FakePlatform;
use herald_testkit::telegram::FakeTelegram;
use herald_testkit::telegram::files::{FakeFile, Serve};
use tokio_util::sync::CancellationToken;

/// A PNG's first bytes: enough for the type check on this side.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x02\0\0\0";

struct Harness {
    fake: FakeTelegram,
    storage: Storage,
    intake: Arc<AttachmentIntake>,
    stop: CancellationToken,
    _dir: tempfile::TempDir,
}

impl Harness {
    async fn start(config: AttachmentsConfig) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let fake = FakeTelegram::start().await;
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::connect(
            &StorageConfig {
                url: format!("sqlite://{}", dir.path().join("herald.db").display()).into(),
                ..StorageConfig::default()
            },
            &QueueConfig::default(),
            Arc::new(SystemClock),
        )
        .await
        .unwrap();
        storage.migrate().await.unwrap();
        let yaml = fake.channel_yaml();
        let built = telegram::build(
            &serde_yaml::from_str(&yaml).unwrap(),
            Some(storage.conversations()),
            std::sync::Arc::new(herald_core::LocalLimiter::new(std::sync::Arc::new(
                herald_core::SteadyClock::new(),
            ))),
            &Default::default(),
        )
        .unwrap();
        let intake = Arc::new(AttachmentIntake::new(
            config,
            storage.files(),
            BTreeMap::from([(ChannelName::new("telegram"), built.fetcher.clone().unwrap())]),
            Arc::new(SystemClock),
        ));
        let gateway = Arc::new(Gateway {
            queue: storage.queue(),
            store: storage.conversations(),
            outbound: Outbound::new().with(built.outbound.clone()),
            admins: Admins::new([ActorId::new(format!("telegram:{}", fake.admin().id))]),
            access: AccessConfig::default(),
            max_message_chars: 4000,
            pairing_replies: PairingReplies::new(3),
            clock: Arc::new(SystemClock),
            status: Default::default(),
            attachments: Some(Arc::clone(&intake)),
        });
        let stop = CancellationToken::new();
        let (ingress, token) = (built.ingress.clone(), stop.clone());
        tokio::spawn(async move { ingress.run(gateway, token).await });
        Self {
            fake,
            storage,
            intake,
            stop,
            _dir: dir,
        }
    }

    /// The next queued message as it waits on the queue, claimed and
    /// completed.
    async fn next_queued(&self) -> InboundMessage {
        let queue = self.storage.queue();
        let lease = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                if let Some(lease) = queue.claim(&ClaimFilter::any()).await.unwrap() {
                    return lease;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("a message is queued");
        queue.complete(&lease).await.unwrap();
        match lease.task.payload {
            TaskPayload::Message(message) => message,
            other => panic!("not a message: {other:?}"),
        }
    }

    /// The next queued message with its waiting files fetched, as its turn
    /// would have it.
    async fn next_message(&self) -> InboundMessage {
        let mut message = self.next_queued().await;
        self.intake.fetch_waiting(&mut message).await;
        message
    }

    async fn stored(&self, attachment: &Attachment) -> Vec<u8> {
        let file = attachment
            .file
            .as_ref()
            .unwrap_or_else(|| panic!("not stored: {attachment:?}"));
        self.storage
            .files()
            .get(&file.sha256)
            .await
            .unwrap()
            .expect("in the store")
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn small_caps() -> AttachmentsConfig {
    AttachmentsConfig {
        max_file_bytes: 1024 * 1024,
        max_message_bytes: 2 * 1024 * 1024,
        download_timeout: Duration::from_secs(3),
        allowed_types: ["image/*", "audio/*", "text/*", "application/pdf", "video/*"]
            .map(String::from)
            .to_vec(),
        ..AttachmentsConfig::default()
    }
}

#[tokio::test]
async fn a_captionless_photo_is_queued_waiting_and_fetched_with_its_bytes() {
    let h = Harness::start(AttachmentsConfig::default()).await;
    let ada = h.fake.admin();
    h.fake.send_file(&ada, FakeFile::new("photo", PNG.to_vec()), None);
    let mut message = h.next_queued().await;
    assert!(message.attachments[0].is_waiting(), "{:?}", message.attachments);
    assert!(
        h.fake.file_downloads().is_empty(),
        "nothing is downloaded on the way to the queue"
    );
    h.intake.fetch_waiting(&mut message).await;
    assert_eq!(message.text, "");
    let [photo] = &message.attachments[..] else {
        panic!("{:?}", message.attachments)
    };
    assert_eq!(photo.kind, Some(AttachmentKind::Photo));
    assert_eq!(
        photo.source, None,
        "the queue keeps the stored file, not where it came from"
    );
    assert_eq!(
        photo.file.as_ref().unwrap().content_type,
        "image/png",
        "the bytes' type, not the claim"
    );
    assert_eq!(h.stored(photo).await, PNG);
    // The largest size was fetched, not the thumbnail.
    assert_eq!(h.fake.file_downloads(), ["photos/file_1"]);
}

#[tokio::test]
async fn an_oversize_video_is_described_and_never_fetched() {
    let h = Harness::start(small_caps()).await;
    let video = FakeFile {
        claimed_size: Some(40 * 1024 * 1024),
        ..FakeFile::new("video", Vec::new())
    };
    h.fake.send_file(&h.fake.admin(), video, Some("look at this"));
    let message = h.next_queued().await;
    assert_eq!(message.text, "look at this");
    assert!(!message.attachments[0].is_waiting(), "decided at the door");
    let reason = message.attachments[0].not_fetched.as_deref().unwrap();
    assert!(
        reason.contains("40 MB") && reason.contains("not downloaded"),
        "{reason}"
    );
    assert!(h.fake.file_downloads().is_empty());
    assert!(!h.fake.calls().contains(&"getfile".to_owned()), "not even asked for");
}

#[tokio::test]
async fn hostile_files_are_refused_safely() {
    let h = Harness::start(small_caps()).await;
    let ada = h.fake.admin();
    let cases: Vec<(FakeFile, &str)> = vec![
        // Claims 1 KB and streams a gigabyte: cut off at the cap.
        (
            FakeFile {
                claimed_size: Some(1024),
                serve: Serve::Endless,
                mime: Some("text/plain".into()),
                name: Some("notes.txt".into()),
                ..FakeFile::new("document", b"hello".to_vec())
            },
            "larger than the 1 MB limit",
        ),
        // A byte a second, for ever: cut off by the timeout.
        (
            FakeFile {
                serve: Serve::Trickle,
                mime: Some("text/plain".into()),
                ..FakeFile::new("document", b"slow".to_vec())
            },
            "took longer than 3s",
        ),
        // A zip that says it is a picture.
        (
            FakeFile {
                mime: Some("image/png".into()),
                name: Some("cat.png".into()),
                ..FakeFile::new("document", b"PK\x03\x04 a zip archive".to_vec())
            },
            "claimed to be image/png but its bytes are application/zip",
        ),
        // A file path that climbs out of the file endpoint to a Bot API method.
        (
            FakeFile {
                path: Some("../../bot0/getMe".into()),
                mime: Some("text/plain".into()),
                ..FakeFile::new("document", b"x".to_vec())
            },
            "outside its file endpoint",
        ),
        // A type not on the allow-list.
        (
            FakeFile {
                mime: Some("application/x-msdownload".into()),
                name: Some("setup.exe".into()),
                ..FakeFile::new("document", b"MZ".to_vec())
            },
            "application/x-msdownload files are not accepted",
        ),
    ];
    for (file, expected) in cases {
        h.fake.send_file(&ada, file, Some("what is this?"));
        let message = h.next_message().await;
        let attachment = &message.attachments[0];
        assert_eq!(attachment.file, None, "{expected}");
        let reason = attachment.not_fetched.as_deref().unwrap_or_default();
        assert!(reason.contains(expected), "{reason:?} should say {expected:?}");
    }
    // Nothing but the endless and the slow file reached the file endpoint.
    assert_eq!(h.fake.file_downloads().len(), 3, "{:?}", h.fake.file_downloads());
}

#[tokio::test]
async fn a_strangers_file_is_not_fetched() {
    let h = Harness::start(AttachmentsConfig::default()).await;
    h.fake
        .send_file(&h.fake.stranger(), FakeFile::new("photo", PNG.to_vec()), None);
    h.fake.send_dm(&h.fake.admin(), "after").await;
    let message = h.next_message().await;
    assert_eq!(message.text, "after");
    assert!(h.fake.file_downloads().is_empty());
}

/// The gateway of an email channel whose admin is ann@example.com, with
/// the default caps and no fetcher (a mail's parts are in hand).
fn email_gateway(h: &Harness) -> Gateway {
    Gateway {
        queue: h.storage.queue(),
        store: h.storage.conversations(),
        outbound: Outbound::new(),
        admins: Admins::new([ActorId::new("email:ann@example.com")]),
        access: AccessConfig::default(),
        max_message_chars: 4000,
        pairing_replies: PairingReplies::new(3),
        clock: Arc::new(SystemClock),
        status: Default::default(),
        attachments: Some(Arc::new(AttachmentIntake::new(
            AttachmentsConfig::default(),
            h.storage.files(),
            BTreeMap::new(),
            Arc::new(SystemClock),
        ))),
    }
}

/// A mail's MIME parts are in hand already: the gateway checks and stores
/// them like any fetched file, with no fetcher at all.
#[tokio::test]
async fn a_mails_inline_parts_are_checked_and_stored_without_a_fetch() {
    use herald_core::{ConversationId, ConversationKind, ConversationRef, InboundSink, InlineBytes, Sender};

    let h = Harness::start(AttachmentsConfig::default()).await;
    let gateway = email_gateway(&h);
    let inline = |name: &str, content_type: &str, bytes: &[u8]| Attachment {
        name: name.into(),
        content_type: content_type.into(),
        size: bytes.len() as u64,
        inline: Some(InlineBytes(bytes.into())),
        ..Attachment::default()
    };
    let message = InboundMessage {
        conversation: ConversationRef {
            id: ConversationId::new("email:ann@example.com"),
            channel: ChannelName::new("email"),
            kind: ConversationKind::Direct,
            chat: "ann@example.com".into(),
            thread: None,
        },
        sender: Sender {
            id: ActorId::new("email:ann@example.com"),
            display_name: "Ann".into(),
        },
        text: "Both attached.".into(),
        platform_message_id: "<m1@example.com>".into(),
        reply_to: None,
        mentions_bot: true,
        received_at: chrono::Utc::now(),
        attachments: vec![
            inline("minutes.txt", "text/plain", b"Decided: ship on Friday."),
            inline("invoice.pdf", "application/pdf", b"MZ\x90\0 a program"),
        ],
    };
    gateway.accept(message).await.unwrap();
    // Stored at the door: nothing waits for the turn.
    let queued = h.next_queued().await;
    assert_eq!(h.stored(&queued.attachments[0]).await, b"Decided: ship on Friday.");
    assert!(queued.attachments.iter().all(|a| a.inline.is_none()));
    let refused = queued.attachments[1].not_fetched.as_deref().unwrap();
    assert!(refused.contains("claimed to be application/pdf"), "{refused}");
}

/// One 4 MB mail with 40,000 tiny attachments: the mail reader takes 64
/// parts and counts the rest, the gateway stores the first ten, and the
/// model is told of the others in a few lines, not 40,000.
#[cfg(feature = "email")]
#[tokio::test]
async fn a_mail_with_thousands_of_attachments_keeps_ten() {
    use herald_channels::email::payload::{Classified, MAX_ATTACHMENTS, Reading, classify, to_inbound};
    use herald_core::InboundSink;

    let mut raw = String::from(
        "Authentication-Results: mx.example.com; dmarc=pass header.from=example.com\r\n\
         From: Ann <ann@example.com>\r\nTo: herald@example.com\r\nSubject: many\r\n\
         Message-ID: <many@example.com>\r\nMIME-Version: 1.0\r\n\
         Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n--b\r\n\
         Content-Type: text/plain\r\n\r\nSee attached.\r\n",
    );
    for n in 0..40_000 {
        raw.push_str(&format!(
            "--b\r\nContent-Type: text/plain\r\nContent-Disposition: attachment; filename=\"f{n}.txt\"\r\n\r\nx{n}\r\n"
        ));
    }
    raw.push_str("--b--\r\n");
    assert!(raw.len() > 3_000_000, "{} bytes", raw.len());
    let reading = Reading {
        own: "herald@example.com",
        trusted_authserv_id: Some("mx.example.com"),
    };
    let Classified::Mail(mail) = classify(raw.as_bytes(), reading, "1.1@imap") else {
        panic!("the mail was ignored");
    };
    assert_eq!(mail.attachments.len(), MAX_ATTACHMENTS + 1);
    let h = Harness::start(AttachmentsConfig::default()).await;
    let gateway = email_gateway(&h);
    let root = herald_channels::email::payload::thread_root(&mail).to_owned();
    gateway
        .accept(to_inbound(&mail, &root, chrono::Utc::now()))
        .await
        .unwrap();
    let queued = h.next_queued().await;
    let stored: Vec<&Attachment> = queued.attachments.iter().filter(|a| a.file.is_some()).collect();
    assert_eq!(stored.len(), 10, "the first ten are taken");
    assert_eq!(h.stored(stored[9]).await, b"x9");
    let described: Vec<&str> = queued.attachments[10..]
        .iter()
        .map(|a| a.not_fetched.as_deref().unwrap_or_default())
        .collect();
    assert!(
        described[..MAX_ATTACHMENTS - 10]
            .iter()
            .all(|why| why.contains("after the first 10 files")),
        "{described:?}"
    );
    let last = queued.attachments.last().unwrap();
    assert_eq!(last.name, format!("{} more attachments", 40_000 - MAX_ATTACHMENTS));
    assert!(described.last().unwrap().contains("past the first 64"), "{described:?}");
}
