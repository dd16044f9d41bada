use crate::fixture::Run;

/// Clause segments: every one embedded once (by the chunk owning its middle token), in context
/// and on its own (two different unit vectors); the numbered sections of the long contract are
/// segments.
pub async fn segments_are_embedded_in_context_and_alone(run: &Run) {
    // `--standalone-segments candidates` (the fixture's; not the default): every owned segment
    // is either embedded on its own or marked as skipped (no clause category finds it likely),
    // never both
    let segs: Vec<(String, i64, i64, i64, i64, i64, i64, f64)> = sqlx::query_as(
        "SELECT d.key, count(*), count(s.embedding), count(*) FILTER (WHERE s.chunk_index IS NULL),
                count(s.standalone), count(*) FILTER (WHERE s.standalone_skipped),
                count(*) FILTER (WHERE s.standalone IS NOT NULL AND s.standalone_skipped),
                coalesce(max(abs(vector_norm(s.standalone) - 1)), 0) + 0
         FROM segments s JOIN documents d ON d.id = s.document_id WHERE d.bucket = $1 GROUP BY d.key ORDER BY d.key",
    )
    .bind(&run.bucket)
    .fetch_all(&run.pool)
    .await
    .unwrap();
    assert_eq!(segs.len(), 2, "{segs:?}");
    for (key, n, embedded, unowned, alone, skipped, both, off_unit) in &segs {
        assert!(*n >= 1 && n == embedded && *unowned == 0, "{key}: {n} segments, {embedded} embedded");
        assert!(
            alone + skipped == *n && *both == 0 && *off_unit < 1e-3,
            "{key}: {n} segments, {alone} standalone, {skipped} skipped, {both} both, |norm - 1| {off_unit}"
        );
    }
    let alone: i64 = segs.iter().map(|s| s.4).sum();
    let skipped: i64 = segs.iter().map(|s| s.5).sum();
    // the long supply agreement has clauses (governing law, termination, ...) and boilerplate
    assert!(alone >= 1 && skipped >= 1, "{alone} segments embedded on their own, {skipped} skipped: {segs:?}");
    let (same,): (i64,) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE s.embedding <=> s.standalone < 1e-4) FROM segments s
         JOIN documents d ON d.id = s.document_id WHERE d.bucket = $1",
    )
    .bind(&run.bucket)
    .fetch_one(&run.pool)
    .await
    .unwrap();
    assert!(same * 4 < alone, "{same} of {alone} standalone embeddings equal the contextual ones");
    assert!(segs.iter().any(|s| s.0 == "long-supply-agreement.pdf" && s.1 >= 40), "{segs:?}");
    let (section,): (String,) = sqlx::query_as(
        "SELECT substr(d.text, s.char_start + 1, s.char_end - s.char_start) FROM segments s
         JOIN documents d ON d.id = s.document_id
         WHERE d.bucket = $1 AND d.key = 'long-supply-agreement.pdf' AND s.segment_index = 7",
    )
    .bind(&run.bucket)
    .fetch_one(&run.pool)
    .await
    .unwrap();
    assert!(section.starts_with("7. Section 7.") && section.ends_with("notice."), "{section:?}");
}
