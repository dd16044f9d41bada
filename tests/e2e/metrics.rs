use crate::fixture::Run;
use crate::support::metric;

/// The run served its metrics and readiness while it worked: documents queued and failed,
/// failures by stage, the worker's forward passes, extraction, storing, memory, queue depths.
pub async fn metrics_and_readiness_are_served(run: &Run) {
    let (scrapes, prefix) = (&run.scrapes, &run.prefix);
    assert!(run.ready, "/readyz never answered 200");
    assert!(!scrapes.is_empty(), "no /metrics scrape succeeded");
    assert_eq!(metric(scrapes, r#"docpipe_ingest_documents_total{outcome="queued"}"#), 2.0, "documents queued");
    assert_eq!(metric(scrapes, r#"docpipe_ingest_documents_total{outcome="failed"}"#), 2.0, "documents failed");
    assert!(
        metric(scrapes, r#"docpipe_failures_total{stage="extract",class="permanent"}"#) >= 1.0,
        "permanent extract failures"
    );
    assert!(metric(scrapes, "docpipe_worker_prefill_seconds_count") >= 1.0, "forward passes timed");
    assert!(metric(scrapes, r#"docpipe_worker_chunks_total{outcome="embedded"}"#) >= 1.0, "chunks embedded");
    assert!(metric(scrapes, "docpipe_worker_tokens_total") > 0.0, "tokens embedded");
    assert!(metric(scrapes, "docpipe_ingest_extract_seconds_per_page_count") == 2.0, "extraction timed per page");
    assert!(metric(scrapes, r#"docpipe_aggregator_results_total{outcome="stored"}"#) >= 1.0, "results stored");
    assert!(metric(scrapes, "docpipe_process_peak_resident_memory_bytes") > 1e6, "peak resident memory");
    let chunks_queue = format!(r#"docpipe_queue_messages{{queue="{prefix}.chunks"}}"#);
    assert!(scrapes.iter().any(|b| b.contains(&chunks_queue)), "queue depth of {prefix}.chunks sampled");
}
