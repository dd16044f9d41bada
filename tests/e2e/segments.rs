use crate::fixture::Run;

/// Clause segments: every one embedded once (by the chunk owning its middle token), in context
/// and on its own (two different unit vectors); the numbered sections of the long contract are
/// segments.
pub async fn segments_are_embedded_in_context_and_alone(run: &Run) {
    let segs: Vec<(String, i64, i64, i64, i64, f64)> = sqlx::query_as(
        "SELECT d.key, count(*), count(s.embedding), count(*) FILTER (WHERE s.chunk_index IS NULL),
                count(s.standalone), max(abs(vector_norm(s.standalone) - 1)) + 0
         FROM segments s JOIN documents d ON d.id = s.document_id WHERE d.bucket = $1 GROUP BY d.key ORDER BY d.key",
    )
    .bind(&run.bucket)
    .fetch_all(&run.pool)
    .await
    .unwrap();
    assert_eq!(segs.len(), 2, "{segs:?}");
    for (key, n, embedded, unowned, alone, off_unit) in &segs {
        assert!(*n >= 1 && n == embedded && *unowned == 0, "{key}: {n} segments, {embedded} embedded");
        assert!(alone == n && *off_unit < 1e-3, "{key}: {n} segments, {alone} standalone, |norm - 1| {off_unit}");
    }
    let (same,): (i64,) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE s.embedding <=> s.standalone < 1e-4) FROM segments s
         JOIN documents d ON d.id = s.document_id WHERE d.bucket = $1",
    )
    .bind(&run.bucket)
    .fetch_one(&run.pool)
    .await
    .unwrap();
    assert!(same * 4 < segs.iter().map(|s| s.1).sum::<i64>(), "{same} standalone embeddings equal the contextual ones");
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
