//! One batch through the model: the chunk pass (chunk and contextual segment embeddings, from
//! one forward pass per micro-batch) and the standalone pass (each owned segment on its own).
//! Generic over [`Backend`], so the packing, splitting and the rules for a chunk that fails
//! are tested with a fake model.

use std::ops::Range;
use std::time::Instant;

use docpipe_batching::{embed_by_length, pack, split_on_failure, Backend};
use docpipe_contract::layout::{owns_segment, segment_positions, standalone_input};
use docpipe_contract::messages::{self, BatchStats, ChunkTask, SegmentEmbedding};
use docpipe_ops::metrics::{self, Metrics};
use tracing::{debug, info, warn};

use crate::Standalone;

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
        // one result per input; a backend that returned fewer leaves the rest to be retried
        let mut embedded = embedded.into_iter().map(|r| r.map_err(|e| chunk_error::<B>(&e)));
        for (i, _) in &inputs {
            let lost = || Err(ChunkError { permanent: false, message: "lost in batch".into() });
            out.push((*i, embedded.next().unwrap_or_else(lost)));
        }
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
                    standalone_skipped: false,
                })
                .collect();
            let published = input.task.published_ms;
            let queue_wait_ms = if published > 0 { started_ms.saturating_sub(published) as f64 } else { 0.0 };
            if published > 0 {
                metrics::get().queue_wait(queue_wait_ms / 1e3);
            }
            Embedded { embedding, segments, batch: BatchStats { queue_wait_ms, ..pass.clone() } }
        })
        .collect())
}

/// Embed owned segments of the embedded chunks on their own ([`standalone_input`]), those
/// `which` keeps, with [`embed_by_length`]; the others are marked `standalone_skipped`. A
/// segment that fails alone keeps no standalone embedding (its labels then score the
/// contextual one), so no chunk is lost to this pass.
pub fn embed_standalone<B: Backend>(
    model: &B,
    tasks: &[&ChunkTask],
    done: &mut [Embedding],
    budget: usize,
    which: &Standalone,
) {
    // (chunk, segment) and its input ids
    let mut slots: Vec<(usize, usize)> = Vec::new();
    let mut seqs: Vec<Vec<u32>> = Vec::new();
    let mut skipped = 0;
    for (c, (task, d)) in tasks.iter().zip(done.iter_mut()).enumerate() {
        let Ok(e) = d else { continue };
        for (k, seg) in e.segments.iter_mut().enumerate() {
            // only the segments this chunk owns, and the rule only for them; the input is
            // built only for those kept
            if !owns_segment(task, seg.tokens) {
                continue;
            }
            let keep = match which {
                Standalone::All => true,
                Standalone::Candidates(keeps) => keeps(seg.index, &seg.embedding),
                Standalone::Off => false,
            };
            if !keep {
                seg.standalone_skipped = true;
                skipped += 1;
            } else if let Some(ids) = standalone_input(task, seg.tokens, seg.pooled) {
                slots.push((c, k));
                seqs.push(ids);
            }
        }
    }
    let m = metrics::get();
    Metrics::outcomes(&m.standalone_segments, "skipped", skipped);
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
    Metrics::outcomes(&m.standalone_segments, "embedded", seqs.len() as u64);
    debug!(
        segments = seqs.len(),
        skipped,
        tokens,
        seconds = started.elapsed().as_secs_f64(),
        "segments embedded on their own"
    );
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

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use docpipe_contract::layout::InputLayout;
    use docpipe_contract::messages::{ChunkMeta, SegmentRef, SCHEMA_VERSION};

    use super::*;

    /// Embeds a sequence as [its length]; a pass over `limit` padded tokens fails (out of
    /// memory, not permanent); `drop_last` returns one row too few (a broken backend).
    struct Fake {
        limit: usize,
        drop_last: bool,
        passes: Cell<usize>,
    }

    #[derive(Debug)]
    struct Oom;
    impl std::fmt::Display for Oom {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("out of memory")
        }
    }
    impl std::error::Error for Oom {}

    impl Backend for Fake {
        type Error = Oom;
        fn label(&self) -> String {
            "fake/fp32".into()
        }
        fn max_len(&self) -> usize {
            64
        }
        fn tokenize(&self, _: Option<&str>, _: &str) -> Result<Vec<u32>, Oom> {
            Ok(vec![1])
        }
        fn embed_with_spans(
            &self,
            seqs: &[&[u32]],
            spans: &[&[Range<usize>]],
        ) -> Result<Vec<(Vec<f32>, Vec<Vec<f32>>)>, Oom> {
            self.passes.set(self.passes.get() + 1);
            if seqs.iter().map(|s| s.len()).max().unwrap_or(0) * seqs.len() > self.limit {
                return Err(Oom);
            }
            let mut out: Vec<_> = seqs
                .iter()
                .zip(spans)
                .map(|(s, sp)| (vec![s.len() as f32], sp.iter().map(|r| vec![r.len() as f32]).collect()))
                .collect();
            if self.drop_last {
                out.pop();
            }
            Ok(out)
        }
        fn is_permanent(_: &Oom) -> bool {
            false
        }
    }

    /// A chunk of `n` document tokens with one segment over its first two tokens.
    fn task(n: u32, index: u32) -> ChunkTask {
        let layout = InputLayout { bos: 2, eos: 1, prompt: vec![7] };
        let doc: Vec<u32> = (100..100 + n).collect();
        ChunkTask {
            schema: SCHEMA_VERSION,
            meta: ChunkMeta {
                run_id: uuid::Uuid::nil(),
                document_id: uuid::Uuid::nil(),
                generation: 1,
                index,
                count: 4,
                tokens: [0, n],
                owned_tokens: [0, n],
                chars: [0, n],
                owned_chars: [0, n],
            },
            input_ids: layout.input(&doc),
            segments: vec![SegmentRef { index: 0, tokens: [0, 2] }],
            published_ms: 0,
        }
    }

    #[test]
    fn chunks_keep_their_order_split_on_failure_and_fail_alone() {
        let mut bad = task(5, 2);
        bad.input_ids.truncate(3); // ranges that no longer fit the input: rejected alone
        let tasks = [task(10, 0), task(4, 1), bad, task(6, 3)];
        let refs: Vec<&ChunkTask> = tasks.iter().collect();
        // 13, 7, 3 and 9 input ids: a budget of 40 packs [3 7 9] (27 padded) and [13]; the bad
        // one is left out of its pass, and the fake fails [7 9] (18 padded) above 15
        let model = Fake { limit: 15, drop_last: false, passes: Cell::new(0) };
        let out = embed_chunks(&model, &refs, 40);
        assert_eq!(out.len(), 4);
        assert_eq!(out[0].as_ref().unwrap().embedding, vec![13.0]);
        assert_eq!(out[1].as_ref().unwrap().embedding, vec![7.0]);
        assert_eq!(out[3].as_ref().unwrap().embedding, vec![9.0]);
        let e = out[2].as_ref().unwrap_err();
        assert!(e.permanent && e.message.contains("input ids"), "{e:?}");
        // the segment's contextual embedding pools its two tokens, from the same pass
        assert_eq!(out[0].as_ref().unwrap().segments[0].embedding, vec![2.0]);
        // [7 9] failed and was split into [7] and [9]; then [13]
        assert_eq!(model.passes.get(), 4);
    }

    #[test]
    fn the_standalone_pass_embeds_the_candidates_and_marks_the_others() {
        // chunks 0 and 1, each with one owned segment: the rule keeps segment 0 of chunk 0
        // (its contextual embedding is [2.0]) and not chunk 1's (set to [-1.0] below)
        let tasks = [task(10, 0), task(8, 1)];
        let refs: Vec<&ChunkTask> = tasks.iter().collect();
        let model = Fake { limit: 1000, drop_last: false, passes: Cell::new(0) };
        let mut out = embed_chunks(&model, &refs, 1000);
        out[1].as_mut().unwrap().segments[0].embedding = vec![-1.0];
        let passes = model.passes.get();
        let rule = Standalone::Candidates(std::sync::Arc::new(|_, e: &[f32]| e[0] > 0.0));
        embed_standalone(&model, &refs, &mut out, 1000, &rule);
        let (a, b) = (&out[0].as_ref().unwrap().segments[0], &out[1].as_ref().unwrap().segments[0]);
        // <bos>, prompt, its two tokens, <eos>
        assert_eq!((a.standalone.as_deref(), a.standalone_skipped), (Some(&[5.0f32][..]), false));
        assert_eq!((b.standalone.as_deref(), b.standalone_skipped), (None, true));
        assert_eq!(model.passes.get(), passes + 1, "one pass, for the one candidate");
        // `All` embeds both
        let mut out = embed_chunks(&model, &refs, 1000);
        embed_standalone(&model, &refs, &mut out, 1000, &Standalone::All);
        assert!(out.iter().all(|r| r.as_ref().unwrap().segments[0].standalone.is_some()));
        // `Off` embeds none and marks both, without a pass
        let mut out = embed_chunks(&model, &refs, 1000);
        let passes = model.passes.get();
        embed_standalone(&model, &refs, &mut out, 1000, &Standalone::Off);
        assert!(out.iter().all(|r| {
            let s = &r.as_ref().unwrap().segments[0];
            s.standalone.is_none() && s.standalone_skipped
        }));
        assert_eq!(model.passes.get(), passes, "no pass");
    }

    #[test]
    fn a_backend_that_loses_a_row_leaves_that_chunk_to_be_retried() {
        let tasks = [task(4, 0), task(4, 1)];
        let refs: Vec<&ChunkTask> = tasks.iter().collect();
        let model = Fake { limit: 1000, drop_last: true, passes: Cell::new(0) };
        let out = embed_chunks(&model, &refs, 1000);
        assert_eq!(out.len(), 2);
        assert!(out[0].is_ok());
        let e = out[1].as_ref().unwrap_err();
        assert!(!e.permanent && e.message == "lost in batch", "{e:?}");
    }
}
