use crate::fixture::Run;

/// Each done document has a label per clause category and an embedded row in
/// `contract_summary`.
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
