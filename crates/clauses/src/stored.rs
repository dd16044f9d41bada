//! Clause categories and learned scorers in Postgres (`clause_categories`,
//! `clause_term_weights`), beside the [`Scorer`] they store; and the labelled documents read
//! back for learning and evaluation. Documents are labelled by
//! `docpipe_store::chunks::label_document` from the view `segment_scores`.

use std::collections::{BTreeMap, BTreeSet};

use docpipe_batching::Backend;
use docpipe_contract::status::DocStatus;
use docpipe_store::chunks::label_document;
use docpipe_store::PgPool;
use pgvector::Vector;
use tracing::info;
use uuid::Uuid;

use crate::artifact::Artifact;
use crate::gold::{gold_and_positives, present_in, Doc, Labels, Present};
use crate::scorer::{Scorer, Segment};
use crate::taxonomy::{builtin, Category};
use crate::{db, ClausesError};

type Result<T> = std::result::Result<T, ClausesError>;

/// Category name → description, as stored.
async fn stored_descriptions(pool: &PgPool) -> Result<BTreeMap<String, String>> {
    let rows: Vec<(String, String)> = sqlx::query_as("SELECT name, description FROM clause_categories")
        .fetch_all(pool)
        .await
        .map_err(db("reading clause_categories"))?;
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
pub async fn ensure<B: Backend>(pool: &PgPool, model: &B, threshold: f32) -> Result<usize> {
    let have = stored_descriptions(pool).await?;
    let want = builtin();
    let stale: Vec<&Category> = want.iter().filter(|c| have.get(&c.name) != Some(&c.description)).collect();
    let gone: Vec<&String> = have.keys().filter(|n| !want.iter().any(|c| &c.name == *n)).collect();
    if stale.is_empty() && gone.is_empty() {
        return Ok(0);
    }
    let texts: Vec<String> = stale.iter().map(|c| c.query()).collect();
    let refs: Vec<&str> = texts.iter().map(|t| t.as_str()).collect();
    let embeddings = model
        .embed_texts(Some("query"), &refs)
        .map_err(|e| ClausesError::Model { what: "embedding clause categories".into(), message: e.to_string() })?;
    let mut tx = pool.begin().await.map_err(db("storing clause categories"))?;
    for name in &gone {
        sqlx::query("DELETE FROM clause_categories WHERE name = $1")
            .bind(name)
            .execute(&mut *tx)
            .await
            .map_err(db("removing a clause category"))?;
    }
    for (c, e) in stale.iter().zip(embeddings) {
        let e = Vector::from(e);
        sqlx::query("DELETE FROM clause_term_weights WHERE category = $1")
            .bind(&c.name)
            .execute(&mut *tx)
            .await
            .map_err(db("storing clause categories"))?;
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
        .map_err(db("storing clause categories"))?;
    }
    tx.commit().await.map_err(db("storing clause categories"))?;
    info!(embedded = stale.len(), removed = gone.len(), "clause categories updated");
    let n = relabel_all(pool).await?;
    info!(documents = n, "documents relabelled");
    Ok(stale.len())
}

/// Recompute the labels of every finished document (after the categories changed).
pub async fn relabel_all(pool: &PgPool) -> Result<usize> {
    let ids: Vec<(Uuid,)> = sqlx::query_as("SELECT id FROM documents WHERE status = $1")
        .bind(DocStatus::Done.as_str())
        .fetch_all(pool)
        .await
        .map_err(db("listing done documents"))?;
    for (id,) in &ids {
        relabel(pool, *id).await?;
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
            .map_err(db("reading clause_categories"))?;
    Ok(rows.into_iter().map(|(name, q)| StoredCategory { name, query: q.to_vec() }).collect())
}

/// Store learned scorers (by category name), then relabel every document.
pub async fn store_learned(pool: &PgPool, learned: &[(String, Scorer)], source: &str) -> Result<()> {
    let mut tx = pool.begin().await.map_err(db("storing learned scorers"))?;
    for (name, s) in learned {
        store_scorer(&mut tx, name, s, source).await?;
    }
    tx.commit().await.map_err(db("storing learned scorers"))?;
    relabel_all(pool).await?;
    Ok(())
}

/// Store one category's learned scorer: what `clause_score` and `segment_lexical` read.
async fn store_scorer(conn: &mut sqlx::PgConnection, name: &str, s: &Scorer, source: &str) -> Result<()> {
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
    .map_err(db(format!("storing the learned scorer of {name}")))?;
    let (terms, weights): (Vec<i32>, Vec<f32>) = s.terms.iter().map(|(t, w)| (*t, *w)).unzip();
    sqlx::query("DELETE FROM clause_term_weights WHERE category = $1")
        .bind(name)
        .execute(&mut *conn)
        .await
        .map_err(db(format!("replacing the term weights of {name}")))?;
    sqlx::query(
        "INSERT INTO clause_term_weights (category, term, weight) SELECT $1, * FROM UNNEST($2::int[], $3::real[])",
    )
    .bind(name)
    .bind(&terms)
    .bind(&weights)
    .execute(&mut *conn)
    .await
    .map_err(db(format!("storing the term weights of {name}")))?;
    Ok(())
}

/// The `source` of a category scored by a scorer artifact starts with this.
const ARTIFACT_SOURCE: &str = "scorer ";

/// What [`apply_artifact`] did.
#[derive(Debug, Default)]
pub struct Applied {
    /// Categories now scored by the artifact (changed or not).
    pub covered: usize,
    /// Categories that changed scorer (documents were relabelled when any did).
    pub changed: usize,
    /// Categories the artifact does not cover: zero-shot.
    pub zero_shot: Vec<String>,
    /// Categories learned with `docpipe labels --learn`, left as they are.
    pub learned_here: Vec<String>,
    /// Why the artifact was not applied at all, if it was not.
    pub refused: Option<String>,
}

/// Score the categories by a scorer artifact (`None`: by none), then relabel every document if
/// that changed anything. Categories learned here (`docpipe labels --learn`) keep their own
/// scorers; categories the artifact does not cover, or all of them when its embedding model is
/// not the one the categories were embedded with, are zero-shot at `zero_shot_threshold`.
pub async fn apply_artifact(
    pool: &PgPool,
    artifact: Option<(&Artifact, &str)>,
    zero_shot_threshold: f32,
) -> Result<Applied> {
    let mut tx = pool.begin().await.map_err(db("applying the clause scorer"))?;
    let applied = apply_artifact_in(&mut tx, artifact, zero_shot_threshold).await?;
    tx.commit().await.map_err(db("applying the clause scorer"))?;
    if applied.changed > 0 {
        relabel_all(pool).await?;
    }
    Ok(applied)
}

/// [`apply_artifact`] without the relabelling, in the caller's transaction.
async fn apply_artifact_in(
    tx: &mut sqlx::PgConnection,
    artifact: Option<(&Artifact, &str)>,
    zero_shot_threshold: f32,
) -> Result<Applied> {
    let rows: Vec<(String, String, String)> =
        sqlx::query_as("SELECT name, source, model FROM clause_categories ORDER BY name FOR UPDATE")
            .fetch_all(&mut *tx)
            .await
            .map_err(db("reading clause_categories"))?;
    let mut applied = Applied::default();
    let mut artifact = artifact;
    if let (Some((a, _)), Some((_, _, model))) = (artifact, rows.first()) {
        let embedded_with = model.split('/').next().unwrap_or(model);
        if a.model != embedded_with {
            applied.refused = Some(format!(
                "clause scorer {} was trained on {} embeddings; the categories are embedded with {embedded_with}",
                a.name, a.model
            ));
            artifact = None;
        }
    }
    let tag = artifact.map(|(a, sha)| format!("{ARTIFACT_SOURCE}{} sha256:{}", a.name, &sha[..sha.len().min(12)]));
    let scorers = artifact.map(|(a, _)| a.scorers()).unwrap_or_default();
    for (name, source, _) in &rows {
        if source.starts_with("learned") {
            applied.learned_here.push(name.clone());
            continue;
        }
        match (scorers.get(name), &tag) {
            (Some(s), Some(tag)) => {
                applied.covered += 1;
                if source != tag {
                    store_scorer(&mut *tx, name, s, tag).await?;
                    applied.changed += 1;
                }
            }
            _ => {
                applied.zero_shot.push(name.clone());
                if source.starts_with(ARTIFACT_SOURCE) {
                    reset_to_zero_shot(&mut *tx, name, zero_shot_threshold).await?;
                    applied.changed += 1;
                }
            }
        }
    }
    Ok(applied)
}

/// Score a category by its query again.
async fn reset_to_zero_shot(conn: &mut sqlx::PgConnection, name: &str, threshold: f32) -> Result<()> {
    sqlx::query(
        "UPDATE clause_categories SET embedding = query_embedding, scale = 1, position_weights = '{0,0}',
                bias = NULL, threshold = $2, source = 'query', updated_at = now()
         WHERE name = $1",
    )
    .bind(name)
    .bind(threshold)
    .execute(&mut *conn)
    .await
    .map_err(db(format!("resetting {name} to zero-shot")))?;
    sqlx::query("DELETE FROM clause_term_weights WHERE category = $1")
        .bind(name)
        .execute(&mut *conn)
        .await
        .map_err(db(format!("removing the term weights of {name}")))?;
    Ok(())
}

/// Recompute one document's labels, in a transaction of its own.
pub async fn relabel(pool: &PgPool, id: Uuid) -> Result<()> {
    let what = || format!("labelling document {id}");
    let mut tx = pool.begin().await.map_err(db(what()))?;
    label_document(&mut tx, id).await.map_err(db(what()))?;
    tx.commit().await.map_err(db(what()))
}

/// Apply a new zero-shot presence threshold to the categories scored by their query alone;
/// relabels every document when it changed anything. Returns whether it did.
pub async fn set_zero_shot_threshold(pool: &PgPool, threshold: f32) -> Result<bool> {
    let changed = sqlx::query("UPDATE clause_categories SET threshold = $1 WHERE source = 'query' AND threshold <> $1")
        .bind(threshold)
        .execute(pool)
        .await
        .map_err(db("setting the zero-shot threshold"))?
        .rows_affected();
    if changed > 0 {
        relabel_all(pool).await?;
    }
    Ok(changed > 0)
}

/// The stored categories' names, in order.
pub async fn names(pool: &PgPool) -> Result<Vec<String>> {
    let rows: Vec<(String,)> = sqlx::query_as("SELECT name FROM clause_categories ORDER BY name")
        .fetch_all(pool)
        .await
        .map_err(db("reading clause_categories"))?;
    Ok(rows.into_iter().map(|r| r.0).collect())
}

/// A category as `docpipe labels` lists it: name, threshold, source, documents it is present in.
pub type CategorySummary = (String, f32, String, i64);

pub async fn summary(pool: &PgPool) -> Result<Vec<CategorySummary>> {
    sqlx::query_as(
        "SELECT c.name, c.threshold, c.source, count(l.*) FILTER (WHERE l.present)
         FROM clause_categories c LEFT JOIN document_labels l ON l.category = c.name
         GROUP BY c.name, c.threshold, c.source ORDER BY c.name",
    )
    .fetch_all(pool)
    .await
    .map_err(db("summarising clause categories"))
}

/// Which segment embedding a loaded document's scorers read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Embeddings {
    /// What labelling reads: the standalone embedding where stored, else the contextual one.
    #[default]
    Labelled,
    /// The contextual (late-chunking) embedding only, as if no standalone pass had run.
    Contextual,
}

/// Load the labelled documents of `bucket` (matched by file name) with their segments.
pub async fn load_docs(
    pool: &PgPool,
    bucket: &str,
    labels: &Labels,
    present: &Present,
    embeddings: Embeddings,
) -> Result<(Vec<Doc>, usize)> {
    let files: BTreeSet<&String> = labels.keys().map(|(f, _)| f).collect();
    let rows: Vec<(Uuid, String, String, Option<String>)> =
        sqlx::query_as("SELECT id, key, status, text FROM documents WHERE bucket = $1 ORDER BY key")
            .bind(bucket)
            .fetch_all(pool)
            .await
            .map_err(db(format!("listing the documents of bucket {bucket}")))?;
    let query = match embeddings {
        Embeddings::Labelled => {
            "SELECT segment_index, char_start, char_end, coalesce(standalone, embedding), terms FROM segments
             WHERE document_id = $1 AND embedding IS NOT NULL ORDER BY segment_index"
        }
        Embeddings::Contextual => {
            "SELECT segment_index, char_start, char_end, embedding, terms FROM segments
             WHERE document_id = $1 AND embedding IS NOT NULL ORDER BY segment_index"
        }
    };
    let mut docs = Vec::new();
    let mut unlocated = 0;
    for (id, key, status, text) in rows {
        let file = key.rsplit('/').next().unwrap_or(&key).to_string();
        if !files.contains(&file) {
            continue;
        }
        let Some(text) = text.filter(|_| status == DocStatus::Done.as_str()) else {
            eprintln!("eval: {key} is {status}; left out");
            continue;
        };
        let segs: Vec<(i32, i32, i32, Vector, Option<Vec<i32>>)> = sqlx::query_as(query)
            .bind(id)
            .fetch_all(pool)
            .await
            .map_err(db(format!("reading the segments of document {id}")))?;
        let segments: Vec<Segment> = segs
            .into_iter()
            .map(|(i, s, e, v, terms)| Segment {
                index: usize::try_from(i).unwrap_or(0),
                chars: usize::try_from(s).unwrap_or(0)..usize::try_from(e).unwrap_or(0),
                embedding: v.to_vec(),
                terms: terms.unwrap_or_default(),
            })
            .collect();
        let clauses = labels.range((file.clone(), String::new())..).take_while(|((f, _), _)| f == &file);
        let (gold, positives, missing) = gold_and_positives(&text, &segments, clauses.map(|((_, c), v)| (c, v)));
        unlocated += missing;
        docs.push(Doc { segments, gold, positives, present: present_in(present, &file), weights: Vec::new() });
    }
    Ok((docs, unlocated))
}

/// Against real Postgres (`DOCPIPE_DATABASE_URL`, set by `make test`), inside a transaction
/// that is rolled back: the SQL score of a stored learned scorer equals [`Scorer::score`].
#[cfg(test)]
mod sql_tests {
    use std::collections::HashMap;

    use pgvector::Vector;
    use uuid::Uuid;

    use crate::scorer::{Scorer, Segment};

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
        let pool = docpipe_store::connect(&url, 2, std::time::Duration::from_secs(30)).await.expect("connect");
        docpipe_store::migrate(&pool).await.expect("migrate");
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
            let seg = Segment { index: i, chars: 0..text.len(), embedding: unit(noise(i as u64 + 1, 768)), terms };
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
            let rust = scorer.score(&segments[i as usize]) as f64;
            assert!((score - rust).abs() < 1e-4, "segment {i}: SQL {score} vs eval {rust}");
        }
        tx.rollback().await.unwrap();
    }

    /// A scorer artifact applied to the categories (in a transaction that is rolled back): the
    /// categories it covers take its scorer, named with its sha256; the others are zero-shot and
    /// listed; an artifact for another embedding model is refused; `none` resets to zero-shot.
    #[tokio::test]
    async fn artifact_scores_what_it_covers_and_the_rest_falls_back_to_zero_shot() {
        use crate::artifact::{Artifact, Category, Training, FORMAT, VERSION};
        let url = std::env::var("DOCPIPE_DATABASE_URL")
            .expect("DOCPIPE_DATABASE_URL is not set: run the tests with `make test`");
        let pool = docpipe_store::connect(&url, 2, std::time::Duration::from_secs(30)).await.expect("connect");
        docpipe_store::migrate(&pool).await.expect("migrate");
        let mut tx = pool.begin().await.expect("begin");
        let (covered, other) = (format!("covered {}", Uuid::now_v7()), format!("other {}", Uuid::now_v7()));
        for name in [&covered, &other] {
            sqlx::query(
                "INSERT INTO clause_categories (name, description, model, query_embedding, embedding, threshold, source)
                 VALUES ($1, 'test', 'test-model/fp32', $2, $2, 0.4, 'query')",
            )
            .bind(name)
            .bind(Vector::from(unit(noise(5, 768))))
            .execute(&mut *tx)
            .await
            .unwrap();
        }
        // only the test categories, whatever else the database holds
        sqlx::query("DELETE FROM clause_categories WHERE name <> $1 AND name <> $2")
            .bind(&covered)
            .bind(&other)
            .execute(&mut *tx)
            .await
            .unwrap();
        let training = Training {
            labels: String::new(),
            labels_sha256: String::new(),
            pdfs_sha256: String::new(),
            documents: 0,
            segments: 0,
            segments_embedded: 0,
            tokens_embedded: 0,
            plan: Some(crate::train::Plan { max_tokens: 1, per_category: 1, negatives: 1 }),
            chunk_plan: None,
            seed: 0,
            trained_at: String::new(),
            docpipe: String::new(),
        };
        let mut artifact = Artifact {
            format: FORMAT.into(),
            version: VERSION,
            name: "test-scorer".into(),
            model: "test-model".into(),
            embeddings: "standalone".into(),
            dim: 768,
            training,
            categories: vec![Category {
                name: covered.clone(),
                weights: noise(3, 768),
                position: [0.5, -0.5],
                bias: -1.5,
                threshold: 0.6,
                terms: vec![(11, 0.25)],
                documents: 1,
                positives: 1,
            }],
        };
        let sha = "0123456789abcdef0123";
        async fn source(tx: &mut sqlx::PgConnection, name: String) -> (String, Option<f32>, f32) {
            sqlx::query_as("SELECT source, bias, threshold FROM clause_categories WHERE name = $1")
                .bind(name)
                .fetch_one(&mut *tx)
                .await
                .unwrap()
        }
        let applied = super::apply_artifact_in(&mut tx, Some((&artifact, sha)), 0.4).await.unwrap();
        assert_eq!((applied.covered, applied.changed, applied.zero_shot.clone()), (1, 1, vec![other.clone()]));
        assert_eq!(
            source(&mut tx, covered.clone()).await,
            ("scorer test-scorer sha256:0123456789ab".into(), Some(-1.5), 0.6)
        );
        assert_eq!(source(&mut tx, other.clone()).await, ("query".into(), None, 0.4));
        let terms: i64 = sqlx::query_scalar("SELECT count(*) FROM clause_term_weights WHERE category = $1")
            .bind(&covered)
            .fetch_one(&mut *tx)
            .await
            .unwrap();
        assert_eq!(terms, 1);
        // applied again: nothing changes
        assert_eq!(super::apply_artifact_in(&mut tx, Some((&artifact, sha)), 0.4).await.unwrap().changed, 0);
        // another embedding model: refused, and what it scored is zero-shot again
        artifact.model = "another-model".into();
        let applied = super::apply_artifact_in(&mut tx, Some((&artifact, sha)), 0.4).await.unwrap();
        assert!(applied.refused.as_deref().is_some_and(|r| r.contains("another-model")), "{:?}", applied.refused);
        assert_eq!(source(&mut tx, covered.clone()).await, ("query".into(), None, 0.4));
        // none: zero-shot everywhere
        artifact.model = "test-model".into();
        super::apply_artifact_in(&mut tx, Some((&artifact, sha)), 0.4).await.unwrap();
        let applied = super::apply_artifact_in(&mut tx, None, 0.4).await.unwrap();
        assert_eq!(applied.changed, 1);
        assert_eq!(source(&mut tx, covered.clone()).await.0, "query");
        tx.rollback().await.unwrap();
    }
}
