use uuid::Uuid;

use crate::fixture::Run;
use crate::support::docpipe;

/// `retry-failed` takes only the failed documents of a run: the two broken files, again (they
/// fail again); the done documents are untouched.
pub async fn retry_failed_retries_only_failed(run: &Run) {
    let (last_run,): (Uuid,) = sqlx::query_as("SELECT run_id FROM documents WHERE bucket = $1 AND key = 'corrupt.pdf'")
        .bind(&run.bucket)
        .fetch_one(&run.pool)
        .await
        .unwrap();
    let out = docpipe(&["retry-failed", "--run", &last_run.to_string()], &run.prefix);
    assert!(out.status.success(), "docpipe retry-failed failed");
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("retry-failed prints a JSON summary");
    assert_eq!((summary["objects"].as_u64(), summary["failed"].as_u64()), (Some(2), Some(2)), "{summary}");
    let (done,): (i64,) = sqlx::query_as("SELECT count(*) FROM documents WHERE bucket = $1 AND status = 'done'")
        .bind(&run.bucket)
        .fetch_one(&run.pool)
        .await
        .unwrap();
    assert_eq!(done, 2, "done documents are untouched");
}
