//! Scanned contracts through the whole pipeline against the real services: a scan fed
//! sideways (no text layer) is read by OCR and ends `done`, with its page marked as OCR in
//! `pages`, its confidence on the document, and a warning when that confidence is below
//! `--ocr-flag-below` (set high here so that the flag shows); a blank scan fails with a reason
//! that says OCR found nothing. `status` shows both.

use std::process::Command;

use sqlx::PgPool;
use uuid::Uuid;

mod common;
use common::{delete_queues, docpipe, env};

const BIN: &str = env!("CARGO_BIN_EXE_docpipe");

const LEASE: &str = include_str!("fixtures/lease.txt");

#[tokio::test]
async fn scans_are_read_by_ocr_and_blank_ones_fail_with_a_reason() {
    let pool = PgPool::connect(&env("DOCPIPE_DATABASE_URL")).await.unwrap();
    env("DOCPIPE_S3_ENDPOINT");
    let tag = Uuid::new_v4().simple().to_string()[..8].to_string();
    let (bucket, prefix) = (format!("scan-{tag}"), format!("test-scan-{tag}"));
    let dir = std::env::temp_dir().join(format!("docpipe-scanned-{tag}"));
    std::fs::create_dir_all(&dir).unwrap();
    let scan = |name: &str, text: &str, rotate: &str| {
        let (txt, pdf) = (dir.join(format!("{name}.txt")), dir.join(format!("{name}.pdf")));
        std::fs::write(&txt, text).unwrap();
        let st =
            Command::new(BIN).args(["render-pdf", "--scan", "--rotate", rotate]).arg(&txt).arg(&pdf).status().unwrap();
        assert!(st.success(), "render-pdf --scan {name}");
        pdf.to_string_lossy().into_owned()
    };
    let lease = scan("scanned-lease", LEASE, "90");
    let blank = scan("blank-scan", " ", "0");
    assert!(docpipe(&["put", "--bucket", &bucket, &lease, &blank], &prefix).status.success());

    let out = docpipe(
        &[
            "run",
            "--bucket",
            &bucket,
            "--chunk-tokens",
            "512",
            "--overlap",
            "64",
            "--ocr-flag-below",
            "99",
            "--run-timeout-s",
            "600",
        ],
        &prefix,
    );
    assert!(out.status.success(), "docpipe run failed");

    type Row = (Uuid, String, String, Option<String>, i32, Option<f32>, Option<String>, Option<String>, Uuid);
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT id, key, status, error, ocr_pages, ocr_confidence, warning, text, run_id FROM documents WHERE bucket = $1 ORDER BY key",
    )
    .bind(&bucket)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    let (blank_row, lease_row) = (&rows[0], &rows[1]);

    let (id, _, status, error, ocr_pages, confidence, warning, text, run_id) = lease_row;
    assert_eq!((status.as_str(), error), ("done", &None), "{lease_row:?}");
    assert_eq!(*ocr_pages, 1);
    let confidence = confidence.expect("the OCR confidence is recorded");
    assert!(confidence > 80.0 && confidence < 99.0, "{confidence}");
    let warning = warning.as_deref().unwrap_or_default();
    assert!(warning.contains("low OCR confidence") && warning.contains("below 99"), "{warning:?}");
    let text = text.as_deref().unwrap_or_default();
    assert!(text.contains("Copperfield Analytics") && text.contains("New York"), "{text:?}");
    let pages: Vec<(bool, Option<f32>)> =
        sqlx::query_as("SELECT ocr, ocr_confidence FROM pages WHERE document_id = $1 ORDER BY page_no")
            .bind(id)
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(pages, vec![(true, Some(confidence))]);
    let (segments, chunks): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM segments WHERE document_id = $1 AND embedding IS NOT NULL),
                (SELECT count(*) FROM chunks WHERE document_id = $1)",
    )
    .bind(id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(
        segments >= 2 && chunks >= 1,
        "the OCR text is segmented and embedded: {segments} segments, {chunks} chunks"
    );

    let (_, _, status, error, ocr_pages, ..) = blank_row;
    assert_eq!((status.as_str(), *ocr_pages), ("failed", 0), "{blank_row:?}");
    let error = error.as_deref().unwrap_or_default();
    assert!(error.contains("OCR found no readable text"), "{error:?}");

    let (ocr_in_run, flagged): (i64, i64) =
        sqlx::query_as("SELECT ocr_pages, flagged FROM run_progress WHERE run_id = $1")
            .bind(run_id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((ocr_in_run, flagged), (1, 1));
    let status = docpipe(&["status", "--run", &run_id.to_string()], &prefix);
    let shown = String::from_utf8_lossy(&status.stdout);
    assert!(shown.contains("warning: low OCR confidence") && shown.contains("1 page(s) read by OCR"), "{shown}");

    let _ = std::fs::remove_dir_all(&dir);
    delete_queues(&prefix).await;
}
