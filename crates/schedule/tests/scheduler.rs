//! The scheduler against the real store, with a manual clock: nothing here
//! sleeps through an interval. Cases that involve several processes run on
//! SQLite and, when `HERALD_TEST_POSTGRES_URL` is set, on PostgreSQL.

mod common;

use std::time::Duration;

use common::{Harness, heartbeat_config, postgres_harness, sqlite_harness, utc};
use herald_core::{ActorId, ClaimFilter, ConversationKind, Enqueued, InstructionOrigin, ScheduleId, TaskPayload};
use herald_schedule::{ActiveHours, HeartbeatConfig, HeartbeatOutcome, MissedRuns, ScheduleConfig, ScheduleSpec};

fn hourly_from(start: &str) -> ScheduleSpec {
    ScheduleSpec::Every {
        every: Duration::from_secs(3600),
        start: utc(start),
        timezone: None,
    }
}

#[tokio::test]
async fn a_due_run_is_queued_once_and_the_schedule_moves_on() {
    let h = sqlite_harness("2026-07-01T06:00:00Z").await;
    let scheduler = h.scheduler(ScheduleConfig::default(), HeartbeatConfig::default());
    let listed = h.add(hourly_from("2026-07-01T07:00:00Z"), "Check the build").await;

    assert!(scheduler.tick().await.fired.is_empty(), "not due yet");
    h.clock.set(utc("2026-07-01T07:00:00Z"));
    assert_eq!(
        scheduler.tick().await.fired,
        vec![(listed.schedule.id, utc("2026-07-01T07:00:00Z"))]
    );
    assert!(scheduler.tick().await.fired.is_empty(), "a run is queued once");

    let lease = h
        .queue()
        .claim(&ClaimFilter::any())
        .await
        .unwrap()
        .expect("the run's task");
    match &lease.task.payload {
        TaskPayload::Instruction {
            instruction,
            origin,
            actor,
            conversation,
        } => {
            assert_eq!(instruction, "Check the build");
            assert_eq!(
                *origin,
                InstructionOrigin::Schedule {
                    schedule_id: listed.schedule.id.0
                }
            );
            assert_eq!(actor.as_ref(), Some(&ActorId::new("test:ann")));
            assert_eq!(conversation.id.as_str(), "test:ann");
        }
        other => panic!("unexpected payload {other:?}"),
    }
    let next = h.storage.schedules().get(listed.schedule.id).await.unwrap().unwrap();
    assert_eq!(next.next_run_at, Some(utc("2026-07-01T08:00:00Z")));
}

#[tokio::test]
async fn a_run_missed_while_down_fires_once_after_restart_or_is_skipped() {
    for (policy, fired) in [(MissedRuns::RunOnce, 1), (MissedRuns::Skip, 0)] {
        let mut h = sqlite_harness("2026-07-01T06:00:00Z").await;
        let listed = h.add(hourly_from("2026-07-01T07:00:00Z"), "Rotate the logs").await;
        // Herald is down from 06:00 to 11:20: five runs fall due meanwhile.
        h.clock.set(utc("2026-07-01T11:20:00Z"));
        h.restart().await;
        let config = ScheduleConfig {
            missed_runs: policy,
            ..ScheduleConfig::default()
        };
        let scheduler = h.scheduler(config.clone(), HeartbeatConfig::default());
        let report = scheduler.tick().await;
        assert_eq!(report.fired.len(), fired, "{policy:?}");
        assert_eq!(report.skipped.len(), 1 - fired, "{policy:?}");
        assert!(
            scheduler.tick().await.fired.is_empty(),
            "{policy:?}: not once per missed interval"
        );
        assert_eq!(
            h.queue().pending(&ClaimFilter::any()).await.unwrap(),
            fired as u64,
            "{policy:?}"
        );
        let schedule = h.storage.schedules().get(listed.schedule.id).await.unwrap().unwrap();
        assert_eq!(schedule.next_run_at, Some(utc("2026-07-01T12:00:00Z")), "{policy:?}");

        // Back to normal: the 12:00 run is on time.
        h.clock.set(utc("2026-07-01T12:00:05Z"));
        assert_eq!(scheduler.tick().await.fired.len(), 1, "{policy:?}");
    }
}

#[tokio::test]
async fn a_one_off_run_fires_and_its_schedule_is_finished() {
    let h = sqlite_harness("2026-07-01T06:00:00Z").await;
    let scheduler = h.scheduler(ScheduleConfig::default(), HeartbeatConfig::default());
    let at = utc("2026-07-01T06:30:00Z");
    h.add(ScheduleSpec::At { at }, "Send the report").await;
    h.clock.set(utc("2026-07-01T06:31:00Z"));
    assert_eq!(scheduler.tick().await.fired.len(), 1);
    assert!(h.schedules().list(None).await.unwrap().is_empty());
    h.clock.set(utc("2026-07-02T06:31:00Z"));
    assert!(scheduler.tick().await.fired.is_empty());
}

/// A new install: no checklist and nobody has written yet. The heartbeat
/// has nothing to do and no target, and stays idle without a complaint
/// (it used to warn `UnknownTarget` at every start).
#[tokio::test]
async fn without_a_checklist_an_unknown_default_target_is_not_a_problem() {
    let h = sqlite_harness("2026-07-01T06:00:00Z").await;
    let scheduler = h.scheduler(ScheduleConfig::default(), heartbeat_config(&h));
    assert_eq!(scheduler.tick().await.heartbeat, HeartbeatOutcome::EmptyChecklist);
    std::fs::write(h.checklist_path(), "- [ ] Check the queue\n").unwrap();
    h.clock.set(utc("2026-07-01T07:00:00Z"));
    assert_eq!(scheduler.tick().await.heartbeat, HeartbeatOutcome::UnknownTarget);
}

#[tokio::test]
async fn an_empty_checklist_skips_the_heartbeat_without_queueing_a_model_call() {
    let h = sqlite_harness("2026-07-01T06:00:00Z").await;
    h.make_known("test:owner", ConversationKind::Direct).await;
    for (what, checklist) in [
        ("no file", None),
        (
            "headings and empty boxes",
            Some("# Heartbeat\n\n- [ ]\n<!-- add checks here -->\n"),
        ),
    ] {
        if let Some(text) = checklist {
            std::fs::write(h.checklist_path(), text).unwrap();
        }
        let scheduler = h.scheduler(ScheduleConfig::default(), heartbeat_config(&h));
        assert_eq!(
            scheduler.tick().await.heartbeat,
            HeartbeatOutcome::EmptyChecklist,
            "{what}"
        );
        assert_eq!(
            scheduler.tick().await.heartbeat,
            HeartbeatOutcome::AlreadyHandled,
            "{what}"
        );
        assert_eq!(
            h.queue().stats().await.unwrap().queued,
            0,
            "{what}: no task, so no model call"
        );
    }
}

#[tokio::test]
async fn a_heartbeat_goes_to_the_first_admin_as_that_admin_at_background_priority() {
    let h = sqlite_harness("2026-07-01T06:00:00Z").await;
    h.make_known("test:owner", ConversationKind::Direct).await;
    std::fs::write(h.checklist_path(), "- [ ] Did the backup run?\n").unwrap();
    let scheduler = h.scheduler(ScheduleConfig::default(), heartbeat_config(&h));
    assert!(matches!(
        scheduler.tick().await.heartbeat,
        HeartbeatOutcome::Queued(Enqueued::New(_))
    ));
    // Someone writes after the heartbeat was queued: their message goes first.
    let later = h.queue().enqueue(common::message("test:bob", "hi")).await.unwrap();
    let first = h.queue().claim(&ClaimFilter::any()).await.unwrap().unwrap();
    assert_eq!(first.task.id, later.task_id(), "people's messages go before heartbeats");
    let lease = h.queue().claim(&ClaimFilter::any()).await.unwrap().unwrap();
    let TaskPayload::Instruction {
        conversation,
        instruction,
        actor,
        origin,
    } = &lease.task.payload
    else {
        panic!("a heartbeat is an instruction")
    };
    assert_eq!(conversation.id.as_str(), "test:owner");
    assert_eq!(actor.as_ref(), Some(&ActorId::new("test:owner")));
    assert_eq!(*origin, InstructionOrigin::Heartbeat);
    assert!(instruction.contains("HEARTBEAT_OK") && instruction.ends_with("- [ ] Did the backup run?"));
}

#[tokio::test]
async fn a_heartbeat_waits_while_its_target_is_busy_and_two_never_overlap() {
    let h = sqlite_harness("2026-07-01T06:00:00Z").await;
    h.make_known("test:owner", ConversationKind::Direct).await;
    std::fs::write(h.checklist_path(), "- [ ] Anything odd in the logs?\n").unwrap();
    let scheduler = h.scheduler(ScheduleConfig::default(), heartbeat_config(&h));

    // The owner's message is being answered: the heartbeat waits.
    let message = h.queue().enqueue(common::message("test:owner", "hello")).await.unwrap();
    let lease = h.queue().claim(&ClaimFilter::any()).await.unwrap().unwrap();
    assert_eq!(lease.task.id, message.task_id());
    assert_eq!(scheduler.tick().await.heartbeat, HeartbeatOutcome::Deferred);
    assert_eq!(scheduler.tick().await.heartbeat, HeartbeatOutcome::Deferred);
    h.queue().complete(&lease).await.unwrap();
    let HeartbeatOutcome::Queued(first) = scheduler.tick().await.heartbeat else {
        panic!("queued once the turn is over")
    };

    // The next interval comes while the first heartbeat still runs.
    let running = h.queue().claim(&ClaimFilter::any()).await.unwrap().unwrap();
    assert_eq!(running.task.id, first.task_id());
    h.clock.advance(Duration::from_secs(30 * 60));
    assert_eq!(scheduler.tick().await.heartbeat, HeartbeatOutcome::Deferred);
    h.queue().complete(&running).await.unwrap();
    assert!(matches!(
        scheduler.tick().await.heartbeat,
        HeartbeatOutcome::Queued(Enqueued::New(_))
    ));
    assert_eq!(h.queue().pending(&ClaimFilter::any()).await.unwrap(), 1);
}

#[tokio::test]
async fn heartbeats_keep_to_active_hours_in_their_time_zone() {
    // 05:30 UTC on 1 July is 07:30 in Berlin; the window opens at 08:00.
    let h = sqlite_harness("2026-07-01T05:30:00Z").await;
    h.make_known("test:owner", ConversationKind::Direct).await;
    std::fs::write(h.checklist_path(), "- [ ] Check the queue\n").unwrap();
    let config = HeartbeatConfig {
        active_hours: Some(ActiveHours {
            start: "08:00".parse().unwrap(),
            end: "22:00".parse().unwrap(),
            timezone: "Europe/Berlin".parse().unwrap(),
        }),
        ..heartbeat_config(&h)
    };
    let scheduler = h.scheduler(ScheduleConfig::default(), config);
    assert_eq!(scheduler.tick().await.heartbeat, HeartbeatOutcome::OutsideActiveHours);
    h.clock.set(utc("2026-07-01T05:59:59Z"));
    assert_eq!(scheduler.tick().await.heartbeat, HeartbeatOutcome::OutsideActiveHours);
    // 06:00 UTC is 08:00 in Berlin.
    h.clock.set(utc("2026-07-01T06:00:00Z"));
    assert!(matches!(scheduler.tick().await.heartbeat, HeartbeatOutcome::Queued(_)));
    // 20:00 UTC is 22:00: closed again.
    h.clock.set(utc("2026-07-01T20:00:00Z"));
    assert_eq!(scheduler.tick().await.heartbeat, HeartbeatOutcome::OutsideActiveHours);
}

#[tokio::test]
async fn a_group_is_never_the_default_target_but_may_be_chosen() {
    let h = sqlite_harness("2026-07-01T06:00:00Z").await;
    h.make_known("test:owner", ConversationKind::Group).await;
    std::fs::write(h.checklist_path(), "- [ ] Check the queue\n").unwrap();
    let scheduler = h.scheduler(ScheduleConfig::default(), heartbeat_config(&h));
    assert_eq!(scheduler.tick().await.heartbeat, HeartbeatOutcome::GroupNotAllowed);
    assert_eq!(h.queue().stats().await.unwrap().queued, 0);

    let chosen = HeartbeatConfig {
        target: Some("test:owner".into()),
        ..heartbeat_config(&h)
    };
    let scheduler = h.scheduler(ScheduleConfig::default(), chosen);
    assert!(matches!(scheduler.tick().await.heartbeat, HeartbeatOutcome::Queued(_)));

    let unknown = HeartbeatConfig {
        target: Some("test:nobody".into()),
        ..heartbeat_config(&h)
    };
    let scheduler = h.scheduler(ScheduleConfig::default(), unknown);
    assert_eq!(scheduler.tick().await.heartbeat, HeartbeatOutcome::UnknownTarget);
}

/// Two Herald processes (two stores' connections) on one database tick at
/// the same moment: a due run and a heartbeat are each queued once.
async fn two_processes_fire_a_due_run_once(h: Harness) {
    h.make_known("test:owner", ConversationKind::Direct).await;
    std::fs::write(h.checklist_path(), "- [ ] Check the queue\n").unwrap();
    h.add(hourly_from("2026-07-01T07:00:00Z"), "Report").await;
    let other = h.another_process().await;
    let first = h.scheduler(ScheduleConfig::default(), heartbeat_config(&h));
    let second = other.scheduler(ScheduleConfig::default(), heartbeat_config(&h));
    h.clock.set(utc("2026-07-01T07:00:00Z"));
    for _ in 0..5 {
        let (a, b) = tokio::join!(first.tick(), second.tick());
        assert!(a.fired.len() + b.fired.len() <= 2, "{a:?} {b:?}");
    }
    let tasks = h.queue().stats().await.unwrap().queued;
    assert_eq!(tasks, 2, "one scheduled run and one heartbeat");
    let schedule = &h.schedules().list(None).await.unwrap()[0];
    assert_eq!(schedule.next_run_at, Some(utc("2026-07-01T08:00:00Z")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_processes_on_sqlite_fire_a_due_run_once() {
    two_processes_fire_a_due_run_once(sqlite_harness("2026-07-01T06:00:00Z").await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_processes_on_postgres_fire_a_due_run_once() {
    let Some(h) = postgres_harness("2026-07-01T06:00:00Z").await else {
        return;
    };
    two_processes_fire_a_due_run_once(h).await;
}

#[tokio::test]
async fn schedules_are_listed_and_cancelled_within_a_conversation() {
    let h = sqlite_harness("2026-07-01T06:00:00Z").await;
    let ann = h.add(hourly_from("2026-07-01T07:00:00Z"), "Water the plants").await;
    let service = h.service();
    let lines: Vec<String> = service.list(None).await.unwrap().iter().map(|l| l.line()).collect();
    assert_eq!(
        lines,
        [format!(
            "#{} every 1h from 2026-07-01 07:00 UTC (next 2026-07-01 07:00 UTC) in test:ann: Water the plants",
            ann.schedule.id
        )]
    );
    let elsewhere = service
        .cancel(ann.schedule.id, Some(&"test:bob".into()))
        .await
        .unwrap_err();
    assert!(elsewhere.to_string().contains("no schedule"), "{elsewhere}");
    service.cancel(ann.schedule.id, Some(&"test:ann".into())).await.unwrap();
    assert!(service.list(None).await.unwrap().is_empty());
    let gone = service.cancel(ScheduleId(ann.schedule.id.0), None).await.unwrap_err();
    assert!(gone.to_string().contains("no schedule"), "{gone}");
}

/// A model that asks for many schedules in one step makes its calls at
/// once; the count of a non-admin's schedules still holds them to
/// `max_per_user` (each call used to count before any was stored).
#[tokio::test]
async fn schedules_added_at_once_stay_within_max_per_user() {
    let h = sqlite_harness("2026-07-01T06:00:00Z").await;
    let service = h.service().with_limits(herald_schedule::ScheduleLimits {
        min_interval: Duration::from_secs(60),
        max_per_user: 3,
    });
    let mut adds = tokio::task::JoinSet::new();
    for n in 0..10 {
        let service = service.clone();
        adds.spawn(async move {
            service
                .add_within(
                    common::conversation("test:ann", ConversationKind::Direct),
                    ActorId::new("test:ann"),
                    hourly_from("2026-07-01T07:00:00Z"),
                    &format!("Reminder {n}"),
                )
                .await
        });
    }
    let results = adds.join_all().await;
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 3, "{results:?}");
    assert_eq!(h.schedules().list(None).await.unwrap().len(), 3);
}
