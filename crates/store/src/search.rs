//! Nearest clause segments to a query embedding (`docpipe search`).

use pgvector::Vector;

use crate::{ctx, PgPool, StoreError};

/// A segment found: document key, segment index, first page, cosine similarity, text.
pub type Hit = (String, i32, i32, f64, String);

/// The `top` segments nearest to `query`, optionally only from documents of `bucket` and only
/// segments that score at or above `category`'s threshold.
pub async fn nearest_segments(
    pool: &PgPool,
    query: Vec<f32>,
    top: i64,
    bucket: Option<&str>,
    category: Option<&str>,
) -> Result<Vec<Hit>, StoreError> {
    // An exact scan when filtering by bucket or category: the HNSW index returns the
    // ef_search nearest segments of all buckets, and the filter runs after it, so the
    // segments of a small bucket next to a large one would never come back.
    // (`order` is one of two constants: no input reaches the SQL text)
    let order = if bucket.is_some() || category.is_some() { "score DESC" } else { "s.embedding <=> $1" };
    let sql = format!(
        "SELECT d.key, s.segment_index, s.page_start, 1 - (s.embedding <=> $1) AS score,
                substr(d.text, s.char_start + 1, s.char_end - s.char_start) AS text
         FROM segments s JOIN documents d ON d.id = s.document_id
         WHERE s.embedding IS NOT NULL AND ($3::text IS NULL OR d.bucket = $3)
           AND ($4::text IS NULL OR EXISTS (
                SELECT 1 FROM segment_scores x JOIN clause_categories c ON c.name = x.category
                WHERE x.document_id = s.document_id AND x.segment_index = s.segment_index
                  AND lower(c.name) = lower($4) AND x.score >= c.threshold))
         ORDER BY {order} LIMIT $2"
    );
    let mut tx = pool.begin().await.map_err(ctx(|| "searching segments: opening a transaction"))?;
    // An HNSW scan returns at most ef_search rows (pgvector's default of 40 cut `--top 60` to
    // 40 hits): `top` where more are asked for, up to pgvector's ceiling of 1,000, and at least
    // 100, which finds a little more of the true nearest (recall@10 0.953 against 0.946 at 40
    // on 38,965 segments, scripts/experiments/hnsw_insert_cost.sql) at no cost that shows.
    let ef_search = top.clamp(100, 1000).to_string();
    sqlx::query("SELECT set_config('hnsw.ef_search', $1, true)")
        .bind(&ef_search)
        .execute(&mut *tx)
        .await
        .map_err(ctx(|| format!("searching segments: setting hnsw.ef_search to {ef_search}")))?;
    let hits = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(Vector::from(query))
        .bind(top)
        .bind(bucket)
        .bind(category)
        .fetch_all(&mut *tx)
        .await
        .map_err(ctx(|| "searching segments"))?;
    tx.commit().await.map_err(ctx(|| "searching segments: closing the transaction"))?;
    Ok(hits)
}
