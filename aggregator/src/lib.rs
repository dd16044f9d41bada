//! **aggregator** — chunk results from RabbitMQ into Postgres, and documents to `done`.
//!
//! Each result is stored in one transaction that
//! 1. locks the document row and drops the result if it belongs to an older generation
//!    (the document was re-ingested meanwhile);
//! 2. inserts the chunk row keyed by `(document_id, chunk_index)` — `ON CONFLICT DO NOTHING`,
//!    so a redelivered result changes nothing;
//! 3. only when that insert added a row, counts it, and flips the document to `done` in the
//!    same statement when the count reaches the chunk count — so the transition happens
//!    exactly once, also with several aggregators (the row lock serialises them);
//! 4. stores the embeddings of the segments whose middle token the chunk owns (each segment
//!    is kept once, from one chunk — the ownership rule), and, with the document's last chunk,
//!    the document embedding (chunk embeddings weighted by owned tokens) and its clause labels
//!    (best segment per category, [`label_document`]).
//!
//! The delivery is acknowledged after the commit. A message that cannot be decoded is
//! dead-lettered; during a database outage the delivery stays unacknowledged and the store is
//! retried with backoff. Dead letters fail their document (see [`run`]).

use std::time::Duration;

use docpipe_chunker::segment::midpoint;
use docpipe_common::amqp::{self, AmqpError, Publisher, Topology};
use docpipe_common::messages::{ChunkMeta, ChunkOutcome, ChunkResult, SCHEMA_VERSION};
use docpipe_common::metrics::{self, Metrics};
use futures_util::StreamExt;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicRejectOptions};
use lapin::types::FieldTable;
use pgvector::Vector;
use sqlx::PgPool;
use tokio::sync::watch;
use tracing::{debug, error, info, warn};

#[derive(Debug, thiserror::Error)]
pub enum AggregateError {
    #[error(transparent)]
    Amqp(#[from] AmqpError),
    #[error("RabbitMQ consumer failed: {0}")]
    Consume(lapin::Error),
    #[error("the broker closed the consumer (connection lost?)")]
    ConsumerClosed,
    #[error("storing chunk {chunk}: {source}")]
    Store { chunk: String, source: sqlx::Error },
}

/// What storing one result did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// New chunk row; `completed` when it was the document's last one.
    Inserted { completed: bool },
    /// Already stored (a redelivery).
    Duplicate,
    /// The document was re-ingested or deleted since this chunk was produced.
    Stale,
    /// The worker could not embed the chunk: the document is now `failed`.
    Failed,
}

/// Store one result idempotently (see the module docs). A `Failed` outcome fails the document.
pub async fn store(pool: &PgPool, r: &ChunkResult) -> Result<Stored, AggregateError> {
    let m = &r.meta;
    let (embedding, segments) = match &r.outcome {
        ChunkOutcome::Embedded { embedding, segments } => (embedding, segments),
        ChunkOutcome::Failed { error } => return fail_document(pool, m, "embed", error).await,
    };
    let err = |source| AggregateError::Store { chunk: m.label(), source };
    let mut tx = pool.begin().await.map_err(err)?;
    let current: Option<(i32,)> = sqlx::query_as("SELECT generation FROM documents WHERE id = $1 FOR UPDATE")
        .bind(m.document_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(err)?;
    if current.map(|c| c.0) != Some(m.generation) {
        return Ok(Stored::Stale);
    }
    let inserted = sqlx::query(
        "INSERT INTO chunks (document_id, chunk_index, generation, token_start, token_end, owned_token_start, owned_token_end,
                             char_start, char_end, owned_char_start, owned_char_end, input_tokens, model, embedding,
                             batch_id, worker, batch_chunks, batch_tokens, batch_padded_tokens, prefill_ms, queue_wait_ms)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)
         ON CONFLICT (document_id, chunk_index) DO NOTHING",
    )
    .bind(m.document_id)
    .bind(m.index as i32)
    .bind(m.generation)
    .bind(m.tokens[0] as i32)
    .bind(m.tokens[1] as i32)
    .bind(m.owned_tokens[0] as i32)
    .bind(m.owned_tokens[1] as i32)
    .bind(m.chars[0] as i32)
    .bind(m.chars[1] as i32)
    .bind(m.owned_chars[0] as i32)
    .bind(m.owned_chars[1] as i32)
    .bind(r.input_tokens as i32)
    .bind(&r.model)
    .bind(Vector::from(embedding.clone()))
    .bind(r.batch.as_ref().map(|b| b.id))
    .bind(r.batch.as_ref().map(|b| b.worker.as_str()))
    .bind(r.batch.as_ref().map(|b| b.chunks as i32))
    .bind(r.batch.as_ref().map(|b| b.tokens as i32))
    .bind(r.batch.as_ref().map(|b| b.padded_tokens as i32))
    .bind(r.batch.as_ref().map(|b| b.prefill_ms as f32))
    .bind(r.batch.as_ref().map(|b| b.queue_wait_ms as f32))
    .execute(&mut *tx)
    .await
    .map_err(err)?
    .rows_affected();
    if inserted == 0 {
        tx.commit().await.map_err(err)?;
        return Ok(Stored::Duplicate);
    }
    // segments: kept from the chunk that owns their middle token, written in one statement
    let owned_range = m.owned_tokens[0] as usize..m.owned_tokens[1] as usize;
    let owned: Vec<_> = segments
        .iter()
        .filter(|seg| owned_range.contains(&midpoint(&(seg.tokens[0] as usize..seg.tokens[1] as usize))))
        .collect();
    if !owned.is_empty() {
        sqlx::query(
            "UPDATE segments s SET embedding = u.embedding, chunk_index = $2, pooled_token_start = u.pooled_start,
                    pooled_token_end = u.pooled_end, standalone = u.standalone
             FROM UNNEST($3::int[], $4::vector[], $5::int[], $6::int[], $7::vector[])
                  AS u(segment_index, embedding, pooled_start, pooled_end, standalone)
             WHERE s.document_id = $1 AND s.segment_index = u.segment_index",
        )
        .bind(m.document_id)
        .bind(m.index as i32)
        .bind(owned.iter().map(|s| s.index as i32).collect::<Vec<i32>>())
        .bind(owned.iter().map(|s| Vector::from(s.embedding.clone())).collect::<Vec<Vector>>())
        .bind(owned.iter().map(|s| s.pooled[0] as i32).collect::<Vec<i32>>())
        .bind(owned.iter().map(|s| s.pooled[1] as i32).collect::<Vec<i32>>())
        .bind(owned.iter().map(|s| s.standalone.clone().map(Vector::from)).collect::<Vec<Option<Vector>>>())
        .execute(&mut *tx)
        .await
        .map_err(err)?;
    }
    let (done, count, status): (i32, Option<i32>, String) = sqlx::query_as(
        "UPDATE documents SET chunks_done = chunks_done + 1,
                status = CASE WHEN chunks_done + 1 = chunk_count AND status = 'embedding' THEN 'done' ELSE status END,
                done_at = CASE WHEN chunks_done + 1 = chunk_count AND status = 'embedding' THEN now() ELSE done_at END,
                updated_at = now()
         WHERE id = $1 RETURNING chunks_done, chunk_count, status",
    )
    .bind(m.document_id)
    .fetch_one(&mut *tx)
    .await
    .map_err(err)?;
    let completed = Some(done) == count && status == "done";
    if completed {
        finish_document(&mut tx, m.document_id).await.map_err(err)?;
    }
    tx.commit().await.map_err(err)?;
    Ok(Stored::Inserted { completed })
}

/// A document's last chunk is in: its embedding (the mean of its chunk embeddings weighted by
/// owned tokens, normalised) and its clause labels.
async fn finish_document(tx: &mut sqlx::PgConnection, document_id: uuid::Uuid) -> Result<(), sqlx::Error> {
    let chunks: Vec<(Vector, i32)> =
        sqlx::query_as("SELECT embedding, owned_token_end - owned_token_start FROM chunks WHERE document_id = $1")
            .bind(document_id)
            .fetch_all(&mut *tx)
            .await?;
    let embedding = weighted_mean(chunks.iter().map(|(v, w)| (v.as_slice(), (*w).max(0) as f32)));
    if let Some(e) = embedding {
        sqlx::query("UPDATE documents SET embedding = $2 WHERE id = $1")
            .bind(document_id)
            .bind(Vector::from(e))
            .execute(&mut *tx)
            .await?;
    }
    label_document(tx, document_id).await
}

/// Normalised weighted mean of vectors; `None` when there is no weight.
pub fn weighted_mean<'a>(vectors: impl Iterator<Item = (&'a [f32], f32)>) -> Option<Vec<f32>> {
    let mut sum: Vec<f64> = Vec::new();
    let mut total = 0f64;
    for (v, w) in vectors {
        if sum.is_empty() {
            sum = vec![0.0; v.len()];
        }
        for (s, x) in sum.iter_mut().zip(v) {
            *s += *x as f64 * w as f64;
        }
        total += w as f64;
    }
    let norm = sum.iter().map(|x| x * x).sum::<f64>().sqrt();
    (total > 0.0 && norm > 0.0).then(|| sum.iter().map(|x| (x / norm) as f32).collect())
}

/// (Re)compute a document's best segment, score and presence flag per clause category.
/// Nothing to do while `clause_categories` is empty (`docpipe labels` fills it).
pub async fn label_document(tx: &mut sqlx::PgConnection, document_id: uuid::Uuid) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM document_labels WHERE document_id = $1").bind(document_id).execute(&mut *tx).await?;
    sqlx::query(
        "INSERT INTO document_labels (document_id, category, segment_index, score, present)
         SELECT DISTINCT ON (x.category) x.document_id, x.category, x.segment_index, x.score, x.score >= c.threshold
         FROM segment_scores x JOIN clause_categories c ON c.name = x.category
         WHERE x.document_id = $1
         ORDER BY x.category, x.score DESC, x.segment_index",
    )
    .bind(document_id)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Mark the chunk's document failed (once) with the reason, and record it under `stage`
/// (`embed` or `store`, the stage the chunk failed in).
async fn fail_document(pool: &PgPool, m: &ChunkMeta, stage: &str, error: &str) -> Result<Stored, AggregateError> {
    let err = |source| AggregateError::Store { chunk: m.label(), source };
    let mut tx = pool.begin().await.map_err(err)?;
    let message = format!("chunk {}: {error}", m.index);
    let updated = sqlx::query(
        "UPDATE documents SET status = 'failed', error = $3, updated_at = now()
         WHERE id = $1 AND generation = $2 AND status NOT IN ('done', 'failed')",
    )
    .bind(m.document_id)
    .bind(m.generation)
    .bind(format!("{stage}: {message}"))
    .execute(&mut *tx)
    .await
    .map_err(err)?
    .rows_affected();
    if updated == 0 {
        tx.commit().await.map_err(err)?;
        return Ok(Stored::Stale);
    }
    sqlx::query(
        "INSERT INTO failures (run_id, document_id, bucket, key, stage, class, message)
         SELECT $1, id, bucket, key, $4, 'permanent', $3 FROM documents WHERE id = $2",
    )
    .bind(m.run_id)
    .bind(m.document_id)
    .bind(&message)
    .bind(stage)
    .execute(&mut *tx)
    .await
    .map_err(err)?;
    tx.commit().await.map_err(err)?;
    metrics::get().failure(stage, "permanent");
    Ok(Stored::Failed)
}

/// The part of any docpipe message that says which chunk it is about.
#[derive(serde::Deserialize)]
struct Attributed {
    meta: ChunkMeta,
}

/// Consume `topology.results()`, and the dead-letter queues, until `shutdown` turns true.
///
/// A dead-lettered chunk or result (undecodable, or failed on every one of its deliveries)
/// fails its document with the reason, so no document waits forever; a dead letter that names
/// no document is moved to `P.poison` for a person to look at.
pub async fn run(
    conn: &lapin::Connection,
    topology: &Topology,
    pool: &PgPool,
    prefetch: u16,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), AggregateError> {
    let ch = amqp::consumer_channel(conn, prefetch).await?;
    let publisher = Publisher::new(conn).await?;
    let consume = |queue: String, tag: &'static str| {
        let ch = ch.clone();
        async move {
            ch.basic_consume(queue.as_str().into(), tag.into(), BasicConsumeOptions::default(), FieldTable::default())
                .await
                .map_err(AggregateError::Consume)
        }
    };
    let results = consume(topology.results(), "docpipe-aggregator").await?.map(|d| (false, d));
    let dead_chunks = consume(topology.dead_queue(&topology.chunks()), "docpipe-aggregator-dlq-chunks").await?;
    let dead_results = consume(topology.dead_queue(&topology.results()), "docpipe-aggregator-dlq-results").await?;
    let dead = futures_util::stream::select(dead_chunks, dead_results).map(|d| (true, d));
    let mut deliveries = futures_util::stream::select(results, dead);
    info!(queue = topology.results(), "aggregator consuming (and dead letters)");
    loop {
        let next = tokio::select! {
            d = deliveries.next() => d,
            _ = shutdown.changed() => break,
        };
        let Some((is_dead, delivery)) = next else { return Err(AggregateError::ConsumerClosed) };
        let delivery = delivery.map_err(AggregateError::Consume)?;
        if is_dead {
            handle_dead_letter(pool, &publisher, topology, &delivery).await?;
            delivery.ack(BasicAckOptions::default()).await.map_err(AggregateError::Consume)?;
            continue;
        }
        let result = match serde_json::from_slice::<ChunkResult>(&delivery.data) {
            Ok(r) if r.schema == SCHEMA_VERSION => r,
            Ok(r) => {
                warn!(schema = r.schema, "result with unsupported schema; dead-lettering it");
                delivery.reject(BasicRejectOptions { requeue: false }).await.map_err(AggregateError::Consume)?;
                continue;
            }
            Err(e) => {
                warn!(error = %e, bytes = delivery.data.len(), "undecodable result message; dead-lettering it");
                delivery.reject(BasicRejectOptions { requeue: false }).await.map_err(AggregateError::Consume)?;
                continue;
            }
        };
        let m = &result.meta;
        let started = std::time::Instant::now();
        let Some(stored) = store_retrying(pool, &result, &mut shutdown).await? else { break };
        let metrics = metrics::get();
        metrics.store_seconds.observe(started.elapsed().as_secs_f64());
        let outcome = match stored {
            Stored::Inserted { completed: true } => {
                info!(run_id = %m.run_id, document_id = %m.document_id, chunks = m.count, "document done");
                Metrics::outcome(&metrics.documents_finished, "done");
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
                Metrics::outcome(&metrics.documents_finished, "failed");
                "failed"
            }
        };
        Metrics::outcome(&metrics.results, outcome);
        delivery.ack(BasicAckOptions::default()).await.map_err(AggregateError::Consume)?;
    }
    let _ = ch.close(200, "aggregator stopping".into()).await;
    info!("aggregator stopped");
    Ok(())
}

/// Store a result, waiting out database outages (the delivery stays unacknowledged meanwhile,
/// so nothing more is taken). A result the database refuses as data (SQLSTATE class 22/23)
/// fails its document instead. `None` when shutdown was requested while waiting.
async fn store_retrying(
    pool: &PgPool,
    r: &ChunkResult,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<Option<Stored>, AggregateError> {
    let m = &r.meta;
    let mut delay = Duration::from_millis(500);
    loop {
        let stored = store(pool, r).await;
        let db_state = match &stored {
            Err(AggregateError::Store { source, .. }) if !is_data_error(source) => {
                Err(format!("storing results: {source}"))
            }
            _ => Ok(()),
        };
        metrics::get().set_ready("postgres", db_state);
        match stored {
            Ok(s) => return Ok(Some(s)),
            Err(AggregateError::Store { source, .. }) if is_data_error(&source) => {
                error!(document_id = %m.document_id, chunk = m.index, error = %source, "result refused by the database");
                return fail_document(pool, m, "store", &source.to_string()).await.map(Some);
            }
            Err(e) => {
                error!(run_id = %m.run_id, document_id = %m.document_id, chunk = m.index, error = %e, retry_in = ?delay, "cannot store result; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = shutdown.changed() => return Ok(None),
                }
                delay = (delay * 2).min(Duration::from_secs(30));
            }
        }
    }
}

fn is_data_error(e: &sqlx::Error) -> bool {
    e.as_database_error().and_then(|d| d.code()).is_some_and(|c| c.starts_with("22") || c.starts_with("23"))
}

async fn handle_dead_letter(
    pool: &PgPool,
    publisher: &Publisher,
    topology: &Topology,
    d: &lapin::message::Delivery,
) -> Result<(), AggregateError> {
    let queue = d.routing_key.as_str();
    match serde_json::from_slice::<Attributed>(&d.data) {
        Ok(a) => {
            let m = &a.meta;
            warn!(run_id = %m.run_id, document_id = %m.document_id, chunk = m.index, queue, "dead letter: failing its document");
            let why = format!("dead-lettered from {queue}: undecodable, or failed on every delivery");
            // recording it is what makes the ack safe: wait out a database outage
            loop {
                // a dead chunk never got embedded; a dead result never got stored
                let stage = if queue == topology.dead_queue(&topology.chunks()) { "embed" } else { "store" };
                match fail_document(pool, m, stage, &why).await {
                    Ok(_) => return Ok(()),
                    Err(e) => {
                        error!(document_id = %m.document_id, error = %e, "cannot record dead letter; retrying in 2 s");
                        tokio::time::sleep(Duration::from_secs(2)).await;
                    }
                }
            }
        }
        Err(e) => {
            warn!(queue, error = %e, bytes = d.data.len(), "dead letter names no document; moving it to the poison queue");
            let body: serde_json::Value = serde_json::from_slice(&d.data)
                .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(&d.data).into_owned()));
            publisher.publish_all(&topology.poison(), &[serde_json::json!({ "from": queue, "body": body })]).await?;
            Ok(())
        }
    }
}
