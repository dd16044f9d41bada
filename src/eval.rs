//! `docpipe eval` — how well clause labels find the gold clauses of labelled contracts, and
//! the learning behind `docpipe labels --learn`.
//!
//! Labels file: `cuad_labels.tsv` format (tab-separated, quoted: file, category, answer,
//! clauses_json). A gold clause is located in the stored document text after whitespace
//! normalisation (case-folded; failing that, letters and digits only); a clause CUAD gives as
//! parts joined by `<omitted>` is located part by part. A segment *matches* a gold clause when
//! it overlaps one of its occurrences (or parts) by at least half of the shorter of the two.
//!
//! For each category and each document with gold clauses, segments are ranked by score;
//! recall@K is the share of gold clauses matched by one of the top K segments. Presence: a
//! document is predicted to have a category when its best score reaches the threshold.
//!
//! Two scorers are reported: the category queries alone (zero-shot cosine), and learned
//! scorers under k-fold cross-validation by document — every document is scored by a scorer
//! learned on the other folds only. A learned scorer is a class-balanced, L2-regularised
//! logistic regression per category on
//! - the segment embedding, started from and regularised towards `GAMMA * query`;
//! - two position features (`exp(-i)`, `exp(-i/5)` for segment index `i`: titles, parties and
//!   dates open a contract);
//! - lexical features: the segment's hashed words and word pairs
//!   (`docpipe_chunker::segment::terms`) that occur in at least `MIN_DF` training documents,
//!   each worth 1/sqrt(number of terms); the `KEEP_TERMS` largest weights are kept.
//!
//! Its positives are the segments that a located gold clause covers at least 10 % of, and the
//! segments that match a gold clause (the rule above). The presence threshold maximises F1 on
//! the training documents. All categories are fitted at once by full-batch gradient descent,
//! each step two matrix products over the training segments (see [`learn`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Range;
use std::path::Path;

use anyhow::{bail, Context, Result};
use ndarray::linalg::general_mat_mul;
use ndarray::{Array2, Axis};
use pgvector::Vector;
use rayon::prelude::*;
use sqlx::PgPool;
use uuid::Uuid;

use crate::labels::StoredCategory;

/// The probe's prior: it starts at, and is pulled towards, this multiple of the query.
const GAMMA: f32 = 5.0;
/// L2 pull towards the prior.
const L2: f32 = 0.01;
const STEPS: usize = 400;
const LEARNING_RATE: f32 = 2.0;
/// What CUAD writes between the parts of a clause that are not contiguous in the contract.
const OMITTED: &str = "<omitted>";
/// A segment is a training positive when a gold clause covers this share of it.
const POSITIVE_COVER: f64 = 0.1;
/// Lexical term weights: their learning rate and L2 pull towards 0.
const LEXICAL_LEARNING_RATE: f32 = 10.0;
const LEXICAL_L2: f32 = 0.001;
/// A term is a feature when it occurs in at least this many training documents.
const MIN_DF: usize = 2;
/// Term weights kept per category (the largest in magnitude).
const KEEP_TERMS: usize = 2000;

pub struct Segment {
    pub chars: Range<usize>,
    /// The standalone embedding where stored, else the contextual one (as `segment_scores`).
    pub embedding: Vec<f32>,
    /// Lexical terms (`docpipe_chunker::segment::terms`), as stored.
    pub terms: Vec<i32>,
}

/// A labelled document as stored: segments, per category the segments each gold clause
/// matches (one list per gold clause; empty when the clause could not be located), and the
/// training positives.
pub struct Doc {
    pub segments: Vec<Segment>,
    pub gold: Gold,
    pub positives: Positives,
}

/// Per category, the segments each gold clause matches.
pub type Gold = BTreeMap<String, Vec<Vec<usize>>>;
/// Per category, the training positives.
pub type Positives = BTreeMap<String, BTreeSet<usize>>;

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

/// Where a gold clause is in the text: each of its parts (CUAD writes `<omitted>` between the
/// non-contiguous parts of one clause) located after whitespace normalisation, failing that
/// letters and digits only.
fn locate_clause(spaced: &(String, Vec<usize>), alnum: &(String, Vec<usize>), clause: &str) -> Vec<Range<usize>> {
    let mut at = Vec::new();
    for part in clause.split(OMITTED) {
        let found = locate(spaced, part, false);
        at.extend(if found.is_empty() { locate(alnum, part, true) } else { found });
    }
    at
}

fn overlaps_enough(a: &Range<usize>, b: &Range<usize>) -> bool {
    let inter = a.end.min(b.end).saturating_sub(a.start.max(b.start));
    inter > 0 && inter * 2 >= a.len().min(b.len())
}

/// Per category, the segments each gold clause matches (one list per clause, empty when the
/// clause is not in the text), and the training positives: the segments that one of the
/// clause's first 3 occurrences covers at least [`POSITIVE_COVER`] of, and the matching
/// segments (any occurrence, as the evaluation counts them).
/// Also returns how many clauses were not located.
fn gold_and_positives<'a>(
    text: &str,
    segments: &[Segment],
    clauses: impl Iterator<Item = (&'a String, &'a Vec<String>)>,
) -> (Gold, Positives, usize) {
    let spaced = normalise(text, false);
    let alnum = normalise(text, true);
    let (mut gold, mut positives, mut unlocated) = (BTreeMap::new(), BTreeMap::new(), 0);
    for (cat, texts) in clauses {
        let mut per_clause = Vec::new();
        let pos: &mut BTreeSet<usize> = positives.entry(cat.clone()).or_default();
        for clause in texts {
            let at = locate_clause(&spaced, &alnum, clause);
            if at.is_empty() {
                unlocated += 1;
            }
            for o in at.iter().take(3) {
                for (i, seg) in segments.iter().enumerate() {
                    let inter = seg.chars.end.min(o.end).saturating_sub(seg.chars.start.max(o.start));
                    if inter > 0 && inter as f64 >= POSITIVE_COVER * seg.chars.len() as f64 {
                        pos.insert(i);
                    }
                }
            }
            let matching: Vec<usize> = segments
                .iter()
                .enumerate()
                .filter(|(_, s)| at.iter().any(|o| overlaps_enough(&s.chars, o)))
                .map(|(i, _)| i)
                .collect();
            // the segments the evaluation counts as finding this clause are positives too
            pos.extend(matching.iter().copied());
            per_clause.push(matching);
        }
        gold.insert(cat.clone(), per_clause);
    }
    (gold, positives, unlocated)
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
        let segs: Vec<(i32, i32, Vector, Option<Vec<i32>>)> = sqlx::query_as(
            "SELECT char_start, char_end, coalesce(standalone, embedding), terms FROM segments
             WHERE document_id = $1 AND embedding IS NOT NULL ORDER BY segment_index",
        )
        .bind(id)
        .fetch_all(pool)
        .await?;
        let segments: Vec<Segment> = segs
            .into_iter()
            .map(|(s, e, v, terms)| Segment {
                chars: s as usize..e as usize,
                embedding: v.to_vec(),
                terms: terms.unwrap_or_default(),
            })
            .collect();
        let clauses = labels.range((file.clone(), String::new())..).take_while(|((f, _), _)| f == &file);
        let (gold, positives, missing) = gold_and_positives(&text, &segments, clauses.map(|((_, c), v)| (c, v)));
        unlocated += missing;
        docs.push(Doc { segments, gold, positives });
    }
    Ok((docs, unlocated))
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The position features of segment `i`.
fn position(i: usize) -> [f32; 2] {
    let i = i.min(600) as f32;
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
    fn zero_shot(query: &[f32], threshold: f32) -> Self {
        Scorer { weights: query.to_vec(), position: [0.0; 2], terms: HashMap::new(), bias: None, threshold }
    }

    /// The segment's lexical score: the weights of its terms over sqrt(number of terms).
    pub(crate) fn lexical(&self, terms: &[i32]) -> f32 {
        if terms.is_empty() || self.terms.is_empty() {
            return 0.0;
        }
        terms.iter().filter_map(|t| self.terms.get(t)).sum::<f32>() / (terms.len() as f32).sqrt()
    }

    pub(crate) fn score(&self, seg: &Segment, i: usize) -> f32 {
        match self.bias {
            None => dot(&seg.embedding, &self.weights),
            Some(b) => {
                let p = position(i);
                let z = dot(&seg.embedding, &self.weights)
                    + self.position[0] * p[0]
                    + self.position[1] * p[1]
                    + self.lexical(&seg.terms)
                    + b;
                sigmoid(z)
            }
        }
    }
}

/// Segment indices of a document, best first, and the best score.
fn ranking(doc: &Doc, s: &Scorer) -> (Vec<usize>, f32) {
    let scores: Vec<f32> = doc.segments.iter().enumerate().map(|(i, seg)| s.score(seg, i)).collect();
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    idx.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let best = idx.first().map(|&i| scores[i]).unwrap_or(f32::NEG_INFINITY);
    (idx, best)
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

/// The training segments in the learner's layout, one row per segment.
struct Design {
    /// Dense features, one row per segment: the embedding, the two position features, and a
    /// constant 1 for the bias.
    x: Array2<f32>,
    /// Per row: the lexical columns of its terms, and the value each has.
    lexical: Vec<(Vec<usize>, f32)>,
    /// Per lexical column: the rows that have it (`lexical` transposed).
    rows_with: Vec<Vec<usize>>,
}

impl Design {
    fn new(train: &[&Doc], vocab: &Vocabulary, dim: usize) -> Self {
        let segments: Vec<(usize, &Segment)> = train.iter().flat_map(|d| d.segments.iter().enumerate()).collect();
        let mut x = Array2::zeros((segments.len(), dim + 3));
        let mut lexical = Vec::with_capacity(segments.len());
        let mut rows_with = vec![Vec::new(); vocab.terms.len()];
        for (r, (i, seg)) in segments.into_iter().enumerate() {
            let mut row = x.row_mut(r);
            for (a, &e) in row.iter_mut().take(dim).zip(&seg.embedding) {
                *a = e;
            }
            let [p0, p1] = position(i);
            row[dim] = p0;
            row[dim + 1] = p1;
            row[dim + 2] = 1.0;
            let (cols, v) = vocab.features(&seg.terms);
            for &c in &cols {
                rows_with[c].push(r);
            }
            lexical.push((cols, v));
        }
        Design { x, lexical, rows_with }
    }
}

fn sigmoid(z: f32) -> f32 {
    1.0 / (1.0 + (-z.clamp(-50.0, 50.0)).exp())
}

/// Learn every category's scorer from `docs` (see the module docs). All categories are fitted
/// together by full-batch gradient descent: each step is two matrix products over the
/// training segments (segments × features · features × categories, and its transpose), by
/// blocks of rows on rayon's threads, plus the sparse lexical terms.
pub fn learn(docs: &[&Doc], cats: &[StoredCategory]) -> Vec<Scorer> {
    let Some(dim) = cats.first().map(|c| c.query.len()) else { return Vec::new() };
    let vocab = Vocabulary::new(docs);
    let design = Design::new(docs, &vocab, dim);
    let (n, width, ncat, nterms) = (design.x.nrows(), dim + 3, cats.len(), vocab.terms.len());

    // targets, and class weights per category: balanced, normalised to mean 1
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
    let class_weight: Vec<(f32, f32)> = n_pos
        .iter()
        .map(|&p| {
            let (nf, pf) = (n as f32, p as f32);
            let w_pos = if p > 0 { (nf - pf) / pf } else { 0.0 };
            let mean = (pf * w_pos + (nf - pf)) / nf;
            if mean > 0.0 {
                (w_pos / mean, 1.0 / mean)
            } else {
                (1.0, 1.0)
            }
        })
        .collect();

    // weights: rows are features, columns categories; the embedding rows start at and are
    // pulled towards GAMMA * query, the position rows towards 0, the bias row is free
    let mut prior = Array2::<f32>::zeros((width, ncat));
    for (k, c) in cats.iter().enumerate() {
        for (j, q) in c.query.iter().enumerate().take(dim) {
            prior[[j, k]] = GAMMA * q;
        }
    }
    let mut w = prior.clone();
    let l2: Vec<f32> = (0..width).map(|j| if j < dim + 2 { L2 } else { 0.0 }).collect();
    let mut lex = vec![0f32; nterms * ncat];
    let mut lex_grad = vec![0f32; nterms * ncat];
    let mut resid = Array2::<f32>::zeros((n, ncat));
    let block = n.div_ceil(rayon::current_num_threads().max(1)).max(1);

    for _ in 0..STEPS {
        // forward pass and class-weighted residuals, then the dense gradient, by row blocks
        let blocks: Vec<_> = design
            .x
            .axis_chunks_iter(Axis(0), block)
            .zip(resid.axis_chunks_iter_mut(Axis(0), block))
            .zip(y.axis_chunks_iter(Axis(0), block))
            .zip(design.lexical.chunks(block))
            .collect();
        let grad = blocks
            .into_par_iter()
            .map(|(((xb, mut zb), yb), lb)| {
                general_mat_mul(1.0, &xb, &w, 0.0, &mut zb);
                for ((mut z, y), (cols, v)) in zb.rows_mut().into_iter().zip(yb.rows()).zip(lb) {
                    let z = z.as_slice_mut().expect("rows of a standard-layout array are contiguous");
                    for &c in cols {
                        for (zk, l) in z.iter_mut().zip(&lex[c * ncat..(c + 1) * ncat]) {
                            *zk += l * v;
                        }
                    }
                    for ((zk, &yk), &(wp, wn)) in z.iter_mut().zip(y).zip(&class_weight) {
                        *zk = (sigmoid(*zk) - yk) * if yk > 0.5 { wp } else { wn };
                    }
                }
                xb.t().dot(&zb)
            })
            .reduce(|| Array2::zeros((width, ncat)), |a, b| a + b);
        // lexical gradient, by term
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
        let nf = n as f32;
        for ((wj, gj), (pj, &l2j)) in w.rows_mut().into_iter().zip(grad.rows()).zip(prior.rows().into_iter().zip(&l2)) {
            for ((wi, g), p) in wj.into_iter().zip(gj).zip(pj) {
                *wi -= LEARNING_RATE * (g / nf + l2j * (*wi - p));
            }
        }
        for (l, g) in lex.iter_mut().zip(&lex_grad) {
            *l -= LEXICAL_LEARNING_RATE * (g / nf + LEXICAL_L2 * *l);
        }
    }

    cats.par_iter()
        .enumerate()
        .map(|(k, cat)| {
            if n_pos[k] == 0 {
                // nothing to learn from: the query's ranking, never present
                let weights = prior.column(k).iter().take(dim).copied().collect();
                return Scorer {
                    weights,
                    position: [0.0; 2],
                    terms: HashMap::new(),
                    bias: Some(-50.0),
                    threshold: 1.0,
                };
            }
            let col = w.column(k);
            // keep the KEEP_TERMS strongest term weights: what is stored is what is evaluated
            let mut strongest: Vec<(i32, f32)> = vocab
                .terms
                .iter()
                .enumerate()
                .map(|(t, &term)| (term, lex[t * ncat + k]))
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
        })
        .collect()
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

fn pct(a: usize, b: usize) -> String {
    if b == 0 {
        "    -".to_string()
    } else {
        format!("{:5.2}", a as f64 / b as f64)
    }
}

fn print_row(name: &str, t: &Tally) {
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

/// Run the evaluation and print the table; the last line is `recall@5 X.XX`.
pub fn report(docs: &[Doc], cats: &[StoredCategory], folds: usize, unlocated: usize, zs_threshold: f32) -> Result<()> {
    if docs.len() < 2 {
        bail!("need at least 2 labelled documents that are done, found {}", docs.len());
    }
    let folds = folds.min(docs.len()).max(2);
    let mut tally: BTreeMap<&str, Tally> = cats.iter().map(|c| (c.name.as_str(), Tally::default())).collect();
    let (mut pairs, mut pairs_found) = (0usize, 0usize);
    for f in 0..folds {
        let train: Vec<&Doc> = docs.iter().enumerate().filter(|(i, _)| i % folds != f).map(|(_, d)| d).collect();
        let scorers = learn(&train, cats);
        for d in docs.iter().enumerate().filter(|(i, _)| i % folds == f).map(|(_, d)| d) {
            for (cat, s) in cats.iter().zip(&scorers) {
                let t = tally.get_mut(cat.name.as_str()).expect("category");
                let (h, n) = hits(d, &cat.name, s, &[1, 5]);
                let (zs, _) = hits(d, &cat.name, &Scorer::zero_shot(&cat.query, zs_threshold), &[5]);
                if n > 0 {
                    pairs += 1;
                    pairs_found += (h[1] > 0) as usize;
                }
                t.gold += n;
                t.at1 += h[0];
                t.at5 += h[1];
                t.zs5 += zs[0];
                t.docs += has(d, &cat.name) as usize;
                let predicted = ranking(d, s).1 >= s.threshold;
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
            match (ranking(d, &Scorer::zero_shot(&c.query, zs_threshold)).1 >= zs_threshold, has(d, &c.name)) {
                (true, true) => ztp += 1,
                (true, false) => zfp += 1,
                (false, true) => zfn += 1,
                _ => {}
            }
        }
    }
    println!(
        "{} documents, {} folds (learned scorers: each fold scored by a scorer learned on the others), \
         {} gold clauses not located in the extracted text (counted as misses)\n",
        docs.len(),
        folds,
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
        print_row(name, t);
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
    print_row("overall (gold clauses)", &all);
    println!(
        "{:<38} {:>5} {:>5} {:>6} {:>6}   (best ranking possible with these segments)",
        "ceiling",
        "",
        "",
        pct(ceiling(docs, 1), all.gold),
        pct(ceiling(docs, 5), all.gold)
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
        "\ndocument-category pairs with a gold clause in the top 5: {pairs_found}/{pairs} ({})",
        pct(pairs_found, pairs).trim()
    );
    println!(
        "zero-shot presence at threshold {zs_threshold:.2}: precision {} recall {}",
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
        // CUAD's non-contiguous clauses: each part is located
        let parts = locate_clause(&hay, &alnum, "1. Governing Law.<omitted>the LAWS of New York");
        assert_eq!(parts.len(), 2);
        assert_eq!(text.chars().skip(parts[1].start).take(parts[1].len()).collect::<String>(), "the laws of New York");
        assert!(locate_clause(&hay, &alnum, "Governing Law<omitted>Delaware").len() == 1);
    }

    #[test]
    fn overlap_needs_half_of_the_shorter() {
        assert!(overlaps_enough(&(0..100), &(40..60)));
        assert!(overlaps_enough(&(0..10), &(5..100)));
        assert!(!overlaps_enough(&(0..10), &(8..100)));
        assert!(!overlaps_enough(&(0..10), &(10..20)));
    }

    #[test]
    fn positives_are_covered_or_matching_segments() {
        // segment 1 holds most of the clause (a match); segment 2 holds its last 7 characters,
        // over 10 % of the segment but under half of the clause (a positive, not a match)
        let text = "Intro text here. Governing law is New York law. Then a long tail follows the clause.";
        let seg = |r: Range<usize>| Segment { chars: r, embedding: vec![], terms: vec![] };
        let segments = vec![seg(0..16), seg(17..40), seg(40..84)];
        let cat = "Governing Law".to_string();
        let clauses = vec!["governing law is  New York law.".to_string(), "Delaware".to_string()];
        let (gold, pos, missing) = gold_and_positives(text, &segments, std::iter::once((&cat, &clauses)));
        assert_eq!(gold[&cat], vec![vec![1], vec![]]);
        assert_eq!(pos[&cat], BTreeSet::from([1, 2]));
        assert_eq!(missing, 1);
        // a match that covers under 10 % of its segment is still a positive
        let segments = vec![seg(0..84)];
        let clauses = vec!["law".to_string()];
        let (gold, pos, _) = gold_and_positives(text, &segments, std::iter::once((&cat, &clauses)));
        assert_eq!(gold[&cat], vec![vec![0]]);
        assert_eq!(pos[&cat], BTreeSet::from([0]));
    }

    /// Two categories fitted together: "A" is told apart by the embedding alone, "B" by a
    /// lexical term alone (its positives have the same embeddings as negatives); each learned
    /// scorer must rank its own positives first, on documents it was not learned from.
    #[test]
    fn learner_fits_embedding_and_lexical_signals_per_category() {
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
        let doc = |seed: usize| {
            // segment 3: category A (embedding axis 2); segment 5: category B (term 7)
            let segments: Vec<Segment> = (0..8)
                .map(|i| {
                    let mut e = vec![0.5; dim];
                    e[(i + seed) % 2] = 0.7;
                    if i == 3 {
                        e[2] = 1.0;
                    }
                    let terms = if i == 5 { vec![7, 1] } else { vec![100 + i as i32, 1] };
                    Segment { chars: i * 10..i * 10 + 10, embedding: e, terms }
                })
                .collect();
            let gold = BTreeMap::from([("A".to_string(), vec![vec![3]]), ("B".to_string(), vec![vec![5]])]);
            let positives =
                BTreeMap::from([("A".to_string(), BTreeSet::from([3])), ("B".to_string(), BTreeSet::from([5]))]);
            Doc { segments, gold, positives }
        };
        let train: Vec<Doc> = (0..6).map(doc).collect();
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

    #[test]
    fn threshold_maximises_f1() {
        let t = best_threshold([(0.9, true), (0.8, true), (0.7, false), (0.6, true), (0.2, false)].into_iter());
        assert!(t > 0.2 && t < 0.6, "{t}");
        let t = best_threshold([(0.9, true), (0.5, false)].into_iter());
        assert!(t > 0.5 && t < 0.9);
        assert!(best_threshold([(0.4, false)].into_iter()) > 0.4);
    }
}

#[cfg(test)]
mod ceiling_tests {
    use super::*;

    #[test]
    fn ceiling_is_a_greedy_cover() {
        let seg = |n: usize| {
            (0..n).map(|i| Segment { chars: i * 10..i * 10 + 10, embedding: vec![], terms: vec![] }).collect()
        };
        // three gold clauses: two found only in segment 1, one only in segment 4; one nowhere
        let gold = BTreeMap::from([("X".to_string(), vec![vec![1, 2], vec![1], vec![4], vec![]])]);
        let d = Doc { segments: seg(6), gold, positives: BTreeMap::new() };
        assert_eq!(ceiling(std::slice::from_ref(&d), 1), 2);
        assert_eq!(ceiling(std::slice::from_ref(&d), 5), 3);
    }
}
