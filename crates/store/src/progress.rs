//! How far a run is: the one reader of the view `run_progress`, and the per-document status.

use docpipe_contract::status::DocStatus;
use uuid::Uuid;

use crate::{ctx, PgPool, StoreError};

/// One row of the `run_progress` view.
#[derive(sqlx::FromRow, Debug, Clone, PartialEq)]
pub struct Progress {
    pub trigger: String,
    pub bucket: String,
    pub prefix: String,
    pub started_at: chrono::DateTime<chrono::Utc>,
    pub documents: i64,
    pub queued: i64,
    pub extracting: i64,
    pub embedding: i64,
    pub done: i64,
    pub failed: i64,
    pub chunks_total: i64,
    pub chunks_done: i64,
    pub chunks_per_s: Option<f64>,
    pub eta_s: Option<f64>,
    /// Pages read by OCR so far, and the OCR wall time of their documents.
    pub ocr_pages: i64,
    pub ocr_seconds: f64,
    /// Documents processed with a warning (low OCR confidence, say).
    pub flagged: i64,
    pub ingest_finished_at: Option<chrono::DateTime<chrono::Utc>>,
    pub finished_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl Progress {
    pub async fn load(pool: &PgPool, run_id: Uuid) -> Result<Option<Progress>, StoreError> {
        sqlx::query_as(
            "SELECT trigger, bucket, prefix, started_at, documents, queued, extracting, embedding, done, failed,
                    chunks_total, chunks_done, chunks_per_s, eta_s, ingest_finished_at, finished_at,
                    ocr_pages, ocr_seconds, flagged
             FROM run_progress WHERE run_id = $1",
        )
        .bind(run_id)
        .fetch_optional(pool)
        .await
        .map_err(ctx(|| format!("reading the progress of run {run_id}")))
    }

    /// Documents neither done nor failed.
    pub fn pending(&self) -> i64 {
        self.queued + self.extracting + self.embedding
    }

    /// One line for a terminal or a log.
    pub fn line(&self) -> String {
        let eta = match self.eta_s {
            Some(s) if s >= 3600.0 => format!("ETA {:.0}h{:02.0}m", (s / 3600.0).floor(), (s % 3600.0) / 60.0),
            Some(s) => format!("ETA {:.0}m{:02.0}s", (s / 60.0).floor(), s % 60.0),
            None => "ETA -".into(),
        };
        let ocr = match self.ocr_pages {
            0 => String::new(),
            n => format!(" · OCR {n} page(s) in {:.0} s", self.ocr_seconds),
        };
        let flagged = match self.flagged {
            0 => String::new(),
            n => format!(" · {n} flagged"),
        };
        format!(
            "{} documents: {} queued, {} extracting, {} embedding, {} done, {} failed{flagged} · chunks {}/{} · {:.2} chunks/s{ocr} · {}{}",
            self.documents,
            self.queued,
            self.extracting,
            self.embedding,
            self.done,
            self.failed,
            self.chunks_done,
            self.chunks_total,
            self.chunks_per_s.unwrap_or(0.0),
            eta,
            if self.ingest_finished_at.is_none() { " · ingest still listing/publishing" } else { "" }
        )
    }
}

/// Documents of the run that are neither done nor failed.
pub async fn pending_documents(pool: &PgPool, run_id: Uuid) -> Result<i64, StoreError> {
    let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM documents WHERE run_id = $1 AND status NOT IN ($2, $3)")
        .bind(run_id)
        .bind(DocStatus::Done.as_str())
        .bind(DocStatus::Failed.as_str())
        .fetch_one(pool)
        .await
        .map_err(ctx(|| format!("polling run {run_id}")))?;
    Ok(n)
}

/// The most recent run, if any.
pub async fn latest_run(pool: &PgPool) -> Result<Option<Uuid>, StoreError> {
    let latest: Option<(Uuid,)> = sqlx::query_as("SELECT id FROM runs ORDER BY started_at DESC LIMIT 1")
        .fetch_optional(pool)
        .await
        .map_err(ctx(|| "finding the latest run"))?;
    Ok(latest.map(|r| r.0))
}

/// One document of a run, as `docpipe status` lists it.
#[derive(sqlx::FromRow, Debug, Clone)]
pub struct DocumentStatus {
    pub key: String,
    pub status: String,
    pub pages: Option<i32>,
    pub chunk_count: Option<i32>,
    pub chunks_done: i32,
    pub error: Option<String>,
    pub ocr_pages: i32,
    /// Processed, with something a reader should know (low OCR confidence, say).
    pub warning: Option<String>,
    /// The extraction stage: queued, running, done, failed (NULL: not asked for).
    pub fields_status: Option<String>,
    pub fields_error: Option<String>,
}

/// The run's documents by status, then key.
pub async fn documents(pool: &PgPool, run_id: Uuid) -> Result<Vec<DocumentStatus>, StoreError> {
    sqlx::query_as(
        "SELECT key, status, pages, chunk_count, chunks_done, error, ocr_pages, warning, fields_status, fields_error
         FROM documents WHERE run_id = $1 ORDER BY status, key",
    )
    .bind(run_id)
    .fetch_all(pool)
    .await
    .map_err(ctx(|| format!("listing the documents of run {run_id}")))
}
