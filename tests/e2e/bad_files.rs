use crate::fixture::Run;

/// The corrupt and the non-PDF files fail with a reason, recorded in `failures` too.
pub async fn bad_files_fail_with_reasons(run: &Run) {
    for (key, why) in [("corrupt.pdf", "extract"), ("notes.pdf", "not a PDF")] {
        let d = run.doc(key);
        assert_eq!(d.status, "failed", "{key}: {d:?}");
        let err = d.error.as_deref().unwrap_or_default();
        assert!(err.contains(why), "{key}: error {err:?} should mention {why:?}");
        let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM failures WHERE document_id = $1")
            .bind(d.id)
            .fetch_one(&run.pool)
            .await
            .unwrap();
        assert_eq!(n, 1, "{key}: one failure row");
    }
}
