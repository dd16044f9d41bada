//! `docpipe aggregate`: store results in Postgres and finish documents, until SIGTERM.

use anyhow::Result;
use docpipe_store::PgPool;

use crate::cli::{Common, LabelArgs};
use crate::setup;

pub async fn run(c: &Common, prefetch: u16, fields: bool, labels: &LabelArgs) -> Result<()> {
    let pool = setup::db(c).await?;
    setup::ensure_labels(&pool, labels, None, || setup::load_model_on(c, "cpu", "auto", 0)).await?;
    serve(c, pool, prefetch, fields, "docpipe-aggregator", docpipe_ops::shutdown_signal()).await;
    Ok(())
}

/// The aggregator role, kept connected across broker restarts, until `stop`; with `fields`,
/// done documents are queued for field extraction.
pub async fn serve(
    c: &Common,
    pool: PgPool,
    prefetch: u16,
    fields: bool,
    name: &str,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    docpipe_bus::supervise(&setup::broker(c), name, stop, |conn, topology, stop| {
        let pool = pool.clone();
        let concurrency = c.store_concurrency;
        async move { docpipe_aggregator::run(&conn, &topology, &pool, prefetch, concurrency, fields, stop).await }
    })
    .await
}
