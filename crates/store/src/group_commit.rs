//! Group commit: several callers' writes committed as one transaction.
//!
//! SQLite writes through one connection (`sqlite/mod.rs`), and every write
//! run on its own is a transaction of its own: its changed pages appended to
//! the WAL as frames, the WAL index updated, now and then a checkpoint. Under
//! load many turns write at once (a claim, a turn's record, a receipt), and
//! they touch the same few pages (the tasks table's last page, its indexes),
//! each writing those pages again. Here writes that have to wait anyway go
//! to one writer task: it takes every write waiting when it is free, runs
//! them in order inside one `BEGIN IMMEDIATE … COMMIT`, and answers each
//! caller after the commit, so a caller never hears "done" about a change
//! that is not committed.
//!
//! Nothing waits to form a group: a write that finds no other write in
//! flight runs at once, on its own, on the caller's task as before; writes
//! that arrive while others are in flight queue for the writer task, and
//! what is queued when it is free is the next group. A group costs two more
//! round trips to SQLite's thread (`BEGIN`, `COMMIT`) than its writes alone,
//! so fewer than [`MIN_GROUP`] queued writes run one by one, each its own
//! commit. So a quiet Herald pays nothing, and a busy one commits once per
//! group instead of once per write.
//!
//! A failing write does not fail its group. SQLite undoes a failing
//! statement and (for constraint errors) keeps the transaction open; then
//! the writes before it are committed and answered, the failing one gets its
//! error, and the rest go on in a new transaction. Some errors (a full disk,
//! an I/O error) end the whole transaction instead; the commit that follows
//! then fails, and the writes before it get that error, which is the truth:
//! they were not stored. A write of several statements keeps what it has
//! always had: the statements before a failing one stay (they are chosen so
//! that either half alone is harmless, `sqlite/batched.rs`).

use std::sync::atomic::{AtomicUsize, Ordering};

use herald_core::StoreError;
use sqlx::{Database, Pool};
use tokio::sync::{mpsc, oneshot};
use tracing::debug;

use crate::error;
use crate::statement::{self, On, Query, Sql};

/// At most this many writes in one transaction: a group holds SQLite's write
/// lock (and keeps other processes' writers and this process's transactions
/// waiting) for as long as its writes take, a few milliseconds at most.
const MAX_GROUP: usize = 32;

/// Fewer queued writes than this run one by one: for two or three, the
/// round trips of `BEGIN` and `COMMIT` cost about what the commits saved
/// (measured: small groups at 200 messages a second made replies slower).
const MIN_GROUP: usize = 4;

/// Writes waiting for the writer, at most; callers beyond it wait to queue.
const QUEUED: usize = 1024;

type Answer<T> = oneshot::Sender<Result<T, StoreError>>;

/// A write waiting for the writer, and where its caller waits for what it
/// wants back.
enum Write<DB: Database> {
    /// How many rows it changed.
    Changed(Query<DB>, Answer<u64>),
    /// Its first row, if any (a single statement).
    Row(Query<DB>, Answer<Option<DB::Row>>),
    /// Every row of every statement.
    Rows(Query<DB>, Answer<Vec<DB::Row>>),
}

/// A write that ran (or failed), waiting for its transaction's outcome.
enum Ran<DB: Database> {
    Changed(Result<u64, StoreError>, Answer<u64>),
    Row(Result<Option<DB::Row>, StoreError>, Answer<Option<DB::Row>>),
    Rows(Result<Vec<DB::Row>, StoreError>, Answer<Vec<DB::Row>>),
}

impl<DB: Database> Ran<DB> {
    fn error(&self) -> Option<&StoreError> {
        match self {
            Ran::Changed(done, _) => done.as_ref().err(),
            Ran::Row(done, _) => done.as_ref().err(),
            Ran::Rows(done, _) => done.as_ref().err(),
        }
    }

    /// Tells the caller what its write gave back, or why it is not stored:
    /// its own error, or its transaction's.
    fn answer(self, committed: Result<(), &StoreError>) {
        fn send<T>(done: Result<T, StoreError>, answer: Answer<T>, committed: Result<(), &StoreError>) {
            // A caller that stopped waiting does not need to know.
            let _ = answer.send(committed.map_err(same).and(done));
        }
        match self {
            Ran::Changed(done, answer) => send(done, answer, committed),
            Ran::Row(done, answer) => send(done, answer, committed),
            Ran::Rows(done, answer) => send(done, answer, committed),
        }
    }
}

/// The way to the writer task; writes sent here are committed in groups.
pub(crate) struct GroupCommit<DB: Database> {
    writes: mpsc::Sender<Write<DB>>,
    /// Where a write that finds no other in flight runs at once.
    pool: Pool<DB>,
    /// Writes sent and not yet answered.
    in_flight: AtomicUsize,
}

impl<DB: Sql> GroupCommit<DB> {
    /// Starts the writer task on `pool` (which should hold one connection:
    /// the writer takes it for every write or group); `begin` opens a
    /// writing transaction. The task ends when this is dropped.
    pub(crate) fn start(pool: Pool<DB>, begin: &'static str) -> Self {
        let (writes, queue) = mpsc::channel(QUEUED);
        tokio::spawn(writer(pool.clone(), begin, queue));
        Self {
            writes,
            pool,
            in_flight: AtomicUsize::new(0),
        }
    }

    /// Runs a change with the next group; how many rows it changed, once
    /// committed.
    pub(crate) async fn changed(&self, query: Query<DB>) -> Result<u64, StoreError> {
        let (answer, done) = oneshot::channel();
        self.send(Write::Changed(query, answer), done).await
    }

    /// A statement's first row, once committed.
    pub(crate) async fn row(&self, query: Query<DB>) -> Result<Option<DB::Row>, StoreError> {
        let (answer, done) = oneshot::channel();
        self.send(Write::Row(query, answer), done).await
    }

    /// Every row of every statement of `query`, once committed.
    pub(crate) async fn rows(&self, query: Query<DB>) -> Result<Vec<DB::Row>, StoreError> {
        let (answer, done) = oneshot::channel();
        self.send(Write::Rows(query, answer), done).await
    }

    async fn send<T>(&self, write: Write<DB>, done: oneshot::Receiver<Result<T, StoreError>>) -> Result<T, StoreError> {
        self.writes.send(write).await.map_err(|_| stopped())?;
        done.await.map_err(|_| stopped())?
    }

    /// Where a write sent here runs: at once on the pool when no other write
    /// is in flight, else with the writer task (`On::Grouped`, answered by
    /// [`Self::changed`], [`Self::row`] or [`Self::rows`]). The guard counts
    /// the write in flight until it drops. (The pool's one connection still
    /// orders a write run at once after any group the writer is finishing.)
    pub(crate) fn route(&self) -> (InFlight<'_>, On<'_, DB>) {
        let alone = self.in_flight.fetch_add(1, Ordering::AcqRel) == 0;
        let on = if alone { On::Pool(&self.pool) } else { On::Grouped(self) };
        (InFlight(&self.in_flight), on)
    }
}

/// One write in flight, counted while its caller waits (a caller that gives
/// up stops counting; the count only decides whether to queue).
pub(crate) struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn stopped() -> StoreError {
    StoreError::Unavailable("the database writer has stopped".into())
}

async fn writer<DB: Sql>(pool: Pool<DB>, begin: &'static str, mut queue: mpsc::Receiver<Write<DB>>) {
    let mut group = Vec::with_capacity(MAX_GROUP);
    while queue.recv_many(&mut group, MAX_GROUP).await > 0 {
        if group.len() < MIN_GROUP {
            for write in group.drain(..) {
                run(write, On::Pool(&pool)).await.answer(Ok(()));
            }
        } else {
            metrics::histogram!("herald_store_group_commit_writes").record(group.len() as f64);
            commit_group(&pool, begin, group.drain(..)).await;
        }
    }
}

/// Runs `writes` in order in as few transactions as their failures allow,
/// answering each once its fate is known.
///
/// The transaction is opened and ended by plain statements, not sqlx's
/// `Transaction`: when SQLite ends a transaction by itself, sqlx's count of
/// open transactions stays at one, and every later `begin` on that
/// connection would fail (`SqliteEngine::begin_write` has the other half).
async fn commit_group<DB: Sql>(pool: &Pool<DB>, begin: &'static str, writes: impl Iterator<Item = Write<DB>>) {
    let mut writes = writes.peekable();
    let mut connection = match pool.acquire().await {
        Ok(connection) => connection,
        Err(err) => {
            let err = error::db(err);
            writes.for_each(|write| write.not_run(same(&err)).answer(Ok(())));
            return;
        }
    };
    // The writes that ran in the open transaction, answered at its end.
    let mut ran: Vec<Ran<DB>> = Vec::new();
    while writes.peek().is_some() {
        statement::count(begin);
        if let Err(err) = DB::execute(sqlx::query(begin), On::Connection(&mut *connection)).await {
            // Another process holds the write lock past the busy timeout:
            // the writes waiting behind would only wait as long again.
            writes.for_each(|write| write.not_run(same(&err)).answer(Ok(())));
            return;
        }
        let mut failed = None;
        for write in writes.by_ref() {
            let done = run(write, On::Connection(&mut *connection)).await;
            if let Some(err) = done.error() {
                debug!(error = %err, "a write of a group failed; committing the writes before it");
                failed = Some(done);
                break;
            }
            ran.push(done);
        }
        settle(end::<DB>(&mut connection).await, &mut ran);
        if let Some(done) = failed {
            done.answer(Ok(()));
        }
    }
}

/// Commits the open transaction. When the commit fails, rolls back what is
/// left of it (nothing, if SQLite ended it already), so the connection is
/// out of any transaction for the next group.
async fn end<DB: Sql>(connection: &mut DB::Connection) -> Result<(), StoreError> {
    statement::count("COMMIT");
    let committed = DB::execute(sqlx::query("COMMIT"), On::Connection(&mut *connection)).await;
    if committed.is_err() {
        statement::count("ROLLBACK");
        // Fails when no transaction is left, which is what is wanted.
        let _ = DB::execute(sqlx::query("ROLLBACK"), On::Connection(connection)).await;
    }
    committed.map(|_| ())
}

/// Answers the writes of a transaction with its commit's outcome.
fn settle<DB: Database>(committed: Result<(), StoreError>, ran: &mut Vec<Ran<DB>>) {
    for done in ran.drain(..) {
        done.answer(committed.as_ref().map(|_| ()));
    }
}

/// One error for each of several callers.
fn same(err: &StoreError) -> StoreError {
    match err {
        StoreError::Unavailable(message) => StoreError::Unavailable(message.clone()),
        StoreError::LeaseLost(task) => StoreError::LeaseLost(*task),
        StoreError::Corrupt(message) => StoreError::Corrupt(message.clone()),
        StoreError::Database(message) => StoreError::Database(message.clone()),
    }
}

impl<DB: Database> Write<DB> {
    /// The write, failed with `err` before it ran.
    fn not_run(self, err: StoreError) -> Ran<DB> {
        match self {
            Write::Changed(_, answer) => Ran::Changed(Err(err), answer),
            Write::Row(_, answer) => Ran::Row(Err(err), answer),
            Write::Rows(_, answer) => Ran::Rows(Err(err), answer),
        }
    }
}

/// Runs one write where `on` says.
async fn run<DB: Sql>(write: Write<DB>, on: On<'_, DB>) -> Ran<DB> {
    match write {
        Write::Changed(query, answer) => Ran::Changed(DB::execute(query, on).await, answer),
        Write::Row(query, answer) => Ran::Row(DB::fetch_optional(query, on).await, answer),
        Write::Rows(query, answer) => Ran::Rows(DB::fetch_all(query, on).await, answer),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use futures::future::join_all;
    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow};
    use sqlx::{Row, Sqlite};

    use super::*;

    /// A database file written through one connection, as SQLite's engine
    /// does, with a table of unique names.
    async fn database(dir: &std::path::Path) -> (SqlitePool, GroupCommit<Sqlite>) {
        let options = SqliteConnectOptions::new()
            .filename(dir.join("group.db"))
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options)
            .await
            .unwrap();
        sqlx::query("CREATE TABLE names (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, filler BLOB)")
            .execute(&pool)
            .await
            .unwrap();
        let group = GroupCommit::start(pool.clone(), "BEGIN IMMEDIATE");
        (pool, group)
    }

    /// A write as the stores send it: at once when it is alone, else to the
    /// writer task.
    async fn row(group: &GroupCommit<Sqlite>, query: Query<Sqlite>) -> Result<Option<SqliteRow>, StoreError> {
        Sqlite::fetch_optional(query, On::Grouped(group)).await
    }

    async fn changed(group: &GroupCommit<Sqlite>, query: Query<Sqlite>) -> Result<u64, StoreError> {
        Sqlite::execute(query, On::Grouped(group)).await
    }

    fn insert(name: &str, filler: usize) -> Query<Sqlite> {
        sqlx::query("INSERT INTO names (name, filler) VALUES ($1, zeroblob($2)) RETURNING id")
            .bind(name.to_owned())
            .bind(filler as i64)
    }

    async fn stored(pool: &SqlitePool) -> BTreeSet<String> {
        sqlx::query("SELECT name FROM names")
            .fetch_all(pool)
            .await
            .unwrap()
            .iter()
            .map(|row| row.get("name"))
            .collect()
    }

    /// Frames in the write-ahead log: each commit appends the pages it
    /// changed.
    async fn wal_frames(pool: &SqlitePool) -> i64 {
        sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
            .fetch_one(pool)
            .await
            .unwrap()
            .get(1)
    }

    #[tokio::test]
    async fn writes_sent_together_are_committed_together() {
        let dir = tempfile::tempdir().unwrap();
        let (pool, group) = database(dir.path()).await;
        sqlx::query("PRAGMA wal_autocheckpoint = 0")
            .execute(&pool)
            .await
            .unwrap();
        let before = wal_frames(&pool).await;

        // Twenty callers at once (the first finds no other write in flight
        // and runs on its own; the rest wait and are one group): each is
        // answered with its own row.
        let names: Vec<String> = (0..20).map(|i| format!("together-{i}")).collect();
        let answers = join_all(names.iter().map(|name| row(&group, insert(name, 0)))).await;
        let ids: BTreeSet<i64> = answers
            .into_iter()
            .map(|answer| answer.unwrap().expect("a row").get("id"))
            .collect();
        assert_eq!(ids.len(), 20, "each caller got its own id");
        let together = wal_frames(&pool).await - before;

        // The same twenty, one after another: a commit each.
        for i in 0..20 {
            row(&group, insert(&format!("alone-{i}"), 0)).await.unwrap();
        }
        let alone = wal_frames(&pool).await - before - together;

        assert_eq!(stored(&pool).await.len(), 40);
        assert!(alone >= 20, "one commit per write appends a frame each: {alone}");
        assert!(
            together < 5,
            "writes that came together were one commit: {together} frames"
        );
    }

    #[tokio::test]
    async fn a_failing_write_fails_alone() {
        let dir = tempfile::tempdir().unwrap();
        let (pool, group) = database(dir.path()).await;
        row(&group, insert("taken", 0)).await.unwrap();

        // The first runs on its own; the other four are a group with the
        // duplicate in its middle.
        let names = ["alone", "first", "taken", "third", "last"];
        let answers = join_all(names.iter().map(|name| row(&group, insert(name, 0)))).await;

        for (name, answer) in names.iter().zip(&answers) {
            if *name == "taken" {
                assert!(
                    matches!(answer, Err(StoreError::Database(message)) if message.contains("UNIQUE")),
                    "the duplicate is refused: {:?}",
                    answer.as_ref().err()
                );
            } else {
                assert!(answer.is_ok(), "{name}: {:?}", answer.as_ref().err());
            }
        }
        assert_eq!(
            stored(&pool).await,
            BTreeSet::from(["alone", "first", "last", "taken", "third"].map(String::from))
        );
    }

    /// Some errors end the whole transaction, not only their statement (a
    /// full disk or an I/O error may; a trigger's `RAISE(ROLLBACK)` always
    /// does): the writes of the group before it were not stored, and their
    /// callers must hear so; the writes after it are stored.
    #[tokio::test]
    async fn a_write_that_ends_the_transaction_fails_the_writes_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let (pool, group) = database(dir.path()).await;
        sqlx::query(
            "CREATE TRIGGER poison BEFORE INSERT ON names WHEN NEW.name LIKE 'poison%'
             BEGIN SELECT RAISE(ROLLBACK, 'poisoned'); END",
        )
        .execute(&pool)
        .await
        .unwrap();

        // The first runs on its own; the other four are a group.
        let names = ["alone", "before-1", "before-2", "poison", "after"];
        let answers = join_all(names.iter().map(|name| changed(&group, insert(name, 0)))).await;

        for (name, answer) in names.iter().zip(&answers) {
            match *name {
                "alone" | "after" => assert!(answer.is_ok(), "{name}: {:?}", answer.as_ref().err()),
                _ => assert!(answer.is_err(), "{name} was answered stored"),
            }
        }
        assert_eq!(
            stored(&pool).await,
            BTreeSet::from(["alone", "after"].map(String::from))
        );
    }

    /// A full disk can end a whole transaction, not only the statement that
    /// hit it: whatever happens, a caller told "stored" finds its row, and a
    /// caller told "failed" does not.
    #[tokio::test]
    async fn every_answer_is_what_was_stored_when_the_disk_fills() {
        let dir = tempfile::tempdir().unwrap();
        let (pool, group) = database(dir.path()).await;
        let pages: i64 = sqlx::query("PRAGMA page_count").fetch_one(&pool).await.unwrap().get(0);
        sqlx::query(sqlx::AssertSqlSafe(format!("PRAGMA max_page_count = {}", pages + 12)))
            .execute(&pool)
            .await
            .unwrap();

        let names: Vec<String> = (0..60).map(|i| format!("big-{i}")).collect();
        let mut answers = Vec::new();
        for round in names.chunks(15) {
            answers.extend(join_all(round.iter().map(|name| changed(&group, insert(name, 3000)))).await);
        }

        let stored = stored(&pool).await;
        let mut refused = 0;
        for (name, answer) in names.iter().zip(&answers) {
            match answer {
                Ok(changed) => {
                    assert_eq!(*changed, 1);
                    assert!(stored.contains(name), "{name} was answered stored but is not");
                }
                Err(err) => {
                    refused += 1;
                    assert!(!stored.contains(name), "{name} was answered {err} but is stored");
                }
            }
        }
        assert!(
            !stored.is_empty() && refused > 0,
            "the disk filled part-way: {} stored",
            stored.len()
        );
    }
}
