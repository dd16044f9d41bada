//! Chunk results into Postgres, and documents to `done` — idempotently.
//!
//! Each result is stored in one transaction that
//! 1. drops the result if it belongs to an older generation (the document was re-ingested
//!    meanwhile);
//! 2. inserts the chunk row keyed by `(document_id, chunk_index)` — `ON CONFLICT DO NOTHING`,
//!    so a redelivered result changes nothing;
//! 3. stores the embeddings of the segments whose middle token the chunk owns (each segment
//!    is kept once, from one chunk — the ownership rule);
//! 4. then locks the document row, checks the generation again (a re-ingest since step 1
//!    rolls all of this back), counts the chunk in, and flips the document to `done` in the
//!    same statement when the count reaches the chunk count — so the transition happens
//!    exactly once, also with several aggregators (the row lock serialises them); with the
//!    document's last chunk, also the document embedding (chunk embeddings weighted by owned
//!    tokens) and its clause labels (best segment per category, [`label_document`]).
//!
//! The row is locked last so that the results of one document store their chunk and segments
//! (most of the work: the vector indexes' inserts) at the same time, and wait for each other
//! only to count themselves in. A re-ingest that meets such a transaction can deadlock with it
//! (it locks the row first, then deletes the segments); Postgres then aborts one of the two,
//! and both sides retry ([`crate::is_transient`]).

use docpipe_contract::messages::{ChunkMeta, ChunkOutcome, ChunkResult, SegmentEmbedding};
use docpipe_contract::status::{DocStatus, Failure, Stage};
use pgvector::Vector;
use uuid::Uuid;

use crate::failures::{record_failure, DocumentRef};
use crate::{ctx, int, ints, PgConnection, PgPool, StoreError};

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
pub async fn store_result(pool: &PgPool, r: &ChunkResult) -> Result<Stored, StoreError> {
    let m = &r.meta;
    let (embedding, segments) = match &r.outcome {
        ChunkOutcome::Embedded { embedding, segments } => (embedding, segments),
        ChunkOutcome::Failed { error } => return fail_chunk(pool, m, Stage::Embed, error).await,
    };
    let what = || format!("storing chunk {}", m.label());
    let mut tx = pool.begin().await.map_err(ctx(what))?;
    // dropping `tx` without a commit rolls back what it wrote
    if !current_generation(&mut tx, m, false).await? {
        return Ok(Stored::Stale);
    }
    if !insert_chunk(&mut tx, r, embedding).await? {
        tx.commit().await.map_err(ctx(what))?;
        return Ok(Stored::Duplicate);
    }
    store_owned_segments(&mut tx, m, segments).await?;
    if !current_generation(&mut tx, m, true).await? {
        return Ok(Stored::Stale);
    }
    let (done, count, status): (i32, Option<i32>, String) = sqlx::query_as(
        "UPDATE documents SET chunks_done = chunks_done + 1,
                status = CASE WHEN chunks_done + 1 = chunk_count AND status = $2 THEN $3 ELSE status END,
                done_at = CASE WHEN chunks_done + 1 = chunk_count AND status = $2 THEN now() ELSE done_at END,
                updated_at = now()
         WHERE id = $1 RETURNING chunks_done, chunk_count, status",
    )
    .bind(m.document_id)
    .bind(DocStatus::Embedding.as_str())
    .bind(DocStatus::Done.as_str())
    .fetch_one(&mut *tx)
    .await
    .map_err(ctx(what))?;
    let completed = Some(done) == count && DocStatus::parse(&status) == Some(DocStatus::Done);
    if completed {
        finish_document(&mut tx, m.document_id)
            .await
            .map_err(ctx(|| format!("finishing document {}", m.document_id)))?;
    }
    tx.commit().await.map_err(ctx(what))?;
    Ok(Stored::Inserted { completed })
}

/// Whether the chunk's generation is still its document's; with `lock`, the document row is
/// locked until the transaction ends — `FOR NO KEY UPDATE`, the lock of the counting `UPDATE`
/// itself: `FOR UPDATE` would wait on the key-share locks the other results' chunk rows hold
/// on it (their foreign key), each waiting on the other, a deadlock.
async fn current_generation(tx: &mut PgConnection, m: &ChunkMeta, lock: bool) -> Result<bool, StoreError> {
    let sql = if lock {
        "SELECT generation FROM documents WHERE id = $1 FOR NO KEY UPDATE"
    } else {
        "SELECT generation FROM documents WHERE id = $1"
    };
    let current: Option<(i32,)> = sqlx::query_as(sql)
        .bind(m.document_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(ctx(|| format!("storing chunk {}", m.label())))?;
    Ok(current.map(|c| c.0) == Some(m.generation))
}

/// Insert the chunk row; `false` when it was there already (a redelivery).
async fn insert_chunk(tx: &mut PgConnection, r: &ChunkResult, embedding: &[f32]) -> Result<bool, StoreError> {
    let m = &r.meta;
    let b = r.batch.as_ref();
    let inserted = sqlx::query(
        "INSERT INTO chunks (document_id, chunk_index, generation, token_start, token_end, owned_token_start, owned_token_end,
                             char_start, char_end, owned_char_start, owned_char_end, input_tokens, model, embedding,
                             batch_id, worker, batch_chunks, batch_tokens, batch_padded_tokens, prefill_ms, queue_wait_ms)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)
         ON CONFLICT (document_id, chunk_index) DO NOTHING",
    )
    .bind(m.document_id)
    .bind(int(m.index, "chunk index")?)
    .bind(m.generation)
    .bind(int(m.tokens[0], "chunk token start")?)
    .bind(int(m.tokens[1], "chunk token end")?)
    .bind(int(m.owned_tokens[0], "owned token start")?)
    .bind(int(m.owned_tokens[1], "owned token end")?)
    .bind(int(m.chars[0], "chunk char start")?)
    .bind(int(m.chars[1], "chunk char end")?)
    .bind(int(m.owned_chars[0], "owned char start")?)
    .bind(int(m.owned_chars[1], "owned char end")?)
    .bind(int(r.input_tokens, "input tokens")?)
    .bind(&r.model)
    .bind(Vector::from(embedding.to_vec()))
    .bind(b.map(|b| b.id))
    .bind(b.map(|b| b.worker.as_str()))
    .bind(b.map(|b| int(b.chunks, "batch chunks")).transpose()?)
    .bind(b.map(|b| int(b.tokens, "batch tokens")).transpose()?)
    .bind(b.map(|b| int(b.padded_tokens, "batch padded tokens")).transpose()?)
    .bind(b.map(|b| b.prefill_ms as f32))
    .bind(b.map(|b| b.queue_wait_ms as f32))
    .execute(&mut *tx)
    .await
    .map_err(ctx(|| format!("storing chunk {}", m.label())))?
    .rows_affected();
    Ok(inserted > 0)
}

/// The segments whose middle token the chunk owns (the ownership rule), in one statement.
async fn store_owned_segments(
    tx: &mut PgConnection,
    m: &ChunkMeta,
    segments: &[SegmentEmbedding],
) -> Result<(), StoreError> {
    let owned_range = m.owned_tokens[0] as usize..m.owned_tokens[1] as usize;
    let owned: Vec<&SegmentEmbedding> = segments
        .iter()
        .filter(|seg| docpipe_chunker::owns(&owned_range, &(seg.tokens[0] as usize..seg.tokens[1] as usize)))
        .collect();
    if owned.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "UPDATE segments s SET embedding = u.embedding, chunk_index = $2, pooled_token_start = u.pooled_start,
                pooled_token_end = u.pooled_end, standalone = u.standalone, standalone_skipped = u.skipped
         FROM UNNEST($3::int[], $4::vector[], $5::int[], $6::int[], $7::vector[], $8::bool[])
              AS u(segment_index, embedding, pooled_start, pooled_end, standalone, skipped)
         WHERE s.document_id = $1 AND s.segment_index = u.segment_index",
    )
    .bind(m.document_id)
    .bind(int(m.index, "chunk index")?)
    .bind(ints(owned.iter().map(|s| s.index), "segment index")?)
    .bind(owned.iter().map(|s| Vector::from(s.embedding.clone())).collect::<Vec<Vector>>())
    .bind(ints(owned.iter().map(|s| s.pooled[0]), "pooled token start")?)
    .bind(ints(owned.iter().map(|s| s.pooled[1]), "pooled token end")?)
    .bind(owned.iter().map(|s| s.standalone.clone().map(Vector::from)).collect::<Vec<Option<Vector>>>())
    .bind(owned.iter().map(|s| s.standalone_skipped).collect::<Vec<bool>>())
    .execute(&mut *tx)
    .await
    .map_err(ctx(|| format!("storing the segments of chunk {}", m.label())))?;
    Ok(())
}

/// A document's last chunk is in: its embedding (the mean of its chunk embeddings weighted by
/// owned tokens, normalised) and its clause labels.
async fn finish_document(tx: &mut PgConnection, document_id: Uuid) -> Result<(), sqlx::Error> {
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

/// (Re)compute a document's best segment, score and presence flag per clause category, from
/// the view `segment_scores` (the scorer's SQL mirror, see `docpipe-clauses`). Nothing to do
/// while `clause_categories` is empty.
pub async fn label_document(tx: &mut PgConnection, document_id: Uuid) -> Result<(), sqlx::Error> {
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

/// Fail the chunk's document (once) with the reason, recorded under `stage` (`embed`: the
/// worker could not embed it; `store`: the database refused its result; a dead letter).
/// [`Stored::Stale`] when the document was re-ingested or had finished already.
pub async fn fail_chunk(pool: &PgPool, m: &ChunkMeta, stage: Stage, error: &str) -> Result<Stored, StoreError> {
    let doc = DocumentRef { run_id: m.run_id, document_id: m.document_id, generation: m.generation };
    let failure = Failure::permanent(stage, format!("chunk {}: {error}", m.index));
    Ok(if record_failure(pool, doc, &failure).await? { Stored::Failed } else { Stored::Stale })
}
