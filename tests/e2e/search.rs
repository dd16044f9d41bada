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

/// `docpipe search --top N` returns N hits where the database holds that many segments: an
/// HNSW scan returns at most `hnsw.ef_search` rows (40 by pgvector's default), so the search
/// raises it to what is asked. (The shared test database holds every test's segments; with
/// fewer than 41 this only checks that all of them come back.)
pub async fn search_returns_as_many_hits_as_asked(run: &Run) {
    let segments: i64 = sqlx::query_scalar("SELECT count(*) FROM segments WHERE embedding IS NOT NULL")
        .fetch_one(&run.pool)
        .await
        .unwrap();
    let top = segments.clamp(1, 150);
    let out = docpipe(&["search", "termination on written notice", "--top", &top.to_string()], &run.prefix);
    let hits = String::from_utf8_lossy(&out.stdout);
    let found = hits.lines().filter(|l| l.contains("  page ")).count() as i64;
    assert!(
        out.status.success() && found * 10 >= top * 9,
        "{found} of {top} hits asked for, {segments} segments:\n{hits}"
    );
}
