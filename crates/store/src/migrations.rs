//! The schema, embedded in the binary: the SQL files under `migrations/` are
//! compiled in with `include_str!` and handed to sqlx's runtime `Migrator`,
//! so a build needs no database and no `sqlx::migrate!` macro. sqlx records
//! each applied version (with a checksum) in `_sqlx_migrations` and, on
//! PostgreSQL, takes an advisory lock so processes starting together migrate once.

use std::borrow::Cow;

use sqlx::SqlSafeStr;
use sqlx::migrate::{Migration, MigrationType, Migrator};

/// `(version, description, sql)`, oldest first. A released file is never
/// edited: sqlx refuses a database whose applied checksum differs.
const SQLITE: &[(i64, &str, &str)] = &[
    (
        1,
        "initial",
        include_str!("../../../migrations/sqlite/0001_initial.sql"),
    ),
    (
        2,
        "schedules",
        include_str!("../../../migrations/sqlite/0002_schedules.sql"),
    ),
    (
        3,
        "claim plan",
        include_str!("../../../migrations/sqlite/0003_claim_plan.sql"),
    ),
    (
        4,
        "retention",
        include_str!("../../../migrations/sqlite/0004_retention.sql"),
    ),
    (5, "files", include_str!("../../../migrations/sqlite/0005_files.sql")),
    (
        6,
        "lease holders",
        include_str!("../../../migrations/sqlite/0006_lease_holders.sql"),
    ),
    (
        7,
        "send windows",
        include_str!("../../../migrations/sqlite/0007_send_windows.sql"),
    ),
    (
        8,
        "dedup on task",
        include_str!("../../../migrations/sqlite/0008_dedup_on_task.sql"),
    ),
    (
        9,
        "claim several",
        include_str!("../../../migrations/sqlite/0009_claim_several.sql"),
    ),
    (
        10,
        "history together",
        include_str!("../../../migrations/sqlite/0010_history_together.sql"),
    ),
];

const POSTGRES: &[(i64, &str, &str)] = &[
    (
        1,
        "initial",
        include_str!("../../../migrations/postgres/0001_initial.sql"),
    ),
    (
        2,
        "schedules",
        include_str!("../../../migrations/postgres/0002_schedules.sql"),
    ),
    (
        3,
        "claim plan",
        include_str!("../../../migrations/postgres/0003_claim_plan.sql"),
    ),
    (
        4,
        "retention",
        include_str!("../../../migrations/postgres/0004_retention.sql"),
    ),
    (5, "files", include_str!("../../../migrations/postgres/0005_files.sql")),
    (
        6,
        "lease holders",
        include_str!("../../../migrations/postgres/0006_lease_holders.sql"),
    ),
    (
        7,
        "send windows",
        include_str!("../../../migrations/postgres/0007_send_windows.sql"),
    ),
    (
        8,
        "dedup on task",
        include_str!("../../../migrations/postgres/0008_dedup_on_task.sql"),
    ),
    (
        9,
        "claim several",
        include_str!("../../../migrations/postgres/0009_claim_several.sql"),
    ),
    (
        10,
        "history together",
        include_str!("../../../migrations/postgres/0010_history_together.sql"),
    ),
];

fn migrator(files: &'static [(i64, &'static str, &'static str)]) -> Migrator {
    Migrator::with_migrations(
        files
            .iter()
            .map(|&(version, description, sql)| {
                Migration::new(
                    version,
                    Cow::Borrowed(description),
                    MigrationType::Simple,
                    sql.into_sql_str(),
                    false,
                )
            })
            .collect(),
    )
}

pub(crate) fn sqlite() -> Migrator {
    migrator(SQLITE)
}

pub(crate) fn postgres() -> Migrator {
    migrator(POSTGRES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_engines_have_the_same_versions() {
        let versions = |files: &[(i64, &str, &str)]| files.iter().map(|f| (f.0, f.1.to_owned())).collect::<Vec<_>>();
        assert_eq!(versions(SQLITE), versions(POSTGRES));
        assert!(SQLITE.windows(2).all(|pair| pair[0].0 < pair[1].0));
    }

    /// A file added under `migrations/` and not listed here would never run.
    #[test]
    fn every_migration_file_is_embedded() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations");
        for (engine, files) in [("sqlite", SQLITE), ("postgres", POSTGRES)] {
            let mut on_disk: Vec<String> = std::fs::read_dir(root.join(engine))
                .unwrap()
                .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|name| name.ends_with(".sql"))
                .collect();
            on_disk.sort();
            let embedded: Vec<String> = files
                .iter()
                .map(|(version, description, _)| format!("{version:04}_{}.sql", description.replace(' ', "_")))
                .collect();
            assert_eq!(on_disk, embedded, "migrations/{engine}");
        }
    }

    /// 0004 rebuilds SQLite's `messages` and `deliveries` (and changes
    /// PostgreSQL's foreign keys): a database in use keeps every row, and ids
    /// carry on above the highest one.
    mod retention_keeps_existing_rows {
        use sqlx::Pool;

        use super::*;
        use crate::statement::{Columns, Sql, Statement};

        const BEFORE_RETENTION: usize = 3;

        async fn seed<DB: Sql>(pool: &Pool<DB>) {
            for statement in [
                "INSERT INTO conversations (id, channel, ref, created_at, updated_at) VALUES ('test:ann', 'test', '{}', 1, 1)",
                "INSERT INTO tasks (conversation_id, channel, payload, state, max_attempts, run_at, created_at, updated_at)
                 VALUES ('test:ann', 'test', '{}', 'done', 5, 1, 1, 1)",
                "INSERT INTO messages (conversation_id, task_id, seq, role, text, at) VALUES ('test:ann', 1, 0, 'user', 'hi', 1)",
                "INSERT INTO messages (conversation_id, task_id, seq, role, text, at) VALUES ('test:ann', 1, 1, 'assistant', 'hello', 1)",
                "INSERT INTO deliveries (task_id, slot, conversation_id, platform_message_ids, delivered_at)
                 VALUES (1, 'reply', 'test:ann', '[]', 1)",
            ] {
                Statement::<DB>::new(statement).execute(pool).await.unwrap();
            }
        }

        async fn check<DB: Sql>(pool: &Pool<DB>) {
            let texts = |rows: Vec<DB::Row>| {
                rows.iter()
                    .map(|row| {
                        (
                            row.int("id").unwrap(),
                            row.opt_int("task_id").unwrap(),
                            row.text("text").unwrap(),
                        )
                    })
                    .collect::<Vec<_>>()
            };
            let messages = "SELECT id, task_id, text FROM messages ORDER BY id";
            let deliveries = "SELECT task_id FROM deliveries";
            let rows = Statement::<DB>::new(messages).fetch_all(pool).await.unwrap();
            assert_eq!(texts(rows), [(1, Some(1), "hi".into()), (2, Some(1), "hello".into())]);
            assert_eq!(Statement::<DB>::new(deliveries).fetch_all(pool).await.unwrap().len(), 1);

            Statement::<DB>::new("DELETE FROM tasks WHERE id = 1")
                .execute(pool)
                .await
                .unwrap();
            Statement::<DB>::new(
                "INSERT INTO messages (conversation_id, seq, role, text, at) VALUES ('test:ann', 0, 'user', 'again', 2)",
            )
            .execute(pool)
            .await
            .unwrap();
            let rows = Statement::<DB>::new(messages).fetch_all(pool).await.unwrap();
            assert_eq!(
                texts(rows),
                [
                    (1, None, "hi".into()),
                    (2, None, "hello".into()),
                    (3, None, "again".into())
                ]
            );
            assert!(
                Statement::<DB>::new(deliveries)
                    .fetch_all(pool)
                    .await
                    .unwrap()
                    .is_empty()
            );
        }

        #[tokio::test]
        async fn on_sqlite() {
            let dir = tempfile::tempdir().unwrap();
            let url = format!("sqlite://{}?mode=rwc", dir.path().join("old.db").display());
            let options: sqlx::sqlite::SqliteConnectOptions = url.parse().unwrap();
            let pool = sqlx::SqlitePool::connect_with(options.foreign_keys(true))
                .await
                .unwrap();
            migrator(&SQLITE[..BEFORE_RETENTION]).run(&pool).await.unwrap();
            seed(&pool).await;
            sqlite().run(&pool).await.unwrap();
            check(&pool).await;
        }

        #[tokio::test]
        async fn on_postgres() {
            let Some(database) = herald_testkit::postgres::TestDatabase::from_env("herald_m").await else {
                return;
            };
            let pool = sqlx::PgPool::connect(&database.url).await.unwrap();
            migrator(&POSTGRES[..BEFORE_RETENTION]).run(&pool).await.unwrap();
            seed(&pool).await;
            postgres().run(&pool).await.unwrap();
            check(&pool).await;
            pool.close().await;
        }
    }

    /// 0008 moves every dedup key onto its task: an event stored before the
    /// upgrade is still recognised after it, and tasks without a key stay
    /// without one.
    mod dedup_keys_move_onto_their_tasks {
        use sqlx::Pool;

        use super::*;
        use crate::statement::{Columns, Sql, Statement};

        const BEFORE_DEDUP_ON_TASK: usize = 7;

        async fn seed<DB: Sql>(pool: &Pool<DB>) {
            for statement in [
                "INSERT INTO conversations (id, channel, ref, created_at, updated_at) VALUES ('test:ann', 'test', '{}', 1, 1)",
                "INSERT INTO tasks (conversation_id, channel, payload, state, max_attempts, run_at, created_at, updated_at)
                 VALUES ('test:ann', 'test', '{}', 'done', 5, 1, 1, 1)",
                "INSERT INTO tasks (conversation_id, channel, payload, state, max_attempts, run_at, created_at, updated_at)
                 VALUES ('test:ann', 'test', '{}', 'queued', 5, 1, 1, 1)",
                "INSERT INTO inbound_dedup (key, task_id, seen_at) VALUES ('test:m1', 1, 1)",
            ] {
                Statement::<DB>::new(statement).execute(pool).await.unwrap();
            }
        }

        async fn check<DB: Sql>(pool: &Pool<DB>) {
            let rows = Statement::<DB>::new("SELECT id, dedup_key FROM tasks ORDER BY id")
                .fetch_all(pool)
                .await
                .unwrap();
            let keys: Vec<(i64, Option<String>)> = rows
                .iter()
                .map(|row| (row.int("id").unwrap(), row.opt_text("dedup_key").unwrap()))
                .collect();
            assert_eq!(keys, [(1, Some("test:m1".into())), (2, None)]);
            let again = Statement::<DB>::new(
                "INSERT INTO tasks (conversation_id, channel, payload, state, max_attempts, run_at, created_at, updated_at, dedup_key)
                 VALUES ('test:ann', 'test', '{}', 'queued', 5, 1, 1, 1, 'test:m1')",
            )
            .execute(pool)
            .await;
            assert!(again.is_err(), "the key is unique on its task");
        }

        #[tokio::test]
        async fn on_sqlite() {
            let dir = tempfile::tempdir().unwrap();
            let url = format!("sqlite://{}?mode=rwc", dir.path().join("old.db").display());
            let options: sqlx::sqlite::SqliteConnectOptions = url.parse().unwrap();
            let pool = sqlx::SqlitePool::connect_with(options.foreign_keys(true))
                .await
                .unwrap();
            migrator(&SQLITE[..BEFORE_DEDUP_ON_TASK]).run(&pool).await.unwrap();
            seed(&pool).await;
            sqlite().run(&pool).await.unwrap();
            check(&pool).await;
        }

        #[tokio::test]
        async fn on_postgres() {
            let Some(database) = herald_testkit::postgres::TestDatabase::from_env("herald_d").await else {
                return;
            };
            let pool = sqlx::PgPool::connect(&database.url).await.unwrap();
            migrator(&POSTGRES[..BEFORE_DEDUP_ON_TASK]).run(&pool).await.unwrap();
            seed(&pool).await;
            postgres().run(&pool).await.unwrap();
            check(&pool).await;
            pool.close().await;
        }
    }
}
