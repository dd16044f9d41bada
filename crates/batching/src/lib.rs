//! **batching** — what the stages need from an embedding model ([`Backend`]), and how many
//! sequences go through it at once: a length-sorted token-budget packer with the least
//! padding ([`pack`]) and one
//! split-on-failure ([`split_on_failure`]), which [`embed_by_length`] puts together for any
//! list of sequences (the worker's standalone pass, the labels' backfill). Pure: no model, no
//! I/O, so every rule here is unit-tested with a fake backend.
//!
//! The budget counts padded tokens: a micro-batch of `n` sequences whose longest has `L`
//! tokens costs `n × L`, which is what a padded forward pass computes and holds in memory.

use std::ops::Range;

/// A sequence's sentence embedding, and one embedding per span of its positions.
pub type SpanEmbeddings = (Vec<f32>, Vec<Vec<f32>>);

/// An embedding model, as the pipeline uses it: token ids in, normalised vectors out.
pub trait Backend {
    type Error: std::error::Error + Send + Sync + 'static;

    /// `name/precision`, recorded with every stored embedding.
    fn label(&self) -> String;

    /// The longest sequence the model takes, special tokens included.
    fn max_len(&self) -> usize;

    /// Token ids (with special tokens) for the named prompt (`"query"`, `"document"`, ...)
    /// followed by `text`.
    fn tokenize(&self, prompt_name: Option<&str>, text: &str) -> Result<Vec<u32>, Self::Error>;

    /// One padded forward pass: each sequence's embedding and, for each of its spans of
    /// positions, the span's embedding from the same pass (late chunking).
    fn embed_with_spans(&self, seqs: &[&[u32]], spans: &[&[Range<usize>]]) -> Result<Vec<SpanEmbeddings>, Self::Error>;

    /// The input itself is at fault (a bad token id, too long): no split or retry can help.
    fn is_permanent(error: &Self::Error) -> bool;

    /// Memory the model's device holds now, where the device reports it (for the metrics).
    fn memory_in_use(&self) -> Option<u64> {
        None
    }

    /// Sentence embeddings of token sequences, as one padded batch.
    fn embed(&self, seqs: &[&[u32]]) -> Result<Vec<Vec<f32>>, Self::Error> {
        let none: Vec<&[Range<usize>]> = vec![&[]; seqs.len()];
        Ok(self.embed_with_spans(seqs, &none)?.into_iter().map(|(e, _)| e).collect())
    }

    /// Embed texts with a named prompt, as one padded batch.
    fn embed_texts(&self, prompt_name: Option<&str>, texts: &[&str]) -> Result<Vec<Vec<f32>>, Self::Error> {
        let ids = texts.iter().map(|t| self.tokenize(prompt_name, t)).collect::<Result<Vec<_>, _>>()?;
        let refs: Vec<&[u32]> = ids.iter().map(|v| v.as_slice()).collect();
        self.embed(&refs)
    }
}

/// What one more forward pass costs beyond its padded tokens, counted in tokens: the fixed
/// work of a pass (every layer's kernels launched once, GEMMs with few rows run below their
/// rate). It keeps [`pack`] from cutting a list into many tiny passes to save a little padding.
pub const PASS_OVERHEAD_TOKENS: usize = 64;

/// Cut a list sorted by length into consecutive micro-batches whose count × longest (the
/// last, as the list is sorted) stays within `budget` padded tokens, with the least padded
/// tokens over all passes (each pass also counting [`PASS_OVERHEAD_TOKENS`]); an item longer
/// than the budget is a micro-batch of its own.
///
/// Filling each batch greedily from the shortest item would pad short segments to the length
/// of long ones: on the standalone segments of real contracts (24 to 230 tokens in one batch
/// of four chunks) it computed 1.6–1.75 padded tokens per real one (docs/benchmarks.md,
/// `make bench-pipeline`). The cut points come from a
/// dynamic programme over the end of the last batch, `O(n · widest batch)`.
pub fn pack(sorted_lengths: &[usize], budget: usize) -> Vec<Range<usize>> {
    let n = sorted_lengths.len();
    debug_assert!(sorted_lengths.windows(2).all(|w| w[0] <= w[1]), "pack needs lengths sorted");
    // best[e]: the least cost of the first e items; start[e]: where its last batch starts
    let mut best = vec![usize::MAX; n + 1];
    let mut start = vec![0; n + 1];
    best[0] = 0;
    for end in 1..=n {
        let longest = sorted_lengths[end - 1];
        let mut s = end - 1;
        loop {
            let cost = best[s].saturating_add(longest * (end - s) + PASS_OVERHEAD_TOKENS);
            if cost < best[end] {
                (best[end], start[end]) = (cost, s);
            }
            // widen the batch by one more (shorter) item while it stays within the budget
            if s == 0 || longest * (end - s + 1) > budget {
                break;
            }
            s -= 1;
        }
    }
    let mut out = Vec::new();
    let mut end = n;
    while end > 0 {
        out.push(start[end]..end);
        end = start[end];
    }
    out.reverse();
    out
}

/// Run `run` on all `items` at once; when that fails with more than one item (out of memory,
/// say), split them in two and try each half the same way, until an item fails alone. Every
/// item gets its own result, in order. `on_split` hears of each failure that causes a split.
pub fn split_on_failure<T, R, E>(
    items: &[T],
    run: &mut impl FnMut(&[T]) -> Result<Vec<R>, E>,
    on_split: &mut impl FnMut(&E, usize),
) -> Vec<Result<R, E>> {
    if items.is_empty() {
        return Vec::new();
    }
    match run(items) {
        Ok(v) => v.into_iter().map(Ok).collect(),
        Err(e) if items.len() > 1 => {
            on_split(&e, items.len());
            let mid = items.len() / 2;
            let mut out = split_on_failure(&items[..mid], run, on_split);
            out.extend(split_on_failure(&items[mid..], run, on_split));
            out
        }
        Err(e) => vec![Err(e)],
    }
}

/// Sentence embeddings of many sequences, in input order: sorted by length, packed into
/// micro-batches of at most `budget` padded tokens, and a micro-batch that fails split until a
/// sequence fails alone.
pub fn embed_by_length<B: Backend>(model: &B, seqs: &[&[u32]], budget: usize) -> Vec<Result<Vec<f32>, B::Error>> {
    let mut order: Vec<usize> = (0..seqs.len()).collect();
    order.sort_by_key(|&i| seqs[i].len());
    let lengths: Vec<usize> = order.iter().map(|&i| seqs[i].len()).collect();
    type Indexed<E> = (usize, Result<Vec<f32>, E>);
    let mut out: Vec<Indexed<B::Error>> = Vec::with_capacity(seqs.len());
    for batch in pack(&lengths, budget) {
        let ids: Vec<&[u32]> = order[batch.clone()].iter().map(|&i| seqs[i]).collect();
        let embedded = split_on_failure(
            &ids,
            &mut |s| model.embed(s),
            &mut |e, n| tracing::warn!(error = %e, sequences = n, "micro-batch failed; splitting it in two and retrying"),
        );
        out.extend(order[batch].iter().copied().zip(embedded));
    }
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[test]
    fn pack_pads_little_where_lengths_spread() {
        // the lengths of one worker batch's standalone segments are spread like this
        let mut lens: Vec<usize> = (0..40).map(|i| 24 + i).chain((0..40).map(|i| 70 + 2 * i)).collect();
        lens.extend([160, 171, 202, 225, 227]);
        let batches = pack(&lens, 8192);
        let real: usize = lens.iter().sum();
        let padded: usize = batches.iter().map(|b| lens[b.end - 1] * b.len()).sum();
        assert!(batches.iter().all(|b| lens[b.end - 1] * b.len() <= 8192), "{batches:?}");
        assert_eq!(batches.iter().map(|b| b.len()).sum::<usize>(), lens.len());
        assert!(batches.windows(2).all(|w| w[0].end == w[1].start), "{batches:?}");
        // filling each batch greedily from the shortest pads these to 1.73 × their tokens
        assert!((padded as f64) < 1.15 * real as f64, "{padded} padded for {real} real: {batches:?}");
    }

    #[test]
    fn pack_keeps_padded_tokens_within_the_budget() {
        assert_eq!(pack(&[], 10), Vec::<Range<usize>>::new());
        // 3 × 3 = 9 fits 10, a fourth of 4 would be 16
        assert_eq!(pack(&[2, 3, 3, 4, 4], 10), vec![0..3, 3..5]);
        // a single item over the budget goes alone
        assert_eq!(pack(&[5, 20, 20], 10), vec![0..1, 1..2, 2..3]);
        for (lens, budget) in [(vec![1, 1, 2, 3, 5, 8, 13], 16), (vec![7; 9], 21)] {
            let batches = pack(&lens, budget);
            assert_eq!(batches.iter().map(|b| b.len()).sum::<usize>(), lens.len());
            for b in batches.iter().filter(|b| b.len() > 1) {
                assert!(lens[b.end - 1] * b.len() <= budget, "{b:?}");
            }
        }
    }

    #[test]
    fn split_on_failure_isolates_the_bad_item() {
        let calls = RefCell::new(Vec::new());
        let mut splits = 0;
        // fails whenever item 5 is in the batch
        let r = split_on_failure(
            &[1, 2, 5, 3],
            &mut |xs: &[i32]| {
                calls.borrow_mut().push(xs.len());
                if xs.contains(&5) {
                    Err(format!("bad {}", xs.len()))
                } else {
                    Ok(xs.iter().map(|x| x * 10).collect())
                }
            },
            &mut |_, _| splits += 1,
        );
        assert_eq!(r, vec![Ok(10), Ok(20), Err("bad 1".to_string()), Ok(30)]);
        assert_eq!(*calls.borrow(), vec![4, 2, 2, 1, 1]);
        assert_eq!(splits, 2);
    }

    /// Embeds a sequence as [its length, its first id]; fails a pass over `limit` padded
    /// tokens (out of memory) and any sequence holding id 0 (a bad token).
    struct Fake {
        limit: usize,
        passes: RefCell<Vec<usize>>,
    }

    #[derive(Debug, PartialEq)]
    struct FakeError(&'static str);
    impl std::fmt::Display for FakeError {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }
    impl std::error::Error for FakeError {}

    impl Backend for Fake {
        type Error = FakeError;
        fn label(&self) -> String {
            "fake/fp32".into()
        }
        fn max_len(&self) -> usize {
            16
        }
        fn tokenize(&self, _: Option<&str>, text: &str) -> Result<Vec<u32>, FakeError> {
            Ok(text.bytes().map(u32::from).collect())
        }
        fn embed_with_spans(
            &self,
            seqs: &[&[u32]],
            spans: &[&[Range<usize>]],
        ) -> Result<Vec<SpanEmbeddings>, FakeError> {
            let padded = seqs.iter().map(|s| s.len()).max().unwrap_or(0) * seqs.len();
            self.passes.borrow_mut().push(seqs.len());
            if padded > self.limit {
                return Err(FakeError("out of memory"));
            }
            if seqs.iter().any(|s| s.contains(&0)) {
                return Err(FakeError("bad token"));
            }
            Ok(seqs
                .iter()
                .zip(spans)
                .map(|(s, sp)| (vec![s.len() as f32, s[0] as f32], sp.iter().map(|r| vec![r.len() as f32]).collect()))
                .collect())
        }
        fn is_permanent(e: &FakeError) -> bool {
            e.0 == "bad token"
        }
    }

    #[test]
    fn embed_by_length_keeps_input_order_and_fails_only_the_bad_sequence() {
        let model = Fake { limit: 7, passes: RefCell::new(Vec::new()) };
        let seqs: Vec<Vec<u32>> = vec![vec![9; 4], vec![7, 0], vec![3], vec![5; 4], vec![8, 8]];
        let refs: Vec<&[u32]> = seqs.iter().map(|s| s.as_slice()).collect();
        // budget 12 packs [3], [7 0], [8 8] (3 × 2 padded tokens), split for its bad token,
        // and [9;4], [5;4] (2 × 4), split because the fake runs out of memory over 7
        let out = embed_by_length(&model, &refs, 12);
        assert_eq!(out[0], Ok(vec![4.0, 9.0]));
        assert_eq!(out[1], Err(FakeError("bad token")));
        assert!(Fake::is_permanent(out[1].as_ref().unwrap_err()));
        assert_eq!(out[2], Ok(vec![1.0, 3.0]));
        assert_eq!(out[3], Ok(vec![4.0, 5.0]));
        assert_eq!(out[4], Ok(vec![2.0, 8.0]));
        assert_eq!(*model.passes.borrow(), vec![3, 1, 2, 1, 1, 2, 1, 1]);
        assert_eq!(model.embed_texts(None, &["ab"]).unwrap(), vec![vec![2.0, 97.0]]);
    }
}
