use crate::fixture::Run;

/// The good documents are done, every chunk stored once with a unit embedding, and the owned
/// token ranges of their chunks tile the document's tokens; the long contract spans several
/// chunks.
pub async fn done_documents_tile_their_tokens(run: &Run) {
    for key in ["long-supply-agreement.pdf", "short-nda.pdf"] {
        let d = run.doc(key);
        assert_eq!(d.status, "done", "{key}");
        let chunk_count = d.chunk_count.unwrap_or_else(|| panic!("{key}: no chunk_count"));
        let token_count = d.token_count.unwrap_or_else(|| panic!("{key}: no token_count"));
        assert_eq!(d.chunks_done, chunk_count, "{key}: chunks_done");
        assert!(d.pages.unwrap_or_else(|| panic!("{key}: no pages")) >= 1, "{key}: pages");
        let chunks: Vec<(i32, i32, i32, i32, i32, i32, i32, f64)> = sqlx::query_as(
            "SELECT chunk_index, token_start, token_end, owned_token_start, owned_token_end, char_start, char_end,
                    vector_norm(embedding)::float8
             FROM chunks WHERE document_id = $1 ORDER BY chunk_index",
        )
        .bind(d.id)
        .fetch_all(&run.pool)
        .await
        .unwrap();
        assert_eq!(chunks.len() as i32, chunk_count, "{key}");
        let mut next_owned = 0;
        for (i, c) in chunks.iter().enumerate() {
            assert_eq!(c.0, i as i32, "{key}: chunk indexes are 0..n");
            assert_eq!(c.3, next_owned, "{key} chunk {i}: owned range must start where the previous ended");
            assert!(c.1 <= c.3 && c.4 <= c.2, "{key} chunk {i}: owned inside the window");
            assert!(c.5 < c.6, "{key} chunk {i}: character range");
            assert!((c.7 - 1.0).abs() < 1e-3, "{key} chunk {i}: embedding norm {}", c.7);
            next_owned = c.4;
        }
        assert_eq!(next_owned, token_count, "{key}: the last chunk owns up to the end");
    }
    let long_chunks = run.doc("long-supply-agreement.pdf").chunk_count;
    assert!(long_chunks.unwrap() >= 3, "the long contract spans several chunks");
}
