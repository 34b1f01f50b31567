//! Running a statement on either engine from code written once.
//!
//! The stores are generic over the sqlx driver. What they need of a driver
//! (bind an integer or a text, run a statement on a pool or a transaction,
//! read an integer or a text column, count the rows a change touched) is
//! gathered in [`Sql`], implemented once for every driver that can do it, so
//! generic code names one bound (`DB: Sql`) instead of a dozen higher-ranked
//! sqlx bounds at every function. [`Statement`] is the builder the stores use.
//!
//! Every round trip is counted (`herald_store_statements_total`, labelled
//! with the statement's first line), so the benchmark can show how many a
//! message costs and which they are.
//!
//! Architecture invariant: nothing here knows a dialect. What differs between
//! SQLite and PostgreSQL lives in `engine.rs` and the engines' own modules.

use std::future::Future;

use herald_core::StoreError;
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Pool, Row, Transaction, Type};

use crate::error;
use crate::group_commit::{GroupCommit, InFlight};
use crate::text::without_nul;

pub(crate) type Query<DB> = sqlx::query::Query<'static, DB, <DB as Database>::Arguments>;

/// Where a statement runs: on a connection taken from a pool for it, on a
/// connection already held (a transaction), or with the writes committed
/// together (`group_commit.rs`).
pub(crate) enum On<'e, DB: Database> {
    Pool(&'e Pool<DB>),
    Connection(&'e mut DB::Connection),
    Grouped(&'e GroupCommit<DB>),
}

impl<'e, DB: Database> From<&'e Pool<DB>> for On<'e, DB> {
    fn from(pool: &'e Pool<DB>) -> Self {
        On::Pool(pool)
    }
}

impl<'e, DB: Database> From<&'e mut Transaction<'_, DB>> for On<'e, DB> {
    fn from(transaction: &'e mut Transaction<'_, DB>) -> Self {
        On::Connection(&mut **transaction)
    }
}

/// The driver abilities the stores use, as one bound. Implemented below for
/// every sqlx driver that has them: SQLite and PostgreSQL.
pub(crate) trait Sql: Database<Row: Columns, QueryResult: Changed> {
    fn bind_int(query: Query<Self>, value: Option<i64>) -> Query<Self>;
    fn bind_text(query: Query<Self>, value: Option<&str>) -> Query<Self>;
    fn bind_bytes(query: Query<Self>, value: Vec<u8>) -> Query<Self>;
    /// Runs a change; how many rows it changed.
    fn execute<'e>(query: Query<Self>, on: On<'e, Self>) -> impl Future<Output = Result<u64, StoreError>> + Send + 'e;
    fn fetch_optional<'e>(
        query: Query<Self>,
        on: On<'e, Self>,
    ) -> impl Future<Output = Result<Option<Self::Row>, StoreError>> + Send + 'e;
    fn fetch_all<'e>(
        query: Query<Self>,
        on: On<'e, Self>,
    ) -> impl Future<Output = Result<Vec<Self::Row>, StoreError>> + Send + 'e;
}

impl<DB> Sql for DB
where
    DB: Database<Row: Columns, QueryResult: Changed>,
    DB::Arguments: IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> Option<i64>: Encode<'q, DB> + Type<DB>,
    for<'q> Option<&'q str>: Encode<'q, DB> + Type<DB>,
    for<'q> Vec<u8>: Encode<'q, DB> + Type<DB>,
{
    fn bind_int(query: Query<Self>, value: Option<i64>) -> Query<Self> {
        query.bind(value)
    }

    fn bind_text(query: Query<Self>, value: Option<&str>) -> Query<Self> {
        query.bind(value)
    }

    fn bind_bytes(query: Query<Self>, value: Vec<u8>) -> Query<Self> {
        query.bind(value)
    }

    async fn execute(query: Query<Self>, on: On<'_, Self>) -> Result<u64, StoreError> {
        let (_in_flight, on) = routed(on);
        let done = match on {
            On::Pool(pool) => query.execute(pool).await,
            On::Connection(connection) => query.execute(connection).await,
            On::Grouped(group) => return group.changed(query).await,
        };
        done.map(|done| done.rows_changed()).map_err(error::db)
    }

    async fn fetch_optional(query: Query<Self>, on: On<'_, Self>) -> Result<Option<Self::Row>, StoreError> {
        let (_in_flight, on) = routed(on);
        match on {
            On::Pool(pool) => query.fetch_optional(pool).await.map_err(error::db),
            On::Connection(connection) => query.fetch_optional(connection).await.map_err(error::db),
            On::Grouped(group) => group.row(query).await,
        }
    }

    async fn fetch_all(query: Query<Self>, on: On<'_, Self>) -> Result<Vec<Self::Row>, StoreError> {
        let (_in_flight, on) = routed(on);
        match on {
            On::Pool(pool) => query.fetch_all(pool).await.map_err(error::db),
            On::Connection(connection) => query.fetch_all(connection).await.map_err(error::db),
            On::Grouped(group) => group.rows(query).await,
        }
    }
}

/// Where a statement sent to the group commit runs (`GroupCommit::route`),
/// and the guard that counts it in flight meanwhile; any other place as it is.
fn routed<DB: Sql>(on: On<'_, DB>) -> (Option<InFlight<'_>>, On<'_, DB>) {
    match on {
        On::Grouped(group) => {
            let (in_flight, on) = group.route();
            (Some(in_flight), on)
        }
        on => (None, on),
    }
}

/// How many rows a change touched: the drivers have it, but on no trait.
pub(crate) trait Changed {
    fn rows_changed(&self) -> u64;
}

impl Changed for sqlx::sqlite::SqliteQueryResult {
    fn rows_changed(&self) -> u64 {
        self.rows_affected()
    }
}

impl Changed for sqlx::postgres::PgQueryResult {
    fn rows_changed(&self) -> u64 {
        self.rows_affected()
    }
}

/// Reading a row's columns by name, as the two types the schema uses.
pub(crate) trait Columns: Row {
    fn int(&self, column: &str) -> Result<i64, StoreError>;
    fn opt_int(&self, column: &str) -> Result<Option<i64>, StoreError>;
    fn text(&self, column: &str) -> Result<String, StoreError>;
    fn opt_text(&self, column: &str) -> Result<Option<String>, StoreError>;
    fn bytes(&self, column: &str) -> Result<Vec<u8>, StoreError>;
    /// Whether the row has `column` (a statement of several returns rows
    /// of several shapes).
    fn has(&self, column: &str) -> bool;
}

impl<R> Columns for R
where
    R: Row,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Vec<u8>: Decode<'r, R::Database> + Type<R::Database>,
    for<'a> &'a str: ColumnIndex<R>,
{
    fn int(&self, column: &str) -> Result<i64, StoreError> {
        self.try_get(column).map_err(error::db)
    }

    fn opt_int(&self, column: &str) -> Result<Option<i64>, StoreError> {
        self.try_get(column).map_err(error::db)
    }

    fn text(&self, column: &str) -> Result<String, StoreError> {
        self.try_get(column).map_err(error::db)
    }

    fn opt_text(&self, column: &str) -> Result<Option<String>, StoreError> {
        self.try_get(column).map_err(error::db)
    }

    fn bytes(&self, column: &str) -> Result<Vec<u8>, StoreError> {
        self.try_get(column).map_err(error::db)
    }

    fn has(&self, column: &str) -> bool {
        self.columns().iter().any(|c| sqlx::Column::name(c) == column)
    }
}

/// Counts one round trip to the database under `label`.
pub(crate) fn count(label: &'static str) {
    metrics::counter!("herald_store_statements_total", "statement" => label).increment(1);
}

/// The label a statement is counted under: its first line, at most
/// [`LABEL_CHARS`] characters (the SQL, never a bound value).
fn label(sql: &'static str) -> &'static str {
    let line = sql.lines().next().unwrap_or_default().trim();
    match line.char_indices().nth(LABEL_CHARS) {
        Some((end, _)) => &line[..end],
        None => line,
    }
}

const LABEL_CHARS: usize = 60;

/// Counts the round trip sqlx makes before handing out a pooled connection
/// (`test_before_acquire` pings it); for a pool's `before_acquire`, which
/// runs right after that ping.
pub(crate) fn count_ping() -> Result<bool, sqlx::Error> {
    count("ping before use");
    Ok(true)
}

/// Commits a transaction, counted.
pub(crate) async fn commit<DB: Database>(transaction: Transaction<'_, DB>) -> Result<(), StoreError> {
    count("COMMIT");
    transaction.commit().await.map_err(error::db)
}

/// Rolls a transaction back, counted.
pub(crate) async fn rollback<DB: Database>(transaction: Transaction<'_, DB>) -> Result<(), StoreError> {
    count("ROLLBACK");
    transaction.rollback().await.map_err(error::db)
}

/// A statement and its parameters, bound in order (`$1`, `$2`, …).
#[must_use = "a statement does nothing until it is run"]
pub(crate) struct Statement<DB: Database> {
    query: Query<DB>,
    label: &'static str,
}

impl<DB: Database> Statement<DB> {
    /// Binds a value of a type only one engine knows (a PostgreSQL array);
    /// for the engine's own statements.
    pub(crate) fn bind<'t, T>(self, value: T) -> Self
    where
        T: Encode<'t, DB> + Type<DB>,
    {
        Self {
            query: self.query.bind(value),
            label: self.label,
        }
    }
}

impl<DB: Sql> Statement<DB> {
    pub(crate) fn new(sql: &'static str) -> Self {
        Self {
            query: sqlx::query(sql),
            label: label(sql),
        }
    }

    pub(crate) fn int(self, value: i64) -> Self {
        self.opt_int(Some(value))
    }

    pub(crate) fn opt_int(self, value: Option<i64>) -> Self {
        Self {
            query: DB::bind_int(self.query, value),
            label: self.label,
        }
    }

    pub(crate) fn text(self, value: &str) -> Self {
        self.opt_text(Some(value))
    }

    /// Binds a text without NUL (see `text.rs`).
    pub(crate) fn opt_text(self, value: Option<&str>) -> Self {
        let value = value.map(without_nul);
        Self {
            query: DB::bind_text(self.query, value.as_deref()),
            label: self.label,
        }
    }

    /// Binds a binary value (a stored file's bytes).
    pub(crate) fn bytes(self, value: &[u8]) -> Self {
        Self {
            query: DB::bind_bytes(self.query, value.to_vec()),
            label: self.label,
        }
    }

    /// Runs a change; returns how many rows it touched.
    pub(crate) async fn execute<'e>(self, on: impl Into<On<'e, DB>>) -> Result<u64, StoreError> {
        count(self.label);
        DB::execute(self.query, on.into()).await
    }

    pub(crate) async fn fetch_optional<'e>(self, on: impl Into<On<'e, DB>>) -> Result<Option<DB::Row>, StoreError> {
        count(self.label);
        DB::fetch_optional(self.query, on.into()).await
    }

    /// The one row a statement must return.
    pub(crate) async fn fetch_one<'e>(self, on: impl Into<On<'e, DB>>) -> Result<DB::Row, StoreError> {
        self.fetch_optional(on)
            .await?
            .ok_or_else(|| StoreError::Database("a statement that returns a row returned none".into()))
    }

    pub(crate) async fn fetch_all<'e>(self, on: impl Into<On<'e, DB>>) -> Result<Vec<DB::Row>, StoreError> {
        count(self.label);
        DB::fetch_all(self.query, on.into()).await
    }
}
