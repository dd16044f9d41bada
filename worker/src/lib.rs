//! **worker** — batched prefill of chunks through the embedding model, in libtorch.
//!
//! Three stages run concurrently so the model never waits on the broker:
//! ```text
//! RabbitMQ chunks ─► assemble batch ─► model thread ─► publish results ─► ack chunks
//!                    (token budget,    (one batch      (confirm first,
//!                     max wait)         at a time)      then ack)
//! ```
//! A chunk is acknowledged only after its result is confirmed by the broker, so a crash at
//! any point redelivers it (at-least-once; the aggregator's writes are idempotent). A message
//! that cannot be decoded is rejected without requeue and dead-lettered. A batch that fails
//! as a whole (out of memory) is split and retried; a chunk the model rejects on its own
//! becomes a `Failed` result, so its document ends `failed` with the reason; a single chunk
//! that fails for other reasons is requeued (and dead-lettered after the delivery limit).
//!
//! One chunk pass gives the chunk embedding and every segment's contextual (late-chunked)
//! embedding; with `standalone_segments`, a second pass over short sequences embeds each
//! segment the chunk owns on its own, for clause labels (a segment that fails there keeps its
//! contextual embedding only).
//!
//! [`gemma3`] is the model, [`embedder`] the sentence-transformers pipeline around it,
//! [`flash`] the packed FlashAttention it uses on CUDA, [`device`] picks CPU or CUDA and the
//! precision.

pub mod cpu_geglu;
pub mod cpu_norm;
pub mod device;
pub mod embedder;
pub mod flash;
pub mod gemm_attention;
pub mod gemma3;
#[cfg(cpu_kernels)]
mod shim;

use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use docpipe_common::amqp::{self, AmqpError, Publisher, Topology};
use docpipe_common::messages::{
    self, BatchStats, ChunkOutcome, ChunkResult, ChunkTask, SegmentEmbedding, Span, SCHEMA_VERSION,
};
use docpipe_common::metrics::{self, Metrics};
use futures_util::StreamExt;
use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicRejectOptions};
use lapin::types::FieldTable;
use tokio::sync::{mpsc, watch};
use tracing::{debug, error, info, warn};

pub use embedder::{EmbedError, Precision, SentenceEmbedder};
pub use gemma3::AttentionImpl;

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Upper bound on the padded tokens (batch × longest) of one forward pass.
    pub max_batch_tokens: usize,
    /// How long to wait for more chunks once a batch has one.
    pub max_wait: Duration,
    /// Unacknowledged deliveries held from the broker (the next batches wait here).
    pub prefetch: u16,
    /// Also embed each owned segment on its own (see [`SegmentEmbedding::standalone`]); about
    /// as many tokens again through the model on contracts, in short sequences.
    pub standalone_segments: bool,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self { max_batch_tokens: 8192, max_wait: Duration::from_millis(75), prefetch: 32, standalone_segments: true }
    }
}

/// What a calibration pass measured, and the token budget derived from it.
#[derive(Debug, Clone, Copy)]
pub struct Calibration {
    /// Length of the calibration sequence (the longest a chunk can be).
    pub seq_len: usize,
    /// Peak memory of the pass above what was in use before it, per token.
    pub bytes_per_token: u64,
    /// Memory available to forward passes (free device memory, or the CPU's available memory
    /// within the cgroup limit), the calibration pass's own cache included.
    pub available: u64,
    /// Padded tokens per forward pass: `fraction` of `available` over `bytes_per_token`,
    /// whole sequences, at least one and at most `cap`.
    pub budget: usize,
}

/// Derive the per-pass token budget from the memory available. After a warm-up, two forward
/// passes over synthetic sequences of `seq_len` tokens (one, then three of them) measure what
/// one more sequence costs at that length — the most per token, as global attention grows with length
/// — as the difference of their peaks, so memory the allocator already holds cancels out.
/// A budget of `available × fraction / bytes_per_token` padded tokens then keeps a pass of
/// full-length chunks within `fraction` of the memory. It is an estimate: a pass that still
/// runs out of memory is split and retried (see [`run`]).
pub fn calibrate_budget(
    model: &SentenceEmbedder,
    seq_len: usize,
    fraction: f64,
    cap: usize,
) -> Result<Calibration, EmbedError> {
    let device = model.device();
    let seq: Vec<u32> = (0..seq_len).map(|t| 1000 + ((t * 7919) % 100_000) as u32).collect();
    // memory a pass of n sequences adds to what is in use when it starts
    let growth = |n: usize| -> Result<u64, EmbedError> {
        device::reset_peak(device);
        let before = device::in_use(device).unwrap_or(0);
        model.embed(&vec![seq.as_slice(); n])?;
        Ok(device::peak_since_reset(device).unwrap_or(before).saturating_sub(before))
    };
    model.embed(&[seq.as_slice()])?; // one-time allocations (kernels, caches) out of the way
    let (one, three) = (growth(1)?, growth(3)?);
    let per_seq = (three.saturating_sub(one) / 2).max(1);
    let bytes_per_token = per_seq.div_ceil(seq_len as u64).max(1);
    // CUDA: the allocator keeps what the passes needed cached for the next ones
    let cached = if device.is_cuda() { 3 * per_seq } else { 0 };
    let available = device::memory_available(device).map(|a| a + cached).unwrap_or(0);
    let fit = (available as f64 * fraction / bytes_per_token as f64) as usize;
    let budget = (fit / seq_len * seq_len).clamp(seq_len, cap.max(seq_len));
    Ok(Calibration { seq_len, bytes_per_token, available, budget })
}

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error(transparent)]
    Amqp(#[from] AmqpError),
    #[error("RabbitMQ consumer failed: {0}")]
    Consume(lapin::Error),
    #[error("model thread stopped")]
    ModelGone,
    #[error("the broker closed the consumer (connection lost?)")]
    ConsumerClosed,
}

struct Job {
    delivery: Delivery,
    task: ChunkTask,
}

struct Done {
    job: Job,
    result: Embedding,
}

/// Where a chunk's segments sit in its model input: for each, the document tokens pooled
/// (the segment's part inside the chunk) and those tokens' input positions.
fn segment_positions(task: &ChunkTask) -> Result<Vec<(Range<usize>, Range<usize>)>, ChunkError> {
    let m = &task.meta;
    let (start, end) = (m.tokens[0] as usize, m.tokens[1] as usize);
    // input = <bos> + prompt + the chunk's tokens + <eos>
    let Some(offset) = task.input_ids.len().checked_sub(1 + end.saturating_sub(start)).filter(|o| *o >= 1) else {
        return Err(ChunkError {
            permanent: true,
            message: format!("chunk covers tokens {start}..{end} but has only {} input ids", task.input_ids.len()),
        });
    };
    let mut out = Vec::with_capacity(task.segments.len());
    for seg in &task.segments {
        let pooled = (seg.tokens[0] as usize).max(start)..(seg.tokens[1] as usize).min(end);
        if pooled.is_empty() {
            return Err(ChunkError {
                permanent: true,
                message: format!(
                    "segment {} (tokens {:?}) does not overlap the chunk's tokens {start}..{end}",
                    seg.index, seg.tokens
                ),
            });
        }
        let positions = offset + pooled.start - start..offset + pooled.end - start;
        out.push((pooled, positions));
    }
    Ok(out)
}

/// Why one chunk (alone, after any batch splitting) could not be embedded.
struct ChunkError {
    /// The chunk itself is at fault (bad token id, too long): retrying cannot help.
    permanent: bool,
    message: String,
}

impl From<EmbedError> for ChunkError {
    fn from(e: EmbedError) -> Self {
        let permanent = matches!(
            e,
            EmbedError::BadToken { .. } | EmbedError::TooLong { .. } | EmbedError::Empty | EmbedError::BadSpan { .. }
        );
        Self { permanent, message: e.to_string() }
    }
}

/// Consume `topology.chunks()` until `shutdown` turns true, then finish what is in flight.
pub async fn run(
    conn: &lapin::Connection,
    topology: &Topology,
    model: Arc<Mutex<SentenceEmbedder>>,
    cfg: WorkerConfig,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), WorkerError> {
    let ch = amqp::consumer_channel(conn, cfg.prefetch).await?;
    let publisher = Publisher::new(conn).await?;
    let queue = topology.chunks();
    let mut consumer = ch
        .basic_consume(
            queue.as_str().into(),
            "docpipe-worker".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(WorkerError::Consume)?;
    let (label, device) = {
        let m = model.lock().map_err(|_| WorkerError::ModelGone)?;
        (m.label(), m.device())
    };
    info!(queue, model = %label, max_batch_tokens = cfg.max_batch_tokens, max_wait_ms = cfg.max_wait.as_millis() as u64, "worker consuming");

    let (batch_tx, mut batch_rx) = mpsc::channel::<Vec<Job>>(1);
    let (done_tx, mut done_rx) = mpsc::channel::<Vec<Done>>(2);

    // Model thread: one batch at a time, off the async runtime.
    let model_thread = {
        let (max_tokens, standalone) = (cfg.max_batch_tokens, cfg.standalone_segments);
        std::thread::Builder::new()
            .name("docpipe-model".into())
            .spawn(move || {
                while let Some(batch) = batch_rx.blocking_recv() {
                    // a panic inside libtorch poisons the lock: stop, the caller reports it
                    let Ok(model) = model.lock() else { break };
                    let mut done = embed_batch(&model, batch, max_tokens);
                    if standalone {
                        embed_standalone(&model, &mut done, max_tokens);
                    }
                    if let Some(used) = device::memory_in_use(device) {
                        let peak = &metrics::get().device_memory_peak_bytes;
                        if used as i64 > peak.get() {
                            peak.set(used as i64);
                        }
                    }
                    drop(model);
                    if done_tx.blocking_send(done).is_err() {
                        break;
                    }
                }
            })
            .expect("spawn model thread")
    };

    // Publisher: results first, then the acks of their chunks. A chunk the model rejects on
    // its own becomes a `Failed` result (its document fails with the reason); a transient
    // failure (out of memory on a single chunk) is requeued, and after the queue's delivery
    // limit it is dead-lettered, which the aggregator also turns into a failed document.
    let results_queue = topology.results();
    let mut publish = tokio::spawn(async move {
        while let Some(done) = done_rx.recv().await {
            let mut results = Vec::with_capacity(done.len());
            let mut acks = Vec::with_capacity(done.len());
            let metrics = metrics::get();
            for d in done {
                let m = &d.job.task.meta;
                let (outcome, batch) = match d.result {
                    Ok(e) => {
                        Metrics::outcome(&metrics.chunks, "embedded");
                        (ChunkOutcome::Embedded { embedding: e.embedding, segments: e.segments }, Some(e.batch))
                    }
                    Err(e) if e.permanent => {
                        error!(run_id = %m.run_id, document_id = %m.document_id, chunk = m.index, error = %e.message, "chunk rejected by the model");
                        Metrics::outcome(&metrics.chunks, "rejected");
                        (ChunkOutcome::Failed { error: e.message }, None)
                    }
                    Err(e) => {
                        warn!(run_id = %m.run_id, document_id = %m.document_id, chunk = m.index, error = %e.message, "chunk failed; requeueing it");
                        Metrics::outcome(&metrics.chunks, "requeued");
                        d.job
                            .delivery
                            .nack(BasicNackOptions { requeue: true, ..Default::default() })
                            .await
                            .map_err(WorkerError::Consume)?;
                        continue;
                    }
                };
                results.push(ChunkResult {
                    schema: SCHEMA_VERSION,
                    meta: m.clone(),
                    model: label.clone(),
                    input_tokens: d.job.task.input_ids.len() as u32,
                    outcome,
                    batch,
                });
                acks.push(d.job.delivery);
            }
            publisher.publish_all(&results_queue, &results).await?;
            for delivery in acks {
                delivery.ack(BasicAckOptions::default()).await.map_err(WorkerError::Consume)?;
            }
        }
        Ok::<(), WorkerError>(())
    });

    // Assembler: fill a token budget, waiting at most max_wait after the first chunk.
    let mut stopping = false;
    while !stopping {
        let first = tokio::select! {
            d = consumer.next() => d,
            _ = shutdown.changed() => { stopping = true; None }
            // the publisher only ends early on an error: stop taking work and report it
            r = &mut publish => return Err(r.map_err(|_| WorkerError::ModelGone)?.err().unwrap_or(WorkerError::ModelGone)),
        };
        let Some(first) = first else {
            if stopping {
                break;
            }
            return Err(WorkerError::ConsumerClosed);
        };
        let mut batch = Vec::new();
        let mut tokens = 0usize;
        if let Some(job) = decode(first.map_err(WorkerError::Consume)?).await? {
            tokens += job.task.input_ids.len();
            batch.push(job);
        }
        let deadline = tokio::time::Instant::now() + cfg.max_wait;
        while tokens < cfg.max_batch_tokens {
            let next = tokio::select! {
                d = tokio::time::timeout_at(deadline, consumer.next()) => match d { Ok(d) => d, Err(_) => break },
                _ = shutdown.changed() => { stopping = true; break }
            };
            let Some(d) = next else { break };
            if let Some(job) = decode(d.map_err(WorkerError::Consume)?).await? {
                tokens += job.task.input_ids.len();
                batch.push(job);
            }
        }
        if !batch.is_empty() {
            debug!(chunks = batch.len(), tokens, "batch assembled");
            if batch_tx.send(batch).await.is_err() {
                break; // the model thread stopped: the publisher's result says why
            }
        }
    }
    // Stop taking deliveries; what was fetched but not batched is requeued by the broker when
    // the channel closes. Finish the batches in flight.
    drop(batch_tx);
    let published = publish.await.map_err(|_| WorkerError::ModelGone)?;
    let _ = model_thread.join();
    published?;
    let _ = ch.close(200, "worker stopping".into()).await;
    info!("worker stopped");
    Ok(())
}

/// Parse a delivery; a poison message is rejected (dead-lettered) and yields `None`.
async fn decode(delivery: Delivery) -> Result<Option<Job>, WorkerError> {
    match serde_json::from_slice::<ChunkTask>(&delivery.data) {
        Ok(task) if task.schema == SCHEMA_VERSION && !task.input_ids.is_empty() => Ok(Some(Job { delivery, task })),
        Ok(task) => {
            warn!(schema = task.schema, document_id = %task.meta.document_id, "chunk message with unsupported schema or no tokens; dead-lettering it");
            delivery.reject(BasicRejectOptions { requeue: false }).await.map_err(WorkerError::Consume)?;
            Ok(None)
        }
        Err(e) => {
            warn!(error = %e, bytes = delivery.data.len(), "undecodable chunk message; dead-lettering it");
            delivery.reject(BasicRejectOptions { requeue: false }).await.map_err(WorkerError::Consume)?;
            Ok(None)
        }
    }
}

/// Embed a batch: sort by length, cut into padded micro-batches within the token budget, and
/// split any micro-batch that fails (out of memory) until single chunks remain.
fn embed_batch(model: &SentenceEmbedder, mut jobs: Vec<Job>, max_tokens: usize) -> Vec<Done> {
    jobs.sort_by_key(|j| j.task.input_ids.len());
    let started = Instant::now();
    let total: usize = jobs.iter().map(|j| j.task.input_ids.len()).sum();
    let mut results: Vec<Embedding> = Vec::with_capacity(jobs.len());
    let mut start = 0;
    while start < jobs.len() {
        // longest-so-far × count must stay within the budget (sorted, so the last is longest)
        let mut end = start + 1;
        while end < jobs.len() && jobs[end].task.input_ids.len() * (end - start + 1) <= max_tokens {
            end += 1;
        }
        // a chunk whose segment ranges do not fit its input is rejected alone
        let mut inputs = Vec::with_capacity(end - start);
        let mut slots = Vec::with_capacity(end - start);
        for job in &jobs[start..end] {
            match segment_positions(&job.task) {
                Ok(p) => {
                    slots.push(None);
                    inputs.push(Input { task: &job.task, spans: p });
                }
                Err(e) => slots.push(Some(Err(e))),
            }
        }
        let mut embedded = embed_or_split(model, &inputs).into_iter();
        results.extend(slots.into_iter().map(|slot| match slot {
            Some(err) => err,
            None => {
                embedded.next().unwrap_or_else(|| Err(ChunkError { permanent: false, message: "lost in batch".into() }))
            }
        }));
        start = end;
    }
    let secs = started.elapsed().as_secs_f64();
    info!(
        chunks = jobs.len(),
        tokens = total,
        seconds = secs,
        tokens_per_s = total as f64 / secs.max(1e-9),
        "batch embedded"
    );
    jobs.into_iter().zip(results).map(|(job, result)| Done { job, result }).collect()
}

/// Embed each owned segment of the embedded chunks on its own ([`standalone_input`]), with
/// [`embed_by_length`]; a segment that fails alone keeps no standalone embedding (its labels
/// then score the contextual one), so no chunk is lost to this pass.
fn embed_standalone(model: &SentenceEmbedder, done: &mut [Done], max_tokens: usize) {
    // (chunk, segment) and its input ids
    let mut slots: Vec<(usize, usize)> = Vec::new();
    let mut seqs: Vec<Vec<u32>> = Vec::new();
    for (c, d) in done.iter().enumerate() {
        let Ok(e) = &d.result else { continue };
        for (k, seg) in e.segments.iter().enumerate() {
            if let Some(ids) = standalone_input(&d.job.task, seg.tokens, seg.pooled) {
                slots.push((c, k));
                seqs.push(ids);
            }
        }
    }
    if seqs.is_empty() {
        return;
    }
    let started = Instant::now();
    let refs: Vec<&[u32]> = seqs.iter().map(|s| s.as_slice()).collect();
    for (((c, k), ids), e) in slots.iter().zip(&seqs).zip(embed_by_length(model, &refs, max_tokens)) {
        let meta = &done[*c].job.task.meta;
        let (document_id, chunk) = (meta.document_id, meta.index);
        let Ok(r) = &mut done[*c].result else { continue };
        match e {
            Ok(e) => r.segments[*k].standalone = Some(e),
            Err(error) => warn!(
                %document_id, chunk, segment = r.segments[*k].index, tokens = ids.len(), %error,
                "a segment could not be embedded on its own; it keeps its contextual embedding only"
            ),
        }
    }
    let tokens: usize = seqs.iter().map(|s| s.len()).sum();
    debug!(segments = seqs.len(), tokens, seconds = started.elapsed().as_secs_f64(), "segments embedded on their own");
}

/// Sentence embeddings of many sequences, in input order: sorted by length, cut into padded
/// micro-batches of at most `max_tokens` (count × longest), and a micro-batch that fails (out
/// of memory) split in two until a sequence fails alone.
pub fn embed_by_length(
    model: &SentenceEmbedder,
    seqs: &[&[u32]],
    max_tokens: usize,
) -> Vec<Result<Vec<f32>, EmbedError>> {
    let mut order: Vec<usize> = (0..seqs.len()).collect();
    order.sort_by_key(|&i| seqs[i].len());
    let mut out: Vec<(usize, Result<Vec<f32>, EmbedError>)> = Vec::with_capacity(seqs.len());
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && seqs[order[end]].len() * (end - start + 1) <= max_tokens {
            end += 1;
        }
        let batch: Vec<&[u32]> = order[start..end].iter().map(|&i| seqs[i]).collect();
        out.extend(order[start..end].iter().copied().zip(embed_or_halve(model, &batch)));
        start = end;
    }
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}

fn embed_or_halve(model: &SentenceEmbedder, seqs: &[&[u32]]) -> Vec<Result<Vec<f32>, EmbedError>> {
    match model.embed(seqs) {
        Ok(v) => v.into_iter().map(Ok).collect(),
        Err(e) if seqs.len() > 1 => {
            warn!(error = %e, sequences = seqs.len(), "micro-batch failed; splitting it in two and retrying");
            let mid = seqs.len() / 2;
            let mut out = embed_or_halve(model, &seqs[..mid]);
            out.extend(embed_or_halve(model, &seqs[mid..]));
            out
        }
        Err(e) => vec![Err(e)],
    }
}

/// The model input that embeds a segment on its own: the chunk input's head (`<bos>` and the
/// document prompt), the pooled document tokens, and its closing `<eos>`; `None` when the chunk
/// does not own the segment (its middle token is outside the owned range, the aggregator's
/// rule) or the ranges do not fit the input.
fn standalone_input(task: &ChunkTask, tokens: Span, pooled: Span) -> Option<Vec<u32>> {
    let m = &task.meta;
    let (start, end) = (m.tokens[0] as usize, m.tokens[1] as usize);
    let owned = m.owned_tokens[0] as usize..m.owned_tokens[1] as usize;
    if !owned.contains(&docpipe_chunker::segment::midpoint(&(tokens[0] as usize..tokens[1] as usize))) {
        return None;
    }
    let head = task.input_ids.len().checked_sub(1 + end.checked_sub(start)?)?;
    let (a, b) = ((pooled[0] as usize).checked_sub(start)?, (pooled[1] as usize).checked_sub(start)?);
    let body = task.input_ids.get(head + a..head + b).filter(|b| !b.is_empty())?;
    let mut ids = Vec::with_capacity(head + body.len() + 1);
    ids.extend_from_slice(&task.input_ids[..head]);
    ids.extend_from_slice(body);
    ids.push(*task.input_ids.last()?);
    Some(ids)
}

/// A chunk's model input and its segments' (pooled tokens, input positions).
struct Input<'a> {
    task: &'a ChunkTask,
    spans: Vec<(Range<usize>, Range<usize>)>,
}

/// A chunk's embedding, its segments' and the forward pass that made them.
struct Embedded {
    embedding: Vec<f32>,
    segments: Vec<SegmentEmbedding>,
    batch: BatchStats,
}

/// A chunk's embeddings, or why it has none.
type Embedding = Result<Embedded, ChunkError>;

/// This worker's name in [`BatchStats`]: the host (pod) name.
fn worker_name() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        std::env::var("HOSTNAME")
            .ok()
            .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "unknown".into())
    })
}

fn embed_or_split(model: &SentenceEmbedder, inputs: &[Input]) -> Vec<Embedding> {
    let seqs: Vec<&[u32]> = inputs.iter().map(|i| i.task.input_ids.as_slice()).collect();
    let positions: Vec<Vec<Range<usize>>> =
        inputs.iter().map(|i| i.spans.iter().map(|(_, pos)| pos.clone()).collect()).collect();
    let spans: Vec<&[Range<usize>]> = positions.iter().map(|p| p.as_slice()).collect();
    let (started, started_ms) = (Instant::now(), messages::now_ms());
    let embedded = model.embed_with_spans(&seqs, &spans);
    let prefill = started.elapsed().as_secs_f64();
    match embedded {
        Ok(v) => {
            let pass = record_pass(&seqs, prefill);
            v.into_iter()
                .zip(inputs)
                .map(|((embedding, segs), input)| {
                    let segments = segs
                        .into_iter()
                        .zip(&input.task.segments)
                        .zip(&input.spans)
                        .map(|((embedding, seg), (pooled, _))| SegmentEmbedding {
                            index: seg.index,
                            tokens: seg.tokens,
                            pooled: [pooled.start as u32, pooled.end as u32],
                            embedding,
                            standalone: None,
                        })
                        .collect();
                    let published = input.task.published_ms;
                    let queue_wait_ms = if published > 0 { started_ms.saturating_sub(published) as f64 } else { 0.0 };
                    if published > 0 {
                        metrics::get().queue_wait_seconds.observe(queue_wait_ms / 1e3);
                    }
                    Ok(Embedded { embedding, segments, batch: BatchStats { queue_wait_ms, ..pass.clone() } })
                })
                .collect()
        }
        Err(e) if inputs.len() > 1 => {
            let lens: Vec<usize> = seqs.iter().map(|s| s.len()).collect();
            warn!(error = %e, chunks = inputs.len(), lengths = ?lens, "batch failed; splitting it in two and retrying");
            metrics::get().batch_splits.inc();
            let mid = inputs.len() / 2;
            let mut out = embed_or_split(model, &inputs[..mid]);
            out.extend(embed_or_split(model, &inputs[mid..]));
            out
        }
        Err(e) => vec![Err(e.into())],
    }
}

/// Record one successful forward pass in the metrics; its stats, without the per-chunk wait.
fn record_pass(seqs: &[&[u32]], prefill: f64) -> BatchStats {
    let tokens: usize = seqs.iter().map(|s| s.len()).sum();
    let padded = seqs.iter().map(|s| s.len()).max().unwrap_or(0) * seqs.len();
    let m = metrics::get();
    m.prefill_seconds.observe(prefill);
    m.batch_chunks.observe(seqs.len() as f64);
    m.batch_tokens.observe(tokens as f64);
    m.padding_ratio.observe(1.0 - tokens as f64 / padded.max(1) as f64);
    m.tokens.inc_by(tokens as u64);
    m.padded_tokens.inc_by(padded as u64);
    m.tokens_per_second.set(tokens as f64 / prefill.max(1e-9));
    BatchStats {
        id: uuid::Uuid::new_v4(),
        worker: worker_name().to_string(),
        chunks: seqs.len() as u32,
        tokens: tokens as u32,
        padded_tokens: padded as u32,
        prefill_ms: prefill * 1e3,
        queue_wait_ms: 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use docpipe_common::messages::ChunkMeta;

    /// A chunk over document tokens 100..110 owning 104..110, with a 2-token prompt: input
    /// `<bos> p p t100..t109 <eos>` where token `t` has id `t`.
    fn task() -> ChunkTask {
        let mut input_ids = vec![2, 7, 8];
        input_ids.extend(100..110);
        input_ids.push(1);
        ChunkTask {
            schema: SCHEMA_VERSION,
            meta: ChunkMeta {
                run_id: uuid::Uuid::nil(),
                document_id: uuid::Uuid::nil(),
                generation: 1,
                index: 1,
                count: 2,
                tokens: [100, 110],
                owned_tokens: [104, 110],
                chars: [0, 10],
                owned_chars: [4, 10],
            },
            input_ids,
            segments: vec![],
            published_ms: 0,
        }
    }

    #[test]
    fn standalone_input_is_head_segment_tokens_and_eos() {
        let t = task();
        // owned: middle token 106
        assert_eq!(standalone_input(&t, [105, 108], [105, 108]), Some(vec![2, 7, 8, 105, 106, 107, 1]));
        // reaching past the chunk: the pooled part only (middle token 109 is owned)
        assert_eq!(standalone_input(&t, [108, 111], [108, 110]), Some(vec![2, 7, 8, 108, 109, 1]));
        // middle token 101 belongs to the previous chunk
        assert_eq!(standalone_input(&t, [100, 103], [100, 103]), None);
        // ranges that do not fit the input
        assert_eq!(standalone_input(&t, [105, 108], [105, 120]), None);
        assert_eq!(standalone_input(&t, [105, 108], [90, 108]), None);
    }
}
