//! Training the shipped scorer from a labelled corpus without embedding all of it: which
//! segments of a training document are embedded, and what each stands for.
//!
//! Each document gets a token budget ([`Plan`]). First the positives: for each category the
//! document has, rarest category first, the segment matching the most of its gold clauses
//! (then a second one, and so on up to `per_category`), while they fit the budget less the room
//! kept for negatives. A positive of one category is a negative of the 40 others: those are the
//! hardest negatives there are. Then `negatives` of the remaining segments are drawn at random
//! (seeded by the document, so a resumed run draws the same), and each stands for its share of
//! the remaining segments in the loss ([`crate::gold::Doc::weights`]): an unbiased estimate of
//! the whole document's loss for a fraction of its model time. The embeddings are the
//! standalone ones the worker's standalone pass stores.
//!
//! The shipped scorer learns instead from the contextual embeddings every chunk pass stores
//! ([`ChunkPlan`], [`choose_chunks`]), so it reads at run time, under the default
//! `--standalone-segments none`, what it was trained on.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::artifact;
use crate::gold::{Doc, Gold, Positives};
use crate::scorer::{Scorer, Segment};
use crate::stored::StoredCategory;

/// How many segments of a training document are embedded.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct Plan {
    /// Model tokens per document, at most (what bounds the training time).
    pub max_tokens: usize,
    /// Positive segments per category and document, at most.
    pub per_category: usize,
    /// Segments drawn at random from the rest, at most.
    pub negatives: usize,
}

impl Plan {
    /// Every segment of the document: what an evaluation embeds.
    pub const WHOLE: Plan = Plan { max_tokens: usize::MAX, per_category: usize::MAX, negatives: usize::MAX };
}

/// The segments of one document chosen for embedding, by index, with the number of the
/// document's segments each stands for (see the module docs). `lengths`: each segment's
/// standalone input length (0: it has none, never chosen); `rarity`: categories, rarest first.
pub fn choose(
    lengths: &[usize],
    gold: &Gold,
    positives: &Positives,
    rarity: &[String],
    plan: &Plan,
    seed: u64,
) -> Vec<(usize, f32)> {
    let n = lengths.len();
    // per category, its candidates best first: the segments matching the most gold clauses
    // (what recall counts), then the other positives, earliest first
    let candidates: Vec<Vec<usize>> = rarity
        .iter()
        .map(|cat| {
            let mut matched: BTreeMap<usize, usize> = BTreeMap::new();
            for m in gold.get(cat).into_iter().flatten() {
                for &i in m {
                    *matched.entry(i).or_default() += 1;
                }
            }
            let mut c: Vec<usize> = positives.get(cat).into_iter().flatten().copied().collect();
            c.sort_by_key(|i| (std::cmp::Reverse(matched.get(i).copied().unwrap_or(0)), *i));
            c.retain(|&i| i < n && lengths[i] > 0);
            c
        })
        .collect();
    // keep room for the negatives: `negatives` segments of the document's median length
    let mut sorted: Vec<usize> = lengths.iter().copied().filter(|&l| l > 0).collect();
    sorted.sort_unstable();
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or(0);
    let positive_budget = plan.max_tokens.saturating_sub(plan.negatives.saturating_mul(median));
    let mut chosen: BTreeSet<usize> = BTreeSet::new();
    let mut used = 0usize;
    let rounds = plan.per_category.min(candidates.iter().map(|c| c.len()).max().unwrap_or(0));
    for round in 1..=rounds {
        for c in &candidates {
            // a segment chosen for another category counts for this one too
            if c.iter().filter(|i| chosen.contains(i)).count() >= round {
                continue;
            }
            if let Some(&i) = c.iter().find(|i| !chosen.contains(i)) {
                if used.saturating_add(lengths[i]) <= positive_budget {
                    chosen.insert(i);
                    used += lengths[i];
                }
            }
        }
    }
    // the rest: a seeded partial Fisher-Yates shuffle, taken in order while the budget allows
    let mut others: Vec<usize> = (0..n).filter(|&i| !chosen.contains(&i) && lengths[i] > 0).collect();
    let mut x = seed | 1;
    let mut taken = Vec::new();
    for k in 0..others.len() {
        if taken.len() >= plan.negatives {
            break;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let j = k + (x % (others.len() - k) as u64) as usize;
        others.swap(k, j);
        let i = others[k];
        if used.saturating_add(lengths[i]) <= plan.max_tokens {
            used += lengths[i];
            taken.push(i);
        }
    }
    // a segment drawn stands for its share of the rest (those skipped for length included)
    let weight = if taken.is_empty() { 0.0 } else { others.len() as f32 / taken.len() as f32 };
    let mut out: Vec<(usize, f32)> = chosen.into_iter().map(|i| (i, 1.0)).collect();
    out.extend(taken.into_iter().map(|i| (i, weight)));
    out.sort_by_key(|p| p.0);
    out
}

/// How many chunks of a training document are forwarded when the scorer learns the
/// contextual segment embeddings (each segment pooled inside its chunk, as the worker's chunk
/// pass stores it): a chunk forward yields every segment the chunk owns, so the unit of cost
/// is the chunk, not the segment.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct ChunkPlan {
    /// Chunks chosen for their positives (rarest category first), at most.
    pub positive_chunks: usize,
    /// Chunks drawn at random from the rest, at most.
    pub random_chunks: usize,
}

impl ChunkPlan {
    /// Every chunk of the document: what an evaluation forwards.
    pub const WHOLE: ChunkPlan = ChunkPlan { positive_chunks: usize::MAX, random_chunks: usize::MAX };
}

/// The chunks of one document to forward, and its segments to learn from with their weights,
/// for contextual embeddings. `owner[i]`: the chunk that owns segment `i` (the aggregator's
/// rule), `None` for none. Chunks are taken first for positives: round after round, each
/// category (rarest first) not yet holding `round` positives in the taken chunks adds the
/// chunk owning its best untaken positive, until `positive_chunks` are taken. Every segment
/// those chunks own is learned from at weight 1 (they are taken whole: a census of that
/// part of the document). Then `random_chunks` of the rest are drawn (seeded), and each of
/// their segments stands for its share of the segments the untaken chunks own: with the
/// census part, an unbiased estimate of the whole document's loss.
pub fn choose_chunks(
    owner: &[Option<usize>],
    gold: &Gold,
    positives: &Positives,
    rarity: &[String],
    plan: &ChunkPlan,
    seed: u64,
) -> (Vec<usize>, Vec<(usize, f32)>) {
    let n_chunks = owner.iter().flatten().max().map_or(0, |m| m + 1);
    let candidates: Vec<Vec<usize>> = rarity
        .iter()
        .map(|cat| {
            let mut matched: BTreeMap<usize, usize> = BTreeMap::new();
            for m in gold.get(cat).into_iter().flatten() {
                for &i in m {
                    *matched.entry(i).or_default() += 1;
                }
            }
            let mut c: Vec<usize> = positives.get(cat).into_iter().flatten().copied().collect();
            c.sort_by_key(|i| (std::cmp::Reverse(matched.get(i).copied().unwrap_or(0)), *i));
            c.retain(|&i| owner.get(i).copied().flatten().is_some());
            c
        })
        .collect();
    let mut taken: BTreeSet<usize> = BTreeSet::new();
    let rounds = candidates.iter().map(|c| c.len()).max().unwrap_or(0);
    'rounds: for round in 1..=rounds {
        for c in &candidates {
            if taken.len() >= plan.positive_chunks.min(n_chunks) {
                break 'rounds;
            }
            let in_taken = |i: &&usize| owner[**i].is_some_and(|o| taken.contains(&o));
            if c.iter().filter(in_taken).count() >= round {
                continue;
            }
            if let Some(o) = c.iter().find(|i| !in_taken(i)).and_then(|&i| owner[i]) {
                taken.insert(o);
            }
        }
    }
    // the rest: a seeded partial Fisher-Yates shuffle
    let mut others: Vec<usize> = (0..n_chunks).filter(|c| !taken.contains(c)).collect();
    let mut x = seed | 1;
    let draws = plan.random_chunks.min(others.len());
    for k in 0..draws {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let j = k + (x % (others.len() - k) as u64) as usize;
        others.swap(k, j);
    }
    let drawn: BTreeSet<usize> = others[..draws].iter().copied().collect();
    let owned_by = |set: &BTreeSet<usize>| owner.iter().filter(|o| o.is_some_and(|o| set.contains(&o))).count();
    let rest: BTreeSet<usize> = others.iter().copied().collect();
    let (in_rest, in_drawn) = (owned_by(&rest), owned_by(&drawn));
    let weight = if in_drawn == 0 { 0.0 } else { in_rest as f32 / in_drawn as f32 };
    let segments = owner
        .iter()
        .enumerate()
        .filter_map(|(i, o)| {
            let o = (*o)?;
            if taken.contains(&o) {
                Some((i, 1.0))
            } else if drawn.contains(&o) {
                Some((i, weight))
            } else {
                None
            }
        })
        .collect();
    let chunks = taken.union(&drawn).copied().collect();
    (chunks, segments)
}

/// A training document as cached between runs: its chosen segments (with everything but the
/// embeddings, which are cached beside it), its gold clauses and positives (indices into
/// `chosen`), and the categories its answers say are present.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sampled {
    pub file: String,
    pub pdf_sha256: String,
    pub segments: usize,
    pub tokens: usize,
    pub chosen: Vec<ChosenSegment>,
    pub gold: Gold,
    pub positives: Positives,
    pub present: BTreeSet<String>,
    /// Gold clauses not located in the text.
    pub unlocated: usize,
    /// For contextual embeddings: the chunks forwarded (indices into the document's chunks);
    /// empty for standalone ones.
    #[serde(default)]
    pub chunks: Vec<usize>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChosenSegment {
    pub index: usize,
    pub chars: [usize; 2],
    pub terms: Vec<i32>,
    pub weight: f32,
    /// The standalone model input.
    pub input_ids: Vec<u32>,
}

impl Sampled {
    /// Keep `chosen` (indices into the document's segments) of a document whose gold and
    /// positives are given over all its segments.
    pub fn new(
        file: String,
        pdf_sha256: String,
        all: &[Segment],
        inputs: &[Option<Vec<u32>>],
        gold: &Gold,
        positives: &Positives,
        chosen: &[(usize, f32)],
    ) -> Self {
        // chosen segments without a standalone input (none in practice) are left out
        let chosen: Vec<(usize, f32, &Vec<u32>)> =
            chosen.iter().filter_map(|&(i, w)| inputs.get(i).and_then(|x| x.as_ref()).map(|ids| (i, w, ids))).collect();
        let at: BTreeMap<usize, usize> = chosen.iter().enumerate().map(|(k, (i, _, _))| (*i, k)).collect();
        let remap = |v: &[usize]| v.iter().filter_map(|i| at.get(i).copied()).collect::<Vec<usize>>();
        Sampled {
            file,
            pdf_sha256,
            segments: all.len(),
            tokens: chosen.iter().map(|c| c.2.len()).sum(),
            chosen: chosen
                .iter()
                .map(|&(i, w, ids)| ChosenSegment {
                    index: i,
                    chars: [all[i].chars.start, all[i].chars.end],
                    terms: all[i].terms.clone(),
                    weight: w,
                    input_ids: ids.clone(),
                })
                .collect(),
            gold: gold.iter().map(|(c, clauses)| (c.clone(), clauses.iter().map(|m| remap(m)).collect())).collect(),
            positives: positives
                .iter()
                .map(|(c, p)| (c.clone(), remap(&p.iter().copied().collect::<Vec<_>>()).into_iter().collect()))
                .collect(),
            present: BTreeSet::new(),
            unlocated: 0,
            chunks: Vec::new(),
        }
    }

    /// The document the learner reads, with the chosen segments' embeddings (in order).
    pub fn into_doc(self, embeddings: Vec<Vec<f32>>) -> Doc {
        let weights = self.chosen.iter().map(|c| c.weight).collect();
        let segments = self
            .chosen
            .into_iter()
            .zip(embeddings)
            .map(|(c, embedding)| Segment { index: c.index, chars: c.chars[0]..c.chars[1], embedding, terms: c.terms })
            .collect();
        Doc { segments, gold: self.gold, positives: self.positives, present: self.present, weights }
    }
}

/// The learned scorers of `cats` as artifact categories, with how many training documents
/// have each and how many positive segments it learned from.
pub fn artifact_categories(cats: &[StoredCategory], scorers: &[Scorer], docs: &[&Doc]) -> Vec<artifact::Category> {
    cats.iter()
        .zip(scorers)
        .map(|(c, s)| {
            let mut terms: Vec<(i32, f32)> = s.terms.iter().map(|(t, w)| (*t, *w)).collect();
            terms.sort_by(|a, b| b.1.abs().total_cmp(&a.1.abs()).then(a.0.cmp(&b.0)));
            artifact::Category {
                name: c.name.clone(),
                weights: s.weights.clone(),
                position: s.position,
                bias: s.bias.unwrap_or(0.0),
                threshold: s.threshold,
                terms,
                documents: docs.iter().filter(|d| d.present.contains(&c.name)).count(),
                positives: docs.iter().map(|d| d.positives.get(&c.name).map_or(0, |p| p.len())).sum(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positives_first_rarest_category_first_then_a_weighted_sample_within_the_budget() {
        let cat = |c: &str| c.to_string();
        // category A: gold clauses matched by segments 3 (twice) and 7; B: by 3 and 12
        let gold = BTreeMap::from([(cat("A"), vec![vec![3, 7], vec![3]]), (cat("B"), vec![vec![12], vec![3]])]);
        let positives = BTreeMap::from([(cat("A"), BTreeSet::from([3, 7, 8])), (cat("B"), BTreeSet::from([3, 12]))]);
        let lengths = vec![10; 40];
        let rarity = vec![cat("B"), cat("A")];
        let plan = Plan { max_tokens: 1000, per_category: 1, negatives: 5 };
        let c = choose(&lengths, &gold, &positives, &rarity, &plan, 7);
        let kept: Vec<usize> = c.iter().filter(|p| p.1 == 1.0).map(|p| p.0).collect();
        // B first: 3 and 12 match one clause each, the earliest wins; A's best is 3 too, so
        // the one segment serves both
        assert_eq!(kept, vec![3]);
        let sampled: Vec<&(usize, f32)> = c.iter().filter(|p| p.1 != 1.0).collect();
        assert_eq!(sampled.len(), 5);
        // 39 others, 5 drawn: each stands for 39/5, and the weights add up to the document
        assert!(sampled.iter().all(|p| (p.1 - 39.0 / 5.0).abs() < 1e-5));
        assert!((c.iter().map(|p| p.1).sum::<f32>() - 40.0).abs() < 1e-3);
        assert_eq!(c, choose(&lengths, &gold, &positives, &rarity, &plan, 7), "the same seed draws the same");
        assert_ne!(c, choose(&lengths, &gold, &positives, &rarity, &plan, 8));
        // two per category
        let plan2 = Plan { per_category: 2, ..plan };
        let kept: Vec<usize> = choose(&lengths, &gold, &positives, &rarity, &plan2, 7)
            .into_iter()
            .filter(|p| p.1 == 1.0)
            .map(|p| p.0)
            .collect();
        assert_eq!(kept, vec![3, 7, 12]);
        // the budget: 25 tokens, 1 negative of 10 kept in reserve: one positive, one negative
        let tight = Plan { max_tokens: 25, per_category: 2, negatives: 1 };
        let c = choose(&lengths, &gold, &positives, &rarity, &tight, 7);
        assert_eq!(c.len(), 2);
        assert!(c.iter().map(|p| lengths[p.0]).sum::<usize>() <= 25);
        // the whole document
        let whole = choose(&lengths, &gold, &positives, &rarity, &Plan::WHOLE, 7);
        assert_eq!(whole, (0..40).map(|i| (i, 1.0)).collect::<Vec<_>>());
        // segments without an input are never chosen
        let mut holes = lengths.clone();
        holes[3] = 0;
        assert!(choose(&holes, &gold, &positives, &rarity, &plan, 7).iter().all(|p| p.0 != 3));
    }

    #[test]
    fn chunks_for_positives_rarest_first_then_drawn_chunks_standing_for_the_rest() {
        let cat = |c: &str| c.to_string();
        // 10 chunks of 4 segments each: segment i is owned by chunk i / 4
        let owner: Vec<Option<usize>> = (0..40).map(|i| Some(i / 4)).collect();
        // A (common): positives in chunks 1 and 5; B (rare): in chunk 8
        let gold = BTreeMap::from([(cat("A"), vec![vec![5], vec![21]]), (cat("B"), vec![vec![33]])]);
        let positives = BTreeMap::from([(cat("A"), BTreeSet::from([5, 21])), (cat("B"), BTreeSet::from([33]))]);
        let rarity = vec![cat("B"), cat("A")];
        let plan = ChunkPlan { positive_chunks: 2, random_chunks: 2 };
        let (chunks, segs) = choose_chunks(&owner, &gold, &positives, &rarity, &plan, 7);
        // B's chunk first, then A's earliest best positive
        let census: Vec<usize> = segs.iter().filter(|p| p.1 == 1.0).map(|p| p.0 / 4).collect();
        assert_eq!(census, vec![1, 1, 1, 1, 8, 8, 8, 8]);
        assert_eq!(chunks.len(), 4);
        // the 2 drawn chunks' 8 segments stand for the 32 of the 8 untaken chunks
        let drawn: Vec<&(usize, f32)> = segs.iter().filter(|p| p.1 != 1.0).collect();
        assert_eq!(drawn.len(), 8);
        assert!(drawn.iter().all(|p| (p.1 - 4.0).abs() < 1e-6));
        assert!((segs.iter().map(|p| p.1).sum::<f32>() - 40.0).abs() < 1e-3);
        assert_eq!((chunks.clone(), segs.clone()), choose_chunks(&owner, &gold, &positives, &rarity, &plan, 7));
        // a third positive chunk serves A's second positive
        let three = ChunkPlan { positive_chunks: 3, random_chunks: 0 };
        let (chunks, segs) = choose_chunks(&owner, &gold, &positives, &rarity, &three, 7);
        assert_eq!(chunks, vec![1, 5, 8]);
        assert!(segs.iter().all(|p| p.1 == 1.0));
        // the whole document: every owned segment once, at weight 1
        let mut holes = owner.clone();
        holes[0] = None;
        let (chunks, segs) = choose_chunks(&holes, &gold, &positives, &rarity, &ChunkPlan::WHOLE, 7);
        assert_eq!(chunks, (0..10).collect::<Vec<_>>());
        assert_eq!(segs, (1..40).map(|i| (i, 1.0)).collect::<Vec<_>>());
    }

    #[test]
    fn gold_and_positives_follow_the_chosen_segments() {
        let seg = |i: usize| Segment { index: i, chars: i * 10..i * 10 + 9, embedding: vec![], terms: vec![i as i32] };
        let all: Vec<Segment> = (0..6).map(seg).collect();
        let inputs: Vec<Option<Vec<u32>>> = (0..6).map(|i| Some(vec![2, i as u32, 1])).collect();
        let gold = BTreeMap::from([("A".to_string(), vec![vec![2, 3], vec![5], vec![]])]);
        let positives = BTreeMap::from([("A".to_string(), BTreeSet::from([1, 2, 3, 5]))]);
        let s = Sampled::new(
            "f.pdf".into(),
            "00".into(),
            &all,
            &inputs,
            &gold,
            &positives,
            &[(1, 1.0), (3, 1.0), (4, 2.5)],
        );
        assert_eq!(s.gold["A"], vec![vec![1], vec![], vec![]]);
        assert_eq!(s.positives["A"], BTreeSet::from([0, 1]));
        assert_eq!(s.tokens, 9);
        let d = s.into_doc(vec![vec![1.0]; 3]);
        assert_eq!(d.segments.iter().map(|s| s.index).collect::<Vec<_>>(), vec![1, 3, 4]);
        assert_eq!(d.weight(2), 2.5);
        assert_eq!(d.segments[2].terms, vec![4]);
    }
}
