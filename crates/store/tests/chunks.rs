//! The chunk results' writes (what the aggregator does) against real Postgres (`DOCPIPE_DATABASE_URL`, set by `make test`):
//! idempotent chunk rows, exactly one `done` transition under concurrency, stale generations
//! dropped, and a chunk the worker could not embed failing its document; and what the fields
//! workers sweep up after them.

use docpipe_contract::messages::{ChunkMeta, ChunkOutcome, ChunkResult, SegmentEmbedding, SCHEMA_VERSION};
use docpipe_store::chunks::{store_result as store, Stored};
use sqlx::PgPool;
use uuid::Uuid;

async fn pool() -> PgPool {
    let url =
        std::env::var("DOCPIPE_DATABASE_URL").expect("DOCPIPE_DATABASE_URL is not set: run the tests with `make test`");
    let pool = docpipe_store::connect(&url, 16, std::time::Duration::from_secs(30)).await.expect("connect");
    docpipe_store::migrate(&pool).await.expect("migrate");
    pool
}

/// A document in `embedding` state waiting for `chunks` chunks.
async fn document(pool: &PgPool, chunks: i32) -> (Uuid, Uuid) {
    let (run, doc) = (Uuid::now_v7(), Uuid::now_v7());
    sqlx::query("INSERT INTO runs (id, trigger, bucket) VALUES ($1, 'test', 'store-test')")
        .bind(run)
        .execute(pool)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO documents (id, run_id, bucket, key, status, chunk_count) VALUES ($1, $2, 'store-test', $3, 'embedding', $4)",
    )
    .bind(doc)
    .bind(run)
    .bind(format!("doc-{doc}.pdf"))
    .bind(chunks)
    .execute(pool)
    .await
    .unwrap();
    (run, doc)
}

fn result(run: Uuid, doc: Uuid, index: u32, count: u32, generation: i32, outcome: ChunkOutcome) -> ChunkResult {
    let s = index * 100;
    ChunkResult {
        schema: SCHEMA_VERSION,
        meta: ChunkMeta {
            run_id: run,
            document_id: doc,
            generation,
            index,
            count,
            tokens: [s, s + 120],
            owned_tokens: [s + 10, s + 110],
            chars: [s * 4, s * 4 + 480],
            owned_chars: [s * 4 + 40, s * 4 + 440],
        },
        model: "test".into(),
        input_tokens: 130,
        outcome,
        batch: None,
    }
}

fn embedded(i: u32) -> ChunkOutcome {
    let mut e = vec![0.0f32; 768];
    e[i as usize % 768] = 1.0;
    ChunkOutcome::Embedded { embedding: e, segments: vec![] }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_redelivered_results_store_once_and_finish_once() {
    let pool = pool().await;
    let n = 8u32;
    let (run, doc) = document(&pool, n as i32).await;
    // every result delivered twice, all at once, as two aggregators racing would see them
    let results: Vec<ChunkResult> =
        (0..n).flat_map(|i| [result(run, doc, i, n, 1, embedded(i)), result(run, doc, i, n, 1, embedded(i))]).collect();
    let outcomes = futures_util::future::join_all(results.iter().map(|r| store(&pool, r))).await;
    let outcomes: Vec<Stored> = outcomes.into_iter().map(|o| o.expect("store")).collect();
    let completed = outcomes.iter().filter(|o| **o == Stored::Inserted { completed: true }).count();
    let inserted = outcomes.iter().filter(|o| matches!(o, Stored::Inserted { .. })).count();
    let duplicates = outcomes.iter().filter(|o| **o == Stored::Duplicate).count();
    assert_eq!((inserted, duplicates, completed), (n as usize, n as usize, 1), "{outcomes:?}");
    let (status, done): (String, i32) = sqlx::query_as("SELECT status, chunks_done FROM documents WHERE id = $1")
        .bind(doc)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!((status.as_str(), done), ("done", n as i32));
    let (rows,): (i64,) =
        sqlx::query_as("SELECT count(*) FROM chunks WHERE document_id = $1").bind(doc).fetch_one(&pool).await.unwrap();
    assert_eq!(rows, n as i64);
}

#[tokio::test]
async fn results_of_an_older_generation_are_dropped() {
    let pool = pool().await;
    let (run, doc) = document(&pool, 1).await;
    let stale = result(run, doc, 0, 1, 0, embedded(0));
    assert_eq!(store(&pool, &stale).await.unwrap(), Stored::Stale);
    let (rows,): (i64,) =
        sqlx::query_as("SELECT count(*) FROM chunks WHERE document_id = $1").bind(doc).fetch_one(&pool).await.unwrap();
    assert_eq!(rows, 0);
}

#[tokio::test]
async fn a_chunk_the_worker_could_not_embed_fails_its_document() {
    let pool = pool().await;
    let (run, doc) = document(&pool, 2).await;
    assert_eq!(
        store(&pool, &result(run, doc, 0, 2, 1, embedded(0))).await.unwrap(),
        Stored::Inserted { completed: false }
    );
    let failed =
        result(run, doc, 1, 2, 1, ChunkOutcome::Failed { error: "token id 999999 is outside the vocabulary".into() });
    assert_eq!(store(&pool, &failed).await.unwrap(), Stored::Failed);
    // redelivered: nothing more happens
    assert_eq!(store(&pool, &failed).await.unwrap(), Stored::Stale);
    let (status, error): (String, Option<String>) =
        sqlx::query_as("SELECT status, error FROM documents WHERE id = $1").bind(doc).fetch_one(&pool).await.unwrap();
    assert_eq!(status, "failed");
    assert!(error.unwrap().contains("outside the vocabulary"));
    let (n, stage): (i64, String) = sqlx::query_as("SELECT count(*), min(stage) FROM failures WHERE document_id = $1")
        .bind(doc)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!((n, stage.as_str()), (1, "embed"));
}

/// Segments overlapping two chunks are kept from the chunk owning their middle token; the
/// document embedding is the owned-token-weighted mean of the chunk embeddings.
#[tokio::test]
async fn segments_are_kept_from_the_chunk_owning_their_middle() {
    let pool = pool().await;
    let (run, doc) = document(&pool, 2).await;
    // chunk 0: tokens 0..120, owns 10..110; chunk 1: tokens 100..220, owns 110..210
    let segs: [[u32; 2]; 3] = [[0, 50], [95, 130], [150, 200]];
    for (i, t) in segs.iter().enumerate() {
        sqlx::query(
            "INSERT INTO segments (document_id, segment_index, char_start, char_end, token_start, token_end, page_start, page_end)
             VALUES ($1, $2, $3, $4, $5, $6, 1, 1)",
        )
        .bind(doc)
        .bind(i as i32)
        .bind(t[0] as i32 * 4)
        .bind(t[1] as i32 * 4)
        .bind(t[0] as i32)
        .bind(t[1] as i32)
        .execute(&pool)
        .await
        .unwrap();
    }
    let axis = |k: usize| {
        let mut e = vec![0.0f32; 768];
        e[k] = 1.0;
        e
    };
    let seg = |index: u32, chunk: u32| SegmentEmbedding {
        index,
        tokens: segs[index as usize],
        pooled: [segs[index as usize][0].max(chunk * 100), segs[index as usize][1].min(chunk * 100 + 120)],
        embedding: axis(10 * chunk as usize + index as usize),
        // segment 2 comes without a standalone embedding: skipped, not a clause candidate
        standalone: (index != 2).then(|| axis(500 + 10 * chunk as usize + index as usize)),
        standalone_skipped: index == 2,
    };
    let r0 =
        result(run, doc, 0, 2, 1, ChunkOutcome::Embedded { embedding: axis(0), segments: vec![seg(0, 0), seg(1, 0)] });
    let r1 =
        result(run, doc, 1, 2, 1, ChunkOutcome::Embedded { embedding: axis(1), segments: vec![seg(1, 1), seg(2, 1)] });
    assert_eq!(store(&pool, &r0).await.unwrap(), Stored::Inserted { completed: false });
    assert_eq!(store(&pool, &r1).await.unwrap(), Stored::Inserted { completed: true });
    let rows: Vec<(i32, Option<i32>, Option<i32>, Option<i32>, pgvector::Vector, Option<pgvector::Vector>)> = sqlx::query_as(
        "SELECT segment_index, chunk_index, pooled_token_start, pooled_token_end, embedding, standalone FROM segments
         WHERE document_id = $1 ORDER BY segment_index",
    )
    .bind(doc)
    .fetch_all(&pool)
    .await
    .unwrap();
    let owners: Vec<(i32, Option<i32>)> = rows.iter().map(|r| (r.0, r.1)).collect();
    assert_eq!(owners, vec![(0, Some(0)), (1, Some(1)), (2, Some(1))]);
    // segment 1 (tokens 95..130, middle 112) came from chunk 1, pooled over 100..130
    assert_eq!((rows[1].2, rows[1].3), (Some(100), Some(130)));
    assert_eq!(rows[1].4.as_slice()[11], 1.0);
    assert_eq!(rows[0].4.as_slice()[0], 1.0);
    // the standalone embedding comes from the owning chunk too, or stays NULL
    assert_eq!(rows[1].5.as_ref().map(|v| v.as_slice()[511]), Some(1.0));
    assert_eq!(rows[0].5.as_ref().map(|v| v.as_slice()[500]), Some(1.0));
    assert!(rows[2].5.is_none());
    let skipped: Vec<bool> =
        sqlx::query_scalar("SELECT standalone_skipped FROM segments WHERE document_id = $1 ORDER BY segment_index")
            .bind(doc)
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(skipped, vec![false, false, true], "the skip is stored from the owning chunk");
    let (e,): (pgvector::Vector,) =
        sqlx::query_as("SELECT embedding FROM documents WHERE id = $1").bind(doc).fetch_one(&pool).await.unwrap();
    let h = std::f32::consts::FRAC_1_SQRT_2;
    assert!((e.as_slice()[0] - h).abs() < 1e-6 && (e.as_slice()[1] - h).abs() < 1e-6, "{:?}", &e.as_slice()[..3]);
}

/// What a fields worker sweeps up: done documents never queued for fields, all of them or one
/// bucket's (`docpipe run --fields`).
#[tokio::test]
async fn the_fields_sweep_takes_every_bucket_or_the_one_given() {
    let pool = pool().await;
    let (run, mine, other) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
    let bucket = format!("sweep-{run}");
    sqlx::query("INSERT INTO runs (id, trigger, bucket) VALUES ($1, 'test', $2)")
        .bind(run)
        .bind(&bucket)
        .execute(&pool)
        .await
        .unwrap();
    for (doc, b) in [(mine, bucket.clone()), (other, format!("{bucket}-other"))] {
        sqlx::query(
            "INSERT INTO documents (id, run_id, bucket, key, status, chunk_count, done_at)
             VALUES ($1, $2, $3, 'a.pdf', 'done', 1, '1990-01-01')",
        )
        .bind(doc)
        .bind(run)
        .bind(b)
        .execute(&pool)
        .await
        .unwrap();
    }
    let swept = |bucket: Option<String>| {
        let pool = pool.clone();
        async move {
            let ids: Vec<Uuid> = docpipe_store::fields::stranded(&pool, 60.0, bucket.as_deref())
                .await
                .unwrap()
                .into_iter()
                .map(|(id, _, _)| id)
                .collect();
            (ids.contains(&mine), ids.contains(&other))
        }
    };
    assert_eq!(swept(Some(bucket.clone())).await, (true, false), "only the bucket given");
    // the sweep lists the oldest first, 100 at a time: done in 1990, these two come first
    assert_eq!(swept(None).await, (true, true), "every bucket");
    // gone again, so that no later fields worker of the suite sweeps them up, and repeated runs
    // on one database do not pile them up ahead of the next run's
    for q in ["DELETE FROM documents WHERE run_id = $1", "DELETE FROM runs WHERE id = $1"] {
        sqlx::query(q).bind(run).execute(&pool).await.unwrap();
    }
}
