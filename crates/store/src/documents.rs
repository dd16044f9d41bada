//! Runs and documents: what ingest records before it publishes a document's chunks.

use std::ops::Range;

use docpipe_contract::status::DocStatus;
use uuid::Uuid;

use crate::{ctx, int, ints, PgPool, StoreError};

/// Create a run row; its id tags every document and message of the run.
pub async fn start_run(pool: &PgPool, trigger: &str, bucket: &str, prefix: &str) -> Result<Uuid, StoreError> {
    let run_id = Uuid::now_v7();
    sqlx::query("INSERT INTO runs (id, trigger, bucket, prefix) VALUES ($1, $2, $3, $4)")
        .bind(run_id)
        .bind(trigger)
        .bind(bucket)
        .bind(prefix)
        .execute(pool)
        .await
        .map_err(ctx(|| "creating the run"))?;
    Ok(run_id)
}

/// Record that ingest has published everything of the run (see the view `run_progress`).
pub async fn finish_run(pool: &PgPool, run_id: Uuid, objects: usize, skipped: usize) -> Result<(), StoreError> {
    sqlx::query("UPDATE runs SET finished_at = now(), objects_seen = $2, skipped = $3 WHERE id = $1")
        .bind(run_id)
        .bind(int(objects, "objects seen")?)
        .bind(int(skipped, "objects skipped")?)
        .execute(pool)
        .await
        .map_err(ctx(|| format!("finishing run {run_id}")))?;
    Ok(())
}

/// The document at `bucket/key` if it is done with this content (ingest skips it).
pub async fn unchanged_done(pool: &PgPool, bucket: &str, key: &str, sha256: &str) -> Result<Option<Uuid>, StoreError> {
    let row: Option<(Uuid,)> =
        sqlx::query_as("SELECT id FROM documents WHERE bucket = $1 AND key = $2 AND sha256 = $3 AND status = $4")
            .bind(bucket)
            .bind(key)
            .bind(sha256)
            .bind(DocStatus::Done.as_str())
            .fetch_optional(pool)
            .await
            .map_err(ctx(|| format!("looking up s3://{bucket}/{key}")))?;
    Ok(row.map(|r| r.0))
}

/// An S3 object as recorded on its document row.
#[derive(Debug, Clone)]
pub struct ObjectRow<'a> {
    pub bucket: &'a str,
    pub key: &'a str,
    pub etag: Option<&'a str>,
    /// The listed size, or the downloaded one.
    pub bytes: u64,
    /// Content hash, once downloaded.
    pub sha256: Option<&'a str>,
}

/// Insert or reset the document row (status `extracting`); a re-ingest starts a new
/// generation and removes the previous generation's pages, chunks, segments, labels and fields in the
/// same transaction. Returns the document id and generation.
pub async fn upsert_document(pool: &PgPool, run_id: Uuid, obj: &ObjectRow<'_>) -> Result<(Uuid, i32), StoreError> {
    let what = || format!("recording s3://{}/{}", obj.bucket, obj.key);
    let bytes =
        i64::try_from(obj.bytes).map_err(|_| StoreError::OutOfRange { what: what(), value: obj.bytes.to_string() })?;
    let mut tx = pool.begin().await.map_err(ctx(what))?;
    let (id, generation): (Uuid, i32) = sqlx::query_as(
        "INSERT INTO documents (id, run_id, bucket, key, etag, sha256, bytes, status)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (bucket, key) DO UPDATE SET
           run_id = EXCLUDED.run_id, etag = EXCLUDED.etag, sha256 = EXCLUDED.sha256, bytes = EXCLUDED.bytes,
           status = EXCLUDED.status, error = NULL, generation = documents.generation + 1, pages = NULL,
           token_count = NULL, chunk_count = NULL, chunks_done = 0, text = NULL, embedding = NULL, done_at = NULL,
           ingest_started_at = now(), extracted_at = NULL, extract_seconds = NULL, updated_at = now(),
           ocr_pages = 0, ocr_confidence = NULL, ocr_seconds = NULL, warning = NULL,
           fields_status = NULL, fields_error = NULL, fields_at = NULL
         RETURNING id, generation",
    )
    .bind(Uuid::now_v7())
    .bind(run_id)
    .bind(obj.bucket)
    .bind(obj.key)
    .bind(obj.etag)
    .bind(obj.sha256)
    .bind(bytes)
    .bind(DocStatus::Extracting.as_str())
    .fetch_one(&mut *tx)
    .await
    .map_err(ctx(what))?;
    for sql in [
        "DELETE FROM pages WHERE document_id = $1",
        "DELETE FROM chunks WHERE document_id = $1",
        "DELETE FROM segments WHERE document_id = $1",
        "DELETE FROM document_labels WHERE document_id = $1",
        "DELETE FROM document_fields WHERE document_id = $1",
    ] {
        sqlx::query(sql).bind(id).execute(&mut *tx).await.map_err(ctx(what))?;
    }
    tx.commit().await.map_err(ctx(what))?;
    Ok((id, generation))
}

/// A clause segment as stored: character and token ranges, pages (1-based, inclusive) and
/// its lexical terms.
#[derive(Debug, Clone)]
pub struct SegmentRow {
    pub chars: Range<usize>,
    pub tokens: Range<usize>,
    pub pages: Range<usize>,
    pub terms: Vec<i32>,
}

/// A document's extracted text and what was cut from it.
#[derive(Debug, Clone)]
pub struct DocumentText<'a> {
    pub text: &'a str,
    /// Character range of each page, in order.
    pub pages: &'a [Range<usize>],
    /// Per page: the OCR confidence when its text was read by OCR.
    pub ocr: &'a [Option<f32>],
    /// Wall time of the document's OCR, kept or not (0 when no page was read by OCR).
    pub ocr_seconds: f64,
    /// Mean OCR confidence over the OCR pages, weighted by their words.
    pub ocr_confidence: Option<f32>,
    /// What a reader should know about the text (low OCR confidence, say).
    pub warning: Option<&'a str>,
    pub segments: &'a [SegmentRow],
    pub tokens: usize,
    pub chunks: usize,
    pub extract_seconds: f64,
}

/// Postgres array literals (`{1,2,3}`) of integer lists: one text per row, where a 2-D array
/// would need rows of equal length.
pub fn int_array_literals(lists: impl IntoIterator<Item = Vec<i32>>) -> Vec<String> {
    lists
        .into_iter()
        .map(|l| format!("{{{}}}", l.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",")))
        .collect()
}

/// Pages, segments, text and the chunk count, then status `embedding` — before any chunk is
/// published, so the aggregator always knows how many chunks make the document complete.
pub async fn store_text(pool: &PgPool, id: Uuid, generation: i32, doc: &DocumentText<'_>) -> Result<(), StoreError> {
    let what = || format!("storing pages of document {id}");
    let mut tx = pool.begin().await.map_err(ctx(what))?;
    let ocr = |i: usize| doc.ocr.get(i).copied().flatten();
    sqlx::query(
        "INSERT INTO pages (document_id, page_no, char_start, char_end, ocr, ocr_confidence)
         SELECT $1, * FROM UNNEST($2::int[], $3::int[], $4::int[], $5::bool[], $6::real[])",
    )
    .bind(id)
    .bind(ints(1..=doc.pages.len(), "page number")?)
    .bind(ints(doc.pages.iter().map(|p| p.start), "page start")?)
    .bind(ints(doc.pages.iter().map(|p| p.end), "page end")?)
    .bind((0..doc.pages.len()).map(|i| ocr(i).is_some()).collect::<Vec<bool>>())
    .bind((0..doc.pages.len()).map(ocr).collect::<Vec<Option<f32>>>())
    .execute(&mut *tx)
    .await
    .map_err(ctx(what))?;
    let segs = doc.segments;
    let col = |f: fn(&SegmentRow) -> usize, name: &str| ints(segs.iter().map(f), name);
    sqlx::query(
        "INSERT INTO segments (document_id, segment_index, char_start, char_end, token_start, token_end, page_start, page_end, terms)
         SELECT $1, i, cs, ce, ts, te, ps, pe, terms::int[]
         FROM UNNEST($2::int[], $3::int[], $4::int[], $5::int[], $6::int[], $7::int[], $8::int[], $9::text[])
              AS u(i, cs, ce, ts, te, ps, pe, terms)",
    )
    .bind(id)
    .bind(ints(0..segs.len(), "segment index")?)
    .bind(col(|s| s.chars.start, "segment start")?)
    .bind(col(|s| s.chars.end, "segment end")?)
    .bind(col(|s| s.tokens.start, "segment token start")?)
    .bind(col(|s| s.tokens.end, "segment token end")?)
    .bind(col(|s| s.pages.start, "segment page")?)
    .bind(col(|s| s.pages.end - 1, "segment page")?)
    .bind(int_array_literals(segs.iter().map(|s| s.terms.clone())))
    .execute(&mut *tx)
    .await
    .map_err(ctx(what))?;
    sqlx::query(
        "UPDATE documents SET text = $3, pages = $4, token_count = $5, chunk_count = $6, status = $8,
                extract_seconds = $7, extracted_at = now(), updated_at = now(),
                ocr_pages = $9, ocr_confidence = $10, ocr_seconds = $11, warning = $12
         WHERE id = $1 AND generation = $2",
    )
    .bind(id)
    .bind(generation)
    .bind(doc.text)
    .bind(int(doc.pages.len(), "page count")?)
    .bind(int(doc.tokens, "token count")?)
    .bind(int(doc.chunks, "chunk count")?)
    .bind(doc.extract_seconds as f32)
    .bind(DocStatus::Embedding.as_str())
    .bind(int(doc.ocr.iter().flatten().count(), "OCR page count")?)
    .bind(doc.ocr_confidence)
    .bind((doc.ocr_seconds > 0.0).then_some(doc.ocr_seconds as f32))
    .bind(doc.warning)
    .execute(&mut *tx)
    .await
    .map_err(ctx(what))?;
    tx.commit().await.map_err(ctx(what))
}

/// A failed document to ingest again: where it is, and what was listed of it.
#[derive(Debug, Clone)]
pub struct FailedDocument {
    pub bucket: String,
    pub key: String,
    pub bytes: u64,
    pub etag: Option<String>,
}

/// The documents that failed — those whose latest attempt was in `only_run`, or all of them.
pub async fn failed_documents(pool: &PgPool, only_run: Option<Uuid>) -> Result<Vec<FailedDocument>, StoreError> {
    let rows: Vec<(String, String, Option<i64>, Option<String>)> = sqlx::query_as(
        "SELECT bucket, key, bytes, etag FROM documents
         WHERE status = $2 AND ($1::uuid IS NULL OR run_id = $1) ORDER BY bucket, key",
    )
    .bind(only_run)
    .bind(DocStatus::Failed.as_str())
    .fetch_all(pool)
    .await
    .map_err(ctx(|| "listing failed documents"))?;
    Ok(rows
        .into_iter()
        .map(|(bucket, key, bytes, etag)| FailedDocument {
            bucket,
            key,
            bytes: u64::try_from(bytes.unwrap_or(0)).unwrap_or(0),
            etag,
        })
        .collect())
}
