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
