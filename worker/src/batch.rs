//! One batch through the model: the chunk pass (chunk and contextual segment embeddings, from
//! one forward pass per micro-batch) and the standalone pass (each owned segment on its own).
//! Generic over [`Backend`], so the packing, splitting and the rules for a chunk that fails
//! are tested with a fake model.

use std::ops::Range;
use std::time::Instant;

use docpipe_batching::{embed_by_length, pack, split_on_failure, Backend};
use docpipe_contract::layout::{segment_positions, standalone_input};
use docpipe_contract::messages::{self, BatchStats, ChunkTask, SegmentEmbedding};
use docpipe_ops::metrics;
use tracing::{debug, info, warn};

/// Why one chunk (alone, after any batch splitting) could not be embedded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkError {
    /// The chunk itself is at fault (bad token id, too long, ranges that do not fit):
    /// retrying cannot help.
    pub permanent: bool,
    pub message: String,
}

/// A chunk's embedding, its segments' and the forward pass that made them.
#[derive(Debug, Clone)]
pub struct Embedded {
    pub embedding: Vec<f32>,
    pub segments: Vec<SegmentEmbedding>,
    pub batch: BatchStats,
}

/// A chunk's embeddings, or why it has none.
pub type Embedding = Result<Embedded, ChunkError>;

/// A chunk's model input and its segments' (pooled tokens, input positions).
struct Input<'a> {
    task: &'a ChunkTask,
    spans: Vec<(Range<usize>, Range<usize>)>,
}

/// Embed the chunks of a batch, in the order given: sorted by length, cut into padded
/// micro-batches within `budget`, and a micro-batch that fails (out of memory) split until a
/// chunk fails alone. A chunk whose segment ranges do not fit its input is rejected alone.
pub fn embed_chunks<B: Backend>(model: &B, tasks: &[&ChunkTask], budget: usize) -> Vec<Embedding> {
    let mut order: Vec<usize> = (0..tasks.len()).collect();
    order.sort_by_key(|&i| tasks[i].input_ids.len());
    let lengths: Vec<usize> = order.iter().map(|&i| tasks[i].input_ids.len()).collect();
    let started = Instant::now();
    let mut out: Vec<(usize, Embedding)> = Vec::with_capacity(tasks.len());
    for batch in pack(&lengths, budget) {
        let mut inputs = Vec::with_capacity(batch.len());
        let mut slots = Vec::with_capacity(batch.len());
        for &i in &order[batch] {
            match segment_positions(tasks[i]) {
                Ok(spans) => inputs.push((i, Input { task: tasks[i], spans })),
                Err(e) => slots.push((i, Err(ChunkError { permanent: true, message: e.to_string() }))),
            }
        }
        let only: Vec<&Input> = inputs.iter().map(|(_, x)| x).collect();
        let embedded = split_on_failure(&only, &mut |x| forward(model, x), &mut |e, n| {
            warn!(error = %e, chunks = n, "batch failed; splitting it in two and retrying");
            metrics::get().batch_splits.inc();
        });
        let embedded = embedded.into_iter().map(|r| r.map_err(|e| chunk_error::<B>(&e)));
        out.extend(inputs.iter().map(|(i, _)| *i).zip(embedded));
        out.extend(slots);
    }
    let total: usize = lengths.iter().sum();
    let secs = started.elapsed().as_secs_f64();
    info!(
        chunks = tasks.len(),
        tokens = total,
        seconds = secs,
        tokens_per_s = total as f64 / secs.max(1e-9),
        "batch embedded"
    );
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, e)| e).collect()
}

fn chunk_error<B: Backend>(e: &B::Error) -> ChunkError {
    ChunkError { permanent: B::is_permanent(e), message: e.to_string() }
}

/// One forward pass over `inputs`: their chunk and segment embeddings and the pass's stats.
fn forward<B: Backend>(model: &B, inputs: &[&Input]) -> Result<Vec<Embedded>, B::Error> {
    let seqs: Vec<&[u32]> = inputs.iter().map(|i| i.task.input_ids.as_slice()).collect();
    let positions: Vec<Vec<Range<usize>>> =
        inputs.iter().map(|i| i.spans.iter().map(|(_, pos)| pos.clone()).collect()).collect();
    let spans: Vec<&[Range<usize>]> = positions.iter().map(|p| p.as_slice()).collect();
    let (started, started_ms) = (Instant::now(), messages::now_ms());
    let embedded = model.embed_with_spans(&seqs, &spans)?;
    let pass = record_pass(&seqs, started.elapsed().as_secs_f64());
    Ok(embedded
        .into_iter()
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
            Embedded { embedding, segments, batch: BatchStats { queue_wait_ms, ..pass.clone() } }
        })
        .collect())
}

/// Embed each owned segment of the embedded chunks on its own ([`standalone_input`]), with
/// [`embed_by_length`]; a segment that fails alone keeps no standalone embedding (its labels
/// then score the contextual one), so no chunk is lost to this pass.
pub fn embed_standalone<B: Backend>(model: &B, tasks: &[&ChunkTask], done: &mut [Embedding], budget: usize) {
    // (chunk, segment) and its input ids
    let mut slots: Vec<(usize, usize)> = Vec::new();
    let mut seqs: Vec<Vec<u32>> = Vec::new();
    for (c, (task, d)) in tasks.iter().zip(done.iter()).enumerate() {
        let Ok(e) = d else { continue };
        for (k, seg) in e.segments.iter().enumerate() {
            if let Some(ids) = standalone_input(task, seg.tokens, seg.pooled) {
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
    for (((c, k), ids), e) in slots.iter().zip(&seqs).zip(embed_by_length(model, &refs, budget)) {
        let meta = &tasks[*c].meta;
        let Ok(r) = &mut done[*c] else { continue };
        match e {
            Ok(e) => r.segments[*k].standalone = Some(e),
            Err(error) => warn!(
                document_id = %meta.document_id, chunk = meta.index, segment = r.segments[*k].index, tokens = ids.len(), %error,
                "a segment could not be embedded on its own; it keeps its contextual embedding only"
            ),
        }
    }
    let tokens: usize = seqs.iter().map(|s| s.len()).sum();
    debug!(segments = seqs.len(), tokens, seconds = started.elapsed().as_secs_f64(), "segments embedded on their own");
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
