//! The statements that run on every scrape or prune read only what they
//! need: the planner's own account of them, on a real migrated file.

use sqlx::Row;

use super::SqliteEngine;
use crate::engine::Engine;
use crate::{prune, sql};

/// The plan's lines for `statement`, bound with `ints`.
async fn plan(engine: &SqliteEngine, statement: &str, ints: &[i64]) -> Vec<String> {
    let explain = format!("EXPLAIN QUERY PLAN {statement}");
    let mut query = sqlx::query(sqlx::AssertSqlSafe(explain));
    for value in ints {
        query = query.bind(*value);
    }
    query
        .fetch_all(engine.reads())
        .await
        .unwrap()
        .iter()
        .map(|row| row.get::<String, _>("detail"))
        .collect()
}

#[tokio::test]
async fn stats_and_prune_never_scan_a_whole_table() {
    let dir = tempfile::tempdir().unwrap();
    let engine = SqliteEngine::on_file_in(dir.path()).await;
    engine.migrate().await.unwrap();
    for (name, statement, ints, indexes) in [
        (
            "stats",
            sql::STATS,
            &[][..],
            &["tasks_unfinished_by_", "tasks_finished"][..],
        ),
        (
            "prune tasks",
            prune::PRUNE_TASKS,
            &[1, 1, 500][..],
            &["tasks_finished"][..],
        ),
    ] {
        let plan = plan(&engine, statement, ints).await;
        for line in &plan {
            let reads_a_table = line.starts_with("SCAN") || line.starts_with("SEARCH");
            assert!(
                !reads_a_table || line.contains("INDEX") || line.contains("PRIMARY KEY"),
                "{name} reads a whole table: {plan:#?}"
            );
        }
        for index in indexes {
            assert!(
                plan.iter().any(|line| line.contains(index)),
                "{name} does not use {index}: {plan:#?}"
            );
        }
    }
    engine.close().await;
}

/// A turn's history read (migration 0010) is answered from the index alone:
/// a few neighbouring pages, never one table page per entry.
#[tokio::test]
async fn the_history_read_never_visits_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let engine = SqliteEngine::on_file_in(dir.path()).await;
    engine.migrate().await.unwrap();
    let plan = plan(&engine, super::HISTORY_AND_STATE, &[0, 200, 0]).await;
    let messages: Vec<_> = plan.iter().filter(|line| line.contains("messages")).collect();
    assert!(
        !messages.is_empty()
            && messages
                .iter()
                .all(|line| line.contains("USING COVERING INDEX messages_history")),
        "the history read visits the table: {plan:#?}"
    );
    engine.close().await;
}
