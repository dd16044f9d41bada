//! End to end against the real services (S3 server, RabbitMQ, Postgres with pgvector) and the
//! real model: PDFs uploaded to a fresh bucket go through `docpipe run`, and the rows are
//! checked. `make test` starts the services and exports their URLs (scripts/services.sh).
//!
//! One test, because `docpipe run` is expensive (it loads the model): [`fixture::start`] runs
//! it once, then each scenario checks one thing the run (and what follows it) must show, in
//! order — the later ones re-run, retry and redeliver, so they come last.

#[path = "../common/mod.rs"]
mod common;
mod fixture;
mod support;

mod bad_files;
mod fields;
mod labels;
mod metrics;
mod poison;
mod redelivery;
mod report;
mod rerun;
mod retry_failed;
mod round_trip;
mod search;
mod segments;
mod stage_stats;
mod tiling;

#[tokio::test(flavor = "multi_thread")]
async fn pdfs_in_s3_become_rows_in_postgres() {
    let mut run = fixture::start().await;

    metrics::metrics_and_readiness_are_served(&run).await;
    run.load_documents().await;
    bad_files::bad_files_fail_with_reasons(&run).await;
    tiling::done_documents_tile_their_tokens(&run).await;
    stage_stats::chunks_and_documents_record_their_timings(&run).await;
    stage_stats::run_prints_where_the_time_went(&run).await;
    poison::poison_message_is_parked(&run).await;
    round_trip::chunk_offsets_round_trip_the_text(&run).await;
    segments::segments_are_embedded_in_context_and_alone(&run).await;
    labels::done_documents_are_labelled_and_summarised(&run).await;
    fields::done_documents_get_their_fields(&run).await;
    report::report_draws_the_run(&run).await;
    search::search_finds_clauses_and_refuses_unknown_categories(&run).await;
    search::search_returns_as_many_hits_as_asked(&run).await;

    // these act on the pipeline again: redeliver a result, re-run the bucket, retry the failed
    redelivery::redelivered_result_changes_nothing(&run).await;
    rerun::rerun_skips_done_documents(&run).await;
    retry_failed::retry_failed_retries_only_failed(&run).await;

    run.finish().await;
}
