//! One object of a run: download, record, extract, tokenize and cut, store, publish — or fail
//! the document with its reason.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use backon::Retryable;
use docpipe_contract::messages::{self, ChunkTask};
use docpipe_contract::status::{Failure, FailureClass, Stage};
use docpipe_ops::metrics;
use docpipe_store::documents::{self as db, ObjectRow, SegmentRow};
use docpipe_store::failures::{record_failure, DocumentRef};
use docpipe_text::extract::Pages;
use docpipe_text::ocr::OcrMode;
use docpipe_text::prepare::{DocumentText, Prepared, TaskIds};
use sha2::{Digest, Sha256};
use tracing::{info, warn};
use uuid::Uuid;

use crate::{s3, IngestError, Ingestor};

pub(crate) enum Outcome {
    Queued { chunks: usize },
    Skipped,
    Failed,
}

/// A document being ingested: which generation of which object, in which run.
struct Doc<'a> {
    run_id: Uuid,
    id: Uuid,
    generation: i32,
    key: &'a str,
}

impl Ingestor {
    pub(crate) async fn ingest_object(
        &self,
        run_id: Uuid,
        bucket: &str,
        obj: s3::ObjectInfo,
    ) -> Result<Outcome, IngestError> {
        let key = obj.key.as_str();
        let listed = ObjectRow { bucket, key, etag: obj.etag.as_deref(), bytes: obj.size, sha256: None };
        if obj.size > self.cfg.max_pdf_bytes {
            let msg = format!("{} bytes, over the limit of {} (max_pdf_bytes)", obj.size, self.cfg.max_pdf_bytes);
            return self.fail_new(run_id, &listed, Failure::permanent(Stage::Fetch, msg)).await;
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
            Ok(b) => b,
            Err(e) => {
                let attempts = attempts.load(Ordering::Relaxed);
                let f = Failure {
                    stage: Stage::Fetch,
                    class: FailureClass::of(e.is_retryable()),
                    message: e.to_string(),
                    attempts,
                };
                return self.fail_new(run_id, &listed, f).await;
            }
        };
        metrics::get().stage("fetch", fetch_started.elapsed().as_secs_f64());
        let sha = hex::encode(Sha256::digest(&pdf));
        if let Some(id) = db::unchanged_done(&self.pool, bucket, key, &sha).await? {
            info!(%run_id, document_id = %id, key, "unchanged and done, skipped");
            return Ok(Outcome::Skipped);
        }
        let row = ObjectRow { bytes: pdf.len() as u64, sha256: Some(sha.as_str()), ..listed };
        let (id, generation) = db::upsert_document(&self.pool, run_id, &row).await?;
        let doc = Doc { run_id, id, generation, key };
        match self.process(&doc, &pdf).await? {
            Ok(chunks) => Ok(Outcome::Queued { chunks }),
            Err(f) => self.fail(&doc, f).await,
        }
    }

    /// Record a document that failed before its content was read, and fail it.
    async fn fail_new(&self, run_id: Uuid, row: &ObjectRow<'_>, f: Failure) -> Result<Outcome, IngestError> {
        let (id, generation) = db::upsert_document(&self.pool, run_id, row).await?;
        self.fail(&Doc { run_id, id, generation, key: row.key }, f).await
    }

    async fn fail(&self, doc: &Doc<'_>, f: Failure) -> Result<Outcome, IngestError> {
        warn!(run_id = %doc.run_id, document_id = %doc.id, key = doc.key, stage = %f.stage, error = %f.message, "document failed");
        let at = DocumentRef { run_id: doc.run_id, document_id: doc.id, generation: doc.generation };
        record_failure(&self.pool, at, &f).await?;
        Ok(Outcome::Failed)
    }

    /// Extract, chunk, store and publish one document. The outer error aborts the run
    /// (infrastructure); the inner one fails only this document.
    async fn process(&self, doc: &Doc<'_>, pdf: &[u8]) -> Result<Result<usize, Failure>, IngestError> {
        let t0 = Instant::now();
        let pages = match self.extract(doc, pdf).await {
            Ok(p) => p,
            Err(f) => return Ok(Err(f)),
        };
        let extract_s = t0.elapsed().as_secs_f64();
        let text = DocumentText::from_pages(&pages.pages);
        let prepared = match self.prepare(&text, &pages).await {
            Ok(p) => p,
            Err(f) => return Ok(Err(f)),
        };
        let segments: Vec<SegmentRow> = {
            let terms = docpipe_chunker::segment::terms_of_ranges(
                &text.text,
                prepared.segments.iter().map(|s| s.chars.clone()),
            );
            prepared
                .segments
                .iter()
                .zip(terms)
                .map(|(s, terms)| SegmentRow {
                    chars: s.chars.clone(),
                    tokens: s.tokens.clone(),
                    pages: text.pages_of(&s.chars),
                    terms,
                })
                .collect()
        };
        let ocr: Vec<Option<f32>> = pages.ocr.iter().map(|r| r.map(|r| r.confidence)).collect();
        let warning = self.warning(&pages);
        let rows = db::DocumentText {
            text: &text.text,
            pages: &text.pages,
            ocr: &ocr,
            ocr_seconds: pages.ocr_seconds,
            ocr_confidence: pages.ocr_confidence(),
            warning: warning.as_deref(),
            segments: &segments,
            tokens: prepared.n_tokens,
            chunks: prepared.chunks.len(),
            extract_seconds: extract_s,
        };
        match db::store_text(&self.pool, doc.id, doc.generation, &rows).await {
            Ok(()) => {}
            // the document's own data does not fit (a count past a Postgres integer): fail it
            Err(e) if e.is_data_error() => return Ok(Err(Failure::permanent(Stage::Store, e.to_string()))),
            Err(e) => return Err(e.into()),
        }
        let count = self.publish(doc, prepared).await?;
        info!(run_id = %doc.run_id, document_id = %doc.id, key = doc.key, pages = text.pages.len(), tokens = rows.tokens, chunks = count,
              seconds = t0.elapsed().as_secs_f64(), "document queued");
        Ok(Ok(count))
    }

    /// Pages of text, from the isolated extraction child.
    async fn extract(&self, doc: &Doc<'_>, pdf: &[u8]) -> Result<Pages, Failure> {
        let t0 = Instant::now();
        let pages = self.extractor.extract(pdf).await.map_err(|e| Failure {
            stage: Stage::Extract,
            class: FailureClass::of(e.is_retryable()),
            message: e.to_string(),
            attempts: 1,
        })?;
        let m = metrics::get();
        let secs = t0.elapsed().as_secs_f64();
        m.stage("extract", secs);
        m.pages_extracted.inc_by(pages.pages.len() as u64);
        if !pages.pages.is_empty() {
            m.extract_seconds_per_page.observe(secs / pages.pages.len() as f64);
        }
        for (page, why) in &pages.failed_pages {
            warn!(run_id = %doc.run_id, document_id = %doc.id, key = doc.key, page, reason = %why, "page text could not be extracted");
        }
        let read = pages.ocr_pages();
        if pages.ocr_seconds > 0.0 {
            m.stage("ocr", pages.ocr_seconds);
            for r in pages.ocr.iter().flatten() {
                m.ocr_seconds_per_page.observe(r.seconds);
            }
            m.ocr_pages.get_or_create(&vec![("outcome", "used".to_string())]).inc_by(read as u64);
            m.ocr_pages
                .get_or_create(&vec![("outcome", "discarded".to_string())])
                .inc_by(pages.ocr_discarded.len() as u64);
            m.ocr_pages.get_or_create(&vec![("outcome", "failed".to_string())]).inc_by(pages.ocr_failed as u64);
            info!(run_id = %doc.run_id, document_id = %doc.id, key = doc.key, pages_used = read,
                  pages_discarded = pages.ocr_discarded.len(), pages_failed = pages.ocr_failed, confidence = pages.ocr_confidence().unwrap_or(0.0),
                  seconds = pages.ocr_seconds, "OCR finished");
        }
        for (page, why) in &pages.ocr_discarded {
            info!(run_id = %doc.run_id, document_id = %doc.id, key = doc.key, page, reason = %why, "OCR text not used");
        }
        Ok(pages)
    }

    /// What a reader of the results should know about this document's text, if anything: a
    /// low OCR confidence, pages left without text.
    fn warning(&self, pages: &Pages) -> Option<String> {
        let mut parts = Vec::new();
        let below = self.cfg.ocr.flag_below;
        if let Some(confidence) = pages.ocr_confidence().filter(|c| *c < below) {
            parts.push(format!(
                "low OCR confidence: {confidence:.0} (below {below:.0}) on {} page(s) read by OCR; check the text",
                pages.ocr_pages()
            ));
        }
        if let Some((page, why)) = pages.failed_pages.first() {
            parts.push(format!("{} page(s) without text, page {page}: {why}", pages.failed_pages.len()));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// Tokens, chunks and segments, off the async runtime; a document without text or over the
    /// token limit fails here.
    async fn prepare(&self, text: &DocumentText, pages: &Pages) -> Result<Prepared, Failure> {
        let (input, owned) = (self.input.clone(), text.text.clone());
        let t0 = Instant::now();
        let prepared = tokio::task::spawn_blocking(move || input.prepare(&owned))
            .await
            .map_err(|e| Failure::permanent(Stage::Tokenize, format!("the tokenizer stopped: {e}")))?
            .map_err(|e| Failure::permanent(Stage::Tokenize, e.to_string()))?;
        metrics::get().stage("tokenize", t0.elapsed().as_secs_f64());
        if prepared.n_tokens == 0 {
            let n = pages.pages.len();
            let why = match (pages.failed_pages.first(), pages.ocr_discarded.first()) {
                (None, None) if self.cfg.ocr.mode == OcrMode::Off => format!(
                    "no text layer: {n} page(s) without extractable text (scanned or image-only PDF? OCR is off: --ocr auto reads scans)"
                ),
                (None, Some((_, why))) => format!(
                    "no text: {n} page(s) without a text layer, and OCR found no readable text on them (blank, or images without text?); page {}: {why}",
                    pages.ocr_discarded[0].0
                ),
                (None, None) => format!("no text layer: {n} page(s) without extractable text"),
                (Some((_, first)), ocr) => format!(
                    "no text extracted: {} of {n} page(s) failed, first: {first}{}",
                    pages.failed_pages.len(),
                    match ocr {
                        Some(_) => "; OCR found no readable text either",
                        None => "",
                    }
                ),
            };
            return Err(Failure::permanent(Stage::Extract, why));
        }
        if prepared.n_tokens > self.cfg.max_tokens {
            let why = format!("{} tokens, over the limit of {} (max_tokens)", prepared.n_tokens, self.cfg.max_tokens);
            return Err(Failure::permanent(Stage::Tokenize, why));
        }
        Ok(prepared)
    }

    /// One persistent message per chunk, confirmed by the broker.
    async fn publish(&self, doc: &Doc<'_>, prepared: Prepared) -> Result<usize, IngestError> {
        let count = prepared.chunks.len() as u32;
        let published_ms = messages::now_ms();
        let ids = TaskIds { run_id: doc.run_id, document_id: doc.id, generation: doc.generation, count, published_ms };
        let tasks: Vec<ChunkTask> = prepared.chunks.into_iter().map(|p| p.into_task(ids)).collect();
        let t0 = Instant::now();
        self.publisher.publish_all(&self.topology.chunks(), &tasks).await?;
        metrics::get().stage("publish", t0.elapsed().as_secs_f64());
        Ok(tasks.len())
    }
}
