//! Gold clauses: reading a labels file (`cuad_labels.tsv` format), locating each clause in a
//! stored document's text, and the segments that match it (what recall counts) or that train
//! a scorer (positives).
//!
//! A gold clause is located in the stored document text after whitespace normalisation
//! (case-folded; failing that, letters and digits only); a clause CUAD gives as parts joined by
//! `<omitted>` is located part by part. A segment *matches* a gold clause when it overlaps one
//! of its occurrences (or parts) by at least half of the shorter of the two.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::Path;

use crate::scorer::Segment;
use crate::ClausesError;

/// What CUAD writes between the parts of a clause that are not contiguous in the contract.
const OMITTED: &str = "<omitted>";
/// A segment is a training positive when a gold clause covers this share of it.
const POSITIVE_COVER: f64 = 0.1;
/// Occurrences of a clause text located in one document, at most.
const MAX_OCCURRENCES: usize = 100;
/// Occurrences of a clause that make training positives.
const POSITIVE_OCCURRENCES: usize = 3;

/// Gold clauses per (file name, category).
pub type Labels = BTreeMap<(String, String), Vec<String>>;
/// The (file name, category) pairs that are present: by CUAD's answer column, `Yes` or any other
/// non-empty answer than `No` (a date, a party, a duration); where both answer columns of a
/// pair are empty (CUAD leaves the answer of some categories unfilled, e.g. every `Notice Period
/// To Terminate Renewal`), by its having a gold clause.
pub type Present = BTreeSet<(String, String)>;

/// A labelled document as stored: segments, per category the segments each gold clause
/// matches (one list per gold clause; empty when the clause could not be located), the
/// training positives, and the categories its answers say are present.
///
/// A training document may hold a sample of its segments (`Segment::index` keeps their
/// place); `weights` then says how many segments of the document each stands for (empty:
/// every segment is there, weight 1).
pub struct Doc {
    pub segments: Vec<Segment>,
    pub gold: Gold,
    pub positives: Positives,
    pub present: BTreeSet<String>,
    pub weights: Vec<f32>,
}

impl Doc {
    /// How many of the document's segments segment `i` (of `segments`) stands for.
    pub fn weight(&self, i: usize) -> f32 {
        self.weights.get(i).copied().unwrap_or(1.0)
    }

    /// One document from two samples of it (the same labels located in the same text, e.g. its
    /// standalone and its contextual embeddings): `other`'s segments follow this one's, its
    /// gold matches and positives shifted to their new places. Each sample keeps its weights,
    /// so each stands for the whole document.
    pub fn merge(mut self, other: Doc) -> Result<Doc, ClausesError> {
        let shift = self.segments.len();
        let mut weights: Vec<f32> = (0..shift).map(|i| self.weight(i)).collect();
        weights.extend((0..other.segments.len()).map(|i| other.weight(i)));
        for (cat, clauses) in other.gold {
            let mine = self.gold.entry(cat).or_default();
            if !mine.is_empty() && mine.len() != clauses.len() {
                return Err(ClausesError::Input(format!(
                    "merging two samples of a document: {} gold clauses in one, {} in the other",
                    mine.len(),
                    clauses.len()
                )));
            }
            mine.resize(clauses.len(), Vec::new());
            for (m, c) in mine.iter_mut().zip(clauses) {
                m.extend(c.into_iter().map(|i| i + shift));
            }
        }
        for (cat, p) in other.positives {
            self.positives.entry(cat).or_default().extend(p.into_iter().map(|i| i + shift));
        }
        self.present.extend(other.present);
        self.segments.extend(other.segments);
        self.weights = weights;
        Ok(self)
    }
}

/// Per category, the segments each gold clause matches.
pub type Gold = BTreeMap<String, Vec<Vec<usize>>>;
/// Per category, the training positives.
pub type Positives = BTreeMap<String, BTreeSet<usize>>;

/// Gold clauses per (file name, category), and the pairs that are [`Present`], from a
/// `cuad_labels.tsv`-format file. The CUAD artifact column `X- Answer` is folded into `X`.
pub fn read_labels(path: &Path) -> Result<(Labels, Present), ClausesError> {
    let mut rdr = csv::ReaderBuilder::new()
        .delimiter(b'\t')
        .has_headers(true)
        .flexible(true)
        .from_path(path)
        .map_err(|e| ClausesError::Labels { path: path.display().to_string(), message: e.to_string() })?;
    let mut out: Labels = BTreeMap::new();
    let mut present = Present::new();
    let mut answered: BTreeSet<(String, String)> = BTreeSet::new();
    for (i, rec) in rdr.records().enumerate() {
        let rec = rec.map_err(|e| ClausesError::Labels {
            path: path.display().to_string(),
            message: format!("row {}: {e}", i + 2),
        })?;
        let (Some(file), Some(cat)) = (rec.get(0), rec.get(1)) else { continue };
        if file.is_empty() || cat.is_empty() {
            continue;
        }
        let cat = cat.trim().trim_end_matches("- Answer").trim().to_string();
        let answer = rec.get(2).unwrap_or("").trim();
        if !answer.is_empty() {
            answered.insert((file.to_string(), cat.clone()));
            if !answer.eq_ignore_ascii_case("no") {
                present.insert((file.to_string(), cat.clone()));
            }
        }
        let clauses: Vec<String> = match rec.get(3).filter(|c| !c.trim().is_empty()) {
            Some(j) => serde_json::from_str(j).map_err(|e| ClausesError::Labels {
                path: path.display().to_string(),
                message: format!("row {}: clauses_json is not a JSON list of strings: {e}", i + 2),
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
    for (key, clauses) in &out {
        if !answered.contains(key) && !clauses.is_empty() {
            present.insert(key.clone());
        }
    }
    Ok((out, present))
}

/// The categories present in `file` by its answers.
pub fn present_in(present: &Present, file: &str) -> BTreeSet<String> {
    present.range((file.to_string(), String::new())..).take_while(|(f, _)| f == file).map(|(_, c)| c.clone()).collect()
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
    hay.0.match_indices(n).take(MAX_OCCURRENCES).map(|(b, m)| hay.1[b]..hay.1[b + m.len() - 1] + 1).collect()
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
pub fn gold_and_positives<'a>(
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
            for o in at.iter().take(POSITIVE_OCCURRENCES) {
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

/// Whether the document has category `cat`, by its answers.
pub(crate) fn has(d: &Doc, cat: &str) -> bool {
    d.present.contains(cat)
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
    fn presence_comes_from_the_answers_with_the_answer_columns_folded() {
        let path = std::env::temp_dir().join(format!("labels-{}.tsv", std::process::id()));
        let tsv = "file\tcategory\tanswer\tclauses_json\n\
                   a.pdf\tGoverning Law\tDelaware\t[\"governed by Delaware law\"]\n\
                   a.pdf\tAnti-Assignment\tNo\t[]\n\
                   a.pdf\tAudit Rights\tYes\t[\"may audit\"]\n\
                   a.pdf\tNotice Period To Terminate Renewal\t\t[\"90 days\"]\n\
                   a.pdf\tNotice Period To Terminate Renewal- Answer\t90 days\t[]\n\
                   a.pdf\tExpiration Date\t\t[\"until terminated\"]\n\
                   b.pdf\tAudit Rights\tno\t[]\n";
        std::fs::write(&path, tsv).unwrap();
        let (labels, present) = read_labels(&path).unwrap();
        std::fs::remove_file(&path).ok();
        let a = present_in(&present, "a.pdf");
        // Expiration Date: no answer at all, a gold clause: present by its clause
        let want: BTreeSet<String> =
            ["Audit Rights", "Expiration Date", "Governing Law", "Notice Period To Terminate Renewal"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        assert_eq!(a, want);
        assert!(present_in(&present, "b.pdf").is_empty());
        assert_eq!(labels[&("a.pdf".to_string(), "Notice Period To Terminate Renewal".to_string())], vec!["90 days"]);
        assert!(labels.contains_key(&("a.pdf".to_string(), "Expiration Date".to_string())));
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
        let seg = |r: Range<usize>| Segment { index: 0, chars: r, embedding: vec![], terms: vec![] };
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

    #[test]
    fn merged_samples_keep_their_matches_positives_and_weights() {
        let seg = |index: usize| Segment { index, chars: 0..1, embedding: vec![index as f32], terms: vec![] };
        let cat = "Governing Law".to_string();
        let a = Doc {
            segments: vec![seg(0), seg(4)],
            gold: BTreeMap::from([(cat.clone(), vec![vec![1], vec![]])]),
            positives: BTreeMap::from([(cat.clone(), BTreeSet::from([1]))]),
            present: BTreeSet::from([cat.clone()]),
            weights: vec![],
        };
        let b = Doc {
            segments: vec![seg(2), seg(4), seg(5)],
            gold: BTreeMap::from([(cat.clone(), vec![vec![1], vec![2]])]),
            positives: BTreeMap::from([(cat.clone(), BTreeSet::from([1, 2]))]),
            present: BTreeSet::from([cat.clone()]),
            weights: vec![3.0, 1.0, 1.0],
        };
        let m = a.merge(b).unwrap();
        assert_eq!(m.segments.iter().map(|s| s.index).collect::<Vec<_>>(), vec![0, 4, 2, 4, 5]);
        assert_eq!(m.gold[&cat], vec![vec![1, 3], vec![4]]);
        assert_eq!(m.positives[&cat], BTreeSet::from([1, 3, 4]));
        assert_eq!(m.weights, vec![1.0, 1.0, 3.0, 1.0, 1.0]);
        // two samples with different gold clauses are not one document
        let one = |clauses: Vec<Vec<usize>>| Doc {
            segments: vec![seg(0), seg(1)],
            gold: BTreeMap::from([(cat.clone(), clauses)]),
            positives: BTreeMap::new(),
            present: BTreeSet::new(),
            weights: vec![],
        };
        assert!(one(vec![vec![0]]).merge(one(vec![vec![0], vec![1]])).is_err());
    }
}
