//! Scoring extracted fields against CUAD's answers (`cuad_labels.tsv`: file, category,
//! answer, clauses_json).
//!
//! The gold value of a field is CUAD's answer normalised like a prediction. Where CUAD gives
//! no answer but does mark a clause (it leaves every *Notice Period To Terminate Renewal*
//! answer empty, and some expiration terms it could not turn into a date):
//! - notice period: correct when the prediction equals one of the durations the gold clause
//!   states;
//! - any other field: correct when the prediction says something (not none).
//!
//! An empty answer with no clause means the contract does not say: only `none` is correct.
//! Presence of the other categories is scored as precision and recall of "Yes".

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::normalize::{normalize, parse_duration, same_answer, Duration, Value};
use crate::{Field, FIELDS};

#[derive(Debug, thiserror::Error)]
#[error("reading labels {path}: {message}")]
pub struct LabelsError {
    pub path: String,
    pub message: String,
}

/// What counts as a correct answer for one (contract, field).
#[derive(Debug, Clone, PartialEq)]
pub enum Gold {
    /// This value (after normalisation); `Value::None` when the contract does not say.
    Value(Value),
    /// One of these durations (a clause with no answer: the notice period).
    AnyOf(Vec<Duration>),
    /// Anything but none (a clause with no answer).
    Present,
}

impl Gold {
    pub fn accepts(&self, predicted: &Value) -> bool {
        match self {
            // CUAD writes "perpetual" for every term without an end date: one that runs until a
            // party ends it, or until an event that has no date ("until the expiration of the
            // Royalty Term", "for so long as X remains a shareholder")
            Gold::Value(Value::Perpetual) if matches!(predicted, Value::UntilTerminated | Value::UntilEvent { .. }) => {
                true
            }
            Gold::Value(g) => same_answer(predicted, g),
            Gold::AnyOf(ds) => match predicted {
                Value::Duration { duration } => ds.iter().any(|d| d.same_length(duration)),
                _ => false,
            },
            Gold::Present => !predicted.is_none(),
        }
    }

    /// Short text for tables.
    pub fn describe(&self) -> String {
        match self {
            Gold::Value(v) if v.is_none() => "none".into(),
            Gold::Value(v) => v.canonical(),
            Gold::AnyOf(ds) => ds.iter().map(|d| d.to_iso()).collect::<Vec<_>>().join("|"),
            Gold::Present => "(present)".into(),
        }
    }
}

/// The gold answers of a labels file: per (file, field key), and per (file, category) of the
/// other categories whether it is present.
#[derive(Debug, Default)]
pub struct Labels {
    pub fields: BTreeMap<(String, &'static str), Gold>,
    pub presence: BTreeMap<(String, String), bool>,
}

impl Labels {
    pub fn files(&self) -> BTreeSet<String> {
        self.fields.keys().map(|(f, _)| f.clone()).chain(self.presence.keys().map(|(f, _)| f.clone())).collect()
    }
}

/// Every duration a text states ("for one (1) year … sixty (60) days' notice" → P1Y, P60D).
pub fn durations_in(text: &str) -> Vec<Duration> {
    let mut out: Vec<Duration> = Vec::new();
    let lower = text.to_lowercase();
    let bytes = lower.as_bytes();
    for (i, _) in lower.char_indices() {
        // try at each word start
        if i > 0 && bytes[i - 1].is_ascii_alphanumeric() {
            continue;
        }
        if !bytes[i].is_ascii_alphanumeric() {
            continue;
        }
        let end = lower[i..].char_indices().nth(40).map_or(lower.len(), |(j, _)| i + j);
        let window = &lower[i..end];
        // the window must start with the number: a duration found further in is found from its own start
        let first_word: String = window.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
        if !(first_word.chars().all(|c| c.is_ascii_digit()) || NUMBER_WORDS.contains(&first_word.as_str())) {
            continue;
        }
        if let Some(d) = parse_duration(window) {
            if !out.iter().any(|o| o.same_length(&d)) {
                out.push(d);
            }
        }
    }
    out
}

const NUMBER_WORDS: &[&str] = &[
    "a",
    "an",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "fifteen",
    "eighteen",
    "twenty",
    "thirty",
    "forty",
    "forty-five",
    "fifty",
    "sixty",
    "ninety",
    "hundred",
];

/// Read the gold answers from a `cuad_labels.tsv`-format file.
pub fn read_labels(path: &Path) -> Result<Labels, LabelsError> {
    let err = |message: String| LabelsError { path: path.display().to_string(), message };
    let mut rdr = csv::ReaderBuilder::new()
        .delimiter(b'\t')
        .has_headers(true)
        .flexible(true)
        .from_path(path)
        .map_err(|e| err(e.to_string()))?;
    let mut labels = Labels::default();
    for (i, rec) in rdr.records().enumerate() {
        let rec = rec.map_err(|e| err(format!("row {}: {e}", i + 2)))?;
        let (Some(file), Some(cat)) = (rec.get(0), rec.get(1)) else { continue };
        if file.is_empty() || cat.is_empty() {
            continue;
        }
        let answer = rec.get(2).unwrap_or("").trim();
        let clauses: Vec<String> = match rec.get(3).map(str::trim).filter(|s| !s.is_empty()) {
            Some(j) => serde_json::from_str(j).map_err(|e| err(format!("row {}: clauses_json: {e}", i + 2)))?,
            None => Vec::new(),
        };
        if let Some(f) = FIELDS.iter().find(|f| f.cuad == cat) {
            labels.fields.insert((file.to_string(), f.key), gold_of(f, answer, &clauses));
        } else if cat.ends_with("- Answer") {
            continue;
        } else {
            let present = match answer {
                "Yes" | "yes" => true,
                "No" | "no" => false,
                "" => !clauses.is_empty(),
                _ => true,
            };
            labels.presence.insert((file.to_string(), cat.to_string()), present);
        }
    }
    Ok(labels)
}

fn gold_of(f: &Field, answer: &str, clauses: &[String]) -> Gold {
    if !answer.is_empty() {
        return Gold::Value(normalize(f.kind, answer));
    }
    if clauses.is_empty() {
        return Gold::Value(Value::None);
    }
    if f.key == "notice_period_to_terminate_renewal" {
        let ds: Vec<Duration> = clauses.iter().flat_map(|c| durations_in(c)).collect();
        if !ds.is_empty() {
            return Gold::AnyOf(ds);
        }
    }
    Gold::Present
}

/// One scored answer.
#[derive(Debug, Clone)]
pub struct Scored {
    pub file: String,
    pub field: &'static str,
    pub gold: String,
    pub predicted: String,
    pub correct: bool,
}

/// Accuracy per field and overall, and presence precision/recall.
#[derive(Debug, Default)]
pub struct Report {
    pub rows: Vec<Scored>,
    /// (field, correct, total), in [`FIELDS`] order.
    pub per_field: Vec<(&'static str, usize, usize)>,
    pub correct: usize,
    pub total: usize,
    pub presence_tp: usize,
    pub presence_fp: usize,
    pub presence_fn: usize,
}

impl Report {
    pub fn accuracy(&self) -> f64 {
        self.correct as f64 / self.total.max(1) as f64
    }
    pub fn field_accuracy(&self, key: &str) -> Option<f64> {
        self.per_field.iter().find(|(k, ..)| *k == key).map(|&(_, c, t)| c as f64 / t.max(1) as f64)
    }
    pub fn presence_precision(&self) -> f64 {
        self.presence_tp as f64 / (self.presence_tp + self.presence_fp).max(1) as f64
    }
    pub fn presence_recall(&self) -> f64 {
        self.presence_tp as f64 / (self.presence_tp + self.presence_fn).max(1) as f64
    }
}

/// Score `predicted` (per (file, field key); a missing answer counts as none) and `present`
/// (per (file, category)) on `files` against `labels`.
pub fn score(
    labels: &Labels,
    files: &[String],
    predicted: &BTreeMap<(String, String), Value>,
    present: &BTreeMap<(String, String), bool>,
) -> Report {
    let mut r = Report::default();
    for f in FIELDS {
        let (mut c, mut t) = (0, 0);
        for file in files {
            let Some(gold) = labels.fields.get(&(file.clone(), f.key)) else { continue };
            let p = predicted.get(&(file.clone(), f.key.to_string())).cloned().unwrap_or(Value::None);
            let ok = gold.accepts(&p);
            t += 1;
            c += ok as usize;
            r.rows.push(Scored {
                file: file.clone(),
                field: f.key,
                gold: gold.describe(),
                predicted: if p.is_none() { "none".into() } else { p.canonical() },
                correct: ok,
            });
        }
        r.per_field.push((f.key, c, t));
        r.correct += c;
        r.total += t;
    }
    for ((file, cat), &gold) in &labels.presence {
        if !files.contains(file) {
            continue;
        }
        let p = present.get(&(file.clone(), cat.clone())).copied().unwrap_or(false);
        match (p, gold) {
            (true, true) => r.presence_tp += 1,
            (true, false) => r.presence_fp += 1,
            (false, true) => r.presence_fn += 1,
            (false, false) => {}
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_a_clause() {
        let ds = durations_in(
            "The term shall be two (2) years from the Effective Date with automatic annual renewals unless either party gives sixty (60) days notice.",
        );
        assert!(ds.iter().any(|d| d.to_iso() == "P2Y"), "{ds:?}");
        assert!(ds.iter().any(|d| d.to_iso() == "P60D"), "{ds:?}");
    }

    #[test]
    fn gold_rules() {
        let notice = crate::field("notice_period_to_terminate_renewal").unwrap();
        let g = gold_of(notice, "", &["unless either party gives ninety (90) days prior written notice".into()]);
        assert!(matches!(g, Gold::AnyOf(_)));
        let exp = crate::field("expiration_date").unwrap();
        assert_eq!(gold_of(exp, "", &["until three years after launch".into()]), Gold::Present);
        assert_eq!(gold_of(exp, "", &[]), Gold::Value(Value::None));
        assert!(Gold::Value(Value::None).accepts(&Value::None));
        assert!(!Gold::Present.accepts(&Value::None));
        // CUAD's "perpetual": any term without an end date, not a date or none
        let perpetual = gold_of(exp, "perpetual", &["shall continue until the expiration of the last patent".into()]);
        assert!(perpetual.accepts(&Value::Perpetual));
        assert!(perpetual.accepts(&Value::UntilTerminated));
        assert!(perpetual.accepts(&Value::UntilEvent { event: "the expiration of the last patent".into() }));
        assert!(!perpetual.accepts(&Value::None));
        assert!(!perpetual.accepts(&normalize(crate::Kind::EndDate, "December 31, 2012")));
    }

    #[test]
    fn scoring_counts_missing_answers_as_none() {
        let mut labels = Labels::default();
        let law = normalize(crate::Kind::Jurisdiction, "New York");
        labels.fields.insert(("a.pdf".into(), "governing_law"), Gold::Value(law.clone()));
        labels.fields.insert(("a.pdf".into(), "renewal_term"), Gold::Value(Value::None));
        labels.presence.insert(("a.pdf".into(), "Non-Compete".into()), true);
        let mut pred = BTreeMap::new();
        pred.insert(
            ("a.pdf".to_string(), "governing_law".to_string()),
            normalize(crate::Kind::Jurisdiction, "the State of New York"),
        );
        let r = score(&labels, &["a.pdf".into()], &pred, &BTreeMap::new());
        assert_eq!(r.field_accuracy("governing_law"), Some(1.0));
        assert_eq!(r.field_accuracy("renewal_term"), Some(1.0));
        assert_eq!((r.correct, r.total), (2, 2));
        assert_eq!(r.presence_fn, 1);
    }
}
