//! `docpipe ingest` (a listing, `--once` for cron, or `--listen` for S3 events) and
//! `docpipe retry-failed`.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use docpipe_store::progress::Progress;
use docpipe_store::PgPool;
use uuid::Uuid;

use crate::cli::{Common, IngestArgs, SourceArgs};
use crate::cmd::status::watch_run;
use crate::setup;

/// How often `ingest --once` reports the run's progress while it waits.
const ONCE_PROGRESS_INTERVAL: Duration = Duration::from_secs(10);

/// `--listen`: ingest the objects S3 event notifications name, until SIGTERM.
pub async fn listen(c: &Common, source: SourceArgs, ingest: &IngestArgs) -> Result<()> {
    let pool = setup::db(c).await?;
    let (conn, topology) = setup::amqp(c, "docpipe-ingest").await?;
    drop(conn);
    let ingestor = Arc::new(setup::ingestor(c, ingest, pool, "docpipe-ingest", topology).await?);
    let run_id = ingestor.start_run("listen", &source.bucket, &source.prefix).await?;
    docpipe_bus::supervise(
        &setup::broker(c),
        "docpipe-ingest-listen",
        docpipe_ops::shutdown_signal(),
        |conn, _, stop| {
            let (ingestor, source) = (ingestor.clone(), source.clone());
            async move {
                let summary = ingestor.listen(run_id, &conn, &source.bucket, &source.prefix, stop).await?;
                println!("{}", serde_json::to_string_pretty(&summary).unwrap_or_default());
                Ok::<(), docpipe_ingest::IngestError>(())
            }
        },
    )
    .await;
    Ok(())
}

/// List the bucket and ingest it; with `once`, skip if another `--once` of the same source is
/// running, then wait for the run to finish.
pub async fn once_or_cli(
    c: &Common,
    source: &SourceArgs,
    ingest: &IngestArgs,
    once: bool,
    run_timeout_s: u64,
) -> Result<()> {
    let pool = setup::db(c).await?;
    // a session-level advisory lock, held by this connection until the process exits
    let lock = if once {
        match docpipe_store::lock_source(&pool, &source.bucket, &source.prefix).await? {
            Some(lock) => Some(lock),
            None => {
                println!(
                    "another `ingest --once` of s3://{}/{} is running; nothing to do",
                    source.bucket, source.prefix
                );
                return Ok(());
            }
        }
    } else {
        None
    };
    let (_conn, topology) = setup::amqp(c, "docpipe-ingest").await?;
    let ingestor = setup::ingestor(c, ingest, pool.clone(), "docpipe-ingest", topology).await?;
    let run_id = ingestor.start_run(if once { "cron" } else { "cli" }, &source.bucket, &source.prefix).await?;
    let summary = ingestor.ingest(run_id, &source.bucket, &source.prefix).await?;
    println!("{}", serde_json::to_string_pretty(&summary)?);
    if once {
        wait_once(&pool, run_id, run_timeout_s).await?;
    }
    drop(lock);
    Ok(())
}

/// `--once`: follow the run until it finishes, then print its progress.
async fn wait_once(pool: &PgPool, run_id: Uuid, run_timeout_s: u64) -> Result<()> {
    let waited = tokio::time::timeout(
        Duration::from_secs(run_timeout_s),
        watch_run(pool, run_id, ONCE_PROGRESS_INTERVAL, docpipe_ops::shutdown_signal()),
    )
    .await;
    let Some(p) = Progress::load(pool, run_id).await? else { bail!("no run {run_id}") };
    println!("run {run_id}: {}", p.line());
    match waited {
        Ok(r) => r?,
        Err(_) => bail!("run {run_id} not finished after {run_timeout_s} s"),
    }
    if p.finished_at.is_none() {
        bail!("interrupted before run {run_id} finished; its documents resume when workers run");
    }
    Ok(())
}

/// `docpipe retry-failed`: ingest again the failed documents (of one run, or all).
pub async fn retry_failed(c: &Common, run: Option<Uuid>, ingest: &IngestArgs) -> Result<()> {
    let pool = setup::db(c).await?;
    let (conn, topology) = setup::amqp(c, "docpipe-retry").await?;
    // documents whose field extraction failed go back on P.fields (their embeddings are fine)
    let fields = docpipe_store::fields::failed_extractions(&pool, run).await?;
    if !fields.is_empty() {
        let publisher = docpipe_bus::Publisher::new(&conn).await?;
        let tasks: Vec<docpipe_contract::messages::FieldsTask> = fields
            .iter()
            .map(|&(document_id, run_id, generation)| docpipe_contract::messages::FieldsTask {
                schema: docpipe_contract::messages::SCHEMA_VERSION,
                run_id,
                document_id,
                generation,
            })
            .collect();
        publisher.publish_all(&topology.fields(), &tasks).await?;
        for t in &tasks {
            docpipe_store::fields::set_status(&pool, t.document_id, "queued", None).await?;
        }
        println!("{} document(s) queued again for field extraction", tasks.len());
    }
    let ingestor = setup::ingestor(c, ingest, pool, "docpipe-ingest", topology).await?;
    let run_id = ingestor.start_run("retry-failed", "*", "").await?;
    let summary = ingestor.retry_failed(run_id, run).await?;
    println!("{}", serde_json::to_string_pretty(&summary)?);
    Ok(())
}
