//! The scorer artifact: learned clause scorers as a versioned JSON file, what `docpipe
//! train-clauses` writes and what the pipeline applies by default ([`builtin`], compiled into
//! the binary from `crates/clauses/scorers/`).
//!
//! It holds, per category: the probe's weights on the segment embedding, its two position
//! weights, its bias, its presence threshold, and its strongest lexical term weights (hashed
//! terms, `docpipe_chunker::segment::terms`); and for the whole file: the embedding model it
//! was trained on, the embeddings it reads (`standalone`), and what it was trained on (labels
//! file and its sha256, PDFs, documents, segments and tokens embedded, seed).
//! [`Artifact::scorers`] turns it back into the [`Scorer`]s that `clause_score` mirrors.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::scorer::Scorer;
use crate::ClausesError;

/// What the `format` field of a scorer artifact says.
pub const FORMAT: &str = "docpipe-clause-scorer";
/// The artifact layout this docpipe reads.
pub const VERSION: u32 = 1;

/// The name of the scorer shipped with docpipe: its files are `scorers/<name>.json`, `.sha256`
/// and `.fixture.json` beside it, and `train-clauses` writes it there by default.
macro_rules! builtin_name {
    () => {
        "clause-scorer-v5"
    };
}
pub const BUILTIN_NAME: &str = builtin_name!();
/// The shipped scorer's file, from the repository root.
pub const BUILTIN_PATH: &str = concat!("crates/clauses/scorers/", builtin_name!(), ".json");

/// The scorer shipped with docpipe, its sha256 and its recorded scores on a fixture.
const BUILTIN_JSON: &[u8] = include_bytes!(concat!("../scorers/", builtin_name!(), ".json"));
const BUILTIN_SHA256: &str = include_str!(concat!("../scorers/", builtin_name!(), ".json.sha256"));

/// What an artifact was trained on, for its model card and for `docpipe labels`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Training {
    /// The labels file's name and sha256.
    pub labels: String,
    pub labels_sha256: String,
    /// sha256 over the sorted `sha256  file` lines of the training PDFs.
    pub pdfs_sha256: String,
    pub documents: usize,
    /// Segments in those documents, and those embedded (positives and a weighted sample of the
    /// rest).
    pub segments: usize,
    pub segments_embedded: usize,
    pub tokens_embedded: usize,
    /// How the segments embedded alone were chosen per document (learned from standalone
    /// embeddings, or both kinds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<crate::train::Plan>,
    /// How the chunks forwarded were chosen per document (learned from contextual embeddings,
    /// or both kinds). Artifacts up to clause-scorer-v4 lack it: v4's `plan` is the standalone
    /// default, which its contextual training did not use (it used 3 positive and 1 random
    /// chunk per document).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_plan: Option<crate::train::ChunkPlan>,
    /// The seed of the sample.
    pub seed: u64,
    /// UTC date and time of training.
    pub trained_at: String,
    /// The docpipe version that trained it.
    pub docpipe: String,
}

/// One category's learned scorer, as stored in the artifact.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Category {
    pub name: String,
    pub weights: Vec<f32>,
    pub position: [f32; 2],
    pub bias: f32,
    pub threshold: f32,
    /// (term, weight), strongest first.
    pub terms: Vec<(i32, f32)>,
    /// Training documents that have the category (by their answers), and positive segments.
    pub documents: usize,
    pub positives: usize,
}

/// A scorer artifact (see the module docs).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Artifact {
    pub format: String,
    pub version: u32,
    pub name: String,
    /// The embedding model's name (its directory name) whose embeddings the weights read.
    pub model: String,
    /// Which segment embeddings it was trained on: `standalone`.
    pub embeddings: String,
    pub dim: usize,
    pub training: Training,
    pub categories: Vec<Category>,
}

impl Artifact {
    /// Parse and check an artifact; `what` names it in errors.
    pub fn from_json(bytes: &[u8], what: &str) -> Result<Self, ClausesError> {
        let a: Artifact = serde_json::from_slice(bytes)
            .map_err(|e| ClausesError::Input(format!("{what}: not a clause scorer artifact: {e}")))?;
        if a.format != FORMAT || a.version != VERSION {
            return Err(ClausesError::Input(format!(
                "{what}: format {:?} version {}, this docpipe reads {FORMAT:?} version {VERSION}",
                a.format, a.version
            )));
        }
        for c in &a.categories {
            if c.weights.len() != a.dim {
                return Err(ClausesError::Input(format!(
                    "{what}: category {:?} has {} weights for {}-dimensional embeddings",
                    c.name,
                    c.weights.len(),
                    a.dim
                )));
            }
            if !(c.bias.is_finite() && c.threshold.is_finite() && c.weights.iter().all(|w| w.is_finite())) {
                return Err(ClausesError::Input(format!("{what}: category {:?} has non-finite weights", c.name)));
            }
        }
        Ok(a)
    }

    /// Read an artifact file.
    pub fn load(path: &Path) -> Result<(Self, String), ClausesError> {
        let bytes = std::fs::read(path)
            .map_err(|e| ClausesError::Input(format!("reading clause scorer {}: {e}", path.display())))?;
        Ok((Self::from_json(&bytes, &path.display().to_string())?, sha256_hex(&bytes)))
    }

    /// The JSON written to disk: compact, one line per category.
    pub fn to_json(&self) -> Vec<u8> {
        let mut head = self.clone();
        head.categories.clear();
        let head = serde_json::to_string(&head).expect("an artifact serialises");
        let head = head.strip_suffix("[]}").expect("categories come last");
        let cats: Vec<String> =
            self.categories.iter().map(|c| serde_json::to_string(c).expect("a category serialises")).collect();
        format!("{head}[\n{}\n]}}\n", cats.join(",\n")).into_bytes()
    }

    /// The scorers by category name.
    pub fn scorers(&self) -> BTreeMap<String, Scorer> {
        self.categories
            .iter()
            .map(|c| {
                let s = Scorer {
                    weights: c.weights.clone(),
                    position: c.position,
                    terms: c.terms.iter().copied().collect(),
                    bias: Some(c.bias),
                    threshold: c.threshold,
                };
                (c.name.clone(), s)
            })
            .collect()
    }
}

/// Lower-case hex sha256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The scorer shipped with this docpipe and its sha256 (checked against the recorded one).
pub fn builtin() -> Result<(Artifact, String), ClausesError> {
    let sha = sha256_hex(BUILTIN_JSON);
    let recorded = BUILTIN_SHA256.split_whitespace().next().unwrap_or("");
    if sha != recorded {
        return Err(ClausesError::Input(format!(
            "the built-in clause scorer's sha256 {sha} is not the recorded {recorded} \
             ({BUILTIN_PATH} changed without its .sha256)"
        )));
    }
    Ok((Artifact::from_json(BUILTIN_JSON, "built-in clause scorer")?, sha))
}

/// Where the scorers applied at run time come from (`--clause-scorer`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The artifact compiled into docpipe.
    Builtin,
    /// An artifact file.
    File(std::path::PathBuf),
    /// No artifact: categories not learned locally are zero-shot.
    None,
}

impl std::str::FromStr for Source {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "builtin" | "" => Ok(Source::Builtin),
            "none" | "zero-shot" => Ok(Source::None),
            path => Ok(Source::File(path.into())),
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Builtin => f.write_str("builtin"),
            Source::File(p) => write!(f, "{}", p.display()),
            Source::None => f.write_str("none"),
        }
    }
}

impl Source {
    /// The artifact and its sha256 (`None` for [`Source::None`]).
    pub fn load(&self) -> Result<Option<(Artifact, String)>, ClausesError> {
        match self {
            Source::Builtin => builtin().map(Some),
            Source::File(p) => Artifact::load(p).map(Some),
            Source::None => Ok(None),
        }
    }
}

/// Recorded scores of the shipped scorer on a few training segments: the test that the
/// artifact in the repository is the one that was trained, and that it scores the same.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Fixture {
    pub artifact_sha256: String,
    pub segments: Vec<FixtureSegment>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FixtureSegment {
    pub index: usize,
    pub embedding: Vec<f32>,
    pub terms: Vec<i32>,
    /// Score per category name.
    pub scores: BTreeMap<String, f32>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scorer::Segment;

    #[test]
    fn shipped_scorer_loads_matches_its_sha256_and_reproduces_its_recorded_scores() {
        let (artifact, sha) = builtin().expect("the built-in scorer loads and matches its recorded sha256");
        assert_eq!(artifact.categories.len(), 41, "every CUAD category is covered");
        assert_eq!(artifact.name, BUILTIN_NAME, "the shipped file records the name it is shipped under");
        let fixture: Fixture =
            serde_json::from_str(include_str!(concat!("../scorers/", builtin_name!(), ".fixture.json")))
                .expect("the fixture parses");
        assert_eq!(fixture.artifact_sha256, sha, "the fixture was recorded with this artifact");
        assert!(!fixture.segments.is_empty());
        let scorers = artifact.scorers();
        let mut checked = 0;
        for s in &fixture.segments {
            let seg = Segment { index: s.index, chars: 0..0, embedding: s.embedding.clone(), terms: s.terms.clone() };
            for (cat, want) in &s.scores {
                let got = scorers[cat].score(&seg);
                assert!((got - want).abs() < 1e-5, "{cat}, segment {}: {got} vs recorded {want}", s.index);
                checked += 1;
            }
        }
        assert!(checked >= 41, "{checked} scores checked");
    }

    /// The sampling plan an artifact records is the one its training used: the shipped v5
    /// forwarded every chunk of every document and records no segment plan; a sampled
    /// contextual plan, and an artifact of v4's time (a segment plan, no chunk plan), read back.
    #[test]
    fn training_records_the_plan_it_used() {
        let (a, _) = builtin().unwrap();
        assert_eq!(a.training.chunk_plan, Some(crate::train::ChunkPlan::WHOLE));
        assert!(a.training.plan.is_none());
        let mut b = a.clone();
        b.training.chunk_plan = Some(crate::train::ChunkPlan { positive_chunks: 3, random_chunks: 1 });
        let json = String::from_utf8(b.to_json()).unwrap();
        assert!(json.contains(r#""chunk_plan":{"positive_chunks":3,"random_chunks":1}"#), "{}", &json[..400]);
        assert!(!json.contains(r#""plan":"#));
        assert_eq!(Artifact::from_json(json.as_bytes(), "x.json").unwrap(), b);
        let mut v4 = a.clone();
        v4.training.chunk_plan = None;
        v4.training.plan = Some(crate::train::Plan { max_tokens: 2500, per_category: 2, negatives: 8 });
        let json = String::from_utf8(v4.to_json()).unwrap();
        assert!(!json.contains(r#""chunk_plan":"#));
        assert_eq!(Artifact::from_json(json.as_bytes(), "v4.json").unwrap(), v4);
    }

    #[test]
    fn artifacts_of_another_format_or_shape_are_refused() {
        let (a, _) = builtin().unwrap();
        let mut b = a.clone();
        b.version = 99;
        let e = Artifact::from_json(&b.to_json(), "x.json").unwrap_err().to_string();
        assert!(e.contains("version 99"), "{e}");
        let mut b = a.clone();
        b.categories[0].weights.pop();
        let e = Artifact::from_json(&b.to_json(), "x.json").unwrap_err().to_string();
        assert!(e.contains("weights for"), "{e}");
        assert!(Artifact::from_json(b"{}", "x.json").is_err());
        assert_eq!(Artifact::from_json(&a.to_json(), "x.json").unwrap(), a);
    }
}
