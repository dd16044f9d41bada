//! Clause categories: the CUAD taxonomy embedded as search queries, scored against segments,
//! and — from labelled contracts — learned scorers and presence thresholds.
//!
//! A category is the text `"<name>: <description>"` (descriptions are ours, in
//! `cuad_categories.tsv`), embedded once with the model's query prompt. Segments are scored by
//! cosine similarity against the category's `embedding`: the query itself, or after
//! `docpipe labels --learn LABELS.tsv`, a linear probe on the embedding, the position and the
//! segment's words learned from labelled contracts (see `eval`), scored as a probability, with
//! a presence threshold per category that maximises F1 on the labelled documents. The SQL
//! function `clause_score` (with the view `segment_lexical` for the words) applies either.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use docpipe_worker::SentenceEmbedder;
use pgvector::Vector;
use sqlx::PgPool;
use tracing::{info, warn};
use uuid::Uuid;

const BUILTIN: &str = include_str!("cuad_categories.tsv");

/// Presence threshold of a category scored by its query alone (chosen on the shared CUAD
/// contracts by `make eval`; `--label-threshold` overrides it).
pub const DEFAULT_THRESHOLD: f32 = 0.42;

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
        sqlx::query("DELETE FROM clause_term_weights WHERE category = $1").bind(&c.name).execute(&mut *tx).await?;
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

/// Fill in the lexical terms of segments stored before they were kept (migration 0006).
/// Returns the number of documents updated.
pub async fn backfill_terms(pool: &PgPool) -> Result<usize> {
    let ids: Vec<(Uuid, String)> = sqlx::query_as(
        "SELECT d.id, d.text FROM documents d
         WHERE d.text IS NOT NULL AND EXISTS (SELECT 1 FROM segments s WHERE s.document_id = d.id AND s.terms IS NULL)",
    )
    .fetch_all(pool)
    .await
    .context("finding segments without terms")?;
    for (id, text) in &ids {
        let segs: Vec<(i32, i32, i32)> =
            sqlx::query_as("SELECT segment_index, char_start, char_end FROM segments WHERE document_id = $1")
                .bind(id)
                .fetch_all(pool)
                .await
                .with_context(|| format!("reading the segments of document {id}"))?;
        let terms = docpipe_ingest::segment_terms(text, segs.iter().map(|s| s.1.max(0) as usize..s.2.max(0) as usize));
        let index: Vec<i32> = segs.iter().map(|s| s.0).collect();
        sqlx::query(
            "UPDATE segments s SET terms = u.terms::int[] FROM UNNEST($2::int[], $3::text[]) AS u(i, terms)
             WHERE s.document_id = $1 AND s.segment_index = u.i",
        )
        .bind(id)
        .bind(&index)
        .bind(&terms)
        .execute(pool)
        .await
        .with_context(|| format!("storing the terms of document {id}"))?;
    }
    if !ids.is_empty() {
        info!(documents = ids.len(), "segment terms filled in");
    }
    Ok(ids.len())
}

/// Padded tokens per forward pass of [`backfill_standalone`] (the worker's CPU default).
const BACKFILL_BATCH_TOKENS: usize = 8192;

/// Embed on their own the segments stored without a standalone embedding (before migration
/// 0007, or by a worker run with `--standalone-segments false`), and relabel their documents.
/// The segment's text is tokenized afresh (the worker reuses the chunk's tokens, which can
/// differ at the edges). The model is loaded only when there is something to embed. A segment
/// that fails alone is logged and stays NULL. Returns the number of segments embedded.
pub async fn backfill_standalone(pool: &PgPool, load: impl FnOnce() -> Result<SentenceEmbedder>) -> Result<usize> {
    let docs: Vec<(Uuid, String)> = sqlx::query_as(
        "SELECT d.id, d.text FROM documents d
         WHERE d.status = 'done' AND d.text IS NOT NULL AND EXISTS
               (SELECT 1 FROM segments s WHERE s.document_id = d.id AND s.embedding IS NOT NULL AND s.standalone IS NULL)
         ORDER BY d.id",
    )
    .fetch_all(pool)
    .await
    .context("finding segments without a standalone embedding")?;
    if docs.is_empty() {
        return Ok(0);
    }
    let model = load()?;
    info!(documents = docs.len(), "embedding stored segments on their own (standalone embeddings)");
    let mut total = 0;
    for (id, text) in &docs {
        let segs: Vec<(i32, i32, i32)> = sqlx::query_as(
            "SELECT segment_index, char_start, char_end FROM segments
             WHERE document_id = $1 AND embedding IS NOT NULL AND standalone IS NULL",
        )
        .bind(id)
        .fetch_all(pool)
        .await
        .with_context(|| format!("reading the segments of document {id}"))?;
        let chars: Vec<char> = text.chars().collect();
        let mut ids = Vec::with_capacity(segs.len());
        for (_, start, end) in &segs {
            let (a, b) = ((*start).max(0) as usize, (*end).max(0) as usize);
            let seg: String = chars.get(a.min(chars.len())..b.min(chars.len())).unwrap_or_default().iter().collect();
            let mut t =
                model.tokenize(Some("document"), &seg).with_context(|| format!("tokenizing a segment of {id}"))?;
            if t.len() > model.max_len() {
                // keep the closing special token
                let last = t[t.len() - 1];
                t.truncate(model.max_len() - 1);
                t.push(last);
            }
            ids.push(t);
        }
        let refs: Vec<&[u32]> = ids.iter().map(|t| t.as_slice()).collect();
        let mut out: Vec<Option<Vector>> = Vec::with_capacity(ids.len());
        for (seg, e) in segs.iter().zip(docpipe_worker::embed_by_length(&model, &refs, BACKFILL_BATCH_TOKENS)) {
            match e {
                Ok(e) => out.push(Some(Vector::from(e))),
                Err(error) => {
                    warn!(document_id = %id, segment = seg.0, %error, "a segment could not be embedded on its own; it keeps its contextual embedding only");
                    out.push(None);
                }
            }
        }
        let index: Vec<i32> = segs.iter().map(|s| s.0).collect();
        let mut tx = pool.begin().await?;
        sqlx::query(
            "UPDATE segments s SET standalone = u.standalone FROM UNNEST($2::int[], $3::vector[]) AS u(i, standalone)
             WHERE s.document_id = $1 AND s.segment_index = u.i",
        )
        .bind(id)
        .bind(&index)
        .bind(&out)
        .execute(&mut *tx)
        .await
        .with_context(|| format!("storing the standalone embeddings of document {id}"))?;
        docpipe_aggregator::label_document(&mut tx, *id).await.with_context(|| format!("labelling document {id}"))?;
        tx.commit().await?;
        total += segs.len();
        info!(document_id = %id, segments = segs.len(), "standalone segment embeddings stored");
    }
    Ok(total)
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
        store_scorer(&mut tx, name, s, source).await?;
    }
    tx.commit().await?;
    relabel_all(pool).await?;
    Ok(())
}

/// Store one category's learned scorer: what `clause_score` and `segment_lexical` read.
async fn store_scorer(conn: &mut sqlx::PgConnection, name: &str, s: &crate::eval::Scorer, source: &str) -> Result<()> {
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
    .execute(&mut *conn)
    .await
    .with_context(|| format!("storing the learned scorer of {name}"))?;
    let (terms, weights): (Vec<i32>, Vec<f32>) = s.terms.iter().map(|(t, w)| (*t, *w)).unzip();
    sqlx::query("DELETE FROM clause_term_weights WHERE category = $1")
        .bind(name)
        .execute(&mut *conn)
        .await
        .with_context(|| format!("replacing the term weights of {name}"))?;
    sqlx::query(
        "INSERT INTO clause_term_weights (category, term, weight) SELECT $1, * FROM UNNEST($2::int[], $3::real[])",
    )
    .bind(name)
    .bind(&terms)
    .bind(&weights)
    .execute(&mut *conn)
    .await
    .with_context(|| format!("storing the term weights of {name}"))?;
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

/// Against real Postgres (`DOCPIPE_DATABASE_URL`, set by `make test`), inside a transaction
/// that is rolled back: the SQL score of a stored learned scorer equals the one `eval` uses.
#[cfg(test)]
mod sql_tests {
    use std::collections::HashMap;

    use pgvector::Vector;
    use uuid::Uuid;

    use crate::eval::{Scorer, Segment};

    /// Deterministic pseudo-random numbers in [-1, 1).
    fn noise(seed: u64, n: usize) -> Vec<f32> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect()
    }

    fn unit(v: Vec<f32>) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / n).collect()
    }

    #[tokio::test]
    async fn sql_clause_score_equals_the_learned_scorer() {
        let url = std::env::var("DOCPIPE_DATABASE_URL")
            .expect("DOCPIPE_DATABASE_URL is not set: run the tests with `make test`");
        let pool = docpipe_common::db::connect(&url, 2, std::time::Duration::from_secs(30)).await.expect("connect");
        docpipe_common::db::migrate(&pool).await.expect("migrate");
        let mut tx = pool.begin().await.expect("begin");
        let (run, doc, cat) = (Uuid::now_v7(), Uuid::now_v7(), format!("test category {}", Uuid::now_v7()));
        sqlx::query("INSERT INTO runs (id, trigger, bucket) VALUES ($1, 'test', 'labels-test')")
            .bind(run)
            .execute(&mut *tx)
            .await
            .unwrap();
        sqlx::query(
            "INSERT INTO documents (id, run_id, bucket, key, status) VALUES ($1, $2, 'labels-test', $3, 'done')",
        )
        .bind(doc)
        .bind(run)
        .bind(format!("{doc}.pdf"))
        .execute(&mut *tx)
        .await
        .unwrap();
        let texts = [
            "1. Governing Law. This Agreement is governed by the laws of New York.",
            "Payment is due in 30 days.",
            "",
            "(c) no terms",
        ];
        let mut segments = Vec::new();
        for (i, text) in texts.iter().enumerate() {
            let terms = if i == 3 { Vec::new() } else { docpipe_chunker::segment::terms(text) };
            let seg = Segment { chars: 0..text.len(), embedding: unit(noise(i as u64 + 1, 768)), terms };
            sqlx::query(
                "INSERT INTO segments (document_id, segment_index, char_start, char_end, token_start, token_end,
                                       page_start, page_end, embedding, terms)
                 VALUES ($1, $2, 0, 1, 0, 1, 1, 1, $3, $4)",
            )
            .bind(doc)
            .bind(i as i32)
            .bind(Vector::from(seg.embedding.clone()))
            .bind(if i == 2 { None } else { Some(seg.terms.clone()) })
            .execute(&mut *tx)
            .await
            .unwrap();
            segments.push(seg);
        }
        sqlx::query(
            "INSERT INTO clause_categories (name, description, model, query_embedding, embedding, threshold, source)
             VALUES ($1, 'test', 'test', $2, $2, 0.5, 'query')",
        )
        .bind(&cat)
        .bind(Vector::from(unit(noise(99, 768))))
        .execute(&mut *tx)
        .await
        .unwrap();
        // weights on some of the first two segments' terms, and on terms no segment has
        let mut terms: HashMap<i32, f32> = HashMap::new();
        for (k, t) in segments[0].terms.iter().chain(&segments[1].terms).step_by(2).enumerate() {
            terms.insert(*t, 0.1 * (k % 7) as f32 - 0.25);
        }
        terms.insert(-7, 9.0);
        let weights: Vec<f32> = noise(7, 768).into_iter().map(|w| w * 0.2).collect();
        let scorer = Scorer { weights, position: [0.8, -0.4], terms, bias: Some(-0.3), threshold: 0.5 };
        super::store_scorer(&mut tx, &cat, &scorer, "test").await.expect("store");
        let sql: Vec<(i32, f64)> = sqlx::query_as(
            "SELECT segment_index, score FROM segment_scores WHERE document_id = $1 AND category = $2 ORDER BY segment_index",
        )
        .bind(doc)
        .bind(&cat)
        .fetch_all(&mut *tx)
        .await
        .unwrap();
        assert_eq!(sql.len(), texts.len());
        let lexical: Vec<f32> = segments.iter().map(|s| scorer.lexical(&s.terms)).collect();
        assert!(lexical[0] != 0.0 && lexical[1] != 0.0 && lexical[2] == 0.0 && lexical[3] == 0.0, "{lexical:?}");
        for (i, score) in sql {
            let rust = scorer.score(&segments[i as usize], i as usize) as f64;
            assert!((score - rust).abs() < 1e-4, "segment {i}: SQL {score} vs eval {rust}");
        }
        tx.rollback().await.unwrap();
    }
}
