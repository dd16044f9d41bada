//! `docpipe eval --labels F --bucket B`: recall@1/@5 and presence precision/recall of the
//! clause labels against labelled documents (`make eval`); the last line is `recall@5 X.XX`.

use std::path::Path;

use anyhow::Result;
use docpipe_clauses::{eval, gold, stored};

use crate::cli::{Common, LabelArgs, WorkerArgs};
use crate::cmd::labels;
use crate::setup;

pub async fn run(
    c: &Common,
    w: &WorkerArgs,
    a: &LabelArgs,
    labels_file: &Path,
    bucket: &str,
    folds: usize,
) -> Result<()> {
    let pool = setup::db(c).await?;
    labels::prepare(c, w, a, &pool).await?;
    let gold = gold::read_labels(labels_file)?;
    let (docs, unlocated) = stored::load_docs(&pool, bucket, &gold).await?;
    let cats = stored::load(&pool).await?;
    let table = eval::evaluate(&docs, &cats, folds, unlocated, a.label_threshold)?;
    println!("{table}");
    Ok(())
}
