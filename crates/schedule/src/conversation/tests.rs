use std::sync::Arc;

use crate::Schedules;
use crate::command::USAGE;
use herald_core::{
    ActorId, ChannelName, Clock, ConversationId, ConversationKind, ConversationRef, InboundMessage, ManualClock,
    NewTask, NoTools, Outbound, Sender, TaskId,
};
use herald_core::{ToolOutput, Toolbox, TurnScope};
use herald_skills::{CapLimits, CoreSkill, Services, SkillContext, SkillError, SkillsConfig, TurnView};
use herald_store::{QueueConfig, Storage, StorageConfig};
use serde_json::{Value, json};

use super::*;

fn reference(id: &str) -> ConversationRef {
    ConversationRef {
        id: ConversationId::new(id),
        channel: ChannelName::new("test"),
        kind: ConversationKind::Direct,
        chat: id.into(),
        thread: None,
    }
}

fn scope(conversation: &str, actor: &str, is_admin: bool) -> TurnScope {
    TurnScope {
        task: TaskId(1),
        conversation: reference(conversation),
        actor: Some(ActorId::new(actor)),
        is_admin,
        reply_to: None,
        origin: herald_core::TurnOrigin::Person,
        files: Vec::new(),
    }
}

struct Fixture {
    storage: Storage,
    schedules: Schedules,
    services: Services,
}

async fn fixture() -> Fixture {
    let clock = Arc::new(ManualClock::new(
        chrono::DateTime::parse_from_rfc3339("2026-07-01T06:00:00Z")
            .unwrap()
            .to_utc(),
    ));
    let storage = Storage::connect(
        &StorageConfig {
            url: "sqlite::memory:".into(),
            ..StorageConfig::default()
        },
        &QueueConfig::default(),
        clock.clone(),
    )
    .await
    .unwrap();
    storage.migrate().await.unwrap();
    // `test:bob` has written before, so where it lives is known.
    storage
        .queue()
        .enqueue(NewTask::message(InboundMessage {
            conversation: reference("test:bob"),
            sender: Sender {
                id: ActorId::new("test:bob"),
                display_name: "Bob".into(),
            },
            text: "hi".into(),
            platform_message_id: "1".into(),
            reply_to: None,
            mentions_bot: true,
            received_at: clock.now(),
            attachments: Vec::new(),
        }))
        .await
        .unwrap();
    let config = SkillsConfig::default();
    let services = Services {
        caps: CapLimits::new(&config, 120_000),
        config,
        store: storage.conversations(),
        outbound: Outbound::new(),
        clock: clock.clone(),
        mcp: None,
        files: None,
    };
    Fixture {
        schedules: Schedules::new(storage.schedules(), clock),
        storage,
        services,
    }
}

impl Fixture {
    /// A `schedule_task` call.
    async fn call(&self, scope: &TurnScope, arguments: Value) -> Result<ToolOutput, SkillError> {
        self.call_skill(SCHEDULE_TASK, scope, arguments).await
    }

    /// A call of one of the scheduling skills, as the registry would make it.
    async fn call_skill(&self, name: &str, scope: &TurnScope, arguments: Value) -> Result<ToolOutput, SkillError> {
        let skills = schedule_skills(self.schedules.clone(), self.storage.conversations());
        let skill = skills.iter().find(|s| s.spec().name.as_str() == name).unwrap();
        let view = TurnView {
            is_admin: scope.is_admin,
            ..TurnView::default()
        };
        let context = SkillContext {
            scope,
            is_admin: scope.is_admin,
            occurrence: 1,
            call_key: "test:1",
            view: &view,
            services: &self.services,
        };
        skill.invoke(&context, arguments).await
    }

    async fn stored(&self) -> Vec<(String, Option<String>, String)> {
        self.schedules
            .list(None)
            .await
            .unwrap()
            .into_iter()
            .map(|l| {
                (
                    l.schedule.conversation.id.to_string(),
                    l.schedule.actor.map(|a| a.to_string()),
                    l.schedule.instruction,
                )
            })
            .collect()
    }
}

#[tokio::test]
async fn the_skill_schedules_into_the_callers_conversation_and_only_admins_elsewhere() {
    let f = fixture().await;
    let ann = scope("test:ann", "test:ann", false);
    let owner = scope("test:owner", "test:owner", true);
    for (what, scope, arguments, outcome) in [
        (
            "a non-admin into its own conversation",
            &ann,
            json!({"when": "every 1d from 2026-07-02T09:00 Europe/Berlin", "instruction": "Water the plants"}),
            Ok("Scheduled: #1 every 1d from 2026-07-02 09:00 Europe/Berlin"),
        ),
        (
            "a non-admin into another conversation",
            &ann,
            json!({"when": "every 1h", "instruction": "Spam Bob", "conversation": "test:bob"}),
            Err("only admins may schedule into another conversation"),
        ),
        (
            "an admin into a known conversation",
            &owner,
            json!({"when": "at 2026-07-01T18:00:00Z", "instruction": "Remind Bob of the call", "conversation": "test:bob"}),
            Ok("Scheduled: #2 at 2026-07-01 18:00 UTC"),
        ),
        (
            "an admin into an unknown conversation",
            &owner,
            json!({"when": "every 1h", "instruction": "x", "conversation": "test:nobody"}),
            Err("no known conversation `test:nobody`"),
        ),
        (
            "an unreadable time",
            &ann,
            json!({"when": "tomorrow-ish", "instruction": "x"}),
            Err("expected `at TIME`"),
        ),
        (
            "words after the time",
            &ann,
            json!({"when": "every 1h check the mail", "instruction": "x"}),
            Err("put them in `instruction`"),
        ),
        (
            "a time in the past",
            &ann,
            json!({"when": "at 2026-06-01T00:00:00Z", "instruction": "x"}),
            Err("in the past"),
        ),
    ] {
        match (f.call(scope, arguments).await, outcome) {
            (Ok(output), Ok(expected)) => assert!(output.content.starts_with(expected), "{what}: {}", output.content),
            (Err(err), Err(expected)) => assert!(err.to_string().contains(expected), "{what}: {err}"),
            (got, expected) => panic!("{what}: got {got:?}, expected {expected:?}"),
        }
    }
    assert_eq!(
        f.stored().await,
        [
            ("test:ann".into(), Some("test:ann".into()), "Water the plants".into()),
            (
                "test:bob".into(),
                Some("test:owner".into()),
                "Remind Bob of the call".into()
            ),
        ],
        "refused calls stored nothing; runs act as whoever scheduled them"
    );
}

#[tokio::test]
async fn non_admins_are_not_offered_another_conversation() {
    let f = fixture().await;
    let skill = ScheduleTask::new(f.schedules.clone(), f.storage.conversations());
    for (is_admin, offered) in [(false, false), (true, true)] {
        let view = TurnView {
            is_admin,
            ..TurnView::default()
        };
        assert_eq!(
            skill.parameters(&view)["properties"].get("conversation").is_some(),
            offered
        );
    }
}

#[tokio::test]
async fn schedule_commands_are_for_admins_and_answered_without_the_model() {
    let f = fixture().await;
    let commands = ScheduleCommands::new(Arc::new(NoTools), f.schedules.clone());
    let admin = scope("test:owner", "test:owner", true);
    let other = scope("test:ann", "test:ann", false);
    for (what, scope, text, expected) in [
        (
            "a non-admin adding",
            &other,
            "/schedule add every 1h Nag",
            Some("Only admins can add schedules with /schedule"),
        ),
        ("an empty list", &admin, "/schedule", Some("No schedules.")),
        (
            "adding",
            &admin,
            "/schedule add every 30m Check the deploy",
            Some(
                "Scheduled: #1 every 30m from 2026-07-01 06:30 UTC (next 2026-07-01 06:30 UTC) in test:owner: Check the deploy",
            ),
        ),
        ("listing", &admin, "/schedule list", Some("#1 every 30m")),
        (
            "a mistake",
            &admin,
            "/schedule add every soon Check",
            Some("Not scheduled: invalid duration"),
        ),
        ("bad usage", &admin, "/schedule cancel", Some(USAGE)),
        (
            "cancelling",
            &admin,
            "/schedule cancel 1",
            Some("Cancelled: #1 every 30m"),
        ),
        (
            "cancelling twice",
            &admin,
            "/schedule cancel 1",
            Some("Not cancelled: no schedule 1"),
        ),
        ("anything else goes to the skills", &admin, "what is scheduled?", None),
    ] {
        let prepared = commands.prepare(scope, Some(text)).await;
        match (prepared.direct_reply, expected) {
            (Some(reply), Some(expected)) => assert!(reply.starts_with(expected), "{what}: {reply}"),
            (None, None) => {}
            (got, expected) => panic!("{what}: got {got:?}, expected {expected:?}"),
        }
    }
}

/// A non-admin's model asks for a schedule every second, then for more
/// schedules than anyone needs: both are refused and nothing is stored.
#[tokio::test]
async fn a_non_admin_cannot_schedule_often_or_without_end() {
    let f = fixture().await;
    let ann = scope("test:ann", "test:ann", false);
    for when in ["every 1s", "every 4m", "cron \"* * * * *\"", "cron \"0,2 9 * * *\""] {
        let err = f
            .call(&ann, json!({"when": when, "instruction": "Ping"}))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("at most once every 5m"), "{when}: {err}");
    }
    assert!(f.stored().await.is_empty());
    for n in 1..=10 {
        f.call(&ann, json!({"when": "every 1h", "instruction": format!("Check #{n}")}))
            .await
            .unwrap_or_else(|err| panic!("schedule {n}: {err}"));
    }
    let err = f
        .call(&ann, json!({"when": "every 1d", "instruction": "One more"}))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("10 schedules"), "{err}");
    assert_eq!(f.stored().await.len(), 10);
    // Admins are not limited.
    let owner = scope("test:owner", "test:owner", true);
    f.call(&owner, json!({"when": "every 1s", "instruction": "Tick"}))
        .await
        .unwrap();
}

/// Ann and Bob each have schedules; Ann's model and Ann herself list and
/// cancel only Ann's, in the conversation she is in. Bob's schedule cannot
/// be cancelled by her, and she is not told it exists.
#[tokio::test]
async fn anyone_lists_and_cancels_their_own_schedules_and_no_one_elses() {
    let f = fixture().await;
    let ann = scope("test:ann", "test:ann", false);
    let bob = scope("test:bob", "test:bob", false);
    f.call(&ann, json!({"when": "every 1h", "instruction": "Ann's reminder"}))
        .await
        .unwrap();
    f.call(&bob, json!({"when": "every 1h", "instruction": "Bob's reminder"}))
        .await
        .unwrap();
    // Bob is in Ann's group too: his schedule there is his, not hers.
    let bob_in_ann = scope("test:ann", "test:bob", false);
    f.call(
        &bob_in_ann,
        json!({"when": "every 2h", "instruction": "Bob in Ann's group"}),
    )
    .await
    .unwrap();

    let listed = f.call_skill(LIST_SCHEDULES, &ann, json!({})).await.unwrap().content;
    assert!(listed.contains("#1 ") && listed.contains("Ann's reminder"), "{listed}");
    assert!(!listed.contains("Bob"), "{listed}");
    for id in [2, 3, 99] {
        let err = f
            .call_skill(CANCEL_SCHEDULE, &ann, json!({"id": id}))
            .await
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!("no schedule {id} here"),
            "the same answer as for none at all"
        );
    }
    let commands = ScheduleCommands::new(Arc::new(NoTools), f.schedules.clone());
    let reply = |scope: TurnScope, text: &'static str| {
        let commands = &commands;
        async move { commands.prepare(&scope, Some(text)).await.direct_reply.unwrap() }
    };
    assert_eq!(
        reply(ann.clone(), "/schedule cancel 2").await,
        "Not cancelled: no schedule 2 here"
    );
    let own = reply(ann.clone(), "/schedule list").await;
    assert!(own.contains("Ann's reminder") && !own.contains("Bob"), "{own}");
    assert!(
        reply(ann.clone(), "/schedule cancel 1")
            .await
            .starts_with("Cancelled: #1")
    );
    assert_eq!(reply(ann.clone(), "/schedule").await, "No schedules.");
    assert_eq!(
        f.stored()
            .await
            .iter()
            .map(|(_, actor, _)| actor.clone().unwrap())
            .collect::<Vec<_>>(),
        ["test:bob", "test:bob"],
        "Bob's schedules are untouched"
    );
    // An admin sees and cancels anything.
    let owner = scope("test:owner", "test:owner", true);
    let all = f.call_skill(LIST_SCHEDULES, &owner, json!({})).await.unwrap().content;
    assert!(all.contains("#2 ") && all.contains("#3 "), "{all}");
    f.call_skill(CANCEL_SCHEDULE, &owner, json!({"id": 3})).await.unwrap();
}
