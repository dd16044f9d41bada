//! **ingest** — the source stage: PDFs in an S3 bucket to chunk messages on RabbitMQ.
//!
//! For each object under `s3://bucket/prefix` (listing follows pagination), [`document`]:
//! 1. downloads it (size-limited) and hashes it; an unchanged document that is already `done`
//!    is skipped;
//! 2. records the document (a new *generation* on every re-ingest, old rows removed);
//! 3. extracts text per page in an isolated child process (`docpipe_text::extract`), and
//!    reads the pages without a usable text layer by OCR (`docpipe_text::ocr`);
//! 4. tokenizes with the model's tokenizer and cuts 2048/128 chunks with owned ranges, and the
//!    clause segments each chunk carries (`docpipe_text::prepare`);
//! 5. stores pages, segments and the chunk count (status `embedding`), then publishes one
//!    persistent message per chunk and waits for the broker's confirms.
//!
//! A document that cannot be processed ends `failed` with the reason and a row in `failures`;
//! the run goes on. Losing the database or the broker aborts the run with an error instead.
//! `--listen` takes the objects from S3 event notifications instead ([`events`]).

mod document;
pub mod events;
pub mod s3;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use backon::Retryable;
use docpipe_bus::{self as bus, AmqpError, Inbox, Publisher, Topology};
use docpipe_contract::defaults;
use docpipe_ops::metrics::{self, Metrics};
use docpipe_ops::retry;
use docpipe_store::{documents as db, PgPool, StoreError};
use docpipe_text::extract::{ExtractLimits, Extractor};
use docpipe_text::ocr::{Ocr, OcrConfig, OcrError};
use docpipe_text::prepare::{ModelInput, PrepareError};
use docpipe_text::ModelDir;
use futures_util::StreamExt;
use tokio::sync::watch;
use tracing::{error, info, warn};
use uuid::Uuid;

use document::Outcome;

/// Everything ingest needs to know, with production defaults in [`IngestConfig::new`].
#[derive(Debug, Clone)]
pub struct IngestConfig {
    pub model_dir: ModelDir,
    /// Model sequence length per chunk, prompt and special tokens included.
    pub chunk_tokens: usize,
    pub overlap: usize,
    pub max_pdf_bytes: u64,
    /// Documents over this many tokens fail (a limit on one document's share of a run).
    pub max_tokens: usize,
    pub extract: ExtractLimits,
    /// When and how pages without a usable text layer are read by OCR.
    pub ocr: OcrConfig,
    /// The docpipe binary that serves `extract-pdf`.
    pub extractor_exe: PathBuf,
    /// Documents processed at the same time.
    pub concurrency: usize,
}

impl IngestConfig {
    pub fn new(model_dir: ModelDir, extractor_exe: PathBuf) -> Self {
        Self {
            model_dir,
            chunk_tokens: defaults::CHUNK_TOKENS,
            overlap: defaults::CHUNK_OVERLAP,
            max_pdf_bytes: defaults::MAX_PDF_MB << 20,
            max_tokens: defaults::MAX_TOKENS,
            extract: ExtractLimits::default(),
            ocr: OcrConfig::default(),
            extractor_exe,
            concurrency: defaults::INGEST_CONCURRENCY,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error(transparent)]
    Prepare(#[from] PrepareError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Amqp(#[from] AmqpError),
    #[error(transparent)]
    S3(#[from] s3::S3Error),
    #[error(transparent)]
    Ocr(#[from] OcrError),
}

impl IngestError {
    /// A database that is restarting or unreachable: worth retrying the whole document
    /// (ingesting a document again is idempotent — it starts a new generation).
    pub fn is_transient(&self) -> bool {
        matches!(self, IngestError::Store(e) if e.is_transient())
    }
}

/// Retries of a whole document after a transient database error: ~1 minute in all.
fn document_backoff() -> retry::ExponentialBuilder {
    retry::bounded(Duration::from_millis(500), Duration::from_secs(10), 8)
}

/// How long an S3 event whose objects could not be ingested waits before it is requeued.
const REQUEUE_PAUSE: Duration = Duration::from_secs(5);

/// What happened in one ingest run.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RunSummary {
    pub run_id: Uuid,
    pub objects: usize,
    pub queued: usize,
    pub skipped: usize,
    pub failed: usize,
    pub chunks: usize,
}

impl RunSummary {
    fn count(&mut self, outcome: &Outcome) {
        match outcome {
            Outcome::Queued { chunks } => {
                self.queued += 1;
                self.chunks += chunks;
            }
            Outcome::Skipped => self.skipped += 1,
            Outcome::Failed => self.failed += 1,
        }
    }
}

pub struct Ingestor {
    cfg: IngestConfig,
    s3: aws_sdk_s3::Client,
    pool: PgPool,
    publisher: Publisher,
    topology: Topology,
    extractor: Extractor,
    input: Arc<ModelInput>,
}

impl Ingestor {
    pub fn new(
        cfg: IngestConfig,
        s3: aws_sdk_s3::Client,
        pool: PgPool,
        publisher: Publisher,
        topology: Topology,
    ) -> Result<Self, IngestError> {
        let input = Arc::new(ModelInput::load(&cfg.model_dir, cfg.chunk_tokens, cfg.overlap)?);
        let extractor =
            Extractor { exe: cfg.extractor_exe.clone(), limits: cfg.extract.clone(), ocr: Ocr::new(cfg.ocr.clone()) };
        Ok(Self { cfg, s3, pool, publisher, topology, extractor, input })
    }

    /// Check that what OCR needs is installed (unless it is off): one clear error at start
    /// instead of a failure per scanned document.
    pub async fn check_ocr(&self) -> Result<(), IngestError> {
        Ok(self.extractor.ocr.check().await?)
    }

    /// Create a run row; its id tags every document and message of the run.
    pub async fn start_run(&self, trigger: &str, bucket: &str, prefix: &str) -> Result<Uuid, IngestError> {
        Ok(db::start_run(&self.pool, trigger, bucket, prefix).await?)
    }

    /// Ingest every object under `s3://bucket/prefix` as part of `run_id`.
    pub async fn ingest(&self, run_id: Uuid, bucket: &str, prefix: &str) -> Result<RunSummary, IngestError> {
        let objects = (|| s3::list(&self.s3, bucket, prefix))
            .retry(s3::backoff())
            .when(|e| e.is_retryable())
            .notify(|e, d| warn!(%run_id, bucket, prefix, error = %e, retry_in = ?d, "listing failed; retrying"))
            .await?;
        info!(%run_id, bucket, prefix, objects = objects.len(), "listed bucket");
        self.ingest_objects(run_id, objects.into_iter().map(|o| (bucket.to_string(), o)).collect()).await
    }

    /// Ingest again the documents that failed — those whose latest attempt was in `only_run`,
    /// or every failed document — as part of `run_id`.
    pub async fn retry_failed(&self, run_id: Uuid, only_run: Option<Uuid>) -> Result<RunSummary, IngestError> {
        let failed = db::failed_documents(&self.pool, only_run).await?;
        info!(%run_id, documents = failed.len(), "retrying failed documents");
        let objects = failed
            .into_iter()
            .map(|d| (d.bucket, s3::ObjectInfo { key: d.key, size: d.bytes, etag: d.etag }))
            .collect();
        self.ingest_objects(run_id, objects).await
    }

    /// `--listen`: ingest the objects that S3 event notifications on `topology.events()` name
    /// (see [`events`]), as part of `run_id`, until `shutdown` turns true. Only events for
    /// `bucket` under `prefix` are processed; others are acknowledged and skipped. A message
    /// that is not an S3 event is dead-lettered; one that hits a database or S3 outage is
    /// requeued (and dead-lettered after the queue's delivery limit).
    pub async fn listen(
        &self,
        run_id: Uuid,
        conn: &lapin::Connection,
        bucket: &str,
        prefix: &str,
        mut shutdown: watch::Receiver<bool>,
    ) -> Result<RunSummary, IngestError> {
        let queue = self.topology.events();
        let mut inbox =
            Inbox::open(conn, defaults::LISTEN_PREFETCH, &[(queue.clone(), "docpipe-ingest-listen")]).await?;
        info!(%run_id, queue, bucket, prefix, "listening for S3 event notifications");
        let mut summary = RunSummary { run_id, ..Default::default() };
        loop {
            let (_, delivery) = tokio::select! {
                d = inbox.recv() => d?,
                _ = shutdown.changed() => break,
            };
            let objects = match events::created_objects(&delivery.data) {
                Ok(o) => o,
                Err(e) => {
                    warn!(%run_id, queue, error = %e, bytes = delivery.data.len(), "not an S3 event; dead-lettering it");
                    bus::dead_letter(&delivery).await?;
                    continue;
                }
            };
            match self.ingest_event(run_id, bucket, prefix, objects, &mut summary).await {
                Ok(()) => bus::ack(&delivery).await?,
                Err(e) => {
                    error!(%run_id, error = %e, "cannot ingest the event's objects; requeueing the event");
                    bus::requeue(&delivery).await?;
                    tokio::time::sleep(REQUEUE_PAUSE).await;
                }
            }
        }
        inbox.close("ingest stopping").await;
        db::finish_run(&self.pool, run_id, summary.objects, summary.skipped).await?;
        Ok(summary)
    }

    /// The objects of one S3 event that are in `bucket` under `prefix`.
    async fn ingest_event(
        &self,
        run_id: Uuid,
        bucket: &str,
        prefix: &str,
        objects: Vec<(String, s3::ObjectInfo)>,
        summary: &mut RunSummary,
    ) -> Result<(), IngestError> {
        for (b, obj) in objects {
            if b != bucket || !obj.key.starts_with(prefix) {
                info!(%run_id, bucket = b, key = obj.key, "event for another bucket or prefix; skipped");
                continue;
            }
            summary.objects += 1;
            let outcome = self.ingest_object_retrying(run_id, &b, obj).await?;
            summary.count(&outcome);
        }
        Ok(())
    }

    async fn ingest_objects(
        &self,
        run_id: Uuid,
        objects: Vec<(String, s3::ObjectInfo)>,
    ) -> Result<RunSummary, IngestError> {
        let started = Instant::now();
        let mut summary = RunSummary { run_id, objects: objects.len(), ..Default::default() };
        let mut results = futures_util::stream::iter(objects)
            .map(|(bucket, obj)| async move { self.ingest_object_retrying(run_id, &bucket, obj).await })
            .buffer_unordered(self.cfg.concurrency.max(1));
        while let Some(r) = results.next().await {
            summary.count(&r?);
        }
        db::finish_run(&self.pool, run_id, summary.objects, summary.skipped).await?;
        info!(%run_id, queued = summary.queued, skipped = summary.skipped, failed = summary.failed, chunks = summary.chunks,
              seconds = started.elapsed().as_secs_f64(), "ingest finished");
        Ok(summary)
    }

    /// One object ([`document`]), started over (a new generation) after a transient database
    /// error, for about a minute.
    async fn ingest_object_retrying(
        &self,
        run_id: Uuid,
        bucket: &str,
        obj: s3::ObjectInfo,
    ) -> Result<Outcome, IngestError> {
        let outcome = (|| self.ingest_object(run_id, bucket, obj.clone()))
            .retry(document_backoff())
            .when(|e| e.is_transient())
            .notify(|e, d| warn!(%run_id, bucket, key = obj.key, error = %e, retry_in = ?d, "document interrupted; retrying it"))
            .await?;
        let m = metrics::get();
        match outcome {
            Outcome::Queued { chunks } => {
                Metrics::outcome(&m.documents_ingested, "queued");
                m.chunks_published.inc_by(chunks as u64);
            }
            Outcome::Skipped => Metrics::outcome(&m.documents_ingested, "skipped"),
            Outcome::Failed => Metrics::outcome(&m.documents_ingested, "failed"),
        }
        Ok(outcome)
    }
}
