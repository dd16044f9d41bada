//! Clause categories: the CUAD taxonomy embedded as search queries, scored against segments,
//! and — from labelled contracts — learned scorers and presence thresholds.
//!
//! A category is the text `"<name>: <description>"` (descriptions are ours, in
//! `cuad_categories.tsv`), embedded once with the model's query prompt. Segments are scored by
//! cosine similarity against the category's `embedding`: the query itself, or after
//! `docpipe labels --learn LABELS.tsv`, a linear probe learned from labelled contracts (see
//! `eval`), scored as a probability, with a presence threshold per category that maximises
//! F1 on the labelled documents. The SQL function `clause_score` applies either.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use docpipe_worker::SentenceEmbedder;
use pgvector::Vector;
use sqlx::PgPool;
use tracing::info;
use uuid::Uuid;

const BUILTIN: &str = include_str!("cuad_categories.tsv");

/// Presence threshold of a category scored by its query alone (chosen on the shared CUAD
/// contracts by `make eval`; `--label-threshold` overrides it).
pub const DEFAULT_THRESHOLD: f32 = 0.45;

#[derive(Debug, Clone)]
pub struct Category {
    pub name: String,
    pub description: String,
}

impl Category {
    /// What gets embedded.
    pub fn query(&self) -> String {
        format!("{}: {}", self.name, self.description)
    }
}

/// The built-in taxonomy: CUAD's 41 categories with our descriptions.
pub fn builtin() -> Vec<Category> {
    BUILTIN
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once('\t'))
        .map(|(n, d)| Category { name: n.trim().to_string(), description: d.trim().to_string() })
        .collect()
}

/// Category name → description, as stored.
async fn stored_descriptions(pool: &PgPool) -> Result<BTreeMap<String, String>> {
    let rows: Vec<(String, String)> = sqlx::query_as("SELECT name, description FROM clause_categories")
        .fetch_all(pool)
        .await
        .context("reading clause_categories")?;
    Ok(rows.into_iter().collect())
}

/// Whether `clause_categories` holds exactly the built-in categories with their descriptions.
pub async fn is_current(pool: &PgPool) -> Result<bool> {
    let have = stored_descriptions(pool).await?;
    let want = builtin();
    Ok(have.len() == want.len() && want.iter().all(|c| have.get(&c.name) == Some(&c.description)))
}

/// Embed the categories that are missing or whose description changed, drop the ones no
/// longer in the taxonomy, and relabel every finished document if anything changed.
/// Returns the number of categories embedded.
pub async fn ensure(pool: &PgPool, model: &SentenceEmbedder, threshold: f32) -> Result<usize> {
    let have = stored_descriptions(pool).await?;
    let want = builtin();
    let stale: Vec<&Category> = want.iter().filter(|c| have.get(&c.name) != Some(&c.description)).collect();
    let gone: Vec<&String> = have.keys().filter(|n| !want.iter().any(|c| &c.name == *n)).collect();
    if stale.is_empty() && gone.is_empty() {
        return Ok(0);
    }
    let texts: Vec<String> = stale.iter().map(|c| c.query()).collect();
    let refs: Vec<&str> = texts.iter().map(|t| t.as_str()).collect();
    let embeddings = model.embed_texts(Some("query"), &refs).context("embedding clause categories")?;
    let mut tx = pool.begin().await?;
    for name in &gone {
        sqlx::query("DELETE FROM clause_categories WHERE name = $1").bind(name).execute(&mut *tx).await?;
    }
    for (c, e) in stale.iter().zip(embeddings) {
        let e = Vector::from(e);
        sqlx::query(
            "INSERT INTO clause_categories (name, description, model, query_embedding, embedding, threshold, source)
             VALUES ($1, $2, $3, $4, $4, $5, 'query')
             ON CONFLICT (name) DO UPDATE SET description = $2, model = $3, query_embedding = $4, embedding = $4,
               threshold = $5, source = 'query', scale = 1, position_weights = '{0,0}', bias = NULL, updated_at = now()",
        )
        .bind(&c.name)
        .bind(&c.description)
        .bind(model.label())
        .bind(e)
        .bind(threshold)
        .execute(&mut *tx)
        .await
        .context("storing clause categories")?;
    }
    tx.commit().await?;
    info!(embedded = stale.len(), removed = gone.len(), "clause categories updated");
    let n = relabel_all(pool).await?;
    info!(documents = n, "documents relabelled");
    Ok(stale.len())
}

/// Recompute the labels of every finished document (after the categories changed).
pub async fn relabel_all(pool: &PgPool) -> Result<usize> {
    let ids: Vec<(Uuid,)> = sqlx::query_as("SELECT id FROM documents WHERE status = 'done'").fetch_all(pool).await?;
    for (id,) in &ids {
        let mut tx = pool.begin().await?;
        docpipe_aggregator::label_document(&mut tx, *id).await.with_context(|| format!("labelling document {id}"))?;
        tx.commit().await?;
    }
    Ok(ids.len())
}

/// A category as stored: its name and query embedding.
#[derive(Debug, Clone)]
pub struct StoredCategory {
    pub name: String,
    pub query: Vec<f32>,
}

pub async fn load(pool: &PgPool) -> Result<Vec<StoredCategory>> {
    let rows: Vec<(String, Vector)> =
        sqlx::query_as("SELECT name, query_embedding FROM clause_categories ORDER BY name")
            .fetch_all(pool)
            .await
            .context("reading clause_categories")?;
    Ok(rows.into_iter().map(|(name, q)| StoredCategory { name, query: q.to_vec() }).collect())
}

/// Store learned scorers (by category name), then relabel every document.
pub async fn store_learned(pool: &PgPool, learned: &[(String, crate::eval::Scorer)], source: &str) -> Result<()> {
    let mut tx = pool.begin().await?;
    for (name, s) in learned {
        // `embedding` holds the probe's direction and `scale` its length: cosine × scale = w·e
        let scale = s.weights.iter().map(|w| w * w).sum::<f32>().sqrt().max(1e-12);
        let direction: Vec<f32> = s.weights.iter().map(|w| w / scale).collect();
        sqlx::query(
            "UPDATE clause_categories SET embedding = $2, scale = $3, position_weights = $4, bias = $5, threshold = $6,
                    source = $7, updated_at = now()
             WHERE name = $1",
        )
        .bind(name)
        .bind(Vector::from(direction))
        .bind(scale)
        .bind(s.position.to_vec())
        .bind(s.bias)
        .bind(s.threshold)
        .bind(source)
        .execute(&mut *tx)
        .await
        .with_context(|| format!("storing the learned scorer of {name}"))?;
    }
    tx.commit().await?;
    relabel_all(pool).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn builtin_taxonomy_is_cuad_41() {
        let cats = super::builtin();
        assert_eq!(cats.len(), 41);
        assert!(cats.iter().all(|c| !c.name.is_empty() && c.description.split_whitespace().count() >= 10));
        assert!(cats.iter().any(|c| c.name == "Governing Law"));
    }
}
