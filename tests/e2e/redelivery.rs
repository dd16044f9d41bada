use docpipe_contract::messages::{ChunkMeta, ChunkOutcome, ChunkResult, SCHEMA_VERSION};
use docpipe_store::chunks::{store_result, Stored};
use sqlx::PgPool;
use uuid::Uuid;

use crate::fixture::Run;

/// A redelivered result (the stored chunk 1 of the long contract, sent again) changes nothing:
/// it is a duplicate, and the document stays done with the same count.
pub async fn redelivered_result_changes_nothing(run: &Run) {
    let long_id = run.doc("long-supply-agreement.pdf").id;
    let (duplicate, count) = stored_chunk_as_result(&run.pool, long_id, 1).await;
    let stored = store_result(&run.pool, &duplicate).await.unwrap();
    assert_eq!(stored, Stored::Duplicate, "a redelivered result is a duplicate");
    let (done, status): (i32, String) = sqlx::query_as("SELECT chunks_done, status FROM documents WHERE id = $1")
        .bind(long_id)
        .fetch_one(&run.pool)
        .await
        .unwrap();
    assert_eq!((done, status.as_str()), (count, "done"), "(chunks_done, status) after the redelivery");
}

/// The result the aggregator stored as chunk `index` of a document, rebuilt from its row; and
/// the document's chunk count.
async fn stored_chunk_as_result(pool: &PgPool, document_id: Uuid, index: i32) -> (ChunkResult, i32) {
    let (generation, ts, te, os, oe, cs, ce, ocs, oce, emb, count): (
        i32,
        i32,
        i32,
        i32,
        i32,
        i32,
        i32,
        i32,
        i32,
        pgvector::Vector,
        i32,
    ) = sqlx::query_as(
        "SELECT c.generation, token_start, token_end, owned_token_start, owned_token_end, char_start, char_end,
                    owned_char_start, owned_char_end, c.embedding, d.chunk_count
             FROM chunks c JOIN documents d ON d.id = c.document_id WHERE c.document_id = $1 AND chunk_index = $2",
    )
    .bind(document_id)
    .bind(index)
    .fetch_one(pool)
    .await
    .unwrap();
    let (run_id,): (Uuid,) =
        sqlx::query_as("SELECT run_id FROM documents WHERE id = $1").bind(document_id).fetch_one(pool).await.unwrap();
    let span = |a: i32, b: i32| [a as u32, b as u32];
    let result = ChunkResult {
        schema: SCHEMA_VERSION,
        meta: ChunkMeta {
            run_id,
            document_id,
            generation,
            index: index as u32,
            count: count as u32,
            tokens: span(ts, te),
            owned_tokens: span(os, oe),
            chars: span(cs, ce),
            owned_chars: span(ocs, oce),
        },
        outcome: ChunkOutcome::Embedded { embedding: emb.to_vec(), segments: vec![] },
        model: "test".into(),
        input_tokens: 1,
        batch: None,
    };
    (result, count)
}
