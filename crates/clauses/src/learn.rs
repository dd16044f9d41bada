//! Learning clause scorers from labelled documents: a class-balanced, L2-regularised logistic
//! regression per category on the segment embedding (started from and regularised towards
//! `GAMMA * query`), two position features and lexical terms, plus a listwise loss that asks
//! each training document's clauses to outrank its other segments ([`Fit::listwise`]); all
//! categories fitted at once by full-batch gradient descent — each step two matrix products
//! over the training segments (segments × features · features × categories, and the gradient
//! back), by blocks of rows on rayon's threads, plus the sparse lexical terms.
//!
//! Training documents may hold a sample of their segments: each segment's loss counts as
//! many times as the segments it stands for ([`Doc::weight`]), so a sample with known
//! inclusion rates fits the same objective as the whole documents.

use std::collections::{BTreeSet, HashMap};

use ndarray::linalg::general_mat_mul;
use ndarray::{Array2, Axis};
use rayon::prelude::*;

use crate::calibrate;
use crate::gold::{has, Doc};
use crate::scorer::{position, ranking, sigmoid, Scorer, Segment};
use crate::stored::StoredCategory;

/// The probe's prior: it starts at, and is pulled towards, this multiple of the query.
const GAMMA: f32 = 5.0;
/// L2 pull towards the prior.
const L2: f32 = 0.01;
const STEPS: usize = 400;
const LEARNING_RATE: f32 = 2.0;
/// Lexical term weights: their learning rate and L2 pull towards 0.
const LEXICAL_LEARNING_RATE: f32 = 10.0;
const LEXICAL_L2: f32 = 0.003;
/// Weight of the listwise loss (see [`Fit::listwise`], averaged over its (document, category)
/// pairs) against the per-segment loss (averaged over the segments' weights).
const LISTWISE: f32 = 16.0;
/// A term is a feature when it occurs in at least this many training documents.
const MIN_DF: usize = 2;
/// Term weights kept per category (the largest in magnitude).
const KEEP_TERMS: usize = 2000;
/// The bias of a category with no positives: never present.
const NEVER: f32 = -50.0;
/// Rows per block of the dense gradient, computed in parallel and summed in block order. A
/// fixed size, not one per thread, so that the sums, and the scorer learned, are the same
/// whatever the number of threads (small in the tests, so that they cover several blocks).
#[cfg(not(test))]
const BLOCK_ROWS: usize = 512;
#[cfg(test)]
const BLOCK_ROWS: usize = 5;

/// The lexical vocabulary of a training set: the terms found in at least [`MIN_DF`] of its
/// documents (a term seen in one contract is a name or a number, not a clause), as columns.
struct Vocabulary {
    column: HashMap<i32, usize>,
    terms: Vec<i32>,
}

impl Vocabulary {
    fn new(train: &[&Doc]) -> Self {
        let mut df: HashMap<i32, usize> = HashMap::new();
        for d in train {
            let seen: BTreeSet<i32> = d.segments.iter().flat_map(|s| s.terms.iter().copied()).collect();
            for t in seen {
                *df.entry(t).or_default() += 1;
            }
        }
        let mut terms: Vec<i32> = df.into_iter().filter(|&(_, n)| n >= MIN_DF).map(|(t, _)| t).collect();
        terms.sort_unstable();
        let column = terms.iter().enumerate().map(|(c, &t)| (t, c)).collect();
        Vocabulary { column, terms }
    }

    /// A segment's lexical features: the columns of its terms, and the value each has
    /// (1/sqrt(number of terms, in the vocabulary or not), as in `Scorer::lexical`).
    fn features(&self, terms: &[i32]) -> (Vec<usize>, f32) {
        let cols = terms.iter().filter_map(|t| self.column.get(t).copied()).collect();
        (cols, 1.0 / (terms.len().max(1) as f32).sqrt())
    }
}

/// The threshold that maximises F1 of `score >= t` against the flags.
fn best_threshold(points: impl Iterator<Item = (f32, bool)>) -> f32 {
    let mut pts: Vec<(f32, bool)> = points.collect();
    pts.sort_by(|a, b| b.0.total_cmp(&a.0));
    let positives = pts.iter().filter(|p| p.1).count();
    if positives == 0 {
        return pts.first().map(|p| p.0 + 1e-3).unwrap_or(1.0);
    }
    let (mut best, mut best_t, mut tp) = (-1f64, pts[0].0, 0usize);
    for (i, p) in pts.iter().enumerate() {
        tp += p.1 as usize;
        let f1 = 2.0 * tp as f64 / ((i + 1) as f64 + positives as f64);
        let next = pts.get(i + 1).map(|q| q.0).unwrap_or(p.0 - 1e-3);
        if f1 > best && next < p.0 {
            best = f1;
            best_t = (p.0 + next) / 2.0;
        }
    }
    best_t
}

/// The training segments in the learner's layout, one row per segment.
struct Design {
    /// Dense features, one row per segment: the embedding, the two position features, and a
    /// constant 1 for the bias.
    x: Array2<f32>,
    /// Per row: how many segments it stands for.
    weight: Vec<f32>,
    /// The sum of `weight`: what the loss is averaged over.
    total: f32,
    /// Per row: the lexical columns of its terms, and the value each has.
    lexical: Vec<(Vec<usize>, f32)>,
    /// Per lexical column: the rows that have it (`lexical` transposed).
    rows_with: Vec<Vec<usize>>,
    /// Each training document's rows.
    docs: Vec<std::ops::Range<usize>>,
}

impl Design {
    fn new(train: &[&Doc], vocab: &Vocabulary, dim: usize) -> Self {
        let segments: Vec<(f32, &Segment)> =
            train.iter().flat_map(|d| d.segments.iter().enumerate().map(|(i, s)| (d.weight(i), s))).collect();
        let mut docs = Vec::with_capacity(train.len());
        let mut at = 0;
        for d in train {
            docs.push(at..at + d.segments.len());
            at += d.segments.len();
        }
        let mut x = Array2::zeros((segments.len(), dim + 3));
        let weight: Vec<f32> = segments.iter().map(|(w, _)| *w).collect();
        let total = weight.iter().sum::<f32>().max(1e-6);
        let mut lexical = Vec::with_capacity(segments.len());
        let mut rows_with = vec![Vec::new(); vocab.terms.len()];
        for (r, (_, seg)) in segments.into_iter().enumerate() {
            let mut row = x.row_mut(r);
            for (a, &e) in row.iter_mut().take(dim).zip(&seg.embedding) {
                *a = e;
            }
            let [p0, p1] = position(seg.index);
            row[dim] = p0;
            row[dim + 1] = p1;
            row[dim + 2] = 1.0;
            let (cols, v) = vocab.features(&seg.terms);
            for &c in &cols {
                rows_with[c].push(r);
            }
            lexical.push((cols, v));
        }
        Design { x, weight, total, lexical, rows_with, docs }
    }
}

/// Training targets per segment and category, and each category's class weights (positives
/// and negatives balanced by their summed segment weights, normalised to mean 1).
struct Targets {
    y: Array2<f32>,
    /// (document, category) where the document has positives of the category.
    pairs: Vec<(usize, usize)>,
    n_pos: Vec<usize>,
    class_weight: Vec<(f32, f32)>,
}

impl Targets {
    fn new(docs: &[&Doc], cats: &[StoredCategory], design: &Design) -> Self {
        let (n, ncat) = (design.x.nrows(), cats.len());
        let mut y = Array2::<f32>::zeros((n, ncat));
        let mut r = 0;
        for d in docs {
            for (k, c) in cats.iter().enumerate() {
                for &i in d.positives.get(&c.name).into_iter().flatten() {
                    if i < d.segments.len() {
                        y[[r + i, k]] = 1.0;
                    }
                }
            }
            r += d.segments.len();
        }
        let n_pos: Vec<usize> = y.columns().into_iter().map(|c| c.iter().filter(|&&v| v > 0.5).count()).collect();
        let pos_weight: Vec<f32> = y
            .columns()
            .into_iter()
            .map(|c| c.iter().zip(&design.weight).filter(|(&v, _)| v > 0.5).map(|(_, w)| w).sum())
            .collect();
        let class_weight: Vec<(f32, f32)> = pos_weight
            .iter()
            .map(|&pf| {
                let nf = design.total;
                let w_pos = if pf > 0.0 { (nf - pf) / pf } else { 0.0 };
                let mean = (pf * w_pos + (nf - pf)) / nf;
                if mean > 0.0 {
                    (w_pos / mean, 1.0 / mean)
                } else {
                    (1.0, 1.0)
                }
            })
            .collect();
        let pairs = (0..design.docs.len())
            .flat_map(|d| (0..ncat).map(move |k| (d, k)))
            .filter(|&(d, k)| design.docs[d].clone().any(|i| y[[i, k]] > 0.5))
            .collect();
        Targets { y, pairs, n_pos, class_weight }
    }
}

/// The weights being fitted: rows are features, columns categories; the embedding rows start
/// at and are pulled towards `GAMMA * query`, the position rows towards 0, the bias row is
/// free; and the lexical weights, term by category.
struct Fit {
    dim: usize,
    ncat: usize,
    prior: Array2<f32>,
    w: Array2<f32>,
    l2: Vec<f32>,
    lex: Vec<f32>,
    lex_grad: Vec<f32>,
    resid: Array2<f32>,
    /// Rows per parallel block ([`BLOCK_ROWS`]).
    block: usize,
}

impl Fit {
    fn new(cats: &[StoredCategory], dim: usize, nterms: usize, n: usize) -> Self {
        let (width, ncat) = (dim + 3, cats.len());
        let mut prior = Array2::<f32>::zeros((width, ncat));
        for (k, c) in cats.iter().enumerate() {
            for (j, q) in c.query.iter().enumerate().take(dim) {
                prior[[j, k]] = GAMMA * q;
            }
        }
        Fit {
            dim,
            ncat,
            w: prior.clone(),
            prior,
            l2: (0..width).map(|j| if j < dim + 2 { L2 } else { 0.0 }).collect(),
            lex: vec![0f32; nterms * ncat],
            lex_grad: vec![0f32; nterms * ncat],
            resid: Array2::<f32>::zeros((n, ncat)),
            block: BLOCK_ROWS,
        }
    }

    /// One full-batch gradient step.
    fn step(&mut self, design: &Design, t: &Targets) {
        let grad = self.dense_gradient(design, t);
        self.lexical_gradient(design);
        let (lex_grad, nf) = (&self.lex_grad, design.total);
        let (w, prior, l2, lex) = (&mut self.w, &self.prior, &self.l2, &mut self.lex);
        for ((wj, gj), (pj, &l2j)) in
            w.rows_mut().into_iter().zip(grad.rows()).zip(prior.rows().into_iter().zip(l2.iter()))
        {
            for ((wi, g), p) in wj.into_iter().zip(gj).zip(pj) {
                *wi -= LEARNING_RATE * (g / nf + l2j * (*wi - p));
            }
        }
        for (l, g) in lex.iter_mut().zip(lex_grad.iter()) {
            *l -= LEXICAL_LEARNING_RATE * (g / nf + LEXICAL_L2 * *l);
        }
    }

    /// Forward pass and class-weighted residuals (kept in `resid`), then the dense gradient,
    /// by row blocks.
    fn dense_gradient(&mut self, design: &Design, t: &Targets) -> Array2<f32> {
        let (block, ncat, width) = (self.block, self.ncat, self.dim + 3);
        let (w, lex, class_weight, y) = (&self.w, &self.lex, &t.class_weight, &t.y);
        // the logits, in `resid`
        design
            .x
            .axis_chunks_iter(Axis(0), block)
            .zip(self.resid.axis_chunks_iter_mut(Axis(0), block))
            .zip(design.lexical.chunks(block))
            .collect::<Vec<_>>()
            .into_par_iter()
            .for_each(|((xb, mut zb), lb)| {
                general_mat_mul(1.0, &xb, w, 0.0, &mut zb);
                for (mut z, (cols, v)) in zb.rows_mut().into_iter().zip(lb) {
                    let z = z.as_slice_mut().expect("rows of a standard-layout array are contiguous");
                    for &c in cols {
                        for (zk, l) in z.iter_mut().zip(&lex[c * ncat..(c + 1) * ncat]) {
                            *zk += l * v;
                        }
                    }
                }
            });
        let listwise = self.listwise(design, t);
        let blocks: Vec<_> = design
            .x
            .axis_chunks_iter(Axis(0), block)
            .zip(self.resid.axis_chunks_iter_mut(Axis(0), block))
            .zip(y.axis_chunks_iter(Axis(0), block))
            .zip(design.weight.chunks(block))
            .enumerate()
            .collect();
        let listwise = &listwise;
        blocks
            .into_par_iter()
            .map(|(b, (((xb, mut zb), yb), wb))| {
                for (j, ((mut z, y), &sw)) in zb.rows_mut().into_iter().zip(yb.rows()).zip(wb).enumerate() {
                    let z = z.as_slice_mut().expect("rows of a standard-layout array are contiguous");
                    for (k, ((zk, &yk), &(wp, wn))) in z.iter_mut().zip(y).zip(class_weight.iter()).enumerate() {
                        *zk = (sigmoid(*zk) - yk) * sw * if yk > 0.5 { wp } else { wn } + listwise[[b * block + j, k]];
                    }
                }
                xb.t().dot(&zb)
            })
            .collect::<Vec<_>>()
            .into_iter()
            // summed in block order, whatever order the threads finished in: the same
            // gradient, bit for bit, on every run
            .fold(Array2::zeros((width, ncat)), |a, b| a + b)
    }

    /// The gradient of the listwise loss by logit (kept in `resid`), times its weight. Per
    /// training document and category it has positives of: `-log(Σ_pos w·e^z / Σ_all w·e^z)`,
    /// a softmax over the document's segments, each counted for the segments it stands for
    /// (`w`): the per-segment loss asks every segment to fall on the right side of a line, this
    /// one asks a document's clauses to outrank the rest of that document, which is what its
    /// top five are. Learned with it, the first 400 training contracts of the fixed shuffle
    /// found 630 of the 708 gold clauses of the other 30 in their top five, against 611 without
    /// (docs/clause-scorer.md).
    fn listwise(&self, design: &Design, t: &Targets) -> Array2<f32> {
        let z = &self.resid;
        let mut g = Array2::<f32>::zeros(z.dim());
        let scale = LISTWISE * design.total / t.pairs.len().max(1) as f32;
        for &(d, k) in &t.pairs {
            let rows = design.docs[d].clone();
            let m = rows.clone().map(|i| z[[i, k]]).fold(f32::MIN, f32::max);
            let e: Vec<f32> = rows.clone().map(|i| design.weight[i] * (z[[i, k]] - m).exp()).collect();
            let all: f32 = e.iter().sum();
            let pos: f32 = rows.clone().zip(&e).filter(|&(i, _)| t.y[[i, k]] > 0.5).map(|(_, e)| e).sum();
            for (i, &ei) in rows.zip(&e) {
                let p = if t.y[[i, k]] > 0.5 { ei / pos } else { 0.0 };
                g[[i, k]] = scale * (ei / all - p);
            }
        }
        g
    }

    /// The lexical gradient, by term, from the residuals of [`Fit::dense_gradient`].
    fn lexical_gradient(&mut self, design: &Design) {
        let ncat = self.ncat;
        let (resid, lex_grad) = (&self.resid, &mut self.lex_grad);
        let res = resid.as_slice().expect("a new array is in standard layout");
        lex_grad.fill(0.0);
        lex_grad.par_chunks_mut(ncat).zip(&design.rows_with).for_each(|(g, rows)| {
            for &r in rows {
                let v = design.lexical[r].1;
                for (gk, &rk) in g.iter_mut().zip(&res[r * ncat..(r + 1) * ncat]) {
                    *gk += rk * v;
                }
            }
        });
    }

    /// Category `k`'s scorer; its presence threshold maximises F1 on the training documents
    /// (replaced by [`learn`] where it has folds).
    fn scorer(&self, k: usize, cat: &StoredCategory, vocab: &Vocabulary, t: &Targets, docs: &[&Doc]) -> Scorer {
        let (dim, ncat) = (self.dim, self.ncat);
        if t.n_pos[k] == 0 {
            // nothing to learn from: the query's ranking, never present
            let weights = self.prior.column(k).iter().take(dim).copied().collect();
            return Scorer { weights, position: [0.0; 2], terms: HashMap::new(), bias: Some(NEVER), threshold: 1.0 };
        }
        let col = self.w.column(k);
        // keep the KEEP_TERMS strongest term weights: what is stored is what is evaluated
        let mut strongest: Vec<(i32, f32)> = vocab
            .terms
            .iter()
            .enumerate()
            .map(|(t, &term)| (term, self.lex[t * ncat + k]))
            .filter(|(_, l)| *l != 0.0)
            .collect();
        strongest.sort_by(|a, b| b.1.abs().total_cmp(&a.1.abs()).then(a.0.cmp(&b.0)));
        strongest.truncate(KEEP_TERMS);
        let mut s = Scorer {
            weights: col.iter().take(dim).copied().collect(),
            position: [col[dim], col[dim + 1]],
            terms: strongest.into_iter().collect(),
            bias: Some(col[dim + 2]),
            threshold: 0.0,
        };
        s.threshold = best_threshold(docs.iter().map(|d| (ranking(d, &s).1, has(d, &cat.name))));
        s
    }
}

/// Learn every category's scorer from `docs` (see the module docs), each presence threshold
/// from out-of-fold scores ([`crate::calibrate`]) where there are enough documents for folds.
pub fn learn(docs: &[&Doc], cats: &[StoredCategory]) -> Vec<Scorer> {
    learn_with_estimate(docs, cats).0
}

/// [`learn`], and what the out-of-fold scores say to expect of the scorers on documents they
/// were not learned from (`None` with too few documents for folds).
pub fn learn_with_estimate(
    docs: &[&Doc],
    cats: &[StoredCategory],
) -> (Vec<Scorer>, Option<(calibrate::Estimate, calibrate::OutOfFold)>) {
    let mut scorers = fit(docs, cats);
    if docs.len() < calibrate::MIN_DOCUMENTS {
        return (scorers, None);
    }
    let oof = calibrate::OutOfFold::new(docs, cats, |train| fit(train, cats));
    // a category without positives stays never present; one that some fold's learner never
    // saw keeps its threshold on the training documents
    let ks: Vec<usize> = (0..scorers.len()).filter(|&k| scorers[k].bias != Some(NEVER) && oof.covers(k)).collect();
    for (k, t) in oof.thresholds(docs, cats, &ks) {
        scorers[k].threshold = t;
    }
    let estimate = oof.estimate(docs, cats, &scorers);
    (scorers, Some((estimate, oof)))
}

/// Every category's scorer learned from `docs`, presence thresholds maximising F1 on `docs`
/// themselves (what [`learn`] keeps for too few documents to fold).
fn fit(docs: &[&Doc], cats: &[StoredCategory]) -> Vec<Scorer> {
    let Some(dim) = cats.first().map(|c| c.query.len()) else { return Vec::new() };
    let vocab = Vocabulary::new(docs);
    let design = Design::new(docs, &vocab, dim);
    let targets = Targets::new(docs, cats, &design);
    let mut fit = Fit::new(cats, dim, vocab.terms.len(), design.x.nrows());
    for _ in 0..STEPS {
        fit.step(&design, &targets);
    }
    cats.par_iter().enumerate().map(|(k, cat)| fit.scorer(k, cat, &vocab, &targets, docs)).collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// Two categories: "A" told apart by the embedding alone (segment 3), "B" by a lexical term
    /// alone (segment 5, whose embedding is like the negatives').
    fn two_categories() -> (Vec<StoredCategory>, impl Fn(usize) -> Doc) {
        let dim = 4;
        let query = |k: usize| {
            let mut q = vec![0.1; dim];
            q[k] = 0.5;
            q
        };
        let cats: Vec<StoredCategory> = ["A", "B"]
            .iter()
            .enumerate()
            .map(|(k, n)| StoredCategory { name: n.to_string(), query: query(k) })
            .collect();
        let doc = move |seed: usize| {
            // segment 3: category A (embedding axis 2); segment 5: category B (term 7)
            let segments: Vec<Segment> = (0..8)
                .map(|i| {
                    let mut e = vec![0.5; dim];
                    e[(i + seed) % 2] = 0.7;
                    if i == 3 {
                        e[2] = 1.0;
                    }
                    let terms = if i == 5 { vec![7, 1] } else { vec![100 + i as i32, 1] };
                    Segment { index: i, chars: i * 10..i * 10 + 10, embedding: e, terms }
                })
                .collect();
            let gold = BTreeMap::from([("A".to_string(), vec![vec![3]]), ("B".to_string(), vec![vec![5]])]);
            let positives =
                BTreeMap::from([("A".to_string(), BTreeSet::from([3])), ("B".to_string(), BTreeSet::from([5]))]);
            let present = BTreeSet::from(["A".to_string(), "B".to_string()]);
            Doc { segments, gold, positives, present, weights: Vec::new() }
        };
        (cats, doc)
    }

    /// Both categories fitted together; each learned scorer must rank its own positives first,
    /// on documents it was not learned from.
    #[test]
    fn learner_fits_embedding_and_lexical_signals_per_category() {
        let (cats, doc) = two_categories();
        let train: Vec<Doc> = (0..6).map(&doc).collect();
        let scorers = learn(&train.iter().collect::<Vec<_>>(), &cats);
        assert_eq!(scorers.len(), 2);
        let unseen = doc(7);
        assert_eq!(ranking(&unseen, &scorers[0]).0[0], 3);
        assert_eq!(ranking(&unseen, &scorers[1]).0[0], 5);
        assert!(scorers[1].terms.get(&7).is_some_and(|&w| w > 0.0), "term 7 carries category B");
        // both are present in every training document: the threshold admits the best segment
        for s in &scorers {
            assert!(ranking(&unseen, s).1 >= s.threshold);
        }
    }

    /// The same documents give the same scorers, bit for bit, whatever the number of threads
    /// (the gradient's blocks are summed in order; 48 rows make ten blocks here).
    #[test]
    fn learning_is_reproducible_across_thread_counts() {
        let (cats, doc) = two_categories();
        let train: Vec<Doc> = (0..6).map(&doc).collect();
        let train: Vec<&Doc> = train.iter().collect();
        let bits = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a thread pool");
            pool.install(|| learn(&train, &cats))
                .iter()
                .map(|s| {
                    let mut terms: Vec<(i32, u32)> = s.terms.iter().map(|(&t, w)| (t, w.to_bits())).collect();
                    terms.sort_unstable();
                    let weights: Vec<u32> = s.weights.iter().map(|w| w.to_bits()).collect();
                    let position = s.position.map(f32::to_bits);
                    (weights, position, terms, s.bias.map(f32::to_bits), s.threshold.to_bits())
                })
                .collect::<Vec<_>>()
        };
        let one = bits(1);
        assert_eq!(one, bits(3));
        assert_eq!(one, bits(3));
    }

    /// The listwise gradient is the derivative of its loss: against central differences of
    /// `scale · -log(Σ_pos w·e^z / Σ_all w·e^z)`, on weighted rows of two documents.
    #[test]
    fn listwise_gradient_is_the_derivative_of_its_loss() {
        let dim = 2;
        let cats = vec![StoredCategory { name: "A".into(), query: vec![0.0; dim] }];
        let doc = |n: usize, pos: usize| {
            let segments: Vec<Segment> = (0..n)
                .map(|i| Segment { index: i, chars: i..i + 1, embedding: vec![0.0; dim], terms: vec![] })
                .collect();
            let positives = BTreeMap::from([("A".to_string(), BTreeSet::from([pos]))]);
            let weights = (0..n).map(|i| 1.0 + i as f32).collect();
            Doc { segments, gold: BTreeMap::new(), positives, present: BTreeSet::new(), weights }
        };
        let docs = [doc(4, 1), doc(3, 2)];
        let docs: Vec<&Doc> = docs.iter().collect();
        let vocab = Vocabulary::new(&docs);
        let design = Design::new(&docs, &vocab, dim);
        let t = Targets::new(&docs, &cats, &design);
        assert_eq!(t.pairs, vec![(0, 0), (1, 0)]);
        let mut fit = Fit::new(&cats, dim, 0, design.x.nrows());
        let z0 = [0.3f32, -0.2, 1.1, 0.4, -0.7, 0.2, 0.9];
        let loss = |z: &[f32]| -> f64 {
            let scale = (LISTWISE * design.total / 2.0) as f64;
            design
                .docs
                .iter()
                .map(|r| {
                    let e = |i: usize| design.weight[i] as f64 * (z[i] as f64).exp();
                    let all: f64 = r.clone().map(e).sum();
                    let pos: f64 = r.clone().filter(|&i| t.y[[i, 0]] > 0.5).map(e).sum();
                    -scale * (pos / all).ln()
                })
                .sum()
        };
        for (i, &v) in z0.iter().enumerate() {
            fit.resid[[i, 0]] = v;
        }
        let g = fit.listwise(&design, &t);
        for i in 0..z0.len() {
            let h = 1e-3;
            let (mut up, mut down) = (z0, z0);
            up[i] += h;
            down[i] -= h;
            let numeric = (loss(&up) - loss(&down)) / (2.0 * h as f64);
            assert!(
                (g[[i, 0]] as f64 - numeric).abs() < 1e-2 * numeric.abs().max(1.0),
                "row {i}: {} vs {numeric}",
                g[[i, 0]]
            );
        }
    }

    #[test]
    fn threshold_maximises_f1() {
        let t = best_threshold([(0.9, true), (0.8, true), (0.7, false), (0.6, true), (0.2, false)].into_iter());
        assert!(t > 0.2 && t < 0.6, "{t}");
        let t = best_threshold([(0.9, true), (0.5, false)].into_iter());
        assert!(t > 0.5 && t < 0.9);
        assert!(best_threshold([(0.4, false)].into_iter()) > 0.4);
    }
}
