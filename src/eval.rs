//! `docpipe eval` — how well clause labels find the gold clauses of labelled contracts, and
//! the learning behind `docpipe labels --learn`.
//!
//! Labels file: `cuad_labels.tsv` format (tab-separated, quoted: file, category, answer,
//! clauses_json). A gold clause is located in the stored document text after whitespace
//! normalisation (case-folded; failing that, letters and digits only). A segment *matches* a
//! gold clause when they overlap by at least half of the shorter of the two.
//!
//! For each category and each document with gold clauses, segments are ranked by score;
//! recall@K is the share of gold clauses matched by one of the top K segments. Presence: a
//! document is predicted to have a category when its best score reaches the threshold.
//!
//! Two scorers are reported: the category queries alone (zero-shot), and learned prototypes
//! under k-fold cross-validation by document — every document is scored by prototypes,
//! `beta` and thresholds learned on the other folds only, so no figure comes from a document
//! the scorer was tuned on.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::Path;

use anyhow::{bail, Context, Result};
use pgvector::Vector;
use sqlx::PgPool;
use uuid::Uuid;

use crate::labels::StoredCategory;

/// Values of `beta` tried when learning a prototype.
const BETAS: [f32; 6] = [0.0, 0.5, 1.0, 2.0, 4.0, 8.0];

pub struct Segment {
    pub chars: Range<usize>,
    pub embedding: Vec<f32>,
}

/// A labelled document as stored: segments, and per category the segments each gold clause
/// matches (one list per gold clause; empty when the clause could not be located).
pub struct Doc {
    pub segments: Vec<Segment>,
    pub gold: BTreeMap<String, Vec<Vec<usize>>>,
}

/// Gold clauses per (file name, category), from a `cuad_labels.tsv`-format file. The CUAD
/// artifact column `X- Answer` is folded into `X`.
pub fn read_labels(path: &Path) -> Result<BTreeMap<(String, String), Vec<String>>> {
    let mut rdr = csv::ReaderBuilder::new()
        .delimiter(b'\t')
        .has_headers(true)
        .flexible(true)
        .from_path(path)
        .with_context(|| format!("opening {}", path.display()))?;
    let mut out: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for (i, rec) in rdr.records().enumerate() {
        let rec = rec.with_context(|| format!("{}: row {}", path.display(), i + 2))?;
        let (Some(file), Some(cat)) = (rec.get(0), rec.get(1)) else { continue };
        if file.is_empty() || cat.is_empty() {
            continue;
        }
        let cat = cat.trim().trim_end_matches("- Answer").trim().to_string();
        let clauses: Vec<String> = match rec.get(3).filter(|c| !c.trim().is_empty()) {
            Some(j) => serde_json::from_str(j).with_context(|| {
                format!("{}: row {}: clauses_json is not a JSON list of strings", path.display(), i + 2)
            })?,
            None => Vec::new(),
        };
        let entry = out.entry((file.to_string(), cat)).or_default();
        for c in clauses {
            if !c.trim().is_empty() && !entry.contains(&c) {
                entry.push(c);
            }
        }
    }
    Ok(out)
}

/// Text with whitespace runs collapsed to one space, case-folded (`alnum_only`: letters and
/// digits only), and for every byte of it the character offset in the original.
fn normalise(text: &str, alnum_only: bool) -> (String, Vec<usize>) {
    let mut out = String::with_capacity(text.len());
    let mut map = Vec::with_capacity(text.len());
    let mut space = true;
    for (i, ch) in text.chars().enumerate() {
        if ch.is_whitespace() || (alnum_only && !ch.is_alphanumeric()) {
            if !space && !alnum_only {
                out.push(' ');
                map.push(i);
            }
            space = true;
            continue;
        }
        space = false;
        for l in ch.to_lowercase() {
            let before = out.len();
            out.push(l);
            map.extend(std::iter::repeat_n(i, out.len() - before));
        }
    }
    (out, map)
}

/// Character ranges where `needle` occurs in the text (at most 100).
fn locate(hay: &(String, Vec<usize>), needle: &str, alnum_only: bool) -> Vec<Range<usize>> {
    let n = normalise(needle, alnum_only).0;
    let n = n.trim();
    if n.len() < 2 {
        return Vec::new();
    }
    hay.0.match_indices(n).take(100).map(|(b, m)| hay.1[b]..hay.1[b + m.len() - 1] + 1).collect()
}

fn overlaps_enough(a: &Range<usize>, b: &Range<usize>) -> bool {
    let inter = a.end.min(b.end).saturating_sub(a.start.max(b.start));
    inter > 0 && inter * 2 >= a.len().min(b.len())
}

/// Load the labelled documents of `bucket` (matched by file name) with their segments.
pub async fn load_docs(
    pool: &PgPool,
    bucket: &str,
    labels: &BTreeMap<(String, String), Vec<String>>,
) -> Result<(Vec<Doc>, usize)> {
    let files: BTreeSet<&String> = labels.keys().map(|(f, _)| f).collect();
    let rows: Vec<(Uuid, String, String, Option<String>)> =
        sqlx::query_as("SELECT id, key, status, text FROM documents WHERE bucket = $1 ORDER BY key")
            .bind(bucket)
            .fetch_all(pool)
            .await?;
    let mut docs = Vec::new();
    let mut unlocated = 0;
    for (id, key, status, text) in rows {
        let file = key.rsplit('/').next().unwrap_or(&key).to_string();
        if !files.contains(&file) {
            continue;
        }
        let Some(text) = text.filter(|_| status == "done") else {
            eprintln!("eval: {key} is {status}; left out");
            continue;
        };
        let segs: Vec<(i32, i32, Vector)> = sqlx::query_as(
            "SELECT char_start, char_end, embedding FROM segments
             WHERE document_id = $1 AND embedding IS NOT NULL ORDER BY segment_index",
        )
        .bind(id)
        .fetch_all(pool)
        .await?;
        let segments: Vec<Segment> = segs
            .into_iter()
            .map(|(s, e, v)| Segment { chars: s as usize..e as usize, embedding: v.to_vec() })
            .collect();
        let spaced = normalise(&text, false);
        let alnum = normalise(&text, true);
        let mut gold = BTreeMap::new();
        for ((f, cat), clauses) in labels.range((file.clone(), String::new())..) {
            if f != &file {
                break;
            }
            let mut per_clause = Vec::new();
            for clause in clauses {
                let mut at = locate(&spaced, clause, false);
                if at.is_empty() {
                    at = locate(&alnum, clause, true);
                }
                if at.is_empty() {
                    unlocated += 1;
                }
                let matching: Vec<usize> = segments
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| at.iter().any(|o| overlaps_enough(&s.chars, o)))
                    .map(|(i, _)| i)
                    .collect();
                per_clause.push(matching);
            }
            gold.insert(cat.clone(), per_clause);
        }
        docs.push(Doc { segments, gold });
    }
    Ok((docs, unlocated))
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn normalized(v: Vec<f32>) -> Vec<f32> {
    let n = dot(&v, &v).sqrt().max(1e-12);
    v.into_iter().map(|x| x / n).collect()
}

/// A scorer for one category: the vector segments are compared with, and the threshold.
#[derive(Clone)]
pub struct Scorer {
    pub embedding: Vec<f32>,
    pub threshold: f32,
}

/// Segment indices of a document, best first, and the best score.
fn ranking(doc: &Doc, e: &[f32]) -> (Vec<usize>, f32) {
    let scores: Vec<f32> = doc.segments.iter().map(|s| dot(&s.embedding, e)).collect();
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    idx.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let best = idx.first().map(|&i| scores[i]).unwrap_or(f32::NEG_INFINITY);
    (idx, best)
}

/// Gold clauses found in the top `k` (per k in `ks`), and the number of gold clauses.
fn hits(doc: &Doc, cat: &str, e: &[f32], ks: &[usize]) -> (Vec<usize>, usize) {
    let Some(clauses) = doc.gold.get(cat) else { return (vec![0; ks.len()], 0) };
    let (rank, _) = ranking(doc, e);
    let pos: BTreeMap<usize, usize> = rank.iter().enumerate().map(|(r, &i)| (i, r)).collect();
    let found = ks
        .iter()
        .map(|&k| clauses.iter().filter(|m| m.iter().any(|i| pos.get(i).is_some_and(|&r| r < k))).count())
        .collect();
    (found, clauses.len())
}

/// Learn one category's scorer from training documents.
fn learn_one(train: &[&Doc], cat: &StoredCategory, beta: f32) -> Scorer {
    let mut sum = vec![0f32; cat.query.len()];
    let mut n = 0;
    for d in train {
        let chosen: BTreeSet<usize> = d.gold.get(&cat.name).into_iter().flatten().flatten().copied().collect();
        for i in chosen {
            for (s, x) in sum.iter_mut().zip(&d.segments[i].embedding) {
                *s += x;
            }
            n += 1;
        }
    }
    let embedding = if n == 0 || beta == 0.0 {
        cat.query.clone()
    } else {
        let mean = normalized(sum);
        normalized(cat.query.iter().zip(&mean).map(|(q, m)| q + beta * m).collect())
    };
    let threshold = best_threshold(train.iter().map(|d| (ranking(d, &embedding).1, has(d, &cat.name))));
    Scorer { embedding, threshold }
}

fn has(d: &Doc, cat: &str) -> bool {
    d.gold.get(cat).is_some_and(|c| !c.is_empty())
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

/// Micro recall@5 of `beta` by k-fold cross-validation over `docs`.
fn cv_recall(docs: &[&Doc], cats: &[StoredCategory], beta: f32, folds: usize) -> f64 {
    let (mut found, mut total) = (0usize, 0usize);
    for f in 0..folds {
        let train: Vec<&Doc> = docs.iter().enumerate().filter(|(i, _)| i % folds != f).map(|(_, d)| *d).collect();
        for cat in cats {
            let s = learn_one(&train, cat, beta);
            for (_, d) in docs.iter().enumerate().filter(|(i, _)| i % folds == f) {
                let (h, n) = hits(d, &cat.name, &s.embedding, &[5]);
                found += h[0];
                total += n;
            }
        }
    }
    found as f64 / total.max(1) as f64
}

/// Learn every category's scorer from `docs`, picking `beta` by inner cross-validation.
pub fn learn(docs: &[&Doc], cats: &[StoredCategory], folds: usize) -> (f32, Vec<Scorer>) {
    let folds = folds.min(docs.len()).max(2);
    let beta = BETAS
        .iter()
        .copied()
        .map(|b| (b, cv_recall(docs, cats, b, folds)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(b, _)| b)
        .unwrap_or(1.0);
    (beta, cats.iter().map(|c| learn_one(docs, c, beta)).collect())
}

#[derive(Default, Clone, Copy)]
struct Tally {
    gold: usize,
    at1: usize,
    at5: usize,
    zs5: usize,
    tp: usize,
    fp: usize,
    fn_: usize,
    docs: usize,
}

/// Run the evaluation and print the table; the last line is `recall@5 X.XX`.
pub fn report(docs: &[Doc], cats: &[StoredCategory], folds: usize, unlocated: usize, zs_threshold: f32) -> Result<()> {
    if docs.len() < 2 {
        bail!("need at least 2 labelled documents that are done, found {}", docs.len());
    }
    let folds = folds.min(docs.len()).max(2);
    let mut tally: BTreeMap<&str, Tally> = cats.iter().map(|c| (c.name.as_str(), Tally::default())).collect();
    let mut betas = Vec::new();
    for f in 0..folds {
        let train: Vec<&Doc> = docs.iter().enumerate().filter(|(i, _)| i % folds != f).map(|(_, d)| d).collect();
        let (beta, scorers) = learn(&train, cats, folds - 1);
        betas.push(beta);
        for (i, d) in docs.iter().enumerate().filter(|(i, _)| i % folds == f) {
            let _ = i;
            for (cat, s) in cats.iter().zip(&scorers) {
                let t = tally.get_mut(cat.name.as_str()).expect("category");
                let (h, n) = hits(d, &cat.name, &s.embedding, &[1, 5]);
                let (zs, _) = hits(d, &cat.name, &cat.query, &[5]);
                t.gold += n;
                t.at1 += h[0];
                t.at5 += h[1];
                t.zs5 += zs[0];
                t.docs += has(d, &cat.name) as usize;
                let predicted = ranking(d, &s.embedding).1 >= s.threshold;
                match (predicted, has(d, &cat.name)) {
                    (true, true) => t.tp += 1,
                    (true, false) => t.fp += 1,
                    (false, true) => t.fn_ += 1,
                    _ => {}
                }
            }
        }
    }
    // zero-shot presence with the one global threshold
    let (mut ztp, mut zfp, mut zfn) = (0, 0, 0);
    for d in docs {
        for c in cats {
            match (ranking(d, &c.query).1 >= zs_threshold, has(d, &c.name)) {
                (true, true) => ztp += 1,
                (true, false) => zfp += 1,
                (false, true) => zfn += 1,
                _ => {}
            }
        }
    }
    let pct = |a: usize, b: usize| if b == 0 { "    -".to_string() } else { format!("{:5.2}", a as f64 / b as f64) };
    println!(
        "{} documents, {} folds (beta per fold: {:?}), {} gold clauses not located in the extracted text (counted as misses)\n",
        docs.len(),
        folds,
        betas,
        unlocated
    );
    println!(
        "{:<38} {:>5} {:>5} {:>6} {:>6} {:>7} {:>6} {:>6}",
        "category", "docs", "gold", "R@1", "R@5", "R@5 zs", "pres P", "pres R"
    );
    let mut all = Tally::default();
    let (mut macro1, mut macro5, mut ncat) = (0f64, 0f64, 0usize);
    for (name, t) in &tally {
        if t.gold == 0 && t.fp == 0 {
            continue;
        }
        println!(
            "{:<38} {:>5} {:>5} {:>6} {:>6} {:>7} {:>6} {:>6}",
            name,
            t.docs,
            t.gold,
            pct(t.at1, t.gold),
            pct(t.at5, t.gold),
            pct(t.zs5, t.gold),
            pct(t.tp, t.tp + t.fp),
            pct(t.tp, t.tp + t.fn_)
        );
        if t.gold > 0 {
            macro1 += t.at1 as f64 / t.gold as f64;
            macro5 += t.at5 as f64 / t.gold as f64;
            ncat += 1;
        }
        for (a, b) in [(&mut all.gold, t.gold), (&mut all.at1, t.at1), (&mut all.at5, t.at5), (&mut all.zs5, t.zs5)] {
            *a += b;
        }
        all.tp += t.tp;
        all.fp += t.fp;
        all.fn_ += t.fn_;
        all.docs += t.docs;
    }
    println!(
        "{:<38} {:>5} {:>5} {:>6} {:>6} {:>7} {:>6} {:>6}",
        "overall (gold clauses)",
        all.docs,
        all.gold,
        pct(all.at1, all.gold),
        pct(all.at5, all.gold),
        pct(all.zs5, all.gold),
        pct(all.tp, all.tp + all.fp),
        pct(all.tp, all.tp + all.fn_)
    );
    println!(
        "{:<38} {:>5} {:>5} {:>6.2} {:>6.2}",
        "macro average over categories",
        "",
        ncat,
        macro1 / ncat.max(1) as f64,
        macro5 / ncat.max(1) as f64
    );
    println!(
        "\nzero-shot presence at threshold {zs_threshold:.2}: precision {} recall {}",
        pct(ztp, ztp + zfp),
        pct(ztp, ztp + zfn)
    );
    println!("recall@5 {:.2}", all.at5 as f64 / all.gold.max(1) as f64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gold_text_is_located_after_normalisation() {
        let text = "1. Governing  Law.\nThis Agreement shall be\n  governed by the laws of New York.";
        let hay = normalise(text, false);
        let at = locate(&hay, "this agreement shall be governed by the LAWS of New York.", false);
        assert_eq!(at.len(), 1);
        let found: String = text.chars().skip(at[0].start).take(at[0].len()).collect();
        assert!(found.starts_with("This Agreement") && found.ends_with("York."), "{found}");
        // punctuation differences: letters and digits only
        let alnum = normalise(text, true);
        assert_eq!(locate(&alnum, "governed by the laws of New-York", true).len(), 1);
        assert!(locate(&hay, "Delaware", false).is_empty());
    }

    #[test]
    fn overlap_needs_half_of_the_shorter() {
        assert!(overlaps_enough(&(0..100), &(40..60)));
        assert!(overlaps_enough(&(0..10), &(5..100)));
        assert!(!overlaps_enough(&(0..10), &(8..100)));
        assert!(!overlaps_enough(&(0..10), &(10..20)));
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
