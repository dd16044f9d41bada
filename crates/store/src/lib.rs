//! **store** — Postgres, the one home of the pipeline's SQL: the connection pool (with bounded
//! retries while the server starts), the schema migrations in `migrations/`, and the reads and
//! writes of every stage — runs and documents ([`documents`]), one [`failures::record_failure`],
//! chunk results and document completion ([`chunks`]), run progress and status ([`progress`]),
//! the run report's figures ([`report`]). Clause scorers are stored by `docpipe-clauses`, beside
//! the scorer they mirror.
//!
//! Every write is idempotent (keys like document id + chunk index), so a redelivered message
//! changes nothing.

pub mod chunks;
pub mod documents;
pub mod failures;
pub mod fields;
pub mod progress;
pub mod report;
pub mod search;

use std::time::Duration;

use backon::Retryable;
use docpipe_ops::{redact, retry};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
pub use sqlx::{PgConnection, PgPool};

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("invalid database URL {url}: {source}")]
    Url { url: String, source: sqlx::Error },
    #[error("cannot connect to Postgres at {url}: {source}")]
    Connect { url: String, source: sqlx::Error },
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("migrating {url}: {source}")]
    Migrating { url: String, source: Box<DbError> },
}

/// Longest wait for a free connection of the pool.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections of a role's pool.
const POOL_CONNECTIONS: u32 = 8;

/// What a role does at start: connect (Postgres is not ready on `/readyz` meanwhile, for up
/// to `patience`) and apply the migrations.
pub async fn open(url: &str, patience: Duration) -> Result<PgPool, DbError> {
    let m = docpipe_ops::metrics::get();
    m.set_ready("postgres", Err(format!("connecting to {}", redact::url(url))));
    let pool = connect(url, POOL_CONNECTIONS, patience).await?;
    migrate(&pool).await.map_err(|e| DbError::Migrating { url: redact::url(url), source: Box::new(e) })?;
    m.set_ready("postgres", Ok(()));
    Ok(pool)
}

/// Open a pool, retrying for up to about `patience` while the server is unreachable.
pub async fn connect(url: &str, max_connections: u32, patience: Duration) -> Result<PgPool, DbError> {
    let opts: PgConnectOptions = url.parse().map_err(|source| DbError::Url { url: redact::url(url), source })?;
    let backoff = retry::patient(patience);
    (|| {
        PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(opts.clone())
    })
    .retry(backoff)
    .when(is_transient)
    .notify(
        |e, d| tracing::warn!(url = %redact::url(url), error = %e, retry_in = ?d, "Postgres not reachable, retrying"),
    )
    .await
    .map_err(|source| DbError::Connect { url: redact::url(url), source })
}

/// Apply the migrations embedded at build time (idempotent; concurrent callers serialise on
/// sqlx's advisory lock).
pub async fn migrate(pool: &PgPool) -> Result<(), DbError> {
    sqlx::migrate!("../../migrations").run(pool).await?;
    Ok(())
}

/// The one rule for database errors worth retrying: the connection or the server, not the
/// statement or its data — I/O, pool exhaustion, protocol errors, SQLSTATE classes 08
/// (connection), 57P (shutdown, starting up), 53300 (too many connections), and a transaction
/// Postgres aborted to resolve a deadlock (40P01) or a serialization failure (40001), which
/// succeeds when run again.
pub fn is_transient(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Protocol(_) => true,
        e => e.as_database_error().and_then(|d| d.code()).is_some_and(|c| {
            c.starts_with("08") || c.starts_with("57P") || ["53300", "40P01", "40001"].contains(&c.as_ref())
        }),
    }
}

/// The database refused the data itself (SQLSTATE classes 22 data exception and 23 integrity
/// constraint violation): retrying the same write cannot help.
pub fn is_data_error(e: &sqlx::Error) -> bool {
    e.as_database_error().and_then(|d| d.code()).is_some_and(|c| c.starts_with("22") || c.starts_with("23"))
}

/// A statement that failed, and what it was doing (which run, document or chunk); or a value
/// that does not fit its column.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error while {what}: {source}")]
    Db {
        what: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("{what}: {value} does not fit a Postgres integer")]
    OutOfRange { what: String, value: String },
}

impl StoreError {
    /// Worth retrying: the connection or the server failed ([`is_transient`]).
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Db { source, .. } if is_transient(source))
    }

    /// The data itself was refused ([`is_data_error`]) or does not fit: retrying cannot help.
    pub fn is_data_error(&self) -> bool {
        match self {
            StoreError::Db { source, .. } => is_data_error(source),
            StoreError::OutOfRange { .. } => true,
        }
    }
}

/// Attach what a statement was doing to its error: `.map_err(ctx(|| format!(...)))`.
pub(crate) fn ctx<W: Into<String>>(what: impl FnOnce() -> W) -> impl FnOnce(sqlx::Error) -> StoreError {
    move |source| StoreError::Db { what: what().into(), source }
}

/// A Postgres `integer` for a count, offset or index that came from the wire or the text:
/// out of range is an error, never a silent wrap.
pub(crate) fn int<T: TryInto<i32> + Copy + std::fmt::Display>(v: T, what: &str) -> Result<i32, StoreError> {
    v.try_into().map_err(|_| StoreError::OutOfRange { what: what.into(), value: v.to_string() })
}

/// [`int`] for every element.
pub(crate) fn ints<T: TryInto<i32> + Copy + std::fmt::Display>(
    v: impl IntoIterator<Item = T>,
    what: &str,
) -> Result<Vec<i32>, StoreError> {
    v.into_iter().map(|x| int(x, what)).collect()
}

/// A session-level advisory lock on one ingest source (`bucket/prefix`), held by the returned
/// connection until it is dropped or the process exits: `ingest --once` runs one at a time per
/// source. `None` when another holder has it.
pub async fn lock_source(pool: &PgPool, bucket: &str, prefix: &str) -> Result<Option<PgConnection>, StoreError> {
    let what = || format!("locking s3://{bucket}/{prefix}");
    let mut conn = pool.acquire().await.map_err(ctx(what))?.detach();
    let (got,): (bool,) = sqlx::query_as("SELECT pg_try_advisory_lock(hashtext('docpipe-ingest:' || $1))")
        .bind(format!("{bucket}/{prefix}"))
        .fetch_one(&mut conn)
        .await
        .map_err(ctx(what))?;
    Ok(got.then_some(conn))
}
