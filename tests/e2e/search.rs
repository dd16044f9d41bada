use crate::fixture::Run;
use crate::support::docpipe;

/// `docpipe search` finds the termination clauses of the long contract, and refuses a clause
/// category that does not exist.
pub async fn search_finds_clauses_and_refuses_unknown_categories(run: &Run) {
    let out = docpipe(&["search", "termination on written notice", "--bucket", &run.bucket, "--top", "3"], &run.prefix);
    let hits = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && hits.contains("long-supply-agreement.pdf  page"), "{hits}");
    let out = docpipe(&["search", "x", "--category", "No Such Clause"], &run.prefix);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("unknown clause category"), "{stderr}");
}

/// `docpipe search --top N` returns N hits: an HNSW scan returns at most `hnsw.ef_search` rows
/// (40 by pgvector's default), so the search raises it to what is asked. So that more segments
/// than that are there whatever else the shared test database holds, the long contract's
/// segments are copied under a document of a run of their own, removed afterwards.
pub async fn search_returns_as_many_hits_as_asked(run: &Run) {
    let source = run.doc("long-supply-agreement.pdf").id;
    let (run_id, doc_id) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
    let pool = &run.pool;
    sqlx::query("INSERT INTO runs (id, trigger, bucket) VALUES ($1, 'e2e', $2)")
        .bind(run_id)
        .bind(format!("{}-search-copies", run.bucket))
        .execute(pool)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO documents (id, run_id, bucket, key, status, text)
         SELECT $1, $2, r.bucket, 'copies.pdf', 'done', d.text FROM documents d, runs r WHERE d.id = $3 AND r.id = $2",
    )
    .bind(doc_id)
    .bind(run_id)
    .bind(source)
    .execute(pool)
    .await
    .unwrap();
    // copies of every segment of the long contract, at least 200 in all
    sqlx::query(
        "INSERT INTO segments (document_id, segment_index, char_start, char_end, token_start, token_end,
                               page_start, page_end, embedding)
         SELECT $1, c * 1000 + s.segment_index, s.char_start, s.char_end, s.token_start, s.token_end,
                s.page_start, s.page_end, s.embedding
         FROM segments s,
              generate_series(0, 200 / greatest((SELECT count(*) FROM segments WHERE document_id = $2), 1)::int) c
         WHERE s.document_id = $2 AND s.embedding IS NOT NULL",
    )
    .bind(doc_id)
    .bind(source)
    .execute(pool)
    .await
    .unwrap();
    let top = 150;
    let out = docpipe(&["search", "termination on written notice", "--top", &top.to_string()], &run.prefix);
    // the copies go before any assertion can stop the test (their segments by cascade)
    sqlx::query("DELETE FROM documents WHERE id = $1").bind(doc_id).execute(pool).await.unwrap();
    sqlx::query("DELETE FROM runs WHERE id = $1").bind(run_id).execute(pool).await.unwrap();
    let hits = String::from_utf8_lossy(&out.stdout);
    let found = hits.lines().filter(|l| l.contains("  page ")).count();
    assert!(out.status.success() && found == top, "{found} of {top} hits asked for:\n{hits}");
}
