//! Presence thresholds, and the presence precision and recall to expect on new documents, from
//! out-of-fold scores of the training documents.
//!
//! A threshold set on the scores of the documents a scorer was learned from lands too low, for
//! two reasons: the scorer has seen those documents (their clauses score higher than a new
//! document's), and a training document may hold only a sample of its segments, so its best
//! score is taken over a dozen segments rather than the hundred or more a document has at run
//! time. So the training documents are split into folds, and each fold is scored by scorers
//! learned on the others ([`OutOfFold`]). The best score of a *whole* document is then
//! modelled: a document whose embedded segments score at most `m`, with `r` segments not
//! embedded, has
//!
//! ```text
//! P(best score < t) = [m < t] · F(t)^r
//! ```
//!
//! where `F` is the distribution of the category's scores over the randomly drawn segments of
//! all training documents, each counted for the segments it stands for (positives of the
//! category left out). The thresholds of all categories are chosen together, for the expected
//! precision of presence against the documents' answers over all categories ([`PRECISION`]),
//! with as much recall as that leaves ([`OutOfFold::thresholds`]). A document holding all its
//! segments has `r = 0`: the model is then the plain best score.

use crate::gold::{has, Doc};
use crate::scorer::Scorer;
use crate::stored::StoredCategory;

/// Folds of the training documents.
pub const FOLDS: usize = 5;
/// Fewer training documents than this: thresholds are set on the training scores themselves.
pub const MIN_DOCUMENTS: usize = 10;
/// The precision of presence the thresholds aim at, over all categories together (issue 21's
/// target). Users filter contracts on presence ("every contract with a non-compete"), and a
/// list padded with contracts that lack the clause costs more than one missing a few.
pub const PRECISION: f64 = 0.90;
/// Prices of a false positive, in true positives, tried in order ([`OutOfFold::thresholds`]).
pub const LAMBDAS: &[f64] = &[0.25, 0.5, 0.75, 1.0, 1.125, 1.25, 1.375, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 6.0, 8.0];
/// The threshold of a category never answered present: above every score.
pub const NEVER_PRESENT: f32 = 1.0;

/// Per training document, per category, the score of each of its segments by scorers learned
/// on the other folds (document `i` is in fold `i % FOLDS`).
pub struct OutOfFold {
    scores: Vec<Vec<Vec<f32>>>,
    /// Per category: whether every fold's learner had documents with positives of it.
    covered: Vec<bool>,
}

/// What the out-of-fold scores say to expect of presence on documents the scorers were not
/// learned from: expected counts over documents and categories at the learned thresholds.
/// (Recall@5 is not estimated: a training document's drawn segments say too little about the
/// few segments that would outrank a clause.)
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub folds: usize,
    pub tp: f64,
    pub fp: f64,
    pub fn_: f64,
}

impl Estimate {
    pub fn presence_precision(&self) -> f64 {
        self.tp / (self.tp + self.fp).max(1e-9)
    }
    pub fn presence_recall(&self) -> f64 {
        self.tp / (self.tp + self.fn_).max(1e-9)
    }
}

/// How many segments a document does not hold (the weights of its drawn segments beyond
/// themselves).
fn unembedded(d: &Doc) -> f32 {
    (0..d.segments.len()).map(|i| (d.weight(i) - 1.0).max(0.0)).sum()
}

/// The distribution of one category's scores over the drawn segments of all documents.
struct Background {
    /// (score, cumulative weight up to and including it), ascending.
    cdf: Vec<(f32, f64)>,
    total: f64,
}

impl Background {
    fn new(docs: &[&Doc], scores: &[Vec<Vec<f32>>], k: usize, cat: &str) -> Self {
        let mut pts: Vec<(f32, f64)> = Vec::new();
        for (d, s) in docs.iter().zip(scores) {
            let pos = d.positives.get(cat);
            for (i, &sc) in s[k].iter().enumerate() {
                let w = d.weight(i);
                if w > 1.0 && !pos.is_some_and(|p| p.contains(&i)) {
                    pts.push((sc, f64::from(w)));
                }
            }
        }
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut acc = 0.0;
        let cdf: Vec<(f32, f64)> = pts
            .into_iter()
            .map(|(s, w)| {
                acc += w;
                (s, acc)
            })
            .collect();
        Background { cdf, total: acc }
    }

    /// The share of drawn segments scoring below `t`.
    fn below(&self, t: f32) -> f64 {
        if self.total <= 0.0 {
            return 1.0;
        }
        let n = self.cdf.partition_point(|p| p.0 < t);
        if n == 0 {
            0.0
        } else {
            self.cdf[n - 1].1 / self.total
        }
    }
}

impl OutOfFold {
    /// Score every document by scorers `learn` learns on the other folds.
    pub fn new(docs: &[&Doc], cats: &[StoredCategory], learn: impl Fn(&[&Doc]) -> Vec<Scorer>) -> Self {
        let (folds, ncat) = (FOLDS.min(docs.len()).max(2), cats.len());
        let mut scores: Vec<Vec<Vec<f32>>> = vec![Vec::new(); docs.len()];
        let mut covered = vec![true; ncat];
        for f in 0..folds {
            let train: Vec<&Doc> = docs.iter().enumerate().filter(|(i, _)| i % folds != f).map(|(_, d)| *d).collect();
            for (c, cat) in covered.iter_mut().zip(cats) {
                *c &= train.iter().any(|d| d.positives.get(&cat.name).is_some_and(|p| !p.is_empty()));
            }
            let scorers = learn(&train);
            for (i, d) in docs.iter().enumerate().filter(|(i, _)| i % folds == f) {
                scores[i] = (0..ncat)
                    .map(|k| d.segments.iter().map(|seg| scorers.get(k).map_or(0.0, |s| s.score(seg))).collect())
                    .collect();
            }
        }
        OutOfFold { scores, covered }
    }

    /// Whether category `k`'s out-of-fold scores can set its threshold: a fold whose learner
    /// saw no positive of it scores its documents near zero, which would drag the threshold
    /// down (small training sets, rare categories).
    pub fn covers(&self, k: usize) -> bool {
        self.covered.get(k).copied().unwrap_or(false)
    }

    /// Document `i`'s out-of-fold scores of category `k`, one per segment it holds.
    pub fn scores(&self, i: usize, k: usize) -> &[f32] {
        self.scores.get(i).and_then(|d| d.get(k)).map_or(&[], Vec::as_slice)
    }

    fn folds(&self) -> usize {
        FOLDS.min(self.scores.len()).max(2)
    }

    /// Per document: the best out-of-fold score of its segments for category `k`, and how many
    /// segments it does not hold.
    fn best(&self, docs: &[&Doc], k: usize) -> Vec<(f32, f32)> {
        docs.iter()
            .zip(&self.scores)
            .map(|(d, s)| (s[k].iter().copied().fold(f32::NEG_INFINITY, f32::max), unembedded(d)))
            .collect()
    }

    /// Expected presence counts (tp, fp, fn) of category `k` at threshold `t`.
    fn expected(docs: &[&Doc], cat: &str, best: &[(f32, f32)], bg: &Background, t: f32) -> (f64, f64, f64) {
        let below = bg.below(t);
        let (mut tp, mut fp, mut fn_) = (0.0, 0.0, 0.0);
        for (d, &(m, r)) in docs.iter().zip(best) {
            let absent = if m >= t { 0.0 } else { below.powf(f64::from(r)) };
            if has(d, cat) {
                tp += 1.0 - absent;
                fn_ += absent;
            } else {
                fp += 1.0 - absent;
            }
        }
        (tp, fp, fn_)
    }

    /// Category `k`'s candidate thresholds, ascending, each with the expected presence counts
    /// (tp, fp, fn) over the documents: every document's best score, and the upper tail of the
    /// drawn segments'.
    fn candidates(&self, docs: &[&Doc], k: usize, cat: &str) -> Vec<(f32, (f64, f64, f64))> {
        let best = self.best(docs, k);
        let bg = Background::new(docs, &self.scores, k, cat);
        let mut candidates: Vec<f32> = best.iter().map(|b| b.0).filter(|s| s.is_finite()).collect();
        let tail = bg.cdf.partition_point(|p| p.1 < 0.9 * bg.total);
        candidates.extend(bg.cdf[tail..].iter().map(|p| p.0));
        candidates.sort_by(|a, b| a.total_cmp(b));
        candidates.dedup();
        candidates.into_iter().map(|t| (t, Self::expected(docs, cat, &best, &bg, t))).collect()
    }

    /// The presence thresholds of categories `ks`, chosen together for the precision of
    /// presence over all of them ([`PRECISION`]): for a price `lambda` of a false positive,
    /// each category's threshold maximises its expected true positives less `lambda` times its
    /// false positives (none present, if no threshold gains anything); `lambda` is the
    /// smallest on [`LAMBDAS`] whose thresholds reach `PRECISION` over all categories' expected
    /// counts (the largest, if none does). One price for all categories puts each category's
    /// last "present" where it costs the others least, rather than each category at its own
    /// best trade-off: a category that is hard to tell (few clean positives) then answers
    /// "present" less often, an easy one more.
    pub fn thresholds(&self, docs: &[&Doc], cats: &[StoredCategory], ks: &[usize]) -> Vec<(usize, f32)> {
        let candidates: Vec<Vec<(f32, (f64, f64, f64))>> =
            ks.iter().map(|&k| self.candidates(docs, k, &cats[k].name)).collect();
        // per category at price `lambda`: the chosen candidate (None: never present), its tp, fp
        let choose = |c: &[(f32, (f64, f64, f64))], lambda: f64| {
            let mut choice = (0.0, None, 0.0, 0.0);
            for (j, &(_, (tp, fp, _))) in c.iter().enumerate() {
                if tp - lambda * fp > choice.0 {
                    choice = (tp - lambda * fp, Some(j), tp, fp);
                }
            }
            (choice.1, choice.2, choice.3)
        };
        let at = |lambda: f64| -> (Vec<Option<usize>>, f64) {
            let picks: Vec<_> = candidates.iter().map(|c| choose(c, lambda)).collect();
            let (tp, fp) = picks.iter().fold((0.0, 0.0), |(tp, fp), p| (tp + p.1, fp + p.2));
            (picks.into_iter().map(|p| p.0).collect(), tp / (tp + fp).max(1e-9))
        };
        let last = LAMBDAS[LAMBDAS.len() - 1];
        let picks = LAMBDAS
            .iter()
            .map(|&lambda| at(lambda))
            .find(|(_, precision)| *precision >= PRECISION)
            .unwrap_or_else(|| at(last))
            .0;
        ks.iter()
            .zip(&candidates)
            .zip(picks)
            .map(|((&k, c), j)| {
                // halfway down to the next candidate: the same documents are above it, with a
                // margin; never present: above every score
                let t = match j {
                    Some(0) => c[0].0,
                    Some(j) => (c[j - 1].0 + c[j].0) / 2.0,
                    None => NEVER_PRESENT,
                };
                (k, t)
            })
            .collect()
    }

    /// Expected presence counts at `scorers`' thresholds over the out-of-fold scores.
    pub fn estimate(&self, docs: &[&Doc], cats: &[StoredCategory], scorers: &[Scorer]) -> Estimate {
        let mut e = Estimate { folds: self.folds(), tp: 0.0, fp: 0.0, fn_: 0.0 };
        for (k, (cat, s)) in cats.iter().zip(scorers).enumerate() {
            let best = self.best(docs, k);
            let bg = Background::new(docs, &self.scores, k, &cat.name);
            let (tp, fp, fn_) = Self::expected(docs, &cat.name, &best, &bg, s.threshold);
            e.tp += tp;
            e.fp += fp;
            e.fn_ += fn_;
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;
    use crate::scorer::Segment;

    fn doc(scores: &[f32], weights: Vec<f32>, present: bool, positive: Option<usize>) -> Doc {
        let segments = scores
            .iter()
            .enumerate()
            .map(|(i, &s)| Segment { index: i, chars: i..i + 1, embedding: vec![s], terms: vec![] })
            .collect();
        let positives = positive.map(|p| BTreeMap::from([("A".to_string(), BTreeSet::from([p]))])).unwrap_or_default();
        let gold = positive.map(|p| BTreeMap::from([("A".to_string(), vec![vec![p]])])).unwrap_or_default();
        let present = if present { BTreeSet::from(["A".to_string()]) } else { BTreeSet::new() };
        Doc { segments, gold, positives, present, weights }
    }

    fn cats_a() -> Vec<StoredCategory> {
        vec![StoredCategory { name: "A".into(), query: vec![1.0] }]
    }

    /// A scorer whose score is the segment's one embedding value.
    fn identity() -> Scorer {
        Scorer { weights: vec![1.0], position: [0.0; 2], terms: Default::default(), bias: None, threshold: 0.5 }
    }

    #[test]
    fn whole_documents_get_the_plain_best_score_threshold() {
        // present documents score 0.8, absent ones 0.3: any threshold in (0.3, 0.8] is perfect
        let docs: Vec<Doc> = (0..10)
            .map(|i| {
                if i % 2 == 0 {
                    doc(&[0.1, 0.8], vec![], true, Some(1))
                } else {
                    doc(&[0.1, 0.3], vec![], false, None)
                }
            })
            .collect();
        let refs: Vec<&Doc> = docs.iter().collect();
        let oof = OutOfFold::new(&refs, &cats_a(), |_| vec![identity()]);
        assert!(oof.covers(0), "every fold's learner has present documents");
        let t = oof.thresholds(&refs, &cats_a(), &[0])[0].1;
        assert!(t > 0.3 && t <= 0.8, "{t}");
        let e = oof.estimate(&refs, &cats_a(), &[Scorer { threshold: t, ..identity() }]);
        assert_eq!((e.tp, e.fp, e.fn_), (5.0, 0.0, 0.0));
    }

    #[test]
    fn sampled_documents_raise_the_threshold_for_the_segments_they_do_not_hold() {
        // absent documents: two drawn segments, at 0.3 and at 0.5 (0.66 in one of them), each
        // standing for 50; present documents: a positive at 0.7 and two drawn segments at 0.2.
        // By their drawn segments alone, a threshold of 0.65 makes one false positive. But an
        // absent document has P(best < 0.65) = F(0.65)^98, where F, the share of drawn segments
        // below 0.65, is 1750/1800: most whole absent documents reach 0.65.
        let absent = |hi: f32| doc(&[0.3, hi], vec![50.0, 50.0], false, None);
        let present = || doc(&[0.7, 0.2, 0.2], vec![1.0, 40.0, 40.0], true, Some(0));
        let mut docs: Vec<Doc> = (0..10).map(|_| present()).collect();
        docs.extend((0..10).map(|i| absent(if i == 0 { 0.66 } else { 0.5 })));
        let refs: Vec<&Doc> = docs.iter().collect();
        let oof = OutOfFold::new(&refs, &cats_a(), |_| vec![identity()]);
        let t = oof.thresholds(&refs, &cats_a(), &[0])[0].1;
        assert!(t > 0.66 && t <= 0.7, "{t}");
        // the absent documents' expected false positives at 0.65 are many, at t none
        let cats = cats_a();
        let at = |th: f32| oof.estimate(&refs, &cats, &[Scorer { threshold: th, ..identity() }]);
        assert!(at(0.65).fp > 5.0, "{:?}", at(0.65));
        assert!(at(t).fp < 0.5, "{:?}", at(t));
        assert_eq!(at(t).tp, 10.0);
    }

    #[test]
    fn thresholds_are_chosen_together_for_the_precision_over_all_categories() {
        // A is easy: present documents score 0.8, absent ones 0.3. B is hard: of its ten
        // present documents two score 0.9 and eight 0.6, and eight of the ten absent ones score
        // 0.6 too. Alone, B's best trade-off is 0.6 (10 found, 8 false); with A, that puts the
        // precision over both at 20/28, below PRECISION, so B answers only where it is sure.
        let seg =
            |i: usize, a: f32, b: f32| Segment { index: i, chars: i..i + 1, embedding: vec![a, b], terms: vec![] };
        let docs: Vec<Doc> = (0..20)
            .map(|i| {
                let present = i % 2 == 0;
                let a = if present { 0.8 } else { 0.3 };
                let b = match (present, i / 2) {
                    (true, 0 | 1) => 0.9,
                    (false, 8 | 9) => 0.2,
                    _ => 0.6,
                };
                let names = ["A", "B"].map(String::from);
                let (positives, gold, present) = if present {
                    (
                        names.iter().map(|n| (n.clone(), BTreeSet::from([0]))).collect(),
                        names.iter().map(|n| (n.clone(), vec![vec![0]])).collect(),
                        names.iter().cloned().collect(),
                    )
                } else {
                    Default::default()
                };
                Doc { segments: vec![seg(0, a, b)], gold, positives, present, weights: vec![] }
            })
            .collect();
        let refs: Vec<&Doc> = docs.iter().collect();
        let cats = vec![
            StoredCategory { name: "A".into(), query: vec![1.0, 0.0] },
            StoredCategory { name: "B".into(), query: vec![0.0, 1.0] },
        ];
        let pick = |w: Vec<f32>| Scorer { weights: w, ..identity() };
        let oof = OutOfFold::new(&refs, &cats, |_| vec![pick(vec![1.0, 0.0]), pick(vec![0.0, 1.0])]);
        let t = oof.thresholds(&refs, &cats, &[0, 1]);
        assert_eq!(t.iter().map(|p| p.0).collect::<Vec<_>>(), vec![0, 1]);
        assert!(t[0].1 > 0.3 && t[0].1 <= 0.8, "{t:?}");
        assert!(t[1].1 > 0.6 && t[1].1 <= 0.9, "{t:?}");
        let scorers: Vec<Scorer> = [pick(vec![1.0, 0.0]), pick(vec![0.0, 1.0])]
            .into_iter()
            .zip(&t)
            .map(|(s, &(_, threshold))| Scorer { threshold, ..s })
            .collect();
        let e = oof.estimate(&refs, &cats, &scorers);
        assert_eq!((e.tp, e.fp, e.fn_), (12.0, 0.0, 8.0));
        // B alone has no other category to spend precision on: it is held to PRECISION too
        let alone = oof.thresholds(&refs, &cats, &[1]);
        assert!(alone[0].1 > 0.6, "{alone:?}");
    }

    #[test]
    fn each_fold_is_scored_by_scorers_learned_without_it() {
        let docs: Vec<Doc> = (0..10).map(|i| doc(&[i as f32], vec![], false, None)).collect();
        let refs: Vec<&Doc> = docs.iter().collect();
        // no document has positives of A: no fold covers it
        assert!(!OutOfFold::new(&refs, &cats_a(), |_| vec![identity()]).covers(0));
        // the "learner" records which documents it saw in its weight: their sum
        let oof = OutOfFold::new(&refs, &cats_a(), |train| {
            let seen: f32 = train.iter().map(|d| d.segments[0].embedding[0]).sum();
            vec![Scorer { weights: vec![seen], ..identity() }]
        });
        for (i, s) in oof.scores.iter().enumerate() {
            let seen: f32 = (0..10).filter(|j| j % FOLDS != i % FOLDS).map(|j| j as f32).sum();
            assert_eq!(s[0][0], i as f32 * seen, "document {i}");
        }
    }
}
