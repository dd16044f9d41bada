//! Postgres: the connection pool (with bounded retries while the server starts) and the
//! schema migrations in `migrations/`.

use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;

use crate::redact;

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("invalid database URL {url}: {source}")]
    Url { url: String, source: sqlx::Error },
    #[error("cannot connect to Postgres at {url}: {source}")]
    Connect { url: String, source: sqlx::Error },
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

/// Open a pool, retrying for up to about `patience` while the server is unreachable.
pub async fn connect(url: &str, max_connections: u32, patience: Duration) -> Result<PgPool, DbError> {
    let opts: PgConnectOptions = url.parse().map_err(|source| DbError::Url { url: redact::url(url), source })?;
    let backoff = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(Duration::from_secs(5))
        .with_total_delay(Some(patience))
        .with_max_times(usize::MAX)
        .with_jitter();
    (|| {
        PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(opts.clone())
    })
    .retry(backoff)
    .when(|e| matches!(e, sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut) || is_starting_up(e))
    .notify(
        |e, d| tracing::warn!(url = %redact::url(url), error = %e, retry_in = ?d, "Postgres not reachable, retrying"),
    )
    .await
    .map_err(|source| DbError::Connect { url: redact::url(url), source })
}

/// `57P03 cannot_connect_now`: the server is starting up or shutting down.
fn is_starting_up(e: &sqlx::Error) -> bool {
    e.as_database_error().and_then(|d| d.code()).is_some_and(|c| c == "57P03")
}

/// Apply the migrations embedded at build time (idempotent; concurrent callers serialise on
/// sqlx's advisory lock).
pub async fn migrate(pool: &PgPool) -> Result<(), DbError> {
    sqlx::migrate!("../migrations").run(pool).await?;
    Ok(())
}
