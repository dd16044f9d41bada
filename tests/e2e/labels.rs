use crate::fixture::Run;

/// Each done document has a label per clause category and an embedded row in
/// `contract_summary`; the categories are scored by the shipped clause scorer, named with its
/// sha256 (the run applies it by default).
pub async fn done_documents_are_labelled_and_summarised(run: &Run) {
    let (labels, cats): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM document_labels l JOIN documents d ON d.id = l.document_id WHERE d.bucket = $1),
                (SELECT count(*) FROM clause_categories)",
    )
    .bind(&run.bucket)
    .fetch_one(&run.pool)
    .await
    .unwrap();
    assert_eq!((cats, labels), (41, 2 * 41), "(clause categories, labels of the two done documents)");
    let (artifact, sha) = docpipe_clauses::artifact::builtin().expect("the shipped clause scorer loads");
    let sources: Vec<(String, String, Option<f32>)> =
        sqlx::query_as("SELECT name, source, bias FROM clause_categories ORDER BY name")
            .fetch_all(&run.pool)
            .await
            .unwrap();
    for (name, source, bias) in &sources {
        assert_eq!(source, &format!("scorer {} sha256:{}", artifact.name, &sha[..12]), "{name}");
        assert!(bias.is_some(), "{name} is scored by a learned probe, not zero-shot");
    }
    let (summaries, with_embedding): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(d.embedding) FROM contract_summary s JOIN documents d ON d.id = s.document_id
         WHERE s.bucket = $1 AND s.status = 'done'",
    )
    .bind(&run.bucket)
    .fetch_one(&run.pool)
    .await
    .unwrap();
    assert_eq!((summaries, with_embedding), (2, 2), "(done documents in contract_summary, with an embedding)");
}
