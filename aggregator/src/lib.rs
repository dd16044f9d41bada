//! **aggregator** — chunk results from RabbitMQ into Postgres, and documents to `done`.
//!
//! Each result is stored in one transaction that
//! 1. locks the document row and drops the result if it belongs to an older generation
//!    (the document was re-ingested meanwhile);
//! 2. inserts the chunk row keyed by `(document_id, chunk_index)` — `ON CONFLICT DO NOTHING`,
//!    so a redelivered result changes nothing;
//! 3. only when that insert added a row, counts it, and flips the document to `done` in the
//!    same statement when the count reaches the chunk count — so the transition happens
//!    exactly once, also with several aggregators (the row lock serialises them).
//!
//! The delivery is acknowledged after the commit. A message that cannot be decoded is
//! dead-lettered; a database error leaves it unacknowledged, to be redelivered.

use std::time::Duration;

use docpipe_common::amqp::{self, AmqpError, Topology};
use docpipe_common::messages::{ChunkMeta, ChunkOutcome, ChunkResult, SCHEMA_VERSION};
use futures_util::StreamExt;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicRejectOptions};
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
    let embedding = match &r.outcome {
        ChunkOutcome::Embedded { embedding } => embedding,
        ChunkOutcome::Failed { error } => return fail_document(pool, m, error).await,
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
                             char_start, char_end, owned_char_start, owned_char_end, input_tokens, model, embedding)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
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
    .execute(&mut *tx)
    .await
    .map_err(err)?
    .rows_affected();
    if inserted == 0 {
        tx.commit().await.map_err(err)?;
        return Ok(Stored::Duplicate);
    }
    let (done, count): (i32, Option<i32>) = sqlx::query_as(
        "UPDATE documents SET chunks_done = chunks_done + 1,
                status = CASE WHEN chunks_done + 1 = chunk_count THEN 'done' ELSE status END,
                done_at = CASE WHEN chunks_done + 1 = chunk_count THEN now() ELSE done_at END,
                updated_at = now()
         WHERE id = $1 RETURNING chunks_done, chunk_count",
    )
    .bind(m.document_id)
    .fetch_one(&mut *tx)
    .await
    .map_err(err)?;
    tx.commit().await.map_err(err)?;
    Ok(Stored::Inserted { completed: Some(done) == count })
}

/// Mark the chunk's document failed (once) with the worker's reason, and record it.
async fn fail_document(pool: &PgPool, m: &ChunkMeta, error: &str) -> Result<Stored, AggregateError> {
    let err = |source| AggregateError::Store { chunk: m.label(), source };
    let mut tx = pool.begin().await.map_err(err)?;
    let message = format!("chunk {}: {error}", m.index);
    let updated = sqlx::query(
        "UPDATE documents SET status = 'failed', error = $3, updated_at = now()
         WHERE id = $1 AND generation = $2 AND status NOT IN ('done', 'failed')",
    )
    .bind(m.document_id)
    .bind(m.generation)
    .bind(format!("embed: {message}"))
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
         SELECT $1, id, bucket, key, 'embed', 'permanent', $3 FROM documents WHERE id = $2",
    )
    .bind(m.run_id)
    .bind(m.document_id)
    .bind(&message)
    .execute(&mut *tx)
    .await
    .map_err(err)?;
    tx.commit().await.map_err(err)?;
    Ok(Stored::Failed)
}

/// Consume `topology.results()` until `shutdown` turns true.
pub async fn run(
    conn: &lapin::Connection,
    topology: &Topology,
    pool: &PgPool,
    prefetch: u16,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), AggregateError> {
    let ch = amqp::consumer_channel(conn, prefetch).await?;
    let queue = topology.results();
    let mut consumer = ch
        .basic_consume(
            queue.as_str().into(),
            "docpipe-aggregator".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(AggregateError::Consume)?;
    info!(queue, "aggregator consuming");
    loop {
        let next = tokio::select! {
            d = consumer.next() => d,
            _ = shutdown.changed() => break,
        };
        let Some(delivery) = next else { break };
        let delivery = delivery.map_err(AggregateError::Consume)?;
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
        match store(pool, &result).await {
            Ok(stored) => {
                match stored {
                    Stored::Inserted { completed: true } => {
                        info!(run_id = %m.run_id, document_id = %m.document_id, chunks = m.count, "document done")
                    }
                    Stored::Inserted { .. } => {
                        debug!(run_id = %m.run_id, document_id = %m.document_id, chunk = m.index, "chunk stored")
                    }
                    Stored::Duplicate => {
                        debug!(document_id = %m.document_id, chunk = m.index, "duplicate result ignored")
                    }
                    Stored::Stale => {
                        info!(document_id = %m.document_id, chunk = m.index, generation = m.generation, "result of a superseded generation dropped")
                    }
                    Stored::Failed => {
                        warn!(run_id = %m.run_id, document_id = %m.document_id, chunk = m.index, "document failed: a chunk could not be embedded")
                    }
                }
                delivery.ack(BasicAckOptions::default()).await.map_err(AggregateError::Consume)?;
            }
            Err(e) => {
                // Leave it for redelivery (the queue's delivery limit dead-letters a result
                // that keeps failing); back off so a database outage is not a hot loop.
                error!(run_id = %m.run_id, document_id = %m.document_id, chunk = m.index, error = %e, "cannot store result; requeueing");
                delivery
                    .nack(BasicNackOptions { requeue: true, ..Default::default() })
                    .await
                    .map_err(AggregateError::Consume)?;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
    let _ = ch.close(200, "aggregator stopping".into()).await;
    info!("aggregator stopped");
    Ok(())
}
