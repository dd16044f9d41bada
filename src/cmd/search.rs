//! `docpipe search "text"`: the nearest clause segments to a query, embedded with the model's
//! query prompt.

use anyhow::{bail, Result};
use docpipe_batching::Backend;

use crate::cli::{Common, WorkerArgs};
use crate::setup;

/// Characters of a segment shown under its hit.
const EXCERPT_CHARS: usize = 240;

pub async fn run(
    c: &Common,
    w: &WorkerArgs,
    query: &str,
    top: i64,
    bucket: Option<&str>,
    category: Option<&str>,
) -> Result<()> {
    let pool = setup::db(c).await?;
    if let Some(cat) = category {
        let names = docpipe_clauses::stored::names(&pool).await?;
        if !names.iter().any(|n| n.to_lowercase() == cat.to_lowercase()) {
            bail!("unknown clause category {cat:?}; known: {}", names.join(", "));
        }
    }
    let model = setup::load_model(c, w)?;
    let q = model.embed_texts(Some("query"), &[query])?.remove(0);
    let rows = docpipe_store::search::nearest_segments(&pool, q, top, bucket, category).await?;
    if rows.is_empty() {
        println!("no matching segments");
    }
    for (key, segment, page, score, text) in rows {
        let text: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let excerpt: String = text.chars().take(EXCERPT_CHARS).collect();
        let more = if excerpt.len() < text.len() { "…" } else { "" };
        println!("{score:.3}  {key}  page {page}  segment {segment}\n       {excerpt}{more}");
    }
    Ok(())
}
