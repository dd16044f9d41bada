use crate::common::docpipe;
use crate::fixture::Run;

/// The run with `--fields` queued every done document on P.fields and its fields worker (the
/// small decoder) stored one row per answer field (the model's or the rules' answer, by the
/// field's policy, the other source's beside it where it was asked) and one presence row per
/// other category;
/// answers are typed, the wide view has a row per contract, failed documents have none, and
/// `docpipe fields` prints a contract's answers.
pub async fn done_documents_get_their_fields(run: &Run) {
    let keys = ["long-supply-agreement.pdf", "short-nda.pdf"];
    for key in keys {
        let doc = run.doc(key);
        assert_eq!(doc.status, "done", "{key}");
        let (status, error): (Option<String>, Option<String>) =
            sqlx::query_as("SELECT fields_status, fields_error FROM documents WHERE id = $1")
                .bind(doc.id)
                .fetch_one(&run.pool)
                .await
                .unwrap();
        assert_eq!(status.as_deref(), Some("done"), "{key}: fields {status:?} {error:?}");
        let rows: Vec<(String, String, String, String, Option<String>, String, String, Option<String>)> =
            sqlx::query_as(
                "SELECT field, status, value_type, canonical, raw, source, prompt_version, alternative ->> 'source'
             FROM document_fields WHERE document_id = $1 ORDER BY field",
            )
            .bind(doc.id)
            .fetch_all(&run.pool)
            .await
            .unwrap();
        let answers: Vec<_> = rows.iter().filter(|r| r.5 == "model" || r.5 == "rules").collect();
        let presence: Vec<_> = rows.iter().filter(|r| r.5 == "clause_scorer").collect();
        assert_eq!(answers.len(), docpipe_fields::FIELDS.len(), "{key}: {rows:?}");
        assert_eq!(presence.len(), 41 - docpipe_fields::FIELDS.len(), "{key}: one presence row per other category");
        for (field, status, value_type, canonical, raw, source, version, other) in &answers {
            assert_eq!(version, docpipe_fields::prompt::PROMPT_VERSION);
            let policy = docpipe_fields::field(field).unwrap_or_else(|| panic!("{key}: unknown field {field}")).policy;
            if policy.uses_model() {
                let expected_other = if source == "model" { "rules" } else { "model" };
                assert_eq!(other.as_deref(), Some(expected_other), "{key} {field}: the other source's answer is kept");
            } else {
                // the rules alone answer it: the model is not asked (no --fields-ask-all)
                assert_eq!((source.as_str(), other.as_deref()), ("rules", None), "{key} {field}");
            }
            match status.as_str() {
                "answered" => {
                    assert!(
                        value_type != "none" && !canonical.is_empty() && raw.is_some(),
                        "{key} {field}: {value_type} {canonical:?}"
                    )
                }
                "none" | "unknown" => assert_eq!(value_type, "none", "{key} {field}"),
                other => panic!("{key} {field}: status {other}"),
            }
        }
        for (field, status, value_type, canonical, ..) in &presence {
            assert!(field.starts_with("has:"), "{field}");
            assert_eq!((status.as_str(), value_type.as_str()), ("answered", "boolean"), "{field}");
            assert!(canonical == "true" || canonical == "false", "{field}: {canonical}");
        }
    }
    // a governing-law clause stated plainly comes back as its jurisdiction code
    let law: String = sqlx::query_scalar(
        "SELECT f.canonical FROM document_fields f WHERE f.document_id = $1 AND f.field = 'governing_law'",
    )
    .bind(run.doc("long-supply-agreement.pdf").id)
    .fetch_one(&run.pool)
    .await
    .unwrap();
    assert_eq!(law, "US-DE", "the long contract is governed by Delaware law");
    // the failed documents have no fields and no fields status
    let failed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM documents d WHERE d.bucket = $1 AND d.status = 'failed'
           AND (d.fields_status IS NOT NULL OR EXISTS (SELECT 1 FROM document_fields f WHERE f.document_id = d.id))",
    )
    .bind(&run.bucket)
    .fetch_one(&run.pool)
    .await
    .unwrap();
    assert_eq!(failed, 0, "failed documents get no fields");
    let wide: i64 = sqlx::query_scalar("SELECT count(*) FROM contract_fields WHERE bucket = $1")
        .bind(&run.bucket)
        .fetch_one(&run.pool)
        .await
        .unwrap();
    assert_eq!(wide, 2, "one contract_fields row per done contract");
    let out = docpipe(&["fields", "long-supply-agreement.pdf"], &run.prefix);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("governing_law") && text.contains("US-DE"), "{text}");
}
