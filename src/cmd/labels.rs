//! `docpipe labels [--learn LABELS.tsv --bucket B]`: embed the clause categories if needed,
//! fill in what older segments lack, optionally learn scorers from labelled documents, and
//! print the categories.

use std::path::Path;

use anyhow::{bail, Context, Result};
use docpipe_clauses::{backfill, gold, learn, stored};

use crate::cli::{Common, LabelArgs, WorkerArgs};
use crate::setup;

pub async fn run(
    c: &Common,
    w: &WorkerArgs,
    a: &LabelArgs,
    learn_from: Option<&Path>,
    bucket: Option<&str>,
) -> Result<()> {
    let pool = setup::db(c).await?;
    prepare(c, w, a, &pool).await?;
    if let Some(path) = learn_from {
        let bucket = bucket.context("--learn needs --bucket (where the labelled documents are)")?;
        let (labels, present) = gold::read_labels(path)?;
        let (docs, _) = stored::load_docs(&pool, bucket, &labels, &present, stored::Embeddings::Labelled).await?;
        if docs.len() < 2 {
            bail!("found {} labelled documents that are done in bucket {bucket}; need at least 2", docs.len());
        }
        let cats = stored::load(&pool).await?;
        let refs: Vec<&gold::Doc> = docs.iter().collect();
        let scorers = learn::learn(&refs, &cats);
        let learned: Vec<(String, docpipe_clauses::scorer::Scorer)> =
            cats.iter().map(|c| c.name.clone()).zip(scorers).collect();
        let source = format!("learned from {} documents of {}", docs.len(), path.display());
        stored::store_learned(&pool, &learned, &source).await?;
        println!("{source}");
    }
    println!("{:<38} {:>9} {:>9}  source", "category", "threshold", "documents");
    for (name, t, source, n) in stored::summary(&pool).await? {
        println!("{name:<38} {t:>9.3} {n:>9}  {source}");
    }
    Ok(())
}

/// What `labels` and `eval` do first: fill in older segments' terms and standalone
/// embeddings, and make sure the categories are embedded (the model is loaded only if needed).
pub async fn prepare(c: &Common, w: &WorkerArgs, a: &LabelArgs, pool: &docpipe_store::PgPool) -> Result<()> {
    backfill::backfill_terms(pool).await?;
    backfill::backfill_standalone(pool, || setup::load_model(c, w)).await?;
    setup::ensure_labels(pool, a, None, || setup::load_model(c, w)).await
}
