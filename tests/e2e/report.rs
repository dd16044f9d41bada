use uuid::Uuid;

use crate::fixture::Run;
use crate::support::docpipe;

/// `docpipe report` draws the run on one self-contained HTML page: throughput, latency, batches
/// the contract fields extracted, and the failures with their reasons.
pub async fn report_draws_the_run(run: &Run) {
    let (run_id,): (Uuid,) = sqlx::query_as("SELECT run_id FROM documents WHERE bucket = $1 AND key = 'short-nda.pdf'")
        .bind(&run.bucket)
        .fetch_one(&run.pool)
        .await
        .unwrap();
    let html_path = run.dir.join("report.html");
    let out = docpipe(&["report", "--run", &run_id.to_string(), "-o", html_path.to_str().unwrap()], &run.prefix);
    assert!(out.status.success(), "docpipe report failed");
    let html = std::fs::read_to_string(&html_path).unwrap();
    for part in [
        "Throughput over time",
        "Latency by stage",
        "prefill (per forward pass)",
        "Worker batches",
        "notes.pdf",
        "not a PDF",
        "Contract fields",
        "field extraction (done → fields stored)",
        "<td>Delaware</td>",
    ] {
        assert!(html.contains(part), "report lacks {part:?}");
    }
    assert!(html.matches("<svg").count() >= 4, "throughput, documents, latency, batches and failures plots");
    assert!(!html.contains("src=") && !html.contains("href="), "the report loads nothing external");
}
