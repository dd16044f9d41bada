//! `docpipe run`: ingest, worker and aggregator in one process (still through RabbitMQ), until
//! every document of the run is done or failed; with `--fields`, a fields worker too, until
//! every done document's fields are extracted (or failed).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use docpipe_contract::defaults;
use docpipe_store::PgPool;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};
use uuid::Uuid;

use crate::cli::{Common, IngestArgs, LabelArgs, SourceArgs, WorkerArgs};
use crate::cmd::generate::DecoderArgs;
use crate::cmd::{aggregate, fields as fields_cmd, status, worker};
use crate::setup;

/// How often `run` polls the database for its documents.
const POLL: Duration = Duration::from_millis(500);

pub async fn run(
    c: &Common,
    source: &SourceArgs,
    ingest: &IngestArgs,
    worker_args: &WorkerArgs,
    labels: &LabelArgs,
    timeout: Duration,
    timings: bool,
    fields: Option<(DecoderArgs, usize)>,
) -> Result<()> {
    let started = Instant::now();
    let pool = setup::db(c).await?;
    let (conn, topology) = setup::amqp(c, "docpipe-run").await?;
    let model = setup::load_model(c, worker_args)?;
    let model_label = model.label();
    let worker_cfg = setup::worker_config(worker_args, &model)?;
    setup::ensure_labels(&pool, labels, Some(&model), || setup::load_model(c, worker_args)).await?;
    let ingestor = setup::ingestor(c, ingest, pool.clone(), "docpipe-run", topology).await?;
    let extractor = match &fields {
        Some((args, _)) => {
            let ex = tokio::task::block_in_place(|| fields_cmd::Extractor::load(args))?;
            Some(Arc::new(tokio::sync::Mutex::new(ex)))
        }
        None => None,
    };

    // installed before ingest starts: a signal during ingest ends the run cleanly afterwards
    let stop_signal = docpipe_ops::shutdown_signal();
    let (stop_tx, stop_rx) = watch::channel(false);
    let model = Arc::new(Mutex::new(model));
    let worker_task = {
        let (c, rx) = (c.clone(), stop_rx.clone());
        tokio::spawn(async move { worker::serve(&c, model, worker_cfg, "docpipe-run-worker", rx).await })
    };
    let with_fields = extractor.is_some();
    let aggregator_task = {
        let (c, pool, rx) = (c.clone(), pool.clone(), stop_rx.clone());
        tokio::spawn(async move {
            aggregate::serve(&c, pool, defaults::AGGREGATOR_PREFETCH, with_fields, "docpipe-run-aggregator", rx).await
        })
    };
    let fields_task = extractor.map(|ex| {
        let (c, pool, rx) = (c.clone(), pool.clone(), stop_rx.clone());
        let group = fields.as_ref().map_or(1, |f| f.1);
        // its sweep takes the run's bucket only: a run is not held up by every document ever
        // done without fields elsewhere (a standalone fields worker still takes them all)
        let bucket = Some(source.bucket.clone());
        tokio::spawn(async move { fields_cmd::serve(&c, pool, ex, group, bucket, "docpipe-run-fields", rx).await })
    });

    let run_id = ingestor.start_run("run", &source.bucket, &source.prefix).await?;
    info!(%run_id, bucket = source.bucket, prefix = source.prefix, "run started");
    let summary = ingestor.ingest(run_id, &source.bucket, &source.prefix).await?;
    let mut roles = vec![&worker_task, &aggregator_task];
    roles.extend(fields_task.as_ref());
    let outcome = wait_for_run(&pool, run_id, timeout, stop_signal, &roles, with_fields).await;
    let _ = stop_tx.send(true);
    let worker_result = worker_task.await;
    let aggregator_result = aggregator_task.await;
    let fields_result = match fields_task {
        Some(t) => t.await,
        None => Ok(()),
    };
    outcome?;
    worker_result.context("worker task panicked")?;
    aggregator_result.context("aggregator task panicked")?;
    fields_result.context("fields task panicked")?;
    drop(conn);
    println!(
        "run {run_id}: {} objects, {} queued, {} skipped (unchanged), {} failed at ingest, {} chunks; {:.1} s",
        summary.objects,
        summary.queued,
        summary.skipped,
        summary.failed,
        summary.chunks,
        started.elapsed().as_secs_f64()
    );
    status::print(&pool, run_id).await?;
    if timings {
        print_timings(&pool, run_id, &model_label).await?;
    }
    Ok(())
}

/// Where the time of this process went, stage by stage (`docpipe_ops::metrics::STAGES`), and
/// the run's throughput from the first document's ingest to the last one done, in document
/// tokens (each chunk's overlap counted once) and in chunk tokens (what the model was given).
/// Stages overlap in time: ingest, the model thread, the publisher and the aggregator run
/// concurrently.
async fn print_timings(pool: &PgPool, run_id: Uuid, model: &str) -> Result<()> {
    let m = docpipe_ops::metrics::get();
    println!("\nwhere the time went (this process; stages overlap), model {model}:");
    println!("{:<16} {:>7} {:>10} {:>9}  what one covers", "stage", "count", "seconds", "mean_s");
    for (stage, what) in docpipe_ops::metrics::STAGES {
        if let Some((n, secs)) = m.stage_total(stage) {
            println!("{stage:<16} {n:>7} {secs:>10.1} {:>9.3}  {what}", secs / n.max(1) as f64);
        }
    }
    if let Some((n, secs)) = m.stage_total("queue_wait") {
        let mean = secs / n.max(1) as f64;
        println!("queue wait: {n} chunks, mean {mean:.1} s from ingest publishing a chunk to its forward pass");
    }
    let (docs, tokens, chunk_tokens, secs): (i64, Option<i64>, Option<i64>, Option<f64>) = sqlx::query_as(
        "SELECT count(*), sum(d.token_count)::bigint,
                (SELECT sum(c.token_end - c.token_start)::bigint FROM chunks c JOIN documents e ON e.id = c.document_id
                  WHERE e.run_id = $1 AND e.status = 'done'),
                extract(epoch FROM max(d.done_at) - min(d.ingest_started_at))::float8
           FROM documents d WHERE d.run_id = $1 AND d.status = 'done'",
    )
    .bind(run_id)
    .fetch_one(pool)
    .await
    .with_context(|| format!("reading the timings of run {run_id}"))?;
    let (tokens, chunk_tokens, secs) = (tokens.unwrap_or(0), chunk_tokens.unwrap_or(0), secs.unwrap_or(0.0));
    println!(
        "pipeline: {docs} documents done, {tokens} document tokens ({chunk_tokens} in chunks) in {secs:.1} s \
         from first ingest to last done: {:.1} document tokens/s, {:.1} chunk tokens/s",
        tokens as f64 / secs.max(1e-9),
        chunk_tokens as f64 / secs.max(1e-9)
    );
    Ok(())
}

/// Poll until every document of the run is done or failed. A database restart is waited out
/// like any other pause (the aggregator retries too).
async fn wait_for_run(
    pool: &PgPool,
    run_id: Uuid,
    timeout: Duration,
    mut stop: watch::Receiver<bool>,
    roles: &[&JoinHandle<()>],
    fields: bool,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let pending = async {
            let mut n = docpipe_store::progress::pending_documents(pool, run_id).await?;
            if fields {
                n += docpipe_store::fields::pending_in_run(pool, run_id).await?;
            }
            Ok::<_, docpipe_store::StoreError>(n)
        };
        let pending = match pending.await {
            Ok(n) => n,
            Err(e) => {
                warn!(%run_id, error = %e, "cannot poll run progress; retrying");
                -1
            }
        };
        if pending == 0 {
            return Ok(());
        }
        if roles.iter().any(|r| r.is_finished()) {
            bail!("a pipeline role stopped while {pending} document(s) of run {run_id} were pending");
        }
        if Instant::now() > deadline {
            bail!("run {run_id} not finished after {timeout:?}: {pending} document(s) pending");
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = stop.changed() => bail!("interrupted with {pending} document(s) of run {run_id} pending; they resume on the next run"),
        }
    }
}
