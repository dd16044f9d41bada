//! How a category scores a segment: by the category's query alone (cosine, zero-shot), or by
//! a learned probe (probability). This mirrors, term for term, the SQL function `clause_score`
//! and the view `segment_lexical` (migration `..._lexical_terms.sql`) that label documents in
//! Postgres; `docpipe-clauses`' test `sql_clause_score_equals_the_learned_scorer` holds the
//! two together. The stored form of a scorer is written by [`crate::stored`].

use std::collections::HashMap;
use std::ops::Range;

use crate::gold::Doc;

/// A segment as the scorer sees it.
pub struct Segment {
    /// Position in the document (`segment_index`): what the position features read.
    pub index: usize,
    pub chars: Range<usize>,
    /// The standalone embedding where stored, else the contextual one (as `segment_scores`).
    pub embedding: Vec<f32>,
    /// Lexical terms (`docpipe_chunker::segment::terms`), as stored.
    pub terms: Vec<i32>,
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Segment index past which the position features stop changing (as in `clause_score`).
const POSITION_CAP: usize = 600;

/// The position features of segment `i`.
pub(crate) fn position(i: usize) -> [f32; 2] {
    let i = i.min(POSITION_CAP) as f32;
    [(-i).exp(), (-i / 5.0).exp()]
}

/// How one category scores segments: by the query alone (cosine), or by a learned probe
/// (probability). Mirrors the SQL function `clause_score` and the view `segment_lexical`.
#[derive(Clone)]
pub struct Scorer {
    pub weights: Vec<f32>,
    pub position: [f32; 2],
    /// Weight per lexical term (learned scorers only).
    pub terms: HashMap<i32, f32>,
    /// `None`: zero-shot, the score is the cosine with `weights` (the query).
    pub bias: Option<f32>,
    pub threshold: f32,
}

impl Scorer {
    pub(crate) fn zero_shot(query: &[f32], threshold: f32) -> Self {
        Scorer { weights: query.to_vec(), position: [0.0; 2], terms: HashMap::new(), bias: None, threshold }
    }

    /// The segment's lexical score: the weights of its terms over sqrt(number of terms).
    pub(crate) fn lexical(&self, terms: &[i32]) -> f32 {
        if terms.is_empty() || self.terms.is_empty() {
            return 0.0;
        }
        terms.iter().filter_map(|t| self.terms.get(t)).sum::<f32>() / (terms.len() as f32).sqrt()
    }

    pub fn score(&self, seg: &Segment) -> f32 {
        match self.bias {
            None => dot(&seg.embedding, &self.weights),
            Some(b) => sigmoid(self.log_odds(b, seg.index, &seg.embedding) + self.lexical(&seg.terms)),
        }
    }

    /// A learned probe's log-odds (bias `b`) from the embedding and position of segment
    /// `index`, without its lexical terms.
    pub(crate) fn log_odds(&self, b: f32, index: usize, embedding: &[f32]) -> f32 {
        let p = position(index);
        dot(embedding, &self.weights) + self.position[0] * p[0] + self.position[1] * p[1] + b
    }
}

/// The logistic function, clamped as `clause_score` clamps it.
pub(crate) fn sigmoid(z: f32) -> f32 {
    1.0 / (1.0 + (-z.clamp(-50.0, 50.0)).exp())
}

/// Segment indices of a document, best first, and the best score.
pub fn ranking(doc: &Doc, s: &Scorer) -> (Vec<usize>, f32) {
    let scores: Vec<f32> = doc.segments.iter().map(|seg| s.score(seg)).collect();
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    idx.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let best = idx.first().map(|&i| scores[i]).unwrap_or(f32::NEG_INFINITY);
    (idx, best)
}
