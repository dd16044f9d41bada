//! Evaluation: how well clause labels find the gold clauses of labelled contracts.
//!
//! For each category and each document with gold clauses, segments are ranked by score;
//! recall@K is the share of gold clauses matched by one of the top K segments. Presence: a
//! document is predicted to have a category when its best score reaches the threshold.
//!
//! Two scorers are reported beside each other: the category queries alone (zero-shot cosine),
//! and the scorers under test ([`Scoring`]) — given scorers such as the shipped artifact,
//! scored on documents they were not trained on, or scorers learned under k-fold
//! cross-validation by document, every document scored by a scorer learned on the other folds
//! only ([`crate::learn`]). [`evaluate`] returns the table; its `Display` is what
//! `docpipe eval` prints, ending with `recall@5 X.XX`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::gold::{has, Doc};
use crate::learn::learn;
use crate::scorer::{ranking, Scorer};
use crate::stored::StoredCategory;
use crate::ClausesError;

/// The scorers under test.
pub enum Scoring<'a> {
    /// Given scorers by category name (the shipped artifact, named by `label`); a category
    /// without one is scored by its query (zero-shot) and marked so.
    Given { scorers: &'a BTreeMap<String, Scorer>, label: String },
    /// Scorers learned under `folds`-fold cross-validation by document.
    CrossValidated { folds: usize },
}

/// Gold clauses found in the top `k` (per k in `ks`), and the number of gold clauses.
fn hits(doc: &Doc, cat: &str, s: &Scorer, ks: &[usize]) -> (Vec<usize>, usize) {
    let Some(clauses) = doc.gold.get(cat) else { return (vec![0; ks.len()], 0) };
    let (rank, _) = ranking(doc, s);
    let pos: BTreeMap<usize, usize> = rank.iter().enumerate().map(|(r, &i)| (i, r)).collect();
    let found = ks
        .iter()
        .map(|&k| clauses.iter().filter(|m| m.iter().any(|i| pos.get(i).is_some_and(|&r| r < k))).count())
        .collect();
    (found, clauses.len())
}

/// Counts for one category (or all of them).
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tally {
    pub gold: usize,
    pub at1: usize,
    pub at5: usize,
    pub zs5: usize,
    pub tp: usize,
    pub fp: usize,
    pub fn_: usize,
    pub docs: usize,
}

impl Tally {
    fn add(&mut self, t: &Tally) {
        for (a, b) in [
            (&mut self.gold, t.gold),
            (&mut self.at1, t.at1),
            (&mut self.at5, t.at5),
            (&mut self.zs5, t.zs5),
            (&mut self.tp, t.tp),
            (&mut self.fp, t.fp),
            (&mut self.fn_, t.fn_),
            (&mut self.docs, t.docs),
        ] {
            *a += b;
        }
    }

    /// Count one document's presence prediction against its gold.
    fn presence(&mut self, predicted: bool, present: bool) {
        match (predicted, present) {
            (true, true) => self.tp += 1,
            (true, false) => self.fp += 1,
            (false, true) => self.fn_ += 1,
            _ => {}
        }
    }
}

/// The evaluation's figures, per category and overall.
#[derive(Debug, Clone)]
pub struct EvalTable {
    pub documents: usize,
    /// How the scorers under test were obtained, in words.
    pub scoring: String,
    /// Categories the given scorers do not cover (scored zero-shot).
    pub zero_shot_only: Vec<String>,
    /// Gold clauses not located in the extracted text (counted as misses).
    pub unlocated: usize,
    pub categories: BTreeMap<String, Tally>,
    /// Gold clauses a perfect ranking could find in the top 1 and top 5.
    pub ceiling: (usize, usize),
    /// Document-category pairs with a gold clause, and those with one in the top 5.
    pub pairs: (usize, usize),
    /// Zero-shot presence at `zs_threshold`: true positives, false positives, false negatives.
    pub zero_shot: (usize, usize, usize),
    pub zs_threshold: f32,
}

impl EvalTable {
    /// All categories together.
    pub fn overall(&self) -> Tally {
        let mut all = Tally::default();
        for t in self.categories.values().filter(|t| t.gold > 0 || t.fp > 0 || t.docs > 0) {
            all.add(t);
        }
        all
    }

    /// Share of gold clauses found in the top 5 by the learned scorers.
    pub fn recall_at_5(&self) -> f64 {
        let all = self.overall();
        all.at5 as f64 / all.gold.max(1) as f64
    }
}

fn pct(a: usize, b: usize) -> String {
    if b == 0 {
        "    -".to_string()
    } else {
        format!("{:5.2}", a as f64 / b as f64)
    }
}

fn row(f: &mut fmt::Formatter<'_>, name: &str, t: &Tally) -> fmt::Result {
    writeln!(
        f,
        "{:<38} {:>5} {:>5} {:>6} {:>6} {:>7} {:>6} {:>6}",
        name,
        t.docs,
        t.gold,
        pct(t.at1, t.gold),
        pct(t.at5, t.gold),
        pct(t.zs5, t.gold),
        pct(t.tp, t.tp + t.fp),
        pct(t.tp, t.tp + t.fn_)
    )
}

impl fmt::Display for EvalTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} documents; scorers: {}; {} gold clauses not located in the extracted text (counted as misses)",
            self.documents, self.scoring, self.unlocated
        )?;
        if !self.zero_shot_only.is_empty() {
            writeln!(
                f,
                "not covered by these scorers, scored zero-shot (marked *): {}",
                self.zero_shot_only.join(", ")
            )?;
        }
        writeln!(
            f,
            "presence: CUAD's answers (Yes, or any other non-empty answer than No; a gold clause where both answer \
             columns are empty)\n"
        )?;
        writeln!(
            f,
            "{:<38} {:>5} {:>5} {:>6} {:>6} {:>7} {:>6} {:>6}",
            "category", "docs", "gold", "R@1", "R@5", "R@5 zs", "pres P", "pres R"
        )?;
        let (mut macro1, mut macro5, mut ncat) = (0f64, 0f64, 0usize);
        for (name, t) in self.categories.iter().filter(|(_, t)| t.gold > 0 || t.fp > 0 || t.docs > 0) {
            let marked;
            let name = if self.zero_shot_only.contains(name) {
                marked = format!("{name} *");
                &marked
            } else {
                name
            };
            row(f, name, t)?;
            if t.gold > 0 {
                macro1 += t.at1 as f64 / t.gold as f64;
                macro5 += t.at5 as f64 / t.gold as f64;
                ncat += 1;
            }
        }
        let all = self.overall();
        row(f, "overall (gold clauses)", &all)?;
        writeln!(
            f,
            "{:<38} {:>5} {:>5} {:>6} {:>6}   (best ranking possible with these segments)",
            "ceiling",
            "",
            "",
            pct(self.ceiling.0, all.gold),
            pct(self.ceiling.1, all.gold)
        )?;
        writeln!(
            f,
            "{:<38} {:>5} {:>5} {:>6.2} {:>6.2}",
            "macro average over categories",
            "",
            ncat,
            macro1 / ncat.max(1) as f64,
            macro5 / ncat.max(1) as f64
        )?;
        let (pairs, found) = self.pairs;
        writeln!(
            f,
            "\ndocument-category pairs with a gold clause in the top 5: {found}/{pairs} ({})",
            pct(found, pairs).trim()
        )?;
        let (tp, fp, fn_) = self.zero_shot;
        writeln!(
            f,
            "zero-shot presence at threshold {:.2}: precision {} recall {}",
            self.zs_threshold,
            pct(tp, tp + fp),
            pct(tp, tp + fn_)
        )?;
        write!(f, "recall@5 {:.2}", self.recall_at_5())
    }
}

/// Gold clauses a perfect ranking could find in the top `k` segments (greedy cover per
/// document and category): the ceiling the segmentation sets on recall@k.
fn ceiling(docs: &[Doc], k: usize) -> usize {
    let mut found = 0;
    for d in docs {
        for clauses in d.gold.values() {
            let mut covered = vec![false; clauses.len()];
            for _ in 0..k {
                let candidates: BTreeSet<usize> = clauses.iter().flatten().copied().collect();
                let gain = |i: usize| clauses.iter().zip(&covered).filter(|(m, c)| !**c && m.contains(&i)).count();
                let Some(best) = candidates.into_iter().max_by_key(|&i| gain(i)).filter(|&i| gain(i) > 0) else {
                    break;
                };
                for (m, c) in clauses.iter().zip(covered.iter_mut()) {
                    *c |= m.contains(&best);
                }
            }
            found += covered.iter().filter(|c| **c).count();
        }
    }
    found
}

/// Evaluate the scorers under test ([`Scoring`]) and the zero-shot queries at
/// `zs_threshold` on labelled documents.
pub fn evaluate(
    docs: &[Doc],
    cats: &[StoredCategory],
    scoring: &Scoring<'_>,
    unlocated: usize,
    zs_threshold: f32,
) -> Result<EvalTable, ClausesError> {
    let (min_docs, folds) = match scoring {
        Scoring::Given { .. } => (1, 1),
        Scoring::CrossValidated { folds } => (2, (*folds).min(docs.len()).max(2)),
    };
    if docs.len() < min_docs {
        return Err(ClausesError::Input(format!(
            "need at least {min_docs} labelled documents that are done, found {}",
            docs.len()
        )));
    }
    let (description, zero_shot_only) = match scoring {
        Scoring::Given { scorers, label } => (
            format!("{label}, not trained on these documents"),
            cats.iter().filter(|c| !scorers.contains_key(&c.name)).map(|c| c.name.clone()).collect(),
        ),
        Scoring::CrossValidated { .. } => (
            format!("learned under {folds}-fold cross-validation (each fold scored by a scorer learned on the others)"),
            Vec::new(),
        ),
    };
    let mut tally: BTreeMap<String, Tally> = cats.iter().map(|c| (c.name.clone(), Tally::default())).collect();
    let mut pairs = (0usize, 0usize);
    for f in 0..folds {
        let scorers: Vec<Scorer> = match scoring {
            Scoring::Given { scorers, .. } => cats
                .iter()
                .map(|c| scorers.get(&c.name).cloned().unwrap_or_else(|| Scorer::zero_shot(&c.query, zs_threshold)))
                .collect(),
            Scoring::CrossValidated { .. } => {
                let train: Vec<&Doc> =
                    docs.iter().enumerate().filter(|(i, _)| i % folds != f).map(|(_, d)| d).collect();
                learn(&train, cats)
            }
        };
        for d in docs.iter().enumerate().filter(|(i, _)| i % folds == f).map(|(_, d)| d) {
            for (cat, s) in cats.iter().zip(&scorers) {
                let Some(t) = tally.get_mut(&cat.name) else { continue };
                let (h, n) = hits(d, &cat.name, s, &[1, 5]);
                let (zs, _) = hits(d, &cat.name, &Scorer::zero_shot(&cat.query, zs_threshold), &[5]);
                if n > 0 {
                    pairs.0 += 1;
                    pairs.1 += (h[1] > 0) as usize;
                }
                t.gold += n;
                t.at1 += h[0];
                t.at5 += h[1];
                t.zs5 += zs[0];
                t.docs += has(d, &cat.name) as usize;
                t.presence(ranking(d, s).1 >= s.threshold, has(d, &cat.name));
            }
        }
    }
    // zero-shot presence with the one global threshold
    let mut zero_shot = Tally::default();
    for d in docs {
        for c in cats {
            zero_shot
                .presence(ranking(d, &Scorer::zero_shot(&c.query, zs_threshold)).1 >= zs_threshold, has(d, &c.name));
        }
    }
    Ok(EvalTable {
        documents: docs.len(),
        scoring: description,
        zero_shot_only,
        unlocated,
        categories: tally,
        ceiling: (ceiling(docs, 1), ceiling(docs, 5)),
        pairs,
        zero_shot: (zero_shot.tp, zero_shot.fp, zero_shot.fn_),
        zs_threshold,
    })
}

#[cfg(test)]
mod ceiling_tests {
    use super::*;
    use crate::scorer::Segment;

    #[test]
    fn ceiling_is_a_greedy_cover() {
        let seg = |n: usize| {
            (0..n).map(|i| Segment { index: i, chars: i * 10..i * 10 + 10, embedding: vec![], terms: vec![] }).collect()
        };
        // three gold clauses: two found only in segment 1, one only in segment 4; one nowhere
        let gold = BTreeMap::from([("X".to_string(), vec![vec![1, 2], vec![1], vec![4], vec![]])]);
        let d = Doc { segments: seg(6), gold, positives: BTreeMap::new(), present: BTreeSet::new(), weights: vec![] };
        assert_eq!(ceiling(std::slice::from_ref(&d), 1), 2);
        assert_eq!(ceiling(std::slice::from_ref(&d), 5), 3);
    }
}
