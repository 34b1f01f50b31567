//! Schedules in the database: kept across restarts, due by their next run,
//! and moved past a run by exactly one of the processes that noticed it.

use std::sync::Arc;
use std::time::Duration;

use herald_core::{
    ActorId, ClaimFilter, Enqueued, InstructionOrigin, NewSchedule, NewTask, ScheduleId, TaskPayload, Timestamp,
};
use tokio::sync::Barrier;

use super::{Harness, conversation, queue_config};

fn new_schedule(id: &str, instruction: &str, next_run_at: Timestamp) -> NewSchedule {
    NewSchedule {
        conversation: conversation(id),
        actor: Some(ActorId::new(format!("{id}-owner"))),
        instruction: instruction.into(),
        spec: r#"{"kind":"every","every":"1h","start":"2026-01-01T10:00:00Z"}"#.into(),
        next_run_at,
    }
}

fn at(h: &Harness, after: Duration) -> Timestamp {
    h.clock_now() + chrono::Duration::from_std(after).unwrap()
}

pub async fn schedules_are_kept_across_a_restart_and_listed_by_conversation(mut h: Harness) {
    let schedules = h.storage.schedules();
    let first = schedules
        .create(new_schedule(
            "test:ann",
            "water the plants",
            at(&h, Duration::from_secs(3600)),
        ))
        .await
        .unwrap();
    let second = schedules
        .create(new_schedule("test:bob", "call mum", at(&h, Duration::from_secs(60))))
        .await
        .unwrap();
    assert!(second.id > first.id);
    assert_eq!(first.conversation, conversation("test:ann"));
    assert_eq!(first.actor, Some(ActorId::new("test:ann-owner")));
    assert_eq!(first.created_at, h.clock_now());
    assert_eq!(first.last_run_at, None);

    h.restart().await;
    let schedules = h.storage.schedules();
    let all = schedules.list(None).await.unwrap();
    assert_eq!(all, vec![first.clone(), second.clone()]);
    let anns = schedules.list(Some(&conversation("test:ann").id)).await.unwrap();
    assert_eq!(anns, vec![first.clone()]);
    assert_eq!(schedules.get(second.id).await.unwrap(), Some(second.clone()));
    assert_eq!(schedules.get(ScheduleId(9999)).await.unwrap(), None);
}

pub async fn due_schedules_are_those_whose_run_has_come_earliest_first(h: Harness) {
    let schedules = h.storage.schedules();
    let later = schedules
        .create(new_schedule("test:ann", "later", at(&h, Duration::from_secs(600))))
        .await
        .unwrap();
    let sooner = schedules
        .create(new_schedule("test:bob", "sooner", at(&h, Duration::from_secs(60))))
        .await
        .unwrap();
    assert!(schedules.due(h.clock_now(), 10).await.unwrap().is_empty());
    h.advance(Duration::from_secs(60));
    let due: Vec<ScheduleId> = schedules
        .due(h.clock_now(), 10)
        .await
        .unwrap()
        .iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(due, vec![sooner.id], "a run due exactly now is due");
    h.advance(Duration::from_secs(3600));
    let due: Vec<ScheduleId> = schedules
        .due(h.clock_now(), 10)
        .await
        .unwrap()
        .iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(due, vec![sooner.id, later.id]);
    assert_eq!(
        schedules.due(h.clock_now(), 1).await.unwrap().len(),
        1,
        "the limit holds"
    );
}

pub async fn a_fired_run_moves_the_schedule_once_and_a_finished_schedule_is_gone_from_lists(h: Harness) {
    let schedules = h.storage.schedules();
    let due = at(&h, Duration::from_secs(60));
    let next = at(&h, Duration::from_secs(3660));
    let schedule = schedules.create(new_schedule("test:ann", "hourly", due)).await.unwrap();
    h.advance(Duration::from_secs(61));
    assert!(schedules.mark_fired(schedule.id, due, Some(next)).await.unwrap());
    assert!(
        !schedules.mark_fired(schedule.id, due, Some(next)).await.unwrap(),
        "the same run cannot move it twice"
    );
    let moved = schedules.get(schedule.id).await.unwrap().unwrap();
    assert_eq!((moved.next_run_at, moved.last_run_at), (Some(next), Some(due)));
    assert!(schedules.due(h.clock_now(), 10).await.unwrap().is_empty());

    assert!(schedules.mark_fired(schedule.id, next, None).await.unwrap());
    assert!(
        schedules.list(None).await.unwrap().is_empty(),
        "finished schedules are not listed"
    );
    assert!(
        schedules
            .due(at(&h, Duration::from_secs(86_400)), 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(schedules.get(schedule.id).await.unwrap().unwrap().next_run_at, None);
}

pub async fn a_cancelled_schedule_is_removed(h: Harness) {
    let schedules = h.storage.schedules();
    let schedule = schedules
        .create(new_schedule("test:ann", "nag", at(&h, Duration::from_secs(60))))
        .await
        .unwrap();
    assert!(schedules.cancel(schedule.id).await.unwrap());
    assert!(!schedules.cancel(schedule.id).await.unwrap());
    assert!(schedules.list(None).await.unwrap().is_empty());
    h.advance(Duration::from_secs(120));
    assert!(schedules.due(h.clock_now(), 10).await.unwrap().is_empty());
}

/// Several processes notice the same due run at once: each enqueues it under
/// its run key and tries to move the schedule on. One task is stored and one
/// process moves the schedule.
pub async fn processes_sharing_the_database_fire_a_due_run_once(h: Harness) {
    let mut processes = vec![h.storage.clone()];
    for _ in 1..4 {
        processes.push(h.another_process(&queue_config()).await);
    }
    let due = at(&h, Duration::from_secs(60));
    let next = at(&h, Duration::from_secs(3660));
    let schedule = h
        .storage
        .schedules()
        .create(new_schedule("test:ann", "report", due))
        .await
        .unwrap();
    h.advance(Duration::from_secs(61));
    let key = format!("schedule:{}:{}", schedule.id, herald_core::time::to_millis(due));
    let now = h.clock_now();
    // Every process has noticed the run before any of them fires it.
    let noticed = Arc::new(Barrier::new(processes.len()));
    let runs = processes.iter().map(|storage| {
        let (storage, key, schedule) = (storage.clone(), key.clone(), schedule.clone());
        let noticed = noticed.clone();
        async move {
            let found = storage.schedules().due(now, 10).await.unwrap();
            assert_eq!(found.len(), 1);
            noticed.wait().await;
            let enqueued = storage
                .queue()
                .enqueue(NewTask {
                    payload: TaskPayload::Instruction {
                        conversation: schedule.conversation.clone(),
                        instruction: schedule.instruction.clone(),
                        actor: schedule.actor.clone(),
                        origin: InstructionOrigin::Schedule {
                            schedule_id: schedule.id.0,
                        },
                    },
                    dedup_key: Some(key),
                    priority: 1,
                    not_before: None,
                })
                .await
                .unwrap();
            let moved = storage
                .schedules()
                .mark_fired(schedule.id, due, Some(next))
                .await
                .unwrap();
            (enqueued, moved)
        }
    });
    let outcomes = futures_join_all(runs).await;
    let new = outcomes.iter().filter(|(e, _)| matches!(e, Enqueued::New(_))).count();
    let moved = outcomes.iter().filter(|(_, m)| *m).count();
    assert_eq!((new, moved), (1, 1), "{outcomes:?}");
    assert_eq!(h.storage.queue().pending(&ClaimFilter::any()).await.unwrap(), 1);
}

/// Runs the futures concurrently on the test's runtime.
async fn futures_join_all<F>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for handle in handles {
        out.push(handle.await.expect("task"));
    }
    out
}
