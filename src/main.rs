//! `docpipe` — one binary, one subcommand per role, so one image serves every pod.
//!
//! ```text
//! docpipe ingest --bucket B [--prefix P]   S3 → text → chunks on RabbitMQ
//! docpipe worker                           chunks → embeddings (libtorch, CPU or CUDA)
//! docpipe aggregate                        embeddings → Postgres, documents → done
//! docpipe run --bucket B                   all three in one process, until the run is finished
//! docpipe search "text" [--category C]     nearest clause segments to a query
//! docpipe labels [--learn LABELS.tsv]      embed the clause categories (or learn them), relabel
//! docpipe eval --labels F --bucket B       recall of labelled clauses (`make eval`)
//! docpipe status [--run R]                 documents by status, failures
//! docpipe report [--run R]                 one HTML page: throughput, latency, batches, failures
//! docpipe generate --prompt P             text from the decoder model (GGUF), streamed
//! docpipe fields-worker                    P.fields → contract fields (the decoder), for scaling apart
//! docpipe extract-fields [--bucket B]      contract fields of done documents, by the decoder
//! docpipe fields DOC                       a document's fields with their evidence
//! docpipe eval-fields --labels F --bucket B  field accuracy against CUAD (`make eval-fields`)
//! docpipe migrate                          apply the database migrations
//! docpipe config                           the effective configuration, secrets redacted
//! ```
//! Every flag has an environment variable (`DOCPIPE_*`); see the README.

mod cli;
mod cmd;
mod config;
mod report;
mod sample_pdf;
mod setup;

use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;

use cli::{Cli, Cmd};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let from_file = config::apply::<Cli>(&args)?;
    let cli = Cli::parse();
    if let Cmd::Config = cli.cmd {
        config::print::<Cli>(&from_file, cli.common.config.as_deref());
        return Ok(());
    }
    // The extraction child must not start a runtime or logging that could write to stdout.
    match &cli.cmd {
        Cmd::ExtractPdf { max_pages } => return docpipe_text::extract::child_main(*max_pages).context("extract-pdf"),
        Cmd::RenderPdf { input, output, scan, rotate, dpi, scan_pages } => {
            let only = (!scan_pages.is_empty()).then_some(scan_pages.as_slice());
            let bytes = std::fs::read(input).with_context(|| format!("reading {}", input.display()))?;
            let pdf = if bytes.starts_with(b"%PDF-") {
                anyhow::ensure!(*scan, "{} is a PDF already: add --scan to make a scan of it", input.display());
                sample_pdf::scan(&bytes, *dpi, *rotate, only).context("scanning the PDF")?
            } else {
                let text = String::from_utf8_lossy(&bytes);
                match scan {
                    true => sample_pdf::render_scan(&text, *dpi, *rotate, only).context("rendering a scanned PDF")?,
                    false => sample_pdf::render(&text).context("rendering PDF")?,
                }
            };
            return std::fs::write(output, pdf).with_context(|| format!("writing {}", output.display()));
        }
        _ => {}
    }
    // before any thread starts: the allocator's setting for model inference (see its doc)
    let kept_heap = runs_model(&cli.cmd) && docpipe_model::device::keep_freed_memory();
    init_logging(&cli.common.log_format);
    if kept_heap {
        tracing::debug!("allocator: freed memory kept for the next batch (DOCPIPE_CPU_KEEP_HEAP=0 to not)");
    }
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(dispatch(cli))
}

/// Commands that load the model and run batches through it.
fn runs_model(cmd: &Cmd) -> bool {
    matches!(
        cmd,
        Cmd::Worker { .. }
            | Cmd::Run { .. }
            | Cmd::Labels { .. }
            | Cmd::Eval { .. }
            | Cmd::Search { .. }
            | Cmd::TrainClauses { .. }
            | Cmd::Generate { .. }
            | Cmd::ExtractFields { .. }
            | Cmd::EvalFields { .. }
            | Cmd::FieldsWorker { .. }
    )
}

/// The long-running roles, which serve `/metrics`, `/healthz` and `/readyz`.
fn serves_metrics(cmd: &Cmd) -> bool {
    matches!(
        cmd,
        Cmd::Ingest { .. }
            | Cmd::Worker { .. }
            | Cmd::Aggregate { .. }
            | Cmd::Run { .. }
            | Cmd::RetryFailed { .. }
            | Cmd::FieldsWorker { .. }
    )
}

fn init_logging(format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("DOCPIPE_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| {
            tracing_subscriber::EnvFilter::new("info,lapin=warn,sqlx=warn,aws_config=warn,aws_smithy_runtime=warn")
        });
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    if format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
}

async fn dispatch(cli: Cli) -> Result<()> {
    let c = &cli.common;
    if serves_metrics(&cli.cmd) {
        setup::serve_metrics(&c.metrics_addr).await?;
    }
    match cli.cmd {
        Cmd::Migrate => {
            setup::db(c).await?;
            println!("migrations applied");
            Ok(())
        }
        Cmd::Ingest { source, ingest, listen: true, .. } => cmd::ingest::listen(c, source, &ingest).await,
        Cmd::Ingest { source, ingest, once, run_timeout_s, .. } => {
            cmd::ingest::once_or_cli(c, &source, &ingest, once, run_timeout_s).await
        }
        Cmd::RetryFailed { run, ingest } => cmd::ingest::retry_failed(c, run, &ingest).await,
        Cmd::Worker { worker } => cmd::worker::run(c, &worker).await,
        Cmd::Aggregate { prefetch, fields, labels } => cmd::aggregate::run(c, prefetch, fields, &labels).await,
        Cmd::Run { source, ingest, worker, labels, run_timeout_s, timings, fields, fields_group, decoder } => {
            let fields = fields.then_some((decoder, fields_group));
            let timeout = Duration::from_secs(run_timeout_s);
            cmd::run::run(c, &source, &ingest, &worker, &labels, timeout, timings, fields).await
        }
        Cmd::FieldsWorker { group, decoder } => cmd::fields::worker(c, &decoder, group).await,
        Cmd::Search { query, top, bucket, category, worker } => {
            cmd::search::run(c, &worker, &query, top, bucket.as_deref(), category.as_deref()).await
        }
        Cmd::Labels { learn, bucket, labels, worker } => {
            cmd::labels::run(c, &worker, &labels, learn.as_deref(), bucket.as_deref()).await
        }
        Cmd::Eval { labels, bucket, pdfs, folds, embeddings, standalone_candidates, ocr, label_args, worker } => {
            match (bucket, pdfs) {
                (_, Some(pdfs)) => {
                    let contextual = embeddings == "contextual";
                    cmd::eval::offline(
                        c,
                        &worker,
                        &ocr,
                        &label_args,
                        &labels,
                        &pdfs,
                        folds,
                        contextual,
                        standalone_candidates,
                    )
                    .await
                }
                (Some(bucket), None) => {
                    let e = cmd::eval::Stored { embeddings: &embeddings, standalone_candidates };
                    cmd::eval::run(c, &worker, &label_args, &labels, &bucket, folds, e).await
                }
                (None, None) => anyhow::bail!("eval needs --bucket or --pdfs"),
            }
        }
        Cmd::TrainClauses {
            labels,
            pdfs,
            out,
            name,
            cache,
            docs,
            max_tokens_per_doc,
            positives_per_category,
            negatives,
            embeddings,
            positive_chunks,
            random_chunks,
            seed,
            out_of_fold,
            ocr,
            worker,
        } => {
            let plan = docpipe_clauses::train::Plan {
                max_tokens: max_tokens_per_doc,
                per_category: positives_per_category,
                negatives,
            };
            let embeddings = match embeddings.as_str() {
                "contextual" => cmd::train_clauses::Embeddings::Contextual(docpipe_clauses::train::ChunkPlan {
                    positive_chunks,
                    random_chunks,
                }),
                "both" => cmd::train_clauses::Embeddings::Both(docpipe_clauses::train::ChunkPlan {
                    positive_chunks,
                    random_chunks,
                }),
                _ => cmd::train_clauses::Embeddings::Standalone,
            };
            let opts = cmd::train_clauses::Options {
                labels,
                pdfs,
                out,
                name,
                cache,
                docs,
                plan,
                seed,
                embeddings,
                out_of_fold,
            };
            cmd::train_clauses::run(c, &worker, &ocr, &opts).await
        }
        Cmd::Generate { prompt, prompt_file, system, raw, sampling, max_new_tokens, json_schema, decoder } => {
            let opts = cmd::generate::Options {
                prompts: prompt,
                prompt_file,
                system,
                raw,
                sampling,
                max_new_tokens,
                json_schema,
            };
            tokio::task::block_in_place(|| cmd::generate::run(&decoder, &opts))
        }
        Cmd::ExtractFields { bucket, document, redo, group, decoder } => {
            let opts = cmd::fields::ExtractOptions { bucket, documents: document, redo, group };
            cmd::fields::extract(c, &decoder, &opts).await.map(|_| ())
        }
        Cmd::Fields { document } => cmd::fields::show(c, &document).await,
        Cmd::EvalFields { labels, bucket, pdfs, group, decoder, ocr } => match (bucket, pdfs) {
            (Some(bucket), _) => cmd::fields::eval(c, &decoder, &labels, &bucket, group).await,
            (None, Some(pdfs)) => cmd::fields::eval_rules(&labels, &pdfs, &ocr).await,
            (None, None) => anyhow::bail!("eval-fields needs --bucket or --pdfs"),
        },
        Cmd::EvalOcr { pdfs, docs, pages_per_doc, ocr } => cmd::eval_ocr::run(&pdfs, docs, pages_per_doc, &ocr).await,
        Cmd::Status { run, watch, interval_s } => cmd::status::run(c, run, watch, interval_s).await,
        Cmd::Report { run, out } => cmd::report::run(c, run, out).await,
        Cmd::Put { bucket, prefix, s3, files } => cmd::put::run(&bucket, &prefix, &s3, &files).await,
        Cmd::Chunks { chunk_tokens, overlap, segments, ocr, files } => {
            cmd::chunks::run(c, chunk_tokens, overlap, segments, &ocr, &files).await
        }
        Cmd::PublishRaw { queue } => cmd::publish_raw::run(c, &queue).await,
        Cmd::ExtractPdf { .. } | Cmd::RenderPdf { .. } | Cmd::Config => {
            unreachable!("handled before the runtime starts")
        }
    }
}
