//! **ingest** — from PDFs in an S3 bucket to chunk messages on RabbitMQ.
//!
//! For each object under `s3://bucket/prefix` (listing follows pagination):
//! 1. download it (size-limited) and hash it; an unchanged document that is already `done` is
//!    skipped;
//! 2. record the document (a new *generation* on every re-ingest, old pages/chunks removed);
//! 3. extract text per page in an isolated child process ([`extract`]);
//! 4. tokenize with the model's tokenizer and cut 2048/128 chunks with owned ranges
//!    ([`prepare`], arithmetic in `docpipe-chunker`);
//! 5. cut the text into clause segments (sections, paragraphs, sentences of long paragraphs;
//!    `docpipe_chunker::segment`), each carried, as a token range, by every chunk it overlaps;
//! 6. store pages, segments and the chunk count (status `embedding`), then publish one
//!    persistent message per chunk and wait for the broker's confirms.
//!
//! A document that cannot be processed ends `failed` with the reason and a row in `failures`;
//! the run goes on. Losing the database or the broker aborts the run with an error instead.

pub mod events;
pub mod extract;
pub mod prepare;
pub mod s3;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use backon::{ExponentialBuilder, Retryable};

use docpipe_common::amqp::{self, AmqpError, Publisher, Topology};
use docpipe_common::messages::{self, ChunkMeta, ChunkTask, SCHEMA_VERSION};
use docpipe_common::metrics::{self, Metrics};
use futures_util::StreamExt;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicRejectOptions};
use lapin::types::FieldTable;
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use tokio::sync::watch;
use tracing::{error, info, warn};
use uuid::Uuid;

use extract::{ExtractLimits, Extractor};
use prepare::{DocumentText, ModelInput, PrepareError};

/// Everything ingest needs to know, with production defaults in [`IngestConfig::new`].
#[derive(Debug, Clone)]
pub struct IngestConfig {
    pub model_dir: PathBuf,
    /// Model sequence length per chunk, prompt and special tokens included.
    pub chunk_tokens: usize,
    pub overlap: usize,
    pub max_pdf_bytes: u64,
    /// Documents over this many tokens fail (a limit on one document's share of a run).
    pub max_tokens: usize,
    pub extract: ExtractLimits,
    /// The docpipe binary that serves `extract-pdf`.
    pub extractor_exe: PathBuf,
    /// Documents processed at the same time.
    pub concurrency: usize,
}

impl IngestConfig {
    pub fn new(model_dir: PathBuf, extractor_exe: PathBuf) -> Self {
        Self {
            model_dir,
            chunk_tokens: 2048,
            overlap: 128,
            max_pdf_bytes: 100 << 20,
            max_tokens: 2_000_000,
            extract: ExtractLimits::default(),
            extractor_exe,
            concurrency: 2,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error(transparent)]
    Prepare(#[from] PrepareError),
    #[error("database error while {what}: {source}")]
    Db { what: String, source: sqlx::Error },
    #[error(transparent)]
    Amqp(#[from] AmqpError),
    #[error(transparent)]
    S3(#[from] s3::S3Error),
    #[error("the broker closed the consumer of {0} (connection lost?)")]
    ConsumerClosed(String),
}

fn db(what: impl Into<String>) -> impl FnOnce(sqlx::Error) -> IngestError {
    let what = what.into();
    move |source| IngestError::Db { what, source }
}

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

enum Outcome {
    Queued { chunks: usize },
    Skipped,
    Failed,
}

/// Why a document failed, as recorded in `documents.error` and `failures`.
struct DocFailure {
    stage: &'static str,
    retryable: bool,
    message: String,
    /// Attempts made (a retryable failure is recorded once its retries are exhausted).
    attempts: u32,
}

impl DocFailure {
    fn permanent(stage: &'static str, message: impl Into<String>) -> Self {
        Self { stage, retryable: false, message: message.into(), attempts: 1 }
    }
}

impl IngestError {
    /// A database that is restarting or unreachable: worth retrying the whole document
    /// (ingesting a document again is idempotent — it starts a new generation).
    pub fn is_transient(&self) -> bool {
        match self {
            IngestError::Db { source, .. } => match source {
                sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Protocol(_) => {
                    true
                }
                e => e
                    .as_database_error()
                    .and_then(|d| d.code())
                    .is_some_and(|c| c.starts_with("08") || c.starts_with("57P") || c == "53300"),
            },
            _ => false,
        }
    }
}

/// Retries of a whole document after a transient database error: ~1 minute in all.
fn db_backoff() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(500))
        .with_max_delay(Duration::from_secs(10))
        .with_max_times(8)
        .with_jitter()
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
        let extractor = Extractor { exe: cfg.extractor_exe.clone(), limits: cfg.extract.clone() };
        Ok(Self { cfg, s3, pool, publisher, topology, extractor, input })
    }

    /// Create a run row; its id tags every document and message of the run.
    pub async fn start_run(&self, trigger: &str, bucket: &str, prefix: &str) -> Result<Uuid, IngestError> {
        let run_id = Uuid::now_v7();
        sqlx::query("INSERT INTO runs (id, trigger, bucket, prefix) VALUES ($1, $2, $3, $4)")
            .bind(run_id)
            .bind(trigger)
            .bind(bucket)
            .bind(prefix)
            .execute(&self.pool)
            .await
            .map_err(db("creating the run"))?;
        Ok(run_id)
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
        let ch = amqp::consumer_channel(conn, 4).await?;
        let mut consumer = ch
            .basic_consume(
                queue.as_str().into(),
                "docpipe-ingest-listen".into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(|source| AmqpError::Op { op: format!("consume {queue}"), source })?;
        info!(%run_id, queue, bucket, prefix, "listening for S3 event notifications");
        let mut summary = RunSummary { run_id, ..Default::default() };
        let consume_err = |source| IngestError::Amqp(AmqpError::Op { op: format!("consume {queue}"), source });
        loop {
            let next = tokio::select! {
                d = consumer.next() => d,
                _ = shutdown.changed() => break,
            };
            let Some(delivery) = next else { return Err(IngestError::ConsumerClosed(queue)) };
            let delivery = delivery.map_err(consume_err)?;
            let objects = match events::created_objects(&delivery.data) {
                Ok(o) => o,
                Err(e) => {
                    warn!(%run_id, queue, error = %e, bytes = delivery.data.len(), "not an S3 event; dead-lettering it");
                    delivery.reject(BasicRejectOptions { requeue: false }).await.map_err(consume_err)?;
                    continue;
                }
            };
            let mut failed = None;
            for (b, obj) in objects {
                if b != bucket || !obj.key.starts_with(prefix) {
                    info!(%run_id, bucket = b, key = obj.key, "event for another bucket or prefix; skipped");
                    continue;
                }
                summary.objects += 1;
                match self.ingest_object_retrying(run_id, &b, obj).await {
                    Ok(Outcome::Queued { chunks }) => {
                        summary.queued += 1;
                        summary.chunks += chunks;
                    }
                    Ok(Outcome::Skipped) => summary.skipped += 1,
                    Ok(Outcome::Failed) => summary.failed += 1,
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            match failed {
                None => {
                    delivery.ack(BasicAckOptions::default()).await.map_err(consume_err)?;
                }
                Some(e) => {
                    error!(%run_id, error = %e, "cannot ingest the event's objects; requeueing the event");
                    delivery
                        .nack(BasicNackOptions { requeue: true, ..Default::default() })
                        .await
                        .map_err(consume_err)?;
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
            }
        }
        let _ = ch.close(200, "ingest stopping".into()).await;
        self.finish_run(&summary).await?;
        Ok(summary)
    }

    /// [`Self::ingest_object`], started over (a new generation) after a transient database
    /// error, for about a minute.
    async fn ingest_object_retrying(
        &self,
        run_id: Uuid,
        bucket: &str,
        obj: s3::ObjectInfo,
    ) -> Result<Outcome, IngestError> {
        let outcome = (|| self.ingest_object(run_id, bucket, obj.clone()))
            .retry(db_backoff())
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

    /// Record that ingest has published everything of the run (see the view `run_progress`).
    async fn finish_run(&self, summary: &RunSummary) -> Result<(), IngestError> {
        sqlx::query("UPDATE runs SET finished_at = now(), objects_seen = $2, skipped = $3 WHERE id = $1")
            .bind(summary.run_id)
            .bind(summary.objects as i32)
            .bind(summary.skipped as i32)
            .execute(&self.pool)
            .await
            .map_err(db("finishing the run"))?;
        Ok(())
    }

    /// Ingest again the documents that failed — those whose latest attempt was in `only_run`,
    /// or every failed document — as part of `run_id`.
    pub async fn retry_failed(&self, run_id: Uuid, only_run: Option<Uuid>) -> Result<RunSummary, IngestError> {
        let rows: Vec<(String, String, Option<i64>, Option<String>)> = sqlx::query_as(
            "SELECT bucket, key, bytes, etag FROM documents
             WHERE status = 'failed' AND ($1::uuid IS NULL OR run_id = $1) ORDER BY bucket, key",
        )
        .bind(only_run)
        .fetch_all(&self.pool)
        .await
        .map_err(db("listing failed documents"))?;
        info!(%run_id, documents = rows.len(), "retrying failed documents");
        let objects = rows
            .into_iter()
            .map(|(bucket, key, bytes, etag)| {
                (bucket, s3::ObjectInfo { key, size: bytes.unwrap_or(0).max(0) as u64, etag })
            })
            .collect();
        self.ingest_objects(run_id, objects).await
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
            match r? {
                Outcome::Queued { chunks } => {
                    summary.queued += 1;
                    summary.chunks += chunks;
                }
                Outcome::Skipped => summary.skipped += 1,
                Outcome::Failed => summary.failed += 1,
            }
        }
        self.finish_run(&summary).await?;
        info!(%run_id, queued = summary.queued, skipped = summary.skipped, failed = summary.failed, chunks = summary.chunks,
              seconds = started.elapsed().as_secs_f64(), "ingest finished");
        Ok(summary)
    }

    async fn ingest_object(&self, run_id: Uuid, bucket: &str, obj: s3::ObjectInfo) -> Result<Outcome, IngestError> {
        let key = obj.key.as_str();
        if obj.size > self.cfg.max_pdf_bytes {
            let (id, generation) = self.upsert_document(run_id, bucket, &obj, None).await?;
            let msg = format!("{} bytes, over the limit of {} (max_pdf_bytes)", obj.size, self.cfg.max_pdf_bytes);
            self.fail(run_id, id, generation, bucket, key, DocFailure::permanent("fetch", msg)).await?;
            return Ok(Outcome::Failed);
        }
        let attempts = AtomicU32::new(0);
        let fetch_started = Instant::now();
        let fetched = (|| {
            attempts.fetch_add(1, Ordering::Relaxed);
            s3::get(&self.s3, bucket, key, self.cfg.max_pdf_bytes)
        })
        .retry(s3::backoff())
        .when(|e| e.is_retryable())
        .notify(|e, d| warn!(%run_id, bucket, key, error = %e, retry_in = ?d, "download failed; retrying"))
        .await;
        let pdf = match fetched {
            Ok(b) => {
                metrics::get().stage("fetch", fetch_started.elapsed().as_secs_f64());
                b
            }
            Err(e) => {
                let (id, generation) = self.upsert_document(run_id, bucket, &obj, None).await?;
                let attempts = attempts.load(Ordering::Relaxed);
                let f = DocFailure { stage: "fetch", retryable: e.is_retryable(), message: e.to_string(), attempts };
                self.fail(run_id, id, generation, bucket, key, f).await?;
                return Ok(Outcome::Failed);
            }
        };
        let sha = hex::encode(Sha256::digest(&pdf));
        let unchanged: Option<(Uuid,)> = sqlx::query_as(
            "SELECT id FROM documents WHERE bucket = $1 AND key = $2 AND sha256 = $3 AND status = 'done'",
        )
        .bind(bucket)
        .bind(key)
        .bind(&sha)
        .fetch_optional(&self.pool)
        .await
        .map_err(db(format!("looking up s3://{bucket}/{key}")))?;
        if let Some((id,)) = unchanged {
            info!(%run_id, document_id = %id, key, "unchanged and done, skipped");
            return Ok(Outcome::Skipped);
        }
        let (id, generation) = self.upsert_document(run_id, bucket, &obj, Some((&sha, pdf.len()))).await?;
        match self.process(run_id, id, generation, key, &pdf).await? {
            Ok(chunks) => Ok(Outcome::Queued { chunks }),
            Err(f) => {
                self.fail(run_id, id, generation, bucket, key, f).await?;
                Ok(Outcome::Failed)
            }
        }
    }

    /// Extract, chunk, store and publish one document. The outer error aborts the run
    /// (infrastructure); the inner one fails only this document.
    async fn process(
        &self,
        run_id: Uuid,
        id: Uuid,
        generation: i32,
        key: &str,
        pdf: &[u8],
    ) -> Result<Result<usize, DocFailure>, IngestError> {
        let t0 = Instant::now();
        let m = metrics::get();
        let pages = match self.extractor.extract(pdf).await {
            Ok(p) => p,
            Err(e) => {
                return Ok(Err(DocFailure {
                    stage: "extract",
                    retryable: e.is_retryable(),
                    message: e.to_string(),
                    attempts: 1,
                }))
            }
        };
        let extract_s = t0.elapsed().as_secs_f64();
        m.stage("extract", extract_s);
        m.pages_extracted.inc_by(pages.pages.len() as u64);
        if !pages.pages.is_empty() {
            m.extract_seconds_per_page.observe(extract_s / pages.pages.len() as f64);
        }
        for (page, why) in &pages.failed_pages {
            warn!(%run_id, document_id = %id, key, page, reason = %why, "page text could not be extracted");
        }
        let doc = DocumentText::from_pages(&pages.pages);
        let input = self.input.clone();
        let text = doc.text.clone();
        let t1 = Instant::now();
        let prepared =
            tokio::task::spawn_blocking(move || input.prepare(&text)).await.expect("tokenizer task panicked");
        m.stage("tokenize", t1.elapsed().as_secs_f64());
        let prepare::Prepared { n_tokens, chunks, segments } = match prepared {
            Ok(p) => p,
            Err(e) => return Ok(Err(DocFailure::permanent("tokenize", e.to_string()))),
        };
        if n_tokens == 0 {
            let why = if pages.failed_pages.is_empty() {
                format!(
                    "no text layer: {} page(s) without extractable text (scanned or image-only PDF?)",
                    pages.pages.len()
                )
            } else {
                format!(
                    "no text extracted: {} of {} page(s) failed, first: {}",
                    pages.failed_pages.len(),
                    pages.pages.len(),
                    pages.failed_pages[0].1
                )
            };
            return Ok(Err(DocFailure::permanent("extract", why)));
        }
        if n_tokens > self.cfg.max_tokens {
            return Ok(Err(DocFailure::permanent(
                "tokenize",
                format!("{n_tokens} tokens, over the limit of {} (max_tokens)", self.cfg.max_tokens),
            )));
        }
        self.store_text(id, generation, &doc, &segments, n_tokens, chunks.len(), extract_s).await?;
        let count = chunks.len() as u32;
        let published_ms = messages::now_ms();
        let tasks: Vec<ChunkTask> = chunks
            .into_iter()
            .map(|p| {
                let span = |r: &std::ops::Range<usize>| [r.start as u32, r.end as u32];
                ChunkTask {
                    schema: SCHEMA_VERSION,
                    meta: ChunkMeta {
                        run_id,
                        document_id: id,
                        generation,
                        index: p.chunk.index as u32,
                        count,
                        tokens: span(&p.chunk.tokens),
                        owned_tokens: span(&p.chunk.owned),
                        chars: span(&p.chunk.chars),
                        owned_chars: span(&p.chunk.owned_chars),
                    },
                    input_ids: p.input_ids,
                    segments: p.segments,
                    published_ms,
                }
            })
            .collect();
        let t2 = Instant::now();
        self.publisher.publish_all(&self.topology.chunks(), &tasks).await?;
        m.stage("publish", t2.elapsed().as_secs_f64());
        info!(%run_id, document_id = %id, key, pages = doc.pages.len(), tokens = n_tokens, chunks = count,
              seconds = t0.elapsed().as_secs_f64(), "document queued");
        Ok(Ok(tasks.len()))
    }

    /// Insert or reset the document row; a re-ingest starts a new generation and removes
    /// the previous generation's pages and chunks in the same transaction.
    async fn upsert_document(
        &self,
        run_id: Uuid,
        bucket: &str,
        obj: &s3::ObjectInfo,
        content: Option<(&str, usize)>,
    ) -> Result<(Uuid, i32), IngestError> {
        let what = || format!("recording s3://{bucket}/{}", obj.key);
        let mut tx = self.pool.begin().await.map_err(db(what()))?;
        let (id, generation): (Uuid, i32) = sqlx::query_as(
            "INSERT INTO documents (id, run_id, bucket, key, etag, sha256, bytes, status)
             VALUES ($1, $2, $3, $4, $5, $6, $7, 'extracting')
             ON CONFLICT (bucket, key) DO UPDATE SET
               run_id = EXCLUDED.run_id, etag = EXCLUDED.etag, sha256 = EXCLUDED.sha256, bytes = EXCLUDED.bytes,
               status = 'extracting', error = NULL, generation = documents.generation + 1, pages = NULL,
               token_count = NULL, chunk_count = NULL, chunks_done = 0, text = NULL, embedding = NULL, done_at = NULL,
               ingest_started_at = now(), extracted_at = NULL, extract_seconds = NULL, updated_at = now()
             RETURNING id, generation",
        )
        .bind(Uuid::now_v7())
        .bind(run_id)
        .bind(bucket)
        .bind(&obj.key)
        .bind(&obj.etag)
        .bind(content.map(|c| c.0))
        .bind(content.map(|c| c.1 as i64).unwrap_or(obj.size as i64))
        .fetch_one(&mut *tx)
        .await
        .map_err(db(what()))?;
        for sql in [
            "DELETE FROM pages WHERE document_id = $1",
            "DELETE FROM chunks WHERE document_id = $1",
            "DELETE FROM segments WHERE document_id = $1",
            "DELETE FROM document_labels WHERE document_id = $1",
        ] {
            sqlx::query(sql).bind(id).execute(&mut *tx).await.map_err(db(what()))?;
        }
        tx.commit().await.map_err(db(what()))?;
        Ok((id, generation))
    }

    /// Pages, text and the chunk count, then status `embedding` — before any chunk is published,
    /// so the aggregator always knows how many chunks make the document complete.
    async fn store_text(
        &self,
        id: Uuid,
        generation: i32,
        doc: &DocumentText,
        segments: &[prepare::Segment],
        n_tokens: usize,
        n_chunks: usize,
        extract_seconds: f64,
    ) -> Result<(), IngestError> {
        let what = || format!("storing pages of document {id}");
        let mut tx = self.pool.begin().await.map_err(db(what()))?;
        let page_no: Vec<i32> = (1..=doc.pages.len() as i32).collect();
        let starts: Vec<i32> = doc.pages.iter().map(|p| p.start as i32).collect();
        let ends: Vec<i32> = doc.pages.iter().map(|p| p.end as i32).collect();
        sqlx::query("INSERT INTO pages (document_id, page_no, char_start, char_end) SELECT $1, * FROM UNNEST($2::int[], $3::int[], $4::int[])")
            .bind(id)
            .bind(&page_no)
            .bind(&starts)
            .bind(&ends)
            .execute(&mut *tx)
            .await
            .map_err(db(what()))?;
        let col = |f: &dyn Fn(&prepare::Segment) -> usize| segments.iter().map(|s| f(s) as i32).collect::<Vec<i32>>();
        let pages: Vec<_> = segments.iter().map(|s| doc.pages_of(&s.chars)).collect();
        sqlx::query(
            "INSERT INTO segments (document_id, segment_index, char_start, char_end, token_start, token_end, page_start, page_end, terms)
             SELECT $1, i, cs, ce, ts, te, ps, pe, terms::int[]
             FROM UNNEST($2::int[], $3::int[], $4::int[], $5::int[], $6::int[], $7::int[], $8::int[], $9::text[])
                  AS u(i, cs, ce, ts, te, ps, pe, terms)",
        )
        .bind(id)
        .bind((0..segments.len() as i32).collect::<Vec<i32>>())
        .bind(col(&|s| s.chars.start))
        .bind(col(&|s| s.chars.end))
        .bind(col(&|s| s.tokens.start))
        .bind(col(&|s| s.tokens.end))
        .bind(pages.iter().map(|p| p.start as i32).collect::<Vec<i32>>())
        .bind(pages.iter().map(|p| p.end as i32 - 1).collect::<Vec<i32>>())
        .bind(segment_terms(&doc.text, segments.iter().map(|s| s.chars.clone())))
        .execute(&mut *tx)
        .await
        .map_err(db(what()))?;
        sqlx::query(
            "UPDATE documents SET text = $3, pages = $4, token_count = $5, chunk_count = $6, status = 'embedding',
                    extract_seconds = $7, extracted_at = now(), updated_at = now()
             WHERE id = $1 AND generation = $2",
        )
        .bind(id)
        .bind(generation)
        .bind(&doc.text)
        .bind(doc.pages.len() as i32)
        .bind(n_tokens as i32)
        .bind(n_chunks as i32)
        .bind(extract_seconds as f32)
        .execute(&mut *tx)
        .await
        .map_err(db(what()))?;
        tx.commit().await.map_err(db(what()))
    }

    async fn fail(
        &self,
        run_id: Uuid,
        id: Uuid,
        generation: i32,
        bucket: &str,
        key: &str,
        f: DocFailure,
    ) -> Result<(), IngestError> {
        warn!(%run_id, document_id = %id, key, stage = f.stage, error = %f.message, "document failed");
        let what = || format!("recording the failure of s3://{bucket}/{key}");
        let mut tx = self.pool.begin().await.map_err(db(what()))?;
        sqlx::query(
            "UPDATE documents SET status = 'failed', error = $3, updated_at = now() WHERE id = $1 AND generation = $2",
        )
        .bind(id)
        .bind(generation)
        .bind(format!("{}: {}", f.stage, f.message))
        .execute(&mut *tx)
        .await
        .map_err(db(what()))?;
        sqlx::query("INSERT INTO failures (run_id, document_id, bucket, key, stage, class, message, attempts) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)")
            .bind(run_id)
            .bind(id)
            .bind(bucket)
            .bind(key)
            .bind(f.stage)
            .bind(if f.retryable { "retryable" } else { "permanent" })
            .bind(&f.message)
            .bind(f.attempts as i32)
            .execute(&mut *tx)
            .await
            .map_err(db(what()))?;
        tx.commit().await.map_err(db(what()))?;
        metrics::get().failure(f.stage, if f.retryable { "retryable" } else { "permanent" });
        Ok(())
    }
}

/// Every segment's lexical terms ([`docpipe_chunker::segment::terms`] of its text, by character
/// range), as Postgres array literals.
pub fn segment_terms(text: &str, ranges: impl Iterator<Item = std::ops::Range<usize>>) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    ranges
        .map(|r| {
            let t: String = chars[r.start.min(chars.len())..r.end.min(chars.len())].iter().collect();
            let terms: Vec<String> = docpipe_chunker::segment::terms(&t).iter().map(|x| x.to_string()).collect();
            format!("{{{}}}", terms.join(","))
        })
        .collect()
}
