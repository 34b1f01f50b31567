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
}
