//! Filling in what segments stored by an older docpipe lack: their lexical terms (migration
//! 0006) and their standalone embeddings (migration 0007, or a worker of before 2026-12-05
//! run with `--standalone-segments none`; not the segments a worker skipped on purpose).

use docpipe_batching::{embed_by_length, Backend};
use docpipe_contract::status::DocStatus;
use docpipe_store::chunks::label_document;
use docpipe_store::documents::int_array_literals;
use docpipe_store::PgPool;
use pgvector::Vector;
use tracing::{info, warn};
use uuid::Uuid;

use crate::{db, BoxError, ClausesError};

type Result<T> = std::result::Result<T, ClausesError>;

/// A stored offset (never negative by the schema; a bad one clamps to 0).
fn to_usize(v: i32) -> usize {
    usize::try_from(v).unwrap_or(0)
}

/// Fill in the lexical terms of segments stored before they were kept (migration 0006).
/// Returns the number of documents updated.
pub async fn backfill_terms(pool: &PgPool) -> Result<usize> {
    let ids: Vec<(Uuid, String)> = sqlx::query_as(
        "SELECT d.id, d.text FROM documents d
         WHERE d.text IS NOT NULL AND EXISTS (SELECT 1 FROM segments s WHERE s.document_id = d.id AND s.terms IS NULL)",
    )
    .fetch_all(pool)
    .await
    .map_err(db("finding segments without terms"))?;
    for (id, text) in &ids {
        let segs: Vec<(i32, i32, i32)> =
            sqlx::query_as("SELECT segment_index, char_start, char_end FROM segments WHERE document_id = $1")
                .bind(id)
                .fetch_all(pool)
                .await
                .map_err(db(format!("reading the segments of document {id}")))?;
        let ranges = segs.iter().map(|s| to_usize(s.1)..to_usize(s.2));
        let terms = int_array_literals(docpipe_chunker::segment::terms_of_ranges(text, ranges));
        let index: Vec<i32> = segs.iter().map(|s| s.0).collect();
        sqlx::query(
            "UPDATE segments s SET terms = u.terms::int[] FROM UNNEST($2::int[], $3::text[]) AS u(i, terms)
             WHERE s.document_id = $1 AND s.segment_index = u.i",
        )
        .bind(id)
        .bind(&index)
        .bind(&terms)
        .execute(pool)
        .await
        .map_err(db(format!("storing the terms of document {id}")))?;
    }
    if !ids.is_empty() {
        info!(documents = ids.len(), "segment terms filled in");
    }
    Ok(ids.len())
}

/// Padded tokens per forward pass of [`backfill_standalone`] (the worker's CPU default).
const BACKFILL_BATCH_TOKENS: usize = docpipe_contract::defaults::CPU_BATCH_TOKENS;

/// Embed on their own the segments stored without a standalone embedding (before migration
/// 0007, or by a worker of before 2026-12-05 run with `--standalone-segments none`; not those
/// a worker skipped on purpose, under `none` or as no clause candidate), and relabel their
/// documents.
/// The segment's text is tokenized afresh (the worker reuses the chunk's tokens, which can
/// differ at the edges). The model is loaded only when there is something to embed. A segment
/// that fails alone is logged and stays NULL. Returns the number of segments embedded.
pub async fn backfill_standalone<B: Backend, E: Into<BoxError>>(
    pool: &PgPool,
    load: impl FnOnce() -> std::result::Result<B, E>,
) -> Result<usize> {
    let docs: Vec<(Uuid, String)> = sqlx::query_as(
        "SELECT d.id, d.text FROM documents d
         WHERE d.status = $1 AND d.text IS NOT NULL AND EXISTS
               (SELECT 1 FROM segments s WHERE s.document_id = d.id AND s.embedding IS NOT NULL AND s.standalone IS NULL AND NOT s.standalone_skipped)
         ORDER BY d.id",
    )
    .bind(DocStatus::Done.as_str())
    .fetch_all(pool)
    .await
    .map_err(db("finding segments without a standalone embedding"))?;
    if docs.is_empty() {
        return Ok(0);
    }
    let model = load().map_err(|e| ClausesError::Load { what: "loading the model".into(), source: e.into() })?;
    info!(documents = docs.len(), "embedding stored segments on their own (standalone embeddings)");
    let mut total = 0;
    for (id, text) in &docs {
        total += standalone_document(pool, &model, *id, text).await?;
    }
    Ok(total)
}

/// One document's segments without a standalone embedding: embedded, stored, relabelled.
async fn standalone_document<B: Backend>(pool: &PgPool, model: &B, id: Uuid, text: &str) -> Result<usize> {
    let segs: Vec<(i32, i32, i32)> = sqlx::query_as(
        "SELECT segment_index, char_start, char_end FROM segments
         WHERE document_id = $1 AND embedding IS NOT NULL AND standalone IS NULL AND NOT standalone_skipped",
    )
    .bind(id)
    .fetch_all(pool)
    .await
    .map_err(db(format!("reading the segments of document {id}")))?;
    let chars: Vec<char> = text.chars().collect();
    let mut ids = Vec::with_capacity(segs.len());
    for (_, start, end) in &segs {
        let (a, b) = (to_usize(*start), to_usize(*end));
        let (a, b) = (a.min(chars.len()), b.min(chars.len()));
        let seg: String = chars.get(a..b.max(a)).unwrap_or_default().iter().collect();
        let mut t = model.tokenize(Some("document"), &seg).map_err(|e| ClausesError::Model {
            what: format!("tokenizing a segment of {id}"),
            message: e.to_string(),
        })?;
        if t.len() > model.max_len() {
            // keep the closing special token
            let last = t[t.len() - 1];
            t.truncate(model.max_len() - 1);
            t.push(last);
        }
        ids.push(t);
    }
    let refs: Vec<&[u32]> = ids.iter().map(|t| t.as_slice()).collect();
    let mut out: Vec<Option<Vector>> = Vec::with_capacity(ids.len());
    for (seg, e) in segs.iter().zip(embed_by_length(model, &refs, BACKFILL_BATCH_TOKENS)) {
        match e {
            Ok(e) => out.push(Some(Vector::from(e))),
            Err(error) => {
                warn!(document_id = %id, segment = seg.0, %error, "a segment could not be embedded on its own; it keeps its contextual embedding only");
                out.push(None);
            }
        }
    }
    let index: Vec<i32> = segs.iter().map(|s| s.0).collect();
    let what = || format!("storing the standalone embeddings of document {id}");
    let mut tx = pool.begin().await.map_err(db(what()))?;
    sqlx::query(
        "UPDATE segments s SET standalone = u.standalone FROM UNNEST($2::int[], $3::vector[]) AS u(i, standalone)
         WHERE s.document_id = $1 AND s.segment_index = u.i",
    )
    .bind(id)
    .bind(&index)
    .bind(&out)
    .execute(&mut *tx)
    .await
    .map_err(db(what()))?;
    label_document(&mut tx, id).await.map_err(db(format!("labelling document {id}")))?;
    tx.commit().await.map_err(db(what()))?;
    info!(document_id = %id, segments = segs.len(), "standalone segment embeddings stored");
    Ok(segs.len())
}
