//! `docpipe eval --labels F --bucket B`: recall@1/@5 and presence precision/recall of the
//! clause labels against labelled documents (`make eval`), scored by the clause scorer
//! (`--clause-scorer`, the shipped one by default) or, with `--folds N`, by scorers learned
//! under cross-validation; the last line is `recall@5 X.XX`. With `--pdfs DIR` instead of a
//! bucket, the documents are not run through the pipeline: every segment is embedded on its
//! own here, as the worker's standalone pass embeds it (what labels score under
//! `--standalone-segments all`), or with `--embeddings contextual` pooled inside its chunk, as
//! the worker's chunk pass does (what they score under the default `none`);
//! with `--standalone-candidates M`, both, mixed as a worker with that margin would store them.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use docpipe_clauses::candidates::{self, Candidates};
use docpipe_clauses::eval::{self, Scoring};
use docpipe_clauses::gold::{self, Doc};
use docpipe_clauses::stored::{self, Embeddings};

use docpipe_clauses::stored::StoredCategory;
use docpipe_clauses::train::{ChunkPlan, Plan};

use crate::cli::{Common, LabelArgs, OcrArgs, WorkerArgs};
use crate::cmd::{labels, train_clauses};
use crate::setup;

/// The scorers under test: the clause scorer, or cross-validation.
fn scoring<'a>(
    folds: usize,
    artifact: &Option<(docpipe_clauses::artifact::Artifact, String)>,
    scorers: &'a std::collections::BTreeMap<String, docpipe_clauses::scorer::Scorer>,
) -> Result<Scoring<'a>> {
    Ok(match (folds, artifact) {
        (0, Some((art, sha))) => Scoring::Given { scorers, label: format!("{} (sha256 {})", art.name, &sha[..12]) },
        (0, None) => Scoring::Given { scorers, label: "none (zero-shot)".into() },
        (1, _) => bail!("--folds must be 0 (the clause scorer) or at least 2 (cross-validation)"),
        (n, _) => Scoring::CrossValidated { folds: n },
    })
}

/// The rule `--standalone-candidates M` simulates (`--clause-scorer`'s, at margin M), with M;
/// `None` without the flag.
fn candidate_rule(
    artifact: &Option<(docpipe_clauses::artifact::Artifact, String)>,
    margin: Option<f32>,
    contextual: bool,
) -> Result<Option<(Candidates, f32)>> {
    let Some(t) = margin else { return Ok(None) };
    let Some((art, _)) = artifact else {
        bail!("--standalone-candidates needs a clause scorer (not --clause-scorer none)")
    };
    if contextual {
        bail!("--standalone-candidates mixes standalone and contextual embeddings: leave --embeddings labelled");
    }
    Ok(Some((Candidates::new(art, t), t)))
}

/// `eval --pdfs`: the labelled PDFs embedded here, segment by segment, and scored.
pub async fn offline(
    c: &Common,
    w: &WorkerArgs,
    ocr: &OcrArgs,
    a: &LabelArgs,
    labels_file: &Path,
    pdfs: &Path,
    folds: usize,
    contextual: bool,
    standalone_candidates: Option<f32>,
) -> Result<()> {
    let o = train_clauses::Options {
        labels: labels_file.to_path_buf(),
        pdfs: pdfs.to_path_buf(),
        out: Default::default(),
        name: String::new(),
        cache: None,
        docs: 0,
        plan: Plan::WHOLE,
        seed: 0,
        embeddings: if contextual {
            train_clauses::Embeddings::Contextual(ChunkPlan::WHOLE)
        } else {
            train_clauses::Embeddings::Standalone
        },
        out_of_fold: None,
    };
    // a bad flag fails before anything is embedded
    let artifact = a.clause_scorer.load()?;
    let rule = candidate_rule(&artifact, standalone_candidates, contextual)?;
    let mut corpus = train_clauses::corpus(c, w, ocr, &o).await?;
    if let Some((rule, t)) = rule {
        // every chunk forwarded too (cached apart), each document in the standalone corpus's order
        let ctx =
            train_clauses::Options { embeddings: train_clauses::Embeddings::Contextual(ChunkPlan::WHOLE), ..o.clone() };
        let x = train_clauses::corpus(c, w, ocr, &ctx).await?;
        let mut by_file: BTreeMap<String, Doc> = x.files.into_iter().zip(x.docs).collect();
        let mut aligned = Vec::with_capacity(corpus.docs.len());
        for f in &corpus.files {
            aligned.push(by_file.remove(f).with_context(|| format!("{f}: no contextual embeddings"))?);
        }
        let kept = candidates::simulate(&mut corpus.docs, &aligned, &rule)?;
        println!("standalone candidates at margin {t}: {kept}");
    }
    let cats: Vec<StoredCategory> = corpus.queries;
    let scorers = artifact.as_ref().map(|(a, _)| a.scorers()).unwrap_or_default();
    let table = eval::evaluate(
        &corpus.docs,
        &cats,
        &scoring(folds, &artifact, &scorers)?,
        corpus.unlocated,
        a.label_threshold,
    )?;
    println!("{table}");
    Ok(())
}

/// Which stored segment embeddings `eval --bucket` scores.
pub struct Stored<'a> {
    /// `labelled` or `contextual`.
    pub embeddings: &'a str,
    /// Simulate `--standalone-segments candidates` at this margin.
    pub standalone_candidates: Option<f32>,
}

pub async fn run(
    c: &Common,
    w: &WorkerArgs,
    a: &LabelArgs,
    labels_file: &Path,
    bucket: &str,
    folds: usize,
    stored_as: Stored<'_>,
) -> Result<()> {
    let pool = setup::db(c).await?;
    labels::prepare(c, w, a, &pool).await?;
    let (gold, present) = gold::read_labels(labels_file)?;
    let contextual = stored_as.embeddings == "contextual";
    let embeddings = if contextual { Embeddings::Contextual } else { Embeddings::Labelled };
    let (mut docs, unlocated) = stored::load_docs(&pool, bucket, &gold, &present, embeddings).await?;
    let cats = stored::load(&pool).await?;
    let artifact = a.clause_scorer.load()?;
    if let Some((rule, t)) = candidate_rule(&artifact, stored_as.standalone_candidates, contextual)? {
        let (ctx, _) = stored::load_docs(&pool, bucket, &gold, &present, Embeddings::Contextual).await?;
        let kept = candidates::simulate(&mut docs, &ctx, &rule)?;
        println!("standalone candidates at margin {t}: {kept}");
    }
    let scorers = artifact.as_ref().map(|(a, _)| a.scorers()).unwrap_or_default();
    let table = eval::evaluate(&docs, &cats, &scoring(folds, &artifact, &scorers)?, unlocated, a.label_threshold)?;
    println!("{table}");
    Ok(())
}
