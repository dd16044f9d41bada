use crate::fixture::Run;
use crate::support::docpipe;

/// Re-ingesting the unchanged bucket skips the done documents and adds no rows.
pub async fn rerun_skips_done_documents(run: &Run) {
    let before = chunk_rows(run).await;
    let out = docpipe(&run.run_args(), &run.prefix);
    assert!(out.status.success(), "the second docpipe run failed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("2 skipped"), "second run should skip the two done documents: {stdout}");
    let after = chunk_rows(run).await;
    assert_eq!(before, after, "no duplicate chunk rows after a re-run");
}

/// Chunk rows of the bucket's documents.
async fn chunk_rows(run: &Run) -> i64 {
    let (n,): (i64,) =
        sqlx::query_as("SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.bucket = $1")
            .bind(&run.bucket)
            .fetch_one(&run.pool)
            .await
            .unwrap();
    n
}
