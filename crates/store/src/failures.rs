//! Failures are rows, not log lines: the one place a document is failed with its reason.

use docpipe_contract::status::{DocStatus, Failure};
use docpipe_ops::metrics;
use uuid::Uuid;

use crate::{ctx, PgPool, StoreError};

/// Which document generation a failure is about, in which run.
#[derive(Debug, Clone, Copy)]
pub struct DocumentRef {
    pub run_id: Uuid,
    pub document_id: Uuid,
    pub generation: i32,
}

/// Mark the document `failed` with `stage: message` and add a row to `failures` — once: only
/// while this generation is still in progress (not done, not failed). Returns whether it did
/// (`false`: the document was re-ingested, finished or failed already).
pub async fn record_failure(pool: &PgPool, doc: DocumentRef, f: &Failure) -> Result<bool, StoreError> {
    let what = || format!("recording the failure of document {}", doc.document_id);
    let mut tx = pool.begin().await.map_err(ctx(what))?;
    let updated = sqlx::query(
        "UPDATE documents SET status = $4, error = $3, updated_at = now()
         WHERE id = $1 AND generation = $2 AND status NOT IN ($5, $4)",
    )
    .bind(doc.document_id)
    .bind(doc.generation)
    .bind(f.summary())
    .bind(DocStatus::Failed.as_str())
    .bind(DocStatus::Done.as_str())
    .execute(&mut *tx)
    .await
    .map_err(ctx(what))?
    .rows_affected();
    if updated == 0 {
        tx.commit().await.map_err(ctx(what))?;
        return Ok(false);
    }
    sqlx::query(
        "INSERT INTO failures (run_id, document_id, bucket, key, stage, class, message, attempts)
         SELECT $1, id, bucket, key, $3, $4, $5, $6 FROM documents WHERE id = $2",
    )
    .bind(doc.run_id)
    .bind(doc.document_id)
    .bind(f.stage.as_str())
    .bind(f.class.as_str())
    .bind(&f.message)
    .bind(i32::try_from(f.attempts).unwrap_or(i32::MAX))
    .execute(&mut *tx)
    .await
    .map_err(ctx(what))?;
    tx.commit().await.map_err(ctx(what))?;
    metrics::get().failure(f.stage.as_str(), f.class.as_str());
    Ok(true)
}
