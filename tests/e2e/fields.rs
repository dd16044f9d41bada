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
    segment_at_finds_the_segment_holding_a_character(run).await;
}

/// `segment_at` (the parties' passage past the opening) gives the stored segment that holds a
/// character, with its text, and nothing past the text's end.
async fn segment_at_finds_the_segment_holding_a_character(run: &Run) {
    let doc = run.doc("long-supply-agreement.pdf");
    let segments: Vec<(i32, i32, i32, String)> = sqlx::query_as(
        "SELECT s.segment_index, s.char_start, s.char_end, substr(d.text, s.char_start + 1, s.char_end - s.char_start)
         FROM segments s JOIN documents d ON d.id = s.document_id WHERE s.document_id = $1 ORDER BY 1",
    )
    .bind(doc.id)
    .fetch_all(&run.pool)
    .await
    .unwrap();
    assert!(segments.len() > 3, "the long contract has segments: {}", segments.len());
    let (index, start, end, text) = &segments[segments.len() / 2];
    for at in [*start, (start + end) / 2, end - 1] {
        let seg = docpipe_store::fields::segment_at(&run.pool, doc.id, at, "Parties").await.unwrap();
        let seg = seg.unwrap_or_else(|| panic!("no segment holds character {at}"));
        assert_eq!((seg.segment_index, &seg.text, seg.category.as_str()), (*index, text, "Parties"), "at {at}");
        assert!(seg.score.is_nan(), "not scored by the clause scorer");
    }
    let past = segments.iter().map(|s| s.2).max().unwrap_or(0) + 10;
    assert!(docpipe_store::fields::segment_at(&run.pool, doc.id, past, "Parties").await.unwrap().is_none());
}
