//! Contract fields: what the extraction stage reads (a document's text, the clause scorer's
//! best segments per category, its presence labels) and writes (`document_fields`, the
//! document's `fields_status`). One transaction per document, keyed by (document, field), and
//! only for the document generation it was extracted from: a redelivered or stale extraction
//! changes nothing.

use chrono::NaiveDate;
use uuid::Uuid;

use crate::{ctx, PgPool, StoreError};

/// A document as the extraction stage needs it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct FieldsDocument {
    pub id: Uuid,
    pub run_id: Uuid,
    pub generation: i32,
    pub bucket: String,
    pub key: String,
    pub status: String,
    pub text: String,
}

/// A segment that a clause category scores high: the evidence offered for a field.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Evidence {
    pub category: String,
    pub segment_index: i32,
    pub char_start: i32,
    pub char_end: i32,
    pub page: i32,
    pub score: f64,
    pub text: String,
}

/// The clause scorer's answer for one category of a document.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Label {
    pub category: String,
    pub present: bool,
    pub score: f32,
    pub segment_index: i32,
    pub char_start: i32,
    pub char_end: i32,
    pub page: i32,
}

/// One stored answer.
#[derive(Debug, Clone)]
pub struct FieldRow {
    pub field: String,
    /// `answered`, `none` or `unknown`.
    pub status: &'static str,
    pub raw: Option<String>,
    pub value: serde_json::Value,
    pub value_type: String,
    pub canonical: String,
    pub value_date: Option<NaiveDate>,
    /// An ISO 8601 duration (`P1Y`), stored as an interval.
    pub value_interval: Option<String>,
    pub reason: Option<String>,
    pub evidence: serde_json::Value,
    pub confidence: Option<f32>,
    pub source: &'static str,
    pub model: String,
    pub prompt_version: String,
    /// The other source's answer (`{"source", "status", "raw", "value"}`), where there is one.
    pub alternative: Option<serde_json::Value>,
}

/// A document by id, or by its object key (the newest match when several buckets hold it).
pub async fn document(pool: &PgPool, id_or_key: &str) -> Result<Option<FieldsDocument>, StoreError> {
    let id = Uuid::parse_str(id_or_key).ok();
    sqlx::query_as(
        "SELECT id, run_id, generation, bucket, key, status, coalesce(text, '') AS text
         FROM documents WHERE ($1::uuid IS NOT NULL AND id = $1) OR ($1::uuid IS NULL AND key = $2)
         ORDER BY updated_at DESC LIMIT 1",
    )
    .bind(id)
    .bind(id_or_key)
    .fetch_optional(pool)
    .await
    .map_err(ctx(|| format!("loading document {id_or_key}")))
}

/// Documents whose embeddings are done, of `bucket` (all buckets: `None`), that have no
/// extracted fields of their current generation (or every done document with `redo`).
pub async fn pending(pool: &PgPool, bucket: Option<&str>, redo: bool) -> Result<Vec<Uuid>, StoreError> {
    sqlx::query_scalar(
        "SELECT d.id FROM documents d
         WHERE d.status = 'done' AND ($1::text IS NULL OR d.bucket = $1)
           AND ($2 OR d.fields_status IS DISTINCT FROM 'done'
                OR NOT EXISTS (SELECT 1 FROM document_fields f
                               WHERE f.document_id = d.id AND f.generation = d.generation))
         ORDER BY d.key",
    )
    .bind(bucket)
    .bind(redo)
    .fetch_all(pool)
    .await
    .map_err(ctx(|| format!("listing documents awaiting fields in {}", bucket.unwrap_or("all buckets"))))
}

/// The `per_category` best segments of the document for each of `categories`, best first
/// (scored as `segment_scores` scores them).
pub async fn evidence(
    pool: &PgPool,
    document_id: Uuid,
    categories: &[String],
    per_category: i64,
) -> Result<Vec<Evidence>, StoreError> {
    sqlx::query_as(
        "SELECT category, segment_index, char_start, char_end, page, score, text FROM (
            SELECT x.category, s.segment_index, s.char_start, s.char_end, s.page_start AS page, x.score,
                   substr(d.text, s.char_start + 1, s.char_end - s.char_start) AS text,
                   row_number() OVER (PARTITION BY x.category ORDER BY x.score DESC, s.segment_index) AS rank
            FROM segment_scores x
            JOIN segments s ON s.document_id = x.document_id AND s.segment_index = x.segment_index
            JOIN documents d ON d.id = s.document_id
            WHERE x.document_id = $1 AND x.category = ANY($2)) t
         WHERE rank <= $3 ORDER BY category, rank",
    )
    .bind(document_id)
    .bind(categories)
    .bind(per_category)
    .fetch_all(pool)
    .await
    .map_err(ctx(|| format!("loading the evidence segments of document {document_id}")))
}

/// The segment of the document that holds character `char_at` of its text, offered as
/// evidence for `category` (its `score` is NaN: the clause scorer did not choose it).
pub async fn segment_at(
    pool: &PgPool,
    document_id: Uuid,
    char_at: i32,
    category: &str,
) -> Result<Option<Evidence>, StoreError> {
    sqlx::query_as(
        "SELECT $3::text AS category, s.segment_index, s.char_start, s.char_end, s.page_start AS page,
                'NaN'::float8 AS score, substr(d.text, s.char_start + 1, s.char_end - s.char_start) AS text
         FROM segments s JOIN documents d ON d.id = s.document_id
         WHERE s.document_id = $1 AND s.char_start <= $2 AND $2 < s.char_end
         ORDER BY s.segment_index LIMIT 1",
    )
    .bind(document_id)
    .bind(char_at)
    .bind(category)
    .fetch_optional(pool)
    .await
    .map_err(ctx(|| format!("loading the segment at character {char_at} of document {document_id}")))
}

/// The clause scorer's labels of the document (one per category).
pub async fn labels(pool: &PgPool, document_id: Uuid) -> Result<Vec<Label>, StoreError> {
    sqlx::query_as(
        "SELECT l.category, l.present, l.score, l.segment_index, s.char_start, s.char_end, s.page_start AS page
         FROM document_labels l
         JOIN segments s ON s.document_id = l.document_id AND s.segment_index = l.segment_index
         WHERE l.document_id = $1 ORDER BY l.category",
    )
    .bind(document_id)
    .fetch_all(pool)
    .await
    .map_err(ctx(|| format!("loading the clause labels of document {document_id}")))
}

/// Mark the document's extraction stage (`queued`, `running`, `failed` with its reason);
/// `fields_at` says since when.
pub async fn set_status(pool: &PgPool, document_id: Uuid, status: &str, error: Option<&str>) -> Result<(), StoreError> {
    sqlx::query("UPDATE documents SET fields_status = $2, fields_error = $3, fields_at = now() WHERE id = $1")
        .bind(document_id)
        .bind(status)
        .bind(error)
        .execute(pool)
        .await
        .map_err(ctx(|| format!("setting the fields status of document {document_id} to {status}")))?;
    Ok(())
}

/// Record that the document's extraction was queued, unless a fields worker took it up
/// already (it can be faster than this update).
pub async fn mark_queued(pool: &PgPool, document_id: Uuid) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE documents SET fields_status = 'queued', fields_at = now() WHERE id = $1 AND fields_status IS NULL",
    )
    .bind(document_id)
    .execute(pool)
    .await
    .map_err(ctx(|| format!("marking the extraction of document {document_id} queued")))?;
    Ok(())
}

/// Replace the document's fields with `rows` and mark its extraction done, in one
/// transaction, if the document is still at `generation`. Returns whether it stored them
/// (false: the document was re-ingested meanwhile, or deleted).
pub async fn store(
    pool: &PgPool,
    document_id: Uuid,
    generation: i32,
    run_id: Uuid,
    rows: &[FieldRow],
) -> Result<bool, StoreError> {
    let what = || format!("storing the fields of document {document_id}");
    let mut tx = pool.begin().await.map_err(ctx(what))?;
    let current: Option<i32> = sqlx::query_scalar("SELECT generation FROM documents WHERE id = $1 FOR UPDATE")
        .bind(document_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(ctx(what))?;
    if current != Some(generation) {
        return Ok(false);
    }
    sqlx::query("DELETE FROM document_fields WHERE document_id = $1")
        .bind(document_id)
        .execute(&mut *tx)
        .await
        .map_err(ctx(what))?;
    for r in rows {
        sqlx::query(
            "INSERT INTO document_fields (document_id, field, generation, status, raw, value, value_type,
                 canonical, value_date, value_interval, reason, evidence, confidence, source, model,
                 prompt_version, run_id, alternative)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::text::interval, $11, $12, $13, $14, $15, $16, $17, $18)",
        )
        .bind(document_id)
        .bind(&r.field)
        .bind(generation)
        .bind(r.status)
        .bind(&r.raw)
        .bind(&r.value)
        .bind(&r.value_type)
        .bind(&r.canonical)
        .bind(r.value_date)
        .bind(&r.value_interval)
        .bind(&r.reason)
        .bind(&r.evidence)
        .bind(r.confidence)
        .bind(r.source)
        .bind(&r.model)
        .bind(&r.prompt_version)
        .bind(run_id)
        .bind(&r.alternative)
        .execute(&mut *tx)
        .await
        .map_err(ctx(|| format!("storing field {} of document {document_id}", r.field)))?;
    }
    sqlx::query("UPDATE documents SET fields_status = 'done', fields_error = NULL, fields_at = now() WHERE id = $1")
        .bind(document_id)
        .execute(&mut *tx)
        .await
        .map_err(ctx(what))?;
    tx.commit().await.map_err(ctx(what))?;
    Ok(true)
}

/// A stored answer, for `docpipe fields` and the report.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct StoredField {
    pub field: String,
    pub status: String,
    pub raw: Option<String>,
    pub canonical: String,
    pub value_type: String,
    pub reason: Option<String>,
    pub confidence: Option<f32>,
    pub source: String,
    pub page: Option<i32>,
    pub evidence_text: Option<String>,
    /// The other source's answer (see [`FieldRow::alternative`]).
    pub alternative: Option<serde_json::Value>,
}

/// The document's stored answers, with the text of each answer's first evidence segment.
pub async fn stored(pool: &PgPool, document_id: Uuid) -> Result<Vec<StoredField>, StoreError> {
    sqlx::query_as(
        "SELECT f.field, f.status, f.raw, f.canonical, f.value_type, f.reason, f.confidence, f.source,
                (f.evidence -> 0 ->> 'page')::int AS page,
                substr(d.text, (f.evidence -> 0 ->> 'char_start')::int + 1,
                       (f.evidence -> 0 ->> 'char_end')::int - (f.evidence -> 0 ->> 'char_start')::int) AS evidence_text,
                f.alternative
         FROM document_fields f JOIN documents d ON d.id = f.document_id
         WHERE f.document_id = $1
         ORDER BY f.field LIKE 'has:%', f.created_at, f.field",
    )
    .bind(document_id)
    .fetch_all(pool)
    .await
    .map_err(ctx(|| format!("loading the fields of document {document_id}")))
}

/// The done documents of `bucket`.
pub async fn done_in_bucket(pool: &PgPool, bucket: &str) -> Result<Vec<Uuid>, StoreError> {
    sqlx::query_scalar("SELECT id FROM documents WHERE bucket = $1 AND status = 'done' ORDER BY key")
        .bind(bucket)
        .fetch_all(pool)
        .await
        .map_err(ctx(|| format!("listing the done documents of {bucket}")))
}

/// The document's stored values: (field, normalised value, source).
/// A document's stored answers: (field, value, source, the other source's answer).
pub async fn values(
    pool: &PgPool,
    document_id: Uuid,
) -> Result<Vec<(String, serde_json::Value, String, Option<serde_json::Value>)>, StoreError> {
    sqlx::query_as(
        "SELECT field, value, source, alternative FROM document_fields WHERE document_id = $1 ORDER BY field",
    )
    .bind(document_id)
    .fetch_all(pool)
    .await
    .map_err(ctx(|| format!("loading the field values of document {document_id}")))
}

/// Fail the extraction of the document's `generation`: `fields_status = 'failed'` with the
/// reason, and a row in `failures` (stage `fields`). The document itself stays `done`: its
/// embeddings and labels are good. Returns whether it did (false: re-ingested meanwhile).
pub async fn fail(
    pool: &PgPool,
    document_id: Uuid,
    generation: i32,
    run_id: Uuid,
    class: &str,
    message: &str,
) -> Result<bool, StoreError> {
    let what = || format!("recording the field extraction failure of document {document_id}");
    let mut tx = pool.begin().await.map_err(ctx(what))?;
    let updated = sqlx::query(
        "UPDATE documents SET fields_status = 'failed', fields_error = $3, fields_at = now()
         WHERE id = $1 AND generation = $2",
    )
    .bind(document_id)
    .bind(generation)
    .bind(message)
    .execute(&mut *tx)
    .await
    .map_err(ctx(what))?
    .rows_affected();
    if updated > 0 {
        sqlx::query(
            "INSERT INTO failures (run_id, document_id, bucket, key, stage, class, message)
             SELECT $1, id, bucket, key, 'fields', $3, $4 FROM documents WHERE id = $2",
        )
        .bind(run_id)
        .bind(document_id)
        .bind(class)
        .bind(message)
        .execute(&mut *tx)
        .await
        .map_err(ctx(what))?;
    }
    tx.commit().await.map_err(ctx(what))?;
    Ok(updated > 0)
}

/// Done documents whose extraction was never queued (the aggregator stopped between the
/// `done` commit and the publish), done for at least `older_than_s` seconds, or queued and
/// left `running` by a worker that died: what a fields worker sweeps up. With `bucket`, only
/// that bucket's (`docpipe run --fields`: not every document ever done without fields).
pub async fn stranded(
    pool: &PgPool,
    older_than_s: f64,
    bucket: Option<&str>,
) -> Result<Vec<(Uuid, Uuid, i32)>, StoreError> {
    sqlx::query_as(
        "SELECT id, run_id, generation FROM documents
         WHERE status = 'done' AND ($2::text IS NULL OR bucket = $2)
           AND ((fields_status IS NULL AND done_at < now() - make_interval(secs => $1))
                OR (fields_status = 'running' AND fields_at < now() - make_interval(secs => $1 * 10)))
         ORDER BY done_at LIMIT 100",
    )
    .bind(older_than_s)
    .bind(bucket)
    .fetch_all(pool)
    .await
    .map_err(ctx(|| "listing documents whose extraction was never queued".to_string()))
}

/// Done documents of the run whose extraction is not finished (done or failed).
pub async fn pending_in_run(pool: &PgPool, run_id: Uuid) -> Result<i64, StoreError> {
    sqlx::query_scalar(
        "SELECT count(*) FROM documents
         WHERE run_id = $1 AND status = 'done' AND coalesce(fields_status, '') NOT IN ('done', 'failed')",
    )
    .bind(run_id)
    .fetch_one(pool)
    .await
    .map_err(ctx(|| format!("counting the documents of run {run_id} awaiting fields")))
}

/// Done documents whose extraction failed (of `run`, or all): (document, run, generation).
pub async fn failed_extractions(pool: &PgPool, run: Option<Uuid>) -> Result<Vec<(Uuid, Uuid, i32)>, StoreError> {
    sqlx::query_as(
        "SELECT id, run_id, generation FROM documents
         WHERE status = 'done' AND fields_status = 'failed' AND ($1::uuid IS NULL OR run_id = $1)
         ORDER BY key",
    )
    .bind(run)
    .fetch_all(pool)
    .await
    .map_err(ctx(|| "listing the documents whose field extraction failed".to_string()))
}
