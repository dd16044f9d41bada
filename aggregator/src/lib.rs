//! **aggregator** — the sink stage: chunk results from RabbitMQ into Postgres, documents to
//! `done`, and dead letters to failed documents.
//!
//! Each result is stored idempotently by `docpipe_store::chunks::store_result` (one
//! transaction; a redelivered result changes nothing; the `done` transition happens once) and
//! its delivery acknowledged after the commit. Up to `concurrency` deliveries are handled at
//! once, each acknowledged when its own is done. A message that cannot be decoded is
//! dead-lettered; during a database outage the delivery stays unacknowledged and the store is
//! retried with backoff; a result the database refuses as data fails its document. Dead
//! letters fail the document they name; one that names none is moved to `P.poison`.
//!
//! With `fields` on, each document that turns `done` is queued for field extraction on
//! `P.fields` (after the commit; a document whose task was lost in a crash between the two is
//! swept up by the fields workers).

use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, StreamExt};

use docpipe_bus::{self as bus, AmqpError, Inbox, Publisher, Topology};
use docpipe_contract::messages::{ChunkMeta, ChunkResult, FieldsTask, SCHEMA_VERSION};
use docpipe_contract::status::{DocStatus, Stage};
use docpipe_ops::metrics::{self, Metrics};
use docpipe_ops::retry;
use docpipe_store::chunks::{fail_chunk, store_result, Stored};
use docpipe_store::{PgPool, StoreError};
use lapin::message::Delivery;
use tokio::sync::watch;
use tracing::{debug, error, info, warn};

#[derive(Debug, thiserror::Error)]
pub enum AggregateError {
    #[error(transparent)]
    Amqp(#[from] AmqpError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Waiting out a database outage while holding a delivery: 0.5 s to 30 s apart.
fn outage_backoff() -> retry::ExponentialBuilder {
    retry::unbounded(Duration::from_millis(500), Duration::from_secs(30))
}

/// What became of a delivery.
enum Handled {
    /// Its outcome is stored: acknowledge it.
    Ack,
    /// Already rejected (dead-lettered) as undecodable.
    Settled,
    /// Shutdown came while waiting for the database: leave it unacknowledged.
    Stopped,
}

/// The part of any docpipe message that says which chunk it is about.
#[derive(serde::Deserialize)]
struct Attributed {
    meta: ChunkMeta,
}

/// Consume `topology.results()`, and the dead-letter queues, until `shutdown` turns true,
/// handling up to `concurrency` deliveries at once.
///
/// A dead-lettered chunk or result (undecodable, or failed on every one of its deliveries)
/// fails its document with the reason, so no document waits forever; a dead letter that names
/// no document is moved to `P.poison` for a person to look at.
pub async fn run(
    conn: &lapin::Connection,
    topology: &Topology,
    pool: &PgPool,
    prefetch: u16,
    concurrency: usize,
    fields: bool,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), AggregateError> {
    let queues = [
        (topology.results(), "docpipe-aggregator"),
        (topology.dead_queue(&topology.chunks()), "docpipe-aggregator-dlq-chunks"),
        (topology.dead_queue(&topology.results()), "docpipe-aggregator-dlq-results"),
    ];
    let mut inbox = Inbox::open(conn, prefetch, &queues).await?;
    let publisher = Publisher::new(conn).await?;
    let limit = concurrency.clamp(1, usize::from(prefetch.max(1)));
    info!(queue = topology.results(), concurrency = limit, "aggregator consuming (and dead letters)");
    let stop = shutdown.clone();
    let handle = |queue: usize, delivery: Delivery| {
        let (publisher, mut shutdown) = (&publisher, stop.clone());
        async move {
            let handled = match queue {
                0 => handle_result(pool, &delivery, fields.then_some((publisher, topology)), &mut shutdown).await,
                // a dead chunk never got embedded; a dead result never got stored
                1 => handle_dead_letter(pool, publisher, topology, &delivery, Stage::Embed, &mut shutdown).await,
                _ => handle_dead_letter(pool, publisher, topology, &delivery, Stage::Store, &mut shutdown).await,
            };
            (delivery, handled)
        }
    };
    // An error (the broker's connection lost) returns at once: the deliveries in hand are
    // dropped unacknowledged (their transactions roll back) and come again after reconnecting.
    let mut in_flight = FuturesUnordered::new();
    let mut stopping = false;
    while !stopping {
        tokio::select! {
            d = inbox.recv(), if in_flight.len() < limit => {
                let (queue, delivery) = d?;
                in_flight.push(handle(queue, delivery));
            }
            Some((delivery, handled)) = in_flight.next() => stopping = !settle(&delivery, handled).await?,
            _ = shutdown.changed() => stopping = true,
        }
    }
    // at shutdown the deliveries in hand finish (those waiting out a database outage see the
    // shutdown and stay unacknowledged, to be redelivered)
    while let Some((delivery, handled)) = in_flight.next().await {
        settle(&delivery, handled).await?;
    }
    inbox.close("aggregator stopping").await;
    info!("aggregator stopped");
    Ok(())
}

/// Acknowledge a handled delivery where its outcome is stored; `false` when shutdown came
/// while it waited for the database (it stays unacknowledged, to be redelivered).
async fn settle(delivery: &Delivery, handled: Result<Handled, AggregateError>) -> Result<bool, AggregateError> {
    match handled? {
        Handled::Ack => bus::ack(delivery).await?,
        Handled::Settled => {}
        Handled::Stopped => return Ok(false),
    }
    Ok(true)
}

/// Store one result.
async fn handle_result(
    pool: &PgPool,
    delivery: &Delivery,
    queue_fields: Option<(&Publisher, &Topology)>,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<Handled, AggregateError> {
    let check = |r: &ChunkResult| match r.schema {
        SCHEMA_VERSION => Ok(()),
        s => Err(format!("result with unsupported schema {s} (expected {SCHEMA_VERSION})")),
    };
    let Some(result) = bus::decode::<ChunkResult>(delivery, "result", check).await? else {
        return Ok(Handled::Settled);
    };
    let started = Instant::now();
    let Some(stored) = store_retrying(pool, &result, shutdown).await? else { return Ok(Handled::Stopped) };
    let metrics = metrics::get();
    metrics.store_time(started.elapsed().as_secs_f64());
    let m = &result.meta;
    let outcome = match stored {
        Stored::Inserted { completed: true } => {
            info!(run_id = %m.run_id, document_id = %m.document_id, chunks = m.count, "document done");
            Metrics::outcome(&metrics.documents_finished, DocStatus::Done.as_str());
            if let Some((publisher, topology)) = queue_fields {
                queue_extraction(pool, publisher, topology, m).await;
            }
            "stored"
        }
        Stored::Inserted { .. } => {
            debug!(run_id = %m.run_id, document_id = %m.document_id, chunk = m.index, "chunk stored");
            "stored"
        }
        Stored::Duplicate => {
            debug!(document_id = %m.document_id, chunk = m.index, "duplicate result ignored");
            "duplicate"
        }
        Stored::Stale => {
            info!(document_id = %m.document_id, chunk = m.index, generation = m.generation, "result of a superseded generation dropped");
            "stale"
        }
        Stored::Failed => {
            warn!(run_id = %m.run_id, document_id = %m.document_id, chunk = m.index, "document failed: a chunk could not be embedded");
            Metrics::outcome(&metrics.documents_finished, DocStatus::Failed.as_str());
            "failed"
        }
    };
    Metrics::outcome(&metrics.results, outcome);
    Ok(Handled::Ack)
}

/// Queue a done document for field extraction. A failure here loses nothing: the document
/// stays without a fields status, and the fields workers sweep such documents up.
async fn queue_extraction(pool: &PgPool, publisher: &Publisher, topology: &Topology, m: &ChunkMeta) {
    let task =
        FieldsTask { schema: SCHEMA_VERSION, run_id: m.run_id, document_id: m.document_id, generation: m.generation };
    if let Err(e) = publisher.publish_all(&topology.fields(), &[task]).await {
        warn!(run_id = %m.run_id, document_id = %m.document_id, error = %e, "cannot queue field extraction; the fields workers will sweep it up");
        return;
    }
    if let Err(e) = docpipe_store::fields::mark_queued(pool, m.document_id).await {
        warn!(document_id = %m.document_id, error = %e, "field extraction queued, but its status was not recorded");
    }
}

/// Store a result, waiting out database outages (the delivery stays unacknowledged meanwhile,
/// so nothing more is taken). A result the database refuses as data (SQLSTATE class 22/23, a
/// value out of range) fails its document instead. `None` when shutdown was requested while
/// waiting.
async fn store_retrying(
    pool: &PgPool,
    r: &ChunkResult,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<Option<Stored>, AggregateError> {
    let m = &r.meta;
    let stored = retry::until_stopped(
        outage_backoff(),
        shutdown,
        || async move {
            let stored = store_result(pool, r).await;
            let state = match &stored {
                Err(e) if !e.is_data_error() => Err(format!("storing results: {e}")),
                _ => Ok(()),
            };
            metrics::get().set_ready("postgres", state);
            stored
        },
        |e| !e.is_data_error(),
        |e, delay| error!(run_id = %m.run_id, document_id = %m.document_id, chunk = m.index, error = %e, retry_in = ?delay, "cannot store result; retrying"),
    )
    .await;
    match stored {
        None => Ok(None),
        Some(Ok(s)) => Ok(Some(s)),
        Some(Err(e)) => {
            error!(document_id = %m.document_id, chunk = m.index, error = %e, "result refused by the database");
            Ok(Some(fail_chunk(pool, m, Stage::Store, &e.to_string()).await?))
        }
    }
}

/// Fail the document a dead letter names (waiting out a database outage: recording it is
/// what makes the ack safe), or move a dead letter that names none to `P.poison`.
async fn handle_dead_letter(
    pool: &PgPool,
    publisher: &Publisher,
    topology: &Topology,
    d: &Delivery,
    stage: Stage,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<Handled, AggregateError> {
    let queue = d.routing_key.as_str();
    let Ok(a) = serde_json::from_slice::<Attributed>(&d.data) else {
        warn!(queue, bytes = d.data.len(), "dead letter names no document; moving it to the poison queue");
        let body: serde_json::Value = serde_json::from_slice(&d.data)
            .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(&d.data).into_owned()));
        publisher.publish_all(&topology.poison(), &[serde_json::json!({ "from": queue, "body": body })]).await?;
        return Ok(Handled::Ack);
    };
    let m = &a.meta;
    warn!(run_id = %m.run_id, document_id = %m.document_id, chunk = m.index, queue, "dead letter: failing its document");
    let why = format!("dead-lettered from {queue}: undecodable, or failed on every delivery");
    let recorded = retry::until_stopped(
        outage_backoff(),
        shutdown,
        || fail_chunk(pool, m, stage, &why),
        |_| true,
        |e, delay| error!(document_id = %m.document_id, error = %e, retry_in = ?delay, "cannot record dead letter; retrying"),
    )
    .await;
    match recorded {
        None => Ok(Handled::Stopped),
        Some(r) => r.map(|_| Handled::Ack).map_err(AggregateError::from),
    }
}
