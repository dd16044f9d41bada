use crate::fixture::Run;

/// The long contract's text round-trips through the character offsets of its first chunk.
pub async fn chunk_offsets_round_trip_the_text(run: &Run) {
    let (excerpt,): (String,) = sqlx::query_as(
        "SELECT substr(d.text, c.char_start + 1, c.char_end - c.char_start) FROM chunks c JOIN documents d ON d.id = c.document_id
         WHERE d.bucket = $1 AND d.key = 'long-supply-agreement.pdf' AND c.chunk_index = 0",
    )
    .bind(&run.bucket)
    .fetch_one(&run.pool)
    .await
    .unwrap();
    assert!(excerpt.trim_start().starts_with("SUPPLY AGREEMENT between Société Générale de Pièces"), "{excerpt:?}");
}
