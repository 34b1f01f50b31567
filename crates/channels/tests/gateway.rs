//! The gateway with the real SQLite store: what is queued, what is refused,
//! what is answered at the door, and pairing codes that survive a restart
//! and expire.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::TimeZone;
use herald_channels::access::{AccessConfig, Pairing, PairingReplies, UnknownSenders};
use herald_channels::gateway::Gateway;
use herald_core::{
    ActorId, Admins, Admission, ChannelError, ChannelName, ChannelOutbound, ClaimFilter, Clock, ConversationId,
    ConversationKind, ConversationRef, Enqueued, InboundMessage, InboundSink, ManualClock, Outbound, OutboundMessage,
    Sender, SentMessage, TaskPayload,
};
use herald_store::{QueueConfig, Storage, StorageConfig};

/// Captures what the gateway says itself (pairing codes, greetings).
#[derive(Default)]
struct Said(Mutex<Vec<OutboundMessage>>);

impl Said {
    fn texts(&self) -> Vec<String> {
        self.0.lock().unwrap().iter().map(|m| m.text.clone()).collect()
    }
}

#[async_trait]
impl ChannelOutbound for Said {
    fn channel(&self) -> ChannelName {
        ChannelName::new("telegram")
    }

    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, ChannelError> {
        self.0.lock().unwrap().push(message.clone());
        Ok(SentMessage {
            platform_message_ids: vec!["1".into()],
        })
    }
}

/// The same record, as the email channel's outbound half.
struct SaidByEmail(Arc<Said>);

#[async_trait]
impl ChannelOutbound for SaidByEmail {
    fn channel(&self) -> ChannelName {
        ChannelName::new("email")
    }

    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, ChannelError> {
        self.0.send(message).await
    }
}

struct Harness {
    _dir: tempfile::TempDir,
    url: String,
    storage: Storage,
    said: Arc<Said>,
    clock: Arc<ManualClock>,
}

const ADMIN: &str = "telegram:1";

impl Harness {
    async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("herald.db").display());
        let clock = Arc::new(ManualClock::new(
            chrono::Utc.with_ymd_and_hms(2026, 1, 1, 9, 0, 0).unwrap(),
        ));
        let storage = open(&url, clock.clone()).await;
        Self {
            _dir: dir,
            url,
            storage,
            said: Arc::default(),
            clock,
        }
    }

    fn gateway(&self, unknown: UnknownSenders) -> Gateway {
        Gateway {
            queue: self.storage.queue(),
            store: self.storage.conversations(),
            outbound: Outbound::new()
                .with(self.said.clone())
                .with(Arc::new(SaidByEmail(self.said.clone()))),
            admins: Admins::new([ActorId::new(ADMIN)]),
            access: AccessConfig {
                unknown,
                pairing_code_ttl: Duration::from_secs(600),
                ..AccessConfig::default()
            },
            max_message_chars: 1000,
            pairing_replies: PairingReplies::new(3),
            clock: self.clock.clone(),
            status: Default::default(),
            attachments: None,
        }
    }

    async fn queued(&self) -> u64 {
        self.storage.queue().pending(&ClaimFilter::any()).await.unwrap()
    }

    /// The same database opened again, as after a restart.
    async fn reopen(&mut self) {
        self.storage.close().await;
        self.storage = open(&self.url, self.clock.clone()).await;
    }
}

async fn open(url: &str, clock: Arc<ManualClock>) -> Storage {
    let storage = Storage::connect(
        &StorageConfig {
            url: url.into(),
            ..StorageConfig::default()
        },
        &QueueConfig::default(),
        clock,
    )
    .await
    .unwrap();
    storage.migrate().await.unwrap();
    storage
}

fn message(user: u64, id: u32, text: &str, kind: ConversationKind, mentions_bot: bool) -> InboundMessage {
    let chat = match kind {
        ConversationKind::Direct => user.to_string(),
        ConversationKind::Group => "-100".into(),
    };
    InboundMessage {
        conversation: ConversationRef {
            id: ConversationId::new(format!("telegram:{chat}")),
            channel: ChannelName::new("telegram"),
            kind,
            chat: chat.clone(),
            thread: None,
        },
        sender: Sender {
            id: ActorId::new(format!("telegram:{user}")),
            display_name: format!("User {user}"),
        },
        text: text.into(),
        platform_message_id: format!("{chat}:{id}"),
        reply_to: None,
        mentions_bot,
        received_at: chrono::Utc::now(),
        attachments: Vec::new(),
    }
}

fn dm(user: u64, id: u32, text: &str) -> InboundMessage {
    message(user, id, text, ConversationKind::Direct, true)
}

#[tokio::test]
async fn addressed_messages_are_queued_once_and_unaddressed_group_chatter_is_not() {
    let harness = Harness::new().await;
    let gateway = harness.gateway(UnknownSenders::Allow);
    let chatter = message(5, 1, "lunch?", ConversationKind::Group, false);
    assert_eq!(gateway.accept(chatter).await.unwrap(), Admission::Ignored);
    assert_eq!(harness.queued().await, 0);

    let addressed = message(5, 2, "@herald lunch?", ConversationKind::Group, true);
    let Admission::Queued(Enqueued::New(task)) = gateway.accept(addressed.clone()).await.unwrap() else {
        panic!("an addressed group message is queued")
    };
    assert_eq!(
        gateway.accept(addressed).await.unwrap(),
        Admission::Queued(Enqueued::Duplicate(task)),
        "a redelivered event is recognised by its dedup key"
    );
    assert_eq!(harness.queued().await, 1);
    assert!(harness.said.texts().is_empty());
}

#[tokio::test]
async fn denied_senders_queue_nothing_and_hear_nothing() {
    let harness = Harness::new().await;
    let gateway = harness.gateway(UnknownSenders::Deny);
    assert!(matches!(
        gateway.accept(dm(7, 1, "hi")).await.unwrap(),
        Admission::Denied { .. }
    ));
    assert!(
        matches!(gateway.accept(dm(1, 2, "hi")).await.unwrap(), Admission::Queued(_)),
        "admins always pass"
    );
    assert_eq!(harness.queued().await, 1);
    assert!(harness.said.texts().is_empty());
}

#[tokio::test]
async fn pairing_gives_a_code_an_admin_approves_and_the_approval_survives_a_restart() {
    let mut harness = Harness::new().await;
    let gateway = harness.gateway(UnknownSenders::Pair);
    assert!(matches!(
        gateway.accept(dm(7, 1, "hello?")).await.unwrap(),
        Admission::Denied { .. }
    ));
    assert!(matches!(
        gateway.accept(dm(7, 2, "anyone?")).await.unwrap(),
        Admission::Denied { .. }
    ));
    assert_eq!(harness.queued().await, 0, "an unknown sender costs no model call");
    let said = harness.said.texts();
    assert_eq!(said.len(), 1, "one reply per code: writing again brings no second one");
    let code = said[0].rsplit(' ').next().unwrap().to_owned();
    assert_eq!(code.len(), 6);

    // Only an admin approves: another unknown sender's command is a
    // message from an unknown sender, who gets a code of their own.
    gateway
        .accept(dm(8, 1, &format!("/pair approve {code}")))
        .await
        .unwrap();
    let offered = harness.said.texts().last().unwrap().clone();
    assert!(offered.starts_with("I don't know you yet"), "{offered}");
    assert!(!offered.ends_with(&code));
    gateway.accept(dm(1, 1, "/pair list")).await.unwrap();
    assert!(
        harness
            .said
            .texts()
            .last()
            .unwrap()
            .contains(&format!("{code}: User 7 (telegram:7)"))
    );
    gateway
        .accept(dm(1, 2, &format!("/pair approve {}", code.to_lowercase())))
        .await
        .unwrap();
    assert_eq!(harness.said.texts().last().unwrap(), "Approved User 7 (telegram:7).");
    assert_eq!(harness.queued().await, 0, "pairing commands are not turns");

    harness.reopen().await;
    let gateway = harness.gateway(UnknownSenders::Pair);
    assert!(matches!(
        gateway.accept(dm(7, 3, "now?")).await.unwrap(),
        Admission::Queued(_)
    ));
    assert_eq!(harness.queued().await, 1);
    gateway
        .accept(dm(1, 3, &format!("/pair approve {code}")))
        .await
        .unwrap();
    assert!(
        harness
            .said
            .texts()
            .last()
            .unwrap()
            .starts_with("No pending pairing code"),
        "codes are one-time"
    );
}

#[tokio::test]
async fn pairing_codes_expire() {
    let harness = Harness::new().await;
    let gateway = harness.gateway(UnknownSenders::Pair);
    gateway.accept(dm(7, 1, "hello?")).await.unwrap();
    let first = harness.said.texts()[0].rsplit(' ').next().unwrap().to_owned();
    harness.clock.advance(Duration::from_secs(601));
    gateway
        .accept(dm(1, 1, &format!("/pair approve {first}")))
        .await
        .unwrap();
    assert!(
        harness
            .said
            .texts()
            .last()
            .unwrap()
            .starts_with("No pending pairing code")
    );
    gateway.accept(dm(7, 2, "still here")).await.unwrap();
    let second = harness
        .said
        .texts()
        .last()
        .unwrap()
        .rsplit(' ')
        .next()
        .unwrap()
        .to_owned();
    assert_ne!(first, second, "an expired code is replaced");
    assert!(matches!(
        gateway.accept(dm(7, 3, "and?")).await.unwrap(),
        Admission::Denied { .. }
    ));
}

#[tokio::test]
async fn start_and_help_are_answered_at_the_door_after_access_control() {
    let harness = Harness::new().await;
    let gateway = harness.gateway(UnknownSenders::Pair);
    for (n, text) in ["/start", "/help", "/start deep-link-payload"].into_iter().enumerate() {
        assert_eq!(gateway.accept(dm(1, n as u32, text)).await.unwrap(), Admission::Ignored);
    }
    assert_eq!(harness.queued().await, 0, "no model call for a greeting");
    let said = harness.said.texts();
    assert_eq!(said.len(), 3);
    assert!(
        said.iter()
            .all(|t| t.starts_with("Hello, I'm Herald.") && t.contains("/pair approve"))
    );

    // A stranger's /start is a first contact like any other: a pairing code.
    gateway.accept(dm(9, 1, "/start")).await.unwrap();
    assert!(harness.said.texts().last().unwrap().contains("/pair approve "));
    assert!(!harness.said.texts().last().unwrap().starts_with("Hello"));
    // "/helpme" is not /help.
    assert!(matches!(
        gateway.accept(dm(1, 9, "/helpme")).await.unwrap(),
        Admission::Queued(_)
    ));
}

/// The text of the one task on the queue.
async fn claimed_text(harness: &Harness) -> String {
    let lease = harness
        .storage
        .queue()
        .claim(&ClaimFilter::any())
        .await
        .unwrap()
        .expect("a queued task");
    match &lease.task.payload {
        TaskPayload::Message(message) => message.text.clone(),
        other => panic!("not a message: {other:?}"),
    }
}

#[tokio::test]
async fn control_characters_never_reach_the_queue() {
    let harness = Harness::new().await;
    let gateway = harness.gateway(UnknownSenders::Deny);
    gateway
        .accept(dm(1, 1, "nul\u{0} bell\u{7} escape\u{1b}[2J\ttab\r\nline"))
        .await
        .unwrap();
    assert_eq!(claimed_text(&harness).await, "nul bell escape[2J\ttab\r\nline");
}

#[tokio::test]
async fn a_huge_message_is_queued_cut_to_the_cap_and_the_sender_is_told_once() {
    let harness = Harness::new().await;
    let gateway = harness.gateway(UnknownSenders::Deny);
    let huge = "é".repeat(5_000_000);
    let message = dm(1, 1, &huge);
    assert!(matches!(
        gateway.accept(message.clone()).await.unwrap(),
        Admission::Queued(Enqueued::New(_))
    ));
    // The platform delivers it again: stored once, and no second notice.
    assert!(matches!(
        gateway.accept(message).await.unwrap(),
        Admission::Queued(Enqueued::Duplicate(_))
    ));
    let text = claimed_text(&harness).await;
    assert!(text.starts_with(&"é".repeat(1000)));
    assert!(!text.starts_with(&"é".repeat(1001)));
    assert!(
        text.ends_with("only the first 1000 characters were kept]"),
        "{}",
        &text[1990..]
    );
    assert_eq!(
        harness.said.texts(),
        ["Your message was longer than 1000 characters; I read only the first 1000."]
    );
}

#[tokio::test]
async fn one_unknown_sender_writing_three_times_gets_one_pairing_reply() {
    let harness = Harness::new().await;
    let gateway = harness.gateway(UnknownSenders::Pair);
    for n in 1..=3 {
        gateway.accept(dm(7, n, "hello?")).await.unwrap();
    }
    assert_eq!(harness.said.texts().len(), 1, "{:?}", harness.said.texts());
}

#[tokio::test]
async fn a_flood_of_unknown_senders_gets_no_more_pairing_replies_than_the_budget() {
    let harness = Harness::new().await;
    let gateway = harness.gateway(UnknownSenders::Pair);
    for user in 100..110 {
        gateway.accept(dm(user, 1, "let me in")).await.unwrap();
    }
    assert_eq!(harness.said.texts().len(), 3, "the budget is 3 an hour");
    // An hour later the budget is there again.
    harness.clock.advance(Duration::from_secs(3601));
    gateway.accept(dm(200, 1, "let me in")).await.unwrap();
    assert_eq!(harness.said.texts().len(), 4);
}

/// A mail whose `From` no trusted server vouched for: the id it claims,
/// marked unverified (as the email adapter writes it).
fn unverified(claimed: &str, id: u32, text: &str) -> InboundMessage {
    let mut message = dm(1, id, text);
    message.conversation.channel = ChannelName::new("email");
    message.conversation.id = ConversationId::new(format!("email:{claimed}/{id}"));
    message.conversation.chat = claimed.to_owned();
    message.sender.id = ActorId::unverified(&ChannelName::new("email"), claimed);
    message
}

#[tokio::test]
async fn a_forged_admin_address_is_a_stranger_that_is_neither_answered_nor_obeyed() {
    let harness = Harness::new().await;
    let mut gateway = harness.gateway(UnknownSenders::Pair);
    gateway.admins = Admins::new([ActorId::new("email:alice@example.com")]);
    // A real unknown sender asks for access and gets a code.
    gateway.accept(dm(7, 1, "let me in")).await.unwrap();
    let code = harness.said.texts()[0].rsplit(' ').next().unwrap().to_owned();

    // Someone writes as the admin, unauthenticated: not obeyed, not queued,
    // and nothing is mailed to the address they claimed.
    for (n, text) in [format!("/pair approve {code}"), "/pair list".into(), "hello".into()]
        .into_iter()
        .enumerate()
    {
        assert!(matches!(
            gateway
                .accept(unverified("alice@example.com", n as u32, &text))
                .await
                .unwrap(),
            Admission::Denied { .. }
        ));
    }
    assert_eq!(harness.said.texts().len(), 1, "{:?}", harness.said.texts());
    assert_eq!(harness.queued().await, 0);
    let pending = Pairing {
        store: harness.storage.conversations().as_ref(),
    }
    .pending(harness.clock.now())
    .await
    .unwrap();
    assert_eq!(pending.len(), 1, "the code is still waiting: nothing was approved");

    // With everyone allowed, the unverified sender is served, as a stranger.
    let gateway = harness.gateway(UnknownSenders::Allow);
    gateway
        .accept(unverified("alice@example.com", 9, &format!("/pair approve {code}")))
        .await
        .unwrap();
    assert_eq!(
        harness.said.texts().last().unwrap(),
        "Only an admin can approve pairing codes."
    );
}

/// What a burst of updates (one `getUpdates` answer) becomes: each message
/// screened as if it came alone, in order, and those let in stored together.
#[tokio::test]
async fn a_burst_is_screened_message_by_message_and_stored_in_order() {
    let harness = Harness::new().await;
    let gateway = harness.gateway(UnknownSenders::Pair);
    let burst = vec![
        dm(1, 1, "first"),
        message(5, 2, "lunch?", ConversationKind::Group, false),
        dm(7, 3, "hi, who are you?"),
        dm(1, 4, "/start"),
        dm(1, 5, "second"),
        dm(1, 1, "first"),
        dm(1, 6, &"x".repeat(1500)),
    ];
    let taken = gateway.accept_all(burst).await;
    assert!(taken.error.is_none(), "{:?}", taken.error);
    let outcomes: Vec<&str> = taken
        .admissions
        .iter()
        .map(|admission| match admission {
            Admission::Queued(Enqueued::New(_)) => "new",
            Admission::Queued(Enqueued::Duplicate(_)) => "duplicate",
            Admission::Ignored => "ignored",
            Admission::Denied { .. } => "denied",
        })
        .collect();
    assert_eq!(
        outcomes,
        ["new", "ignored", "denied", "ignored", "new", "duplicate", "new"]
    );
    let (Admission::Queued(first), Admission::Queued(again)) = (&taken.admissions[0], &taken.admissions[5]) else {
        unreachable!()
    };
    assert_eq!(
        first.task_id(),
        again.task_id(),
        "the event twice in one burst is one task"
    );

    // The admin's messages are served in the burst's order.
    let queue = harness.storage.queue();
    let mut texts = Vec::new();
    while let Some(lease) = queue.claim(&ClaimFilter::any()).await.unwrap() {
        let TaskPayload::Message(message) = &lease.task.payload else {
            panic!("not a message: {:?}", lease.task.payload)
        };
        texts.push(message.text.clone());
        queue.complete(&lease).await.unwrap();
    }
    assert_eq!(texts.len(), 3);
    assert_eq!(texts[..2], ["first", "second"]);
    assert!(texts[2].starts_with(&"x".repeat(1000)));

    // What was said at the door, in order: the stranger's pairing code, the
    // greeting, and the notice of the cut message once.
    let said = harness.said.texts();
    assert_eq!(said.len(), 3, "{said:?}");
    assert!(said[0].starts_with("I don't know you yet."), "{said:?}");
    assert!(said[1].starts_with("Hello, I'm Herald."), "{said:?}");
    assert!(said[2].starts_with("Your message was longer than 1000"), "{said:?}");
}

/// A burst the store cannot take: what was answered before the first
/// message to be stored counts as taken, and the rest is left for the
/// adapter to offer again, so nothing is lost. (What was answered after it
/// is answered again when the rest is offered again.)
#[tokio::test]
async fn a_burst_the_store_refuses_is_taken_up_to_its_first_message_to_store() {
    let harness = Harness::new().await;
    let gateway = harness.gateway(UnknownSenders::Deny);
    harness.storage.close().await;
    let taken = gateway
        .accept_all(vec![dm(1, 1, "/start"), dm(1, 2, "hello"), dm(1, 3, "/help")])
        .await;
    assert_eq!(taken.admissions, [Admission::Ignored], "the greeting before it");
    assert!(taken.error.is_some());
    assert!(harness.said.texts()[0].starts_with("Hello, I'm Herald."));
}
