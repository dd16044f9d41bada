use crate::fixture::Run;

/// Every chunk records its forward pass (batch, prefill time, worker, token counts), every done
/// document its stage timestamps in order.
pub async fn chunks_and_documents_record_their_timings(run: &Run) {
    let (unbatched, bad): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE c.batch_id IS NULL OR c.prefill_ms <= 0 OR c.worker IS NULL),
                count(*) FILTER (WHERE c.batch_padded_tokens < c.batch_tokens OR c.batch_tokens < c.input_tokens)
         FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.bucket = $1",
    )
    .bind(&run.bucket)
    .fetch_one(&run.pool)
    .await
    .unwrap();
    assert_eq!((unbatched, bad), (0, 0), "batch stats on every chunk");
    let (timed,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM documents WHERE bucket = $1 AND status = 'done'
           AND ingest_started_at <= extracted_at AND extracted_at <= done_at AND extract_seconds > 0",
    )
    .bind(&run.bucket)
    .fetch_one(&run.pool)
    .await
    .unwrap();
    assert_eq!(timed, 2, "stage timestamps of the done documents");
}

/// `docpipe run --timings` says where the time went: every stage the run went through, with
/// its count and seconds, and the run's document tokens per second over its done documents.
pub async fn run_prints_where_the_time_went(run: &Run) {
    let out = &run.stdout;
    for stage in
        ["fetch", "extract", "tokenize", "publish", "chunk_forward", "standalone_pass", "results_publish", "store"]
    {
        let line = out.lines().find(|l| l.split_whitespace().next() == Some(stage));
        let fields: Vec<&str> = line.map(|l| l.split_whitespace().collect()).unwrap_or_default();
        let count: u64 = fields.get(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        let secs: f64 = fields.get(2).and_then(|c| c.parse().ok()).unwrap_or(-1.0);
        assert!(count > 0 && secs >= 0.0, "stage {stage} timed in:\n{out}");
    }
    let (tokens,): (i64,) =
        sqlx::query_as("SELECT sum(token_count)::bigint FROM documents WHERE bucket = $1 AND status = 'done'")
            .bind(&run.bucket)
            .fetch_one(&run.pool)
            .await
            .unwrap();
    let want = format!("pipeline: 2 documents done, {tokens} document tokens (");
    assert!(out.contains(&want), "want `{want}` in:\n{out}");
}
