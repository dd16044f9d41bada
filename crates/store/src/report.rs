//! The figures behind `docpipe report`: one run's throughput, latencies by stage, the workers'
//! forward passes and its failures, as stored by the stages.

use docpipe_contract::status::DocStatus;
use uuid::Uuid;

use crate::progress::Progress;
use crate::{ctx, PgPool, StoreError};

/// The run's progress (the one reader of `run_progress`) and its model-token total.
#[derive(Debug, Clone)]
pub struct RunSummary {
    pub progress: Progress,
    /// Model input tokens stored, and the seconds from the first ingest to the last chunk.
    pub tokens: Option<i64>,
    pub span_s: Option<f64>,
}

/// A stage's observed latencies: (name, unit, seconds).
pub type StageSeconds = (&'static str, &'static str, Vec<f64>);

/// Everything the report shows.
#[derive(Debug, Clone)]
pub struct RunFigures {
    pub summary: RunSummary,
    /// (seconds since the run started, input tokens) per stored chunk.
    pub chunk_times: Vec<(f64, f64)>,
    /// Seconds since the run started at which each document finished (done).
    pub done_times: Vec<f64>,
    pub stages: Vec<StageSeconds>,
    /// (chunks in the pass, passes).
    pub batch_sizes: Vec<(i32, i64)>,
    /// (real tokens, padded tokens) per forward pass.
    pub batch_tokens: Vec<(i64, i64)>,
    /// (worker, passes, tokens, tokens/s of prefill).
    pub workers: Vec<(String, i64, i64, f64)>,
    /// (stage, class, failures).
    pub failure_classes: Vec<(String, String, i64)>,
    /// (key, stage, class, attempts, message), oldest first, at most 500.
    pub failures: Vec<(String, String, String, i32, String)>,
    /// (key, warning) of the documents processed with a warning (low OCR confidence, say).
    pub flagged: Vec<(String, String)>,
    /// The extracted answers of the run's documents, at most 500, by key.
    pub fields: Vec<FieldsLine>,
}

/// One contract's answers, as `contract_fields` gives them (empty: not answered).
#[derive(Debug, Clone, Default, sqlx::FromRow)]
pub struct FieldsLine {
    pub key: String,
    /// queued, running, done, failed; `None`: extraction not asked for.
    pub status: Option<String>,
    pub error: Option<String>,
    pub title: Option<String>,
    pub parties: Option<String>,
    pub agreement_date: Option<String>,
    pub effective_date: Option<String>,
    pub expiration: Option<String>,
    pub renewal: Option<String>,
    pub notice_period: Option<String>,
    pub governing_law: Option<String>,
}

/// Read the report's figures; `None` when there is no such run.
pub async fn load(pool: &PgPool, run_id: Uuid) -> Result<Option<RunFigures>, StoreError> {
    let Some(summary) = summary(pool, run_id).await? else { return Ok(None) };
    let c = |what: &str| {
        let what = format!("reading {what} of run {run_id}");
        ctx(move || what)
    };
    let chunk_times = sqlx::query_as(
        "SELECT extract(epoch FROM c.created_at - r.started_at)::float8, c.input_tokens::float8
         FROM chunks c JOIN documents d ON d.id = c.document_id JOIN runs r ON r.id = d.run_id
         WHERE d.run_id = $1 ORDER BY 1",
    )
    .bind(run_id)
    .fetch_all(pool)
    .await
    .map_err(c("chunk times"))?;
    let done_times: Vec<(f64,)> = sqlx::query_as(
        "SELECT extract(epoch FROM d.done_at - r.started_at)::float8
         FROM documents d JOIN runs r ON r.id = d.run_id
         WHERE d.run_id = $1 AND d.status = $2 AND d.done_at IS NOT NULL ORDER BY 1",
    )
    .bind(run_id)
    .bind(DocStatus::Done.as_str())
    .fetch_all(pool)
    .await
    .map_err(c("document times"))?;
    let (batch_sizes, batch_tokens, workers) = batches(pool, run_id).await?;
    let (failure_classes, failures) = failures(pool, run_id).await?;
    let flagged = sqlx::query_as(
        "SELECT key, warning FROM documents WHERE run_id = $1 AND warning IS NOT NULL ORDER BY key LIMIT 500",
    )
    .bind(run_id)
    .fetch_all(pool)
    .await
    .map_err(c("flagged documents"))?;
    let fields = sqlx::query_as(
        "SELECT d.key, d.fields_status AS status, d.fields_error AS error, cf.title, cf.parties,
                cf.agreement_date::text AS agreement_date, cf.effective_date::text AS effective_date,
                cf.expiration, cf.renewal, justify_interval(cf.notice_period)::text AS notice_period,
                cf.governing_law
         FROM documents d LEFT JOIN contract_fields cf ON cf.document_id = d.id
         WHERE d.run_id = $1 AND d.status = 'done' ORDER BY d.key LIMIT 500",
    )
    .bind(run_id)
    .fetch_all(pool)
    .await
    .map_err(c("contract fields"))?;
    Ok(Some(RunFigures {
        summary,
        chunk_times,
        done_times: done_times.into_iter().map(|(t,)| t).collect(),
        stages: stages(pool, run_id).await?,
        batch_sizes,
        batch_tokens,
        workers,
        failure_classes,
        failures,
        flagged,
        fields,
    }))
}

async fn summary(pool: &PgPool, run_id: Uuid) -> Result<Option<RunSummary>, StoreError> {
    let Some(progress) = Progress::load(pool, run_id).await? else { return Ok(None) };
    let (tokens, span_s): (Option<i64>, Option<f64>) = sqlx::query_as(
        "SELECT sum(c.input_tokens)::int8,
                extract(epoch FROM max(c.created_at) - min(d.ingest_started_at))::float8
         FROM documents d JOIN chunks c ON c.document_id = d.id WHERE d.run_id = $1",
    )
    .bind(run_id)
    .fetch_one(pool)
    .await
    .map_err(ctx(|| format!("reading tokens of run {run_id}")))?;
    Ok(Some(RunSummary { progress, tokens, span_s }))
}

/// Latencies by stage, from the timestamps and timings the stages stored.
async fn stages(pool: &PgPool, run_id: Uuid) -> Result<Vec<StageSeconds>, StoreError> {
    let mut stages = Vec::new();
    for (name, unit, sql) in [
        ("text extraction", "per document", "SELECT extract_seconds::float8 FROM documents WHERE run_id = $1"),
        (
            "OCR (part of extraction)",
            "per document with OCR pages",
            "SELECT ocr_seconds::float8 FROM documents WHERE run_id = $1 AND ocr_pages > 0",
        ),
        (
            "ingest (fetch → chunks published)",
            "per document",
            "SELECT extract(epoch FROM extracted_at - ingest_started_at)::float8 FROM documents WHERE run_id = $1",
        ),
        (
            "queue wait (published → prefill)",
            "per chunk",
            "SELECT c.queue_wait_ms::float8 / 1e3 FROM chunks c JOIN documents d ON d.id = c.document_id
             WHERE d.run_id = $1 AND c.queue_wait_ms > 0",
        ),
        (
            "prefill",
            "per forward pass",
            "SELECT DISTINCT ON (c.batch_id) c.prefill_ms::float8 / 1e3 FROM chunks c JOIN documents d ON d.id = c.document_id
             WHERE d.run_id = $1 AND c.batch_id IS NOT NULL",
        ),
        (
            "field extraction (done → fields stored)",
            "per document",
            "SELECT extract(epoch FROM fields_at - done_at)::float8 FROM documents
             WHERE run_id = $1 AND fields_status = 'done' AND fields_at IS NOT NULL AND done_at IS NOT NULL",
        ),
        (
            "document, end to end",
            "per document",
            "SELECT extract(epoch FROM done_at - ingest_started_at)::float8 FROM documents WHERE run_id = $1 AND status = 'done'",
        ),
    ] {
        let v: Vec<(Option<f64>,)> = sqlx::query_as(sql)
            .bind(run_id)
            .fetch_all(pool)
            .await
            .map_err(ctx(|| format!("reading {name} of run {run_id}")))?;
        stages.push((name, unit, v.into_iter().filter_map(|(x,)| x).filter(|x| x.is_finite() && *x >= 0.0).collect()));
    }
    Ok(stages)
}

type Batches = (Vec<(i32, i64)>, Vec<(i64, i64)>, Vec<(String, i64, i64, f64)>);

/// The forward passes of the run's chunks: sizes, tokens, and per worker.
async fn batches(pool: &PgPool, run_id: Uuid) -> Result<Batches, StoreError> {
    let c = |what: &'static str| ctx(move || format!("reading {what} of run {run_id}"));
    let sizes = sqlx::query_as(
        "SELECT batch_chunks, count(*) FROM (
             SELECT DISTINCT ON (c.batch_id) c.batch_chunks FROM chunks c JOIN documents d ON d.id = c.document_id
             WHERE d.run_id = $1 AND c.batch_id IS NOT NULL) p
         GROUP BY 1 ORDER BY 1",
    )
    .bind(run_id)
    .fetch_all(pool)
    .await
    .map_err(c("batch sizes"))?;
    let tokens = sqlx::query_as(
        "SELECT DISTINCT ON (c.batch_id) c.batch_tokens::int8, c.batch_padded_tokens::int8
         FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.run_id = $1 AND c.batch_id IS NOT NULL",
    )
    .bind(run_id)
    .fetch_all(pool)
    .await
    .map_err(c("batch tokens"))?;
    let workers = sqlx::query_as(
        "SELECT worker, count(*), sum(batch_tokens)::int8, (sum(batch_tokens) / greatest(sum(prefill_ms) / 1e3, 1e-9))::float8
         FROM (SELECT DISTINCT ON (c.batch_id) c.worker, c.batch_tokens, c.prefill_ms
               FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.run_id = $1 AND c.batch_id IS NOT NULL) p
         GROUP BY worker ORDER BY worker",
    )
    .bind(run_id)
    .fetch_all(pool)
    .await
    .map_err(c("workers"))?;
    Ok((sizes, tokens, workers))
}

type Failures = (Vec<(String, String, i64)>, Vec<(String, String, String, i32, String)>);

async fn failures(pool: &PgPool, run_id: Uuid) -> Result<Failures, StoreError> {
    let c = || ctx(move || format!("reading failures of run {run_id}"));
    let classes = sqlx::query_as(
        "SELECT stage, class, count(*) FROM failures WHERE run_id = $1 GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2",
    )
    .bind(run_id)
    .fetch_all(pool)
    .await
    .map_err(c())?;
    let rows = sqlx::query_as(
        "SELECT coalesce(key, ''), stage, class, attempts, message FROM failures WHERE run_id = $1 ORDER BY at LIMIT 500",
    )
    .bind(run_id)
    .fetch_all(pool)
    .await
    .map_err(c())?;
    Ok((classes, rows))
}
