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
//! docpipe migrate                          apply the database migrations
//! docpipe config                           the effective configuration, secrets redacted
//! ```
//! Every flag has an environment variable (`DOCPIPE_*`); see the README.

mod config;
mod eval;
mod labels;
mod report;
mod sample_pdf;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use docpipe_common::amqp::{self, Publisher, Topology};
use docpipe_common::{db, redact};
use docpipe_ingest::extract::ExtractLimits;
use docpipe_ingest::{IngestConfig, Ingestor};
use docpipe_worker::{device, SentenceEmbedder, WorkerConfig};
use sqlx::PgPool;
use tokio::sync::watch;
use tracing::{info, warn};
use uuid::Uuid;

#[derive(Parser)]
#[command(name = "docpipe", version, about = "Contracts in S3 → chunked, embedded rows in Postgres")]
struct Cli {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Args, Clone)]
struct Common {
    /// RabbitMQ URL (amqps:// for TLS).
    #[arg(
        long,
        global = true,
        env = "DOCPIPE_AMQP_URL",
        default_value = "amqp://guest:guest@127.0.0.1:5672/%2f",
        hide_env_values = true
    )]
    amqp_url: String,
    /// Postgres URL (`?sslmode=require` or `verify-full&sslrootcert=…` for TLS).
    #[arg(
        long,
        global = true,
        env = "DOCPIPE_DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/docpipe",
        hide_env_values = true
    )]
    database_url: String,
    /// Prefix of the RabbitMQ queue names (`P.chunks`, `P.results`, ...).
    #[arg(long, global = true, env = "DOCPIPE_QUEUE_PREFIX", default_value = "docpipe")]
    queue_prefix: String,
    /// sentence-transformers model directory.
    #[arg(long, global = true, env = "DOCPIPE_MODEL")]
    model: Option<PathBuf>,
    /// TOML config file; its keys are the environment variables' names in lower case without
    /// `DOCPIPE_` (precedence: flag > environment > file > default).
    #[arg(long, global = true, env = "DOCPIPE_CONFIG")]
    config: Option<PathBuf>,
    /// Address of the HTTP listener for `/metrics`, `/healthz` and `/readyz` of the long-running
    /// roles (ingest, worker, aggregate, run, retry-failed); `off` disables it, port 0 picks a
    /// free port (logged).
    #[arg(long, global = true, env = "DOCPIPE_METRICS_ADDR", default_value = "0.0.0.0:9464")]
    metrics_addr: String,
    /// Log format: text or json.
    #[arg(long, global = true, env = "DOCPIPE_LOG_FORMAT", default_value = "text")]
    log_format: String,
}

#[derive(Args, Clone)]
struct S3Args {
    /// S3 endpoint for S3-compatible servers (MinIO, SeaweedFS); unset for AWS.
    #[arg(long, env = "DOCPIPE_S3_ENDPOINT")]
    s3_endpoint: Option<String>,
    #[arg(long, env = "AWS_REGION", default_value = "us-east-1")]
    s3_region: String,
}

#[derive(Args, Clone)]
struct SourceArgs {
    #[arg(long, env = "DOCPIPE_BUCKET")]
    bucket: String,
    #[arg(long, env = "DOCPIPE_PREFIX", default_value = "")]
    prefix: String,
}

#[derive(Args, Clone)]
struct IngestArgs {
    #[command(flatten)]
    s3: S3Args,
    /// Model sequence length per chunk, prompt and special tokens included.
    #[arg(long, env = "DOCPIPE_CHUNK_TOKENS", default_value_t = 2048)]
    chunk_tokens: usize,
    /// Tokens shared by neighbouring chunks.
    #[arg(long, env = "DOCPIPE_CHUNK_OVERLAP", default_value_t = 128)]
    overlap: usize,
    /// Larger PDFs fail with a reason.
    #[arg(long, env = "DOCPIPE_MAX_PDF_MB", default_value_t = 100)]
    max_pdf_mb: u64,
    #[arg(long, env = "DOCPIPE_MAX_PAGES", default_value_t = 2000)]
    max_pages: usize,
    #[arg(long, env = "DOCPIPE_MAX_TOKENS", default_value_t = 2_000_000)]
    max_tokens: usize,
    /// Wall-clock limit for extracting one PDF.
    #[arg(long, env = "DOCPIPE_EXTRACT_TIMEOUT_S", default_value_t = 120)]
    extract_timeout_s: u64,
    /// Address-space limit of the extraction child process.
    #[arg(long, env = "DOCPIPE_EXTRACT_MEMORY_MB", default_value_t = 4096)]
    extract_memory_mb: u64,
    /// Documents extracted at the same time.
    #[arg(long, env = "DOCPIPE_INGEST_CONCURRENCY", default_value_t = 2)]
    concurrency: usize,
}

#[derive(Args, Clone)]
struct WorkerArgs {
    /// auto, cpu, cuda or cuda:N.
    #[arg(long, env = "DOCPIPE_DEVICE", default_value = "auto")]
    device: String,
    /// auto (bf16 on CUDA, on CPUs with AMX, and where a bf16 GEMM times clearly faster than
    /// fp32 at start; else fp32), fp32, bf16, fp16.
    #[arg(long, env = "DOCPIPE_DTYPE", default_value = "auto")]
    dtype: String,
    /// Padded tokens per forward pass, or `auto`: on CUDA derived from the free memory by a
    /// calibration pass at start (see --memory-fraction), on the CPU 8192.
    #[arg(long, env = "DOCPIPE_MAX_BATCH_TOKENS", default_value = "auto")]
    max_batch_tokens: String,
    /// With `--max-batch-tokens auto` on CUDA: the share of the free device memory a forward
    /// pass may use.
    #[arg(long, env = "DOCPIPE_MEMORY_FRACTION", default_value_t = 0.5)]
    memory_fraction: f64,
    /// Longest wait for more chunks once a batch has one.
    #[arg(long, env = "DOCPIPE_MAX_WAIT_MS", default_value_t = 75)]
    max_wait_ms: u64,
    #[arg(long, env = "DOCPIPE_PREFETCH", default_value_t = 32)]
    prefetch: u16,
    /// Also embed each segment on its own, for clause labels (about as many model tokens
    /// again, in short sequences; `false`: labels score the contextual segment embeddings).
    #[arg(long, env = "DOCPIPE_STANDALONE_SEGMENTS", default_value_t = true, action = clap::ArgAction::Set)]
    standalone_segments: bool,
    /// Intra-op threads for CPU inference (0 = libtorch's default).
    #[arg(long, env = "DOCPIPE_THREADS", default_value_t = 0)]
    threads: i32,
}

#[derive(Args, Clone)]
struct LabelArgs {
    /// Presence threshold of the zero-shot clause categories: a document has a clause when its
    /// best segment scores at least this (learned categories keep their own thresholds).
    #[arg(long, env = "DOCPIPE_LABEL_THRESHOLD", default_value_t = labels::DEFAULT_THRESHOLD)]
    label_threshold: f32,
}

#[derive(Subcommand)]
enum Cmd {
    /// List a bucket, extract, chunk and publish every PDF.
    Ingest {
        #[command(flatten)]
        source: SourceArgs,
        #[command(flatten)]
        ingest: IngestArgs,
        /// For cron: skip if another `--once` ingest of the same bucket/prefix is running,
        /// then wait until every document of the run is done or failed (workers and
        /// aggregators run elsewhere) and print the run's progress. Exit status 0 when the run
        /// finished (failed documents are in `failures`), 1 otherwise.
        #[arg(long, conflicts_with = "listen")]
        once: bool,
        /// Instead of listing the bucket, ingest the objects named by S3 event notifications
        /// (the standard S3 event JSON) arriving on the queue `P.s3-events`, until SIGTERM.
        /// `--bucket`/`--prefix` filter the events.
        #[arg(long)]
        listen: bool,
        /// Give up waiting for the run (`--once`) after this many seconds.
        #[arg(long, env = "DOCPIPE_RUN_TIMEOUT_S", default_value_t = 6 * 3600)]
        run_timeout_s: u64,
    },
    /// Embed chunks from RabbitMQ.
    Worker {
        #[command(flatten)]
        worker: WorkerArgs,
    },
    /// Store results in Postgres and finish documents (with their clause labels).
    Aggregate {
        #[arg(long, env = "DOCPIPE_PREFETCH", default_value_t = 64)]
        prefetch: u16,
        #[command(flatten)]
        labels: LabelArgs,
    },
    /// Ingest, worker and aggregator in one process (still through RabbitMQ); exits when every
    /// document of the run is done or failed.
    Run {
        #[command(flatten)]
        source: SourceArgs,
        #[command(flatten)]
        ingest: IngestArgs,
        #[command(flatten)]
        worker: WorkerArgs,
        #[command(flatten)]
        labels: LabelArgs,
        /// Give up waiting for the run after this many seconds.
        #[arg(long, env = "DOCPIPE_RUN_TIMEOUT_S", default_value_t = 6 * 3600)]
        run_timeout_s: u64,
    },
    /// Ingest again only the failed documents (of run R, or all of them); needs a worker and an
    /// aggregator running, like `ingest`.
    RetryFailed {
        #[arg(long)]
        run: Option<Uuid>,
        #[command(flatten)]
        ingest: IngestArgs,
    },
    /// Nearest clause segments to a query (embedded with the model's query prompt).
    Search {
        query: String,
        #[arg(long, default_value_t = 5)]
        top: i64,
        /// Only documents from this bucket.
        #[arg(long)]
        bucket: Option<String>,
        /// Only segments that score at or above this clause category's threshold
        /// (e.g. "Governing Law"; `docpipe labels` lists them).
        #[arg(long)]
        category: Option<String>,
        #[command(flatten)]
        worker: WorkerArgs,
    },
    /// Embed the clause categories if needed and relabel documents; with `--learn`, learn a
    /// scorer and a presence threshold per category from labelled documents. Prints the
    /// categories.
    Labels {
        /// Labels file in `cuad_labels.tsv` format (file, category, answer, clauses_json).
        #[arg(long)]
        learn: Option<PathBuf>,
        /// Bucket holding the labelled documents (matched by file name).
        #[arg(long, env = "DOCPIPE_BUCKET")]
        bucket: Option<String>,
        #[command(flatten)]
        labels: LabelArgs,
        #[command(flatten)]
        worker: WorkerArgs,
    },
    /// Recall@1/@5 of labelled clauses and presence precision/recall, per category, with
    /// cross-validated learned scorers; the last line is `recall@5 X.XX`.
    Eval {
        #[arg(long)]
        labels: PathBuf,
        /// Bucket holding the labelled documents (matched by file name).
        #[arg(long, env = "DOCPIPE_BUCKET")]
        bucket: String,
        #[arg(long, default_value_t = 5)]
        folds: usize,
        #[command(flatten)]
        label_args: LabelArgs,
        #[command(flatten)]
        worker: WorkerArgs,
    },
    /// Documents by status (latest run by default) and their failures; `--watch` follows the
    /// run's progress (a progress bar on a terminal, plain lines otherwise) until it finishes.
    Status {
        #[arg(long)]
        run: Option<Uuid>,
        #[arg(long)]
        watch: bool,
        /// Seconds between progress updates with `--watch`.
        #[arg(long, default_value_t = 2)]
        interval_s: u64,
    },
    /// Write one self-contained HTML page about a run (latest by default): throughput over
    /// time, latency by stage, the workers' batch sizes, failures.
    Report {
        #[arg(long)]
        run: Option<Uuid>,
        /// Output file (default `docpipe-report-RUN.html`; `-` for standard output).
        #[arg(long, short)]
        out: Option<PathBuf>,
    },
    /// Upload files to a bucket (created if missing), keyed `PREFIX + file name`.
    Put {
        #[arg(long, env = "DOCPIPE_BUCKET")]
        bucket: String,
        #[arg(long, default_value = "")]
        prefix: String,
        #[command(flatten)]
        s3: S3Args,
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Print the chunks ingest would publish for local PDFs, as JSON lines (no services needed).
    Chunks {
        #[arg(long, env = "DOCPIPE_CHUNK_TOKENS", default_value_t = 2048)]
        chunk_tokens: usize,
        #[arg(long, env = "DOCPIPE_CHUNK_OVERLAP", default_value_t = 128)]
        overlap: usize,
        /// Print the clause segments (ranges, pages, text) instead of the chunks.
        #[arg(long)]
        segments: bool,
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Apply database migrations.
    Migrate,
    /// Print the effective configuration (every option, its value and where it comes from),
    /// secrets redacted.
    Config,
    /// (internal) Extract a PDF from stdin in an isolated process.
    #[command(hide = true)]
    ExtractPdf {
        #[arg(long, default_value_t = 2000)]
        max_pages: usize,
    },
    /// (testing) Publish the JSON on stdin as one persistent message to a queue, with a
    /// confirm — e.g. a poison message for the fault suite.
    #[command(hide = true)]
    PublishRaw { queue: String },
    /// (internal) Render a text file as a PDF, for samples and tests.
    #[command(hide = true)]
    RenderPdf { input: PathBuf, output: PathBuf },
}

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
        Cmd::ExtractPdf { max_pages } => return docpipe_ingest::extract::child_main(*max_pages).context("extract-pdf"),
        Cmd::RenderPdf { input, output } => {
            let text = std::fs::read_to_string(input).with_context(|| format!("reading {}", input.display()))?;
            let pdf = sample_pdf::render(&text).context("rendering PDF")?;
            return std::fs::write(output, pdf).with_context(|| format!("writing {}", output.display()));
        }
        _ => {}
    }
    // before any thread starts: the allocator's setting for model inference (see its doc)
    let kept_heap = runs_model(&cli.cmd) && docpipe_worker::device::keep_freed_memory();
    init_logging(&cli.common.log_format);
    if kept_heap {
        tracing::debug!("allocator: freed memory kept for the next batch (DOCPIPE_CPU_KEEP_HEAP=0 to not)");
    }
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(async_main(cli))
}

/// Commands that load the model and run batches through it.
fn runs_model(cmd: &Cmd) -> bool {
    matches!(cmd, Cmd::Worker { .. } | Cmd::Run { .. } | Cmd::Labels { .. } | Cmd::Eval { .. } | Cmd::Search { .. })
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

async fn async_main(cli: Cli) -> Result<()> {
    let c = &cli.common;
    if matches!(
        cli.cmd,
        Cmd::Ingest { .. } | Cmd::Worker { .. } | Cmd::Aggregate { .. } | Cmd::Run { .. } | Cmd::RetryFailed { .. }
    ) {
        serve_metrics(&c.metrics_addr).await?;
    }
    match cli.cmd {
        Cmd::Migrate => {
            connect_db(c).await?;
            println!("migrations applied");
            Ok(())
        }
        Cmd::Ingest { source, ingest, listen: true, .. } => {
            let pool = connect_db(c).await?;
            let conn = connect_amqp(c, "docpipe-ingest").await?;
            let topology = declare(&conn, c).await?;
            drop(conn);
            let ingestor = Arc::new(build_ingestor(c, &ingest, pool.clone(), "docpipe-ingest", topology).await?);
            let run_id = ingestor.start_run("listen", &source.bucket, &source.prefix).await?;
            supervise(c, "docpipe-ingest-listen", shutdown_signal(), |conn, _topology, stop| {
                let (ingestor, source) = (ingestor.clone(), source.clone());
                async move {
                    let summary = ingestor.listen(run_id, &conn, &source.bucket, &source.prefix, stop).await?;
                    println!("{}", serde_json::to_string_pretty(&summary).unwrap_or_default());
                    Ok::<(), docpipe_ingest::IngestError>(())
                }
            })
            .await
        }
        Cmd::Ingest { source, ingest, once, run_timeout_s, .. } => {
            let pool = connect_db(c).await?;
            // a session-level advisory lock, held by this connection until the process exits
            let mut lock = None;
            if once {
                let mut conn = pool.acquire().await?.detach();
                let (got,): (bool,) = sqlx::query_as("SELECT pg_try_advisory_lock(hashtext('docpipe-ingest:' || $1))")
                    .bind(format!("{}/{}", source.bucket, source.prefix))
                    .fetch_one(&mut conn)
                    .await?;
                if !got {
                    println!(
                        "another `ingest --once` of s3://{}/{} is running; nothing to do",
                        source.bucket, source.prefix
                    );
                    return Ok(());
                }
                lock = Some(conn);
            }
            let conn = connect_amqp(c, "docpipe-ingest").await?;
            let topology = declare(&conn, c).await?;
            let ingestor = build_ingestor(c, &ingest, pool.clone(), "docpipe-ingest", topology).await?;
            let run_id = ingestor.start_run(if once { "cron" } else { "cli" }, &source.bucket, &source.prefix).await?;
            let summary = ingestor.ingest(run_id, &source.bucket, &source.prefix).await?;
            println!("{}", serde_json::to_string_pretty(&summary)?);
            if once {
                let waited = tokio::time::timeout(
                    Duration::from_secs(run_timeout_s),
                    watch_run(&pool, run_id, Duration::from_secs(10), shutdown_signal()),
                )
                .await;
                let p = Progress::load(&pool, run_id).await?;
                println!("run {run_id}: {}", p.line());
                drop(lock);
                match waited {
                    Ok(r) => r?,
                    Err(_) => bail!("run {run_id} not finished after {run_timeout_s} s"),
                }
                if p.finished_at.is_none() {
                    bail!("interrupted before run {run_id} finished; its documents resume when workers run");
                }
            }
            Ok(())
        }
        Cmd::RetryFailed { run, ingest } => {
            let pool = connect_db(c).await?;
            let conn = connect_amqp(c, "docpipe-retry").await?;
            let topology = declare(&conn, c).await?;
            let ingestor = build_ingestor(c, &ingest, pool.clone(), "docpipe-ingest", topology).await?;
            let run_id = ingestor.start_run("retry-failed", "*", "").await?;
            let summary = ingestor.retry_failed(run_id, run).await?;
            println!("{}", serde_json::to_string_pretty(&summary)?);
            Ok(())
        }
        Cmd::Worker { worker } => {
            // off the runtime's threads, so /healthz answers while the model loads
            let (model, cfg) = tokio::task::block_in_place(|| {
                let model = load_model(c, &worker)?;
                let cfg = worker_config(&worker, &model)?;
                anyhow::Ok((model, cfg))
            })?;
            let model = Arc::new(Mutex::new(model));
            supervise(c, "docpipe-worker", shutdown_signal(), |conn, topology, stop| {
                let (model, cfg) = (model.clone(), cfg.clone());
                async move { docpipe_worker::run(&conn, &topology, model, cfg, stop).await }
            })
            .await
        }
        Cmd::Aggregate { prefetch, labels } => {
            let pool = connect_db(c).await?;
            ensure_labels(&pool, &labels, None, || load_model_on(c, "cpu", "auto", 0)).await?;
            supervise(c, "docpipe-aggregator", shutdown_signal(), |conn, topology, stop| {
                let pool = pool.clone();
                async move { docpipe_aggregator::run(&conn, &topology, &pool, prefetch, stop).await }
            })
            .await
        }
        Cmd::Run { source, ingest, worker, labels, run_timeout_s } => {
            run_all(c, source, ingest, worker, labels, Duration::from_secs(run_timeout_s)).await
        }
        Cmd::Search { query, top, bucket, category, worker } => {
            search(c, &worker, &query, top, bucket.as_deref(), category.as_deref()).await
        }
        Cmd::Labels { learn, bucket, labels, worker } => {
            labels_cmd(c, &worker, &labels, learn.as_deref(), bucket.as_deref()).await
        }
        Cmd::Eval { labels, bucket, folds, label_args, worker } => {
            let pool = connect_db(c).await?;
            labels::backfill_terms(&pool).await?;
            labels::backfill_standalone(&pool, || load_model(c, &worker)).await?;
            ensure_labels(&pool, &label_args, None, || load_model(c, &worker)).await?;
            let gold = eval::read_labels(&labels)?;
            let (docs, unlocated) = eval::load_docs(&pool, &bucket, &gold).await?;
            let cats = labels::load(&pool).await?;
            eval::report(&docs, &cats, folds, unlocated, label_args.label_threshold)
        }
        Cmd::Status { run, watch, interval_s } => {
            let pool = connect_db(c).await?;
            let Some(run_id) = resolve_run(&pool, run).await? else {
                println!("no runs yet");
                return Ok(());
            };
            if watch {
                watch_run(&pool, run_id, Duration::from_secs(interval_s.max(1)), shutdown_signal()).await?;
            }
            status(&pool, run_id).await
        }
        Cmd::Report { run, out } => {
            let pool = connect_db(c).await?;
            let Some(run_id) = resolve_run(&pool, run).await? else {
                bail!("no runs yet: nothing to report");
            };
            let html = report::load(&pool, run_id).await?.html();
            match out {
                Some(p) if p.as_os_str() == "-" => print!("{html}"),
                out => {
                    let out = out.unwrap_or_else(|| PathBuf::from(format!("docpipe-report-{run_id}.html")));
                    std::fs::write(&out, html).with_context(|| format!("writing {}", out.display()))?;
                    println!("{}", out.display());
                }
            }
            Ok(())
        }
        Cmd::Put { bucket, prefix, s3, files } => put(&bucket, &prefix, &s3, &files).await,
        Cmd::Chunks { chunk_tokens, overlap, segments, files } => {
            print_chunks(c, chunk_tokens, overlap, segments, &files).await
        }
        Cmd::PublishRaw { queue } => {
            let mut body = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut body).context("reading stdin")?;
            let value: serde_json::Value =
                serde_json::from_str(&body).unwrap_or_else(|_| serde_json::Value::String(body.clone()));
            let conn = connect_amqp(c, "docpipe-publish-raw").await?;
            declare(&conn, c).await?;
            Publisher::new(&conn).await?.publish_all(&queue, &[value]).await?;
            println!("published 1 message to {queue}");
            Ok(())
        }
        Cmd::ExtractPdf { .. } | Cmd::RenderPdf { .. } | Cmd::Config => {
            unreachable!("handled before the runtime starts")
        }
    }
}

const PATIENCE: Duration = Duration::from_secs(60);

/// Start the `/metrics`, `/healthz`, `/readyz` listener. A port already in use is logged and
/// the role runs without it (several roles on one host); a malformed address is an error.
async fn serve_metrics(addr: &str) -> Result<()> {
    if addr.is_empty() || addr == "off" {
        return Ok(());
    }
    let parsed: std::net::SocketAddr = addr
        .parse()
        .with_context(|| format!("DOCPIPE_METRICS_ADDR {addr:?} is not an address like 0.0.0.0:9464 (or off)"))?;
    match docpipe_common::metrics::serve(parsed).await {
        Ok(bound) => info!(addr = %bound, "serving /metrics, /healthz and /readyz"),
        Err(e) => warn!(error = %e, "metrics, health and readiness are not served"),
    }
    Ok(())
}

async fn connect_db(c: &Common) -> Result<PgPool> {
    let m = docpipe_common::metrics::get();
    m.set_ready("postgres", Err(format!("connecting to {}", redact::url(&c.database_url))));
    let pool = db::connect(&c.database_url, 8, PATIENCE).await?;
    db::migrate(&pool).await.with_context(|| format!("migrating {}", redact::url(&c.database_url)))?;
    m.set_ready("postgres", Ok(()));
    Ok(pool)
}

async fn connect_amqp(c: &Common, name: &str) -> Result<lapin::Connection> {
    let m = docpipe_common::metrics::get();
    m.set_ready("rabbitmq", Err(format!("connecting to {}", redact::url(&c.amqp_url))));
    let conn = amqp::connect(&c.amqp_url, name, PATIENCE).await?;
    m.set_ready("rabbitmq", Ok(()));
    Ok(conn)
}

async fn declare(conn: &lapin::Connection, c: &Common) -> Result<Topology> {
    let topology = Topology::new(&c.queue_prefix);
    let ch = conn.create_channel().await.context("creating a channel")?;
    topology.declare(&ch).await?;
    let _ = ch.close(200, "declared".into()).await;
    Ok(topology)
}

fn model_dir(c: &Common) -> Result<PathBuf> {
    let dir = match &c.model {
        Some(d) => d.clone(),
        None => {
            let home = std::env::var_os("DOCPIPE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/docpipe")))
                .context("neither DOCPIPE_MODEL nor HOME is set")?;
            home.join("embeddinggemma-300m")
        }
    };
    if !dir.join("config.json").exists() {
        bail!("no model at {} (set DOCPIPE_MODEL or --model to a sentence-transformers directory; `make model` fetches EmbeddingGemma-300M)", dir.display());
    }
    Ok(dir)
}

async fn build_ingestor(
    c: &Common,
    a: &IngestArgs,
    pool: PgPool,
    conn_name: &str,
    topology: Topology,
) -> Result<Ingestor> {
    let exe = std::env::current_exe().context("locating the docpipe binary for extraction")?;
    let mut cfg = IngestConfig::new(model_dir(c)?, exe);
    cfg.chunk_tokens = a.chunk_tokens;
    cfg.overlap = a.overlap;
    cfg.max_pdf_bytes = a.max_pdf_mb << 20;
    cfg.max_tokens = a.max_tokens;
    cfg.concurrency = a.concurrency;
    cfg.extract = ExtractLimits {
        timeout: Duration::from_secs(a.extract_timeout_s),
        memory_bytes: a.extract_memory_mb << 20,
        max_pages: a.max_pages,
    };
    let s3 = docpipe_ingest::s3::client(&docpipe_ingest::s3::S3Config {
        endpoint: a.s3.s3_endpoint.clone(),
        region: a.s3.s3_region.clone(),
    })
    .await;
    // its own connection, re-established if the broker restarts mid-run
    let publisher = Publisher::reconnecting(&c.amqp_url, &format!("{}-publisher", conn_name), PATIENCE).await?;
    Ok(Ingestor::new(cfg, s3, pool, publisher, topology)?)
}

fn load_model(c: &Common, w: &WorkerArgs) -> Result<SentenceEmbedder> {
    load_model_on(c, &w.device, &w.dtype, w.threads)
}

fn load_model_on(c: &Common, device: &str, dtype: &str, threads: i32) -> Result<SentenceEmbedder> {
    let dir = model_dir(c)?;
    let m = docpipe_common::metrics::get();
    m.set_ready("model", Err(format!("loading {}", dir.display())));
    let dev = device::resolve(device.parse().map_err(anyhow::Error::msg)?)?;
    let precision = device::precision(dtype, dev)?;
    if threads > 0 {
        device::set_threads(threads);
    }
    let t0 = Instant::now();
    let model =
        SentenceEmbedder::load(&dir, dev, precision).with_context(|| format!("loading model {}", dir.display()))?;
    info!(model = %model.label(), device = ?dev, seconds = t0.elapsed().as_secs_f64(), "model loaded");
    m.set_ready("model", Ok(()));
    Ok(model)
}

/// Default padded tokens per forward pass on the CPU: four full chunks. Larger CPU batches add
/// latency, not throughput, and memory is rarely what limits them.
const CPU_BATCH_TOKENS: usize = 8192;

fn worker_config(w: &WorkerArgs, model: &SentenceEmbedder) -> Result<WorkerConfig> {
    let max_batch_tokens = match w.max_batch_tokens.as_str() {
        "auto" if model.device().is_cuda() => {
            if !(w.memory_fraction > 0.0 && w.memory_fraction <= 1.0) {
                bail!("--memory-fraction must be in (0, 1], not {}", w.memory_fraction);
            }
            let cap = w.prefetch as usize * model.max_len();
            let c = docpipe_worker::calibrate_budget(model, model.max_len(), w.memory_fraction, cap)
                .context("calibrating the batch budget")?;
            info!(
                budget_tokens = c.budget,
                bytes_per_token = c.bytes_per_token,
                available_bytes = c.available,
                fraction = w.memory_fraction,
                cap_tokens = cap,
                "batch budget derived from device memory"
            );
            c.budget
        }
        "auto" => CPU_BATCH_TOKENS,
        n => match n.parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => bail!("--max-batch-tokens must be a positive number of tokens or auto, not {n:?}"),
        },
    };
    Ok(WorkerConfig {
        max_batch_tokens,
        max_wait: Duration::from_millis(w.max_wait_ms),
        prefetch: w.prefetch,
        standalone_segments: w.standalone_segments,
    })
}

/// A watch that turns true on SIGINT or SIGTERM.
fn shutdown_signal() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        info!("shutdown requested; finishing in-flight work");
        let _ = tx.send(true);
    });
    rx
}

async fn run_all(
    c: &Common,
    source: SourceArgs,
    ingest: IngestArgs,
    worker: WorkerArgs,
    labels: LabelArgs,
    timeout: Duration,
) -> Result<()> {
    let started = Instant::now();
    let pool = connect_db(c).await?;
    let conn = Arc::new(connect_amqp(c, "docpipe-run").await?);
    let topology = declare(&conn, c).await?;
    let model = load_model(c, &worker)?;
    let worker_cfg = worker_config(&worker, &model)?;
    ensure_labels(&pool, &labels, Some(&model), || load_model(c, &worker)).await?;
    let ingestor = build_ingestor(c, &ingest, pool.clone(), "docpipe-run", topology.clone()).await?;

    let stop_signal = shutdown_signal();
    let (stop_tx, stop_rx) = watch::channel(false);
    let model = Arc::new(Mutex::new(model));
    let worker_task = {
        let (c, cfg, rx) = (c.clone(), worker_cfg, stop_rx.clone());
        tokio::spawn(async move {
            supervise(&c, "docpipe-run-worker", rx, |conn, topology, stop| {
                let (model, cfg) = (model.clone(), cfg.clone());
                async move { docpipe_worker::run(&conn, &topology, model, cfg, stop).await }
            })
            .await
        })
    };
    let aggregator_task = {
        let (c, pool, rx) = (c.clone(), pool.clone(), stop_rx.clone());
        tokio::spawn(async move {
            supervise(&c, "docpipe-run-aggregator", rx, |conn, topology, stop| {
                let pool = pool.clone();
                async move { docpipe_aggregator::run(&conn, &topology, &pool, 64, stop).await }
            })
            .await
        })
    };

    let run_id = ingestor.start_run("run", &source.bucket, &source.prefix).await?;
    info!(%run_id, bucket = source.bucket, prefix = source.prefix, "run started");
    let summary = ingestor.ingest(run_id, &source.bucket, &source.prefix).await?;
    let outcome = wait_for_run(&pool, run_id, timeout, stop_signal, &worker_task, &aggregator_task).await;
    let _ = stop_tx.send(true);
    let worker_result = worker_task.await;
    let aggregator_result = aggregator_task.await;
    outcome?;
    worker_result.context("worker task panicked")??;
    aggregator_result.context("aggregator task panicked")??;
    drop(conn);
    println!(
        "run {run_id}: {} objects, {} queued, {} skipped (unchanged), {} failed at ingest, {} chunks; {:.1} s",
        summary.objects,
        summary.queued,
        summary.skipped,
        summary.failed,
        summary.chunks,
        started.elapsed().as_secs_f64()
    );
    status(&pool, run_id).await
}

/// Run a consuming role until `stop` turns true, reconnecting to RabbitMQ with backoff
/// whenever the connection drops (a broker restart): unacknowledged deliveries return to the
/// queue and are redelivered, and every write downstream is idempotent.
async fn supervise<F, Fut, E>(c: &Common, name: &str, mut stop: watch::Receiver<bool>, mut role: F) -> Result<()>
where
    F: FnMut(Arc<lapin::Connection>, Topology, watch::Receiver<bool>) -> Fut,
    Fut: std::future::Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    let mut delay = Duration::from_secs(1);
    loop {
        if *stop.borrow() {
            return Ok(());
        }
        let connected = async {
            let conn = Arc::new(connect_amqp(c, name).await?);
            let topology = declare(&conn, c).await?;
            anyhow::Ok((conn, topology))
        }
        .await;
        match connected {
            Ok((conn, topology)) => {
                let started = Instant::now();
                let sampler = {
                    let (conn, topology) = (conn.clone(), topology.clone());
                    tokio::spawn(
                        async move { amqp::sample_queue_depths(&conn, &topology, Duration::from_secs(15)).await },
                    )
                };
                let outcome = role(conn.clone(), topology, stop.clone()).await;
                sampler.abort();
                match outcome {
                    Ok(()) => return Ok(()),
                    Err(e) => {
                        warn!(role = name, error = %e, "lost RabbitMQ; reconnecting");
                        docpipe_common::metrics::get().set_ready("rabbitmq", Err(format!("reconnecting: {e}")));
                    }
                }
                let _ = conn.close(200, "reconnecting".into()).await;
                if started.elapsed() > Duration::from_secs(60) {
                    delay = Duration::from_secs(1);
                }
            }
            Err(e) => warn!(role = name, error = %e, "cannot reach RabbitMQ; retrying"),
        }
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stop.changed() => return Ok(()),
        }
        delay = (delay * 2).min(Duration::from_secs(30));
    }
}

/// Poll until every document of the run is done or failed.
async fn wait_for_run<T, U>(
    pool: &PgPool,
    run_id: Uuid,
    timeout: Duration,
    mut stop: watch::Receiver<bool>,
    worker: &tokio::task::JoinHandle<T>,
    aggregator: &tokio::task::JoinHandle<U>,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let polled: Result<(i64,), _> =
            sqlx::query_as("SELECT count(*) FROM documents WHERE run_id = $1 AND status NOT IN ('done', 'failed')")
                .bind(run_id)
                .fetch_one(pool)
                .await;
        // a database restart is waited out like any other pause (the aggregator retries too)
        let pending = match polled {
            Ok((n,)) => n,
            Err(e) => {
                warn!(%run_id, error = %e, "cannot poll run progress; retrying");
                -1
            }
        };
        if pending == 0 {
            return Ok(());
        }
        if worker.is_finished() || aggregator.is_finished() {
            bail!("a pipeline role stopped while {pending} document(s) of run {run_id} were pending");
        }
        if Instant::now() > deadline {
            bail!("run {run_id} not finished after {timeout:?}: {pending} document(s) pending");
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            _ = stop.changed() => bail!("interrupted with {pending} document(s) of run {run_id} pending; they resume on the next run"),
        }
    }
}

/// The run given, or the latest one.
async fn resolve_run(pool: &PgPool, run: Option<Uuid>) -> Result<Option<Uuid>> {
    if run.is_some() {
        return Ok(run);
    }
    let latest: Option<(Uuid,)> =
        sqlx::query_as("SELECT id FROM runs ORDER BY started_at DESC LIMIT 1").fetch_optional(pool).await?;
    Ok(latest.map(|r| r.0))
}

/// One row of the `run_progress` view.
#[derive(sqlx::FromRow, Debug, Clone, PartialEq)]
struct Progress {
    documents: i64,
    queued: i64,
    extracting: i64,
    embedding: i64,
    done: i64,
    failed: i64,
    chunks_total: i64,
    chunks_done: i64,
    chunks_per_s: Option<f64>,
    eta_s: Option<f64>,
    ingest_finished_at: Option<chrono::DateTime<chrono::Utc>>,
    finished_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl Progress {
    async fn load(pool: &PgPool, run_id: Uuid) -> Result<Progress> {
        sqlx::query_as(
            "SELECT documents, queued, extracting, embedding, done, failed, chunks_total, chunks_done, chunks_per_s, eta_s,
                    ingest_finished_at, finished_at
             FROM run_progress WHERE run_id = $1",
        )
        .bind(run_id)
        .fetch_optional(pool)
        .await?
        .with_context(|| format!("no run {run_id}"))
    }

    fn line(&self) -> String {
        let eta = match self.eta_s {
            Some(s) if s >= 3600.0 => format!("ETA {:.0}h{:02.0}m", (s / 3600.0).floor(), (s % 3600.0) / 60.0),
            Some(s) => format!("ETA {:.0}m{:02.0}s", (s / 60.0).floor(), s % 60.0),
            None => "ETA -".into(),
        };
        format!(
            "{} documents: {} queued, {} extracting, {} embedding, {} done, {} failed · chunks {}/{} · {:.2} chunks/s · {}{}",
            self.documents,
            self.queued,
            self.extracting,
            self.embedding,
            self.done,
            self.failed,
            self.chunks_done,
            self.chunks_total,
            self.chunks_per_s.unwrap_or(0.0),
            eta,
            if self.ingest_finished_at.is_none() { " · ingest still listing/publishing" } else { "" }
        )
    }
}

/// Follow a run until it is finished: a progress bar on a terminal, a plain line per change
/// (at most every `interval`) otherwise.
async fn watch_run(pool: &PgPool, run_id: Uuid, interval: Duration, mut stop: watch::Receiver<bool>) -> Result<()> {
    use std::io::IsTerminal;
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} chunks\n{msg}",
            )
            .expect("progress template"),
        );
        bar
    });
    let mut last: Option<Progress> = None;
    loop {
        let p = Progress::load(pool, run_id).await?;
        match &bar {
            Some(bar) => {
                bar.set_length(p.chunks_total as u64);
                bar.set_position(p.chunks_done as u64);
                bar.set_message(p.line());
                bar.tick();
            }
            None if last.as_ref() != Some(&p) => {
                println!("{} run {run_id}: {}", chrono::Utc::now().format("%H:%M:%S"), p.line())
            }
            None => {}
        }
        if p.finished_at.is_some() {
            if let Some(bar) = &bar {
                bar.finish_with_message(p.line());
            }
            return Ok(());
        }
        last = Some(p);
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = stop.changed() => return Ok(()),
        }
    }
}

async fn status(pool: &PgPool, run_id: Uuid) -> Result<()> {
    let rows: Vec<(String, String, Option<i32>, Option<i32>, i32, Option<String>)> = sqlx::query_as(
        "SELECT key, status, pages, chunk_count, chunks_done, error FROM documents WHERE run_id = $1 ORDER BY status, key",
    )
    .bind(run_id)
    .fetch_all(pool)
    .await?;
    println!("run {run_id}");
    println!("{:<44} {:<10} {:>5} {:>7}  error", "document", "status", "pages", "chunks");
    for (key, st, pages, count, done, err) in &rows {
        let chunks = match count {
            Some(n) => format!("{done}/{n}"),
            None => "-".into(),
        };
        let pages = pages.map(|p| p.to_string()).unwrap_or_else(|| "-".into());
        let err = err.as_deref().unwrap_or("");
        let key = if key.chars().count() > 44 {
            format!("…{}", key.chars().rev().take(43).collect::<Vec<_>>().into_iter().rev().collect::<String>())
        } else {
            key.clone()
        };
        println!("{key:<44} {st:<10} {pages:>5} {chunks:>7}  {}", err.chars().take(120).collect::<String>());
    }
    let count = |s: &str| rows.iter().filter(|r| r.1 == s).count();
    println!(
        "{} documents: {} done, {} failed, {} in progress",
        rows.len(),
        count("done"),
        count("failed"),
        rows.len() - count("done") - count("failed")
    );
    Ok(())
}

async fn put(bucket: &str, prefix: &str, s3: &S3Args, files: &[PathBuf]) -> Result<()> {
    use docpipe_ingest::s3 as s3api;
    let client =
        s3api::client(&s3api::S3Config { endpoint: s3.s3_endpoint.clone(), region: s3.s3_region.clone() }).await;
    s3api::ensure_bucket(&client, bucket).await?;
    for f in files {
        let name = f.file_name().with_context(|| format!("{} has no file name", f.display()))?.to_string_lossy();
        let body = std::fs::read(f).with_context(|| format!("reading {}", f.display()))?;
        let key = format!("{prefix}{name}");
        s3api::put(&client, bucket, &key, body).await?;
        println!("uploaded s3://{bucket}/{key}");
    }
    Ok(())
}

async fn print_chunks(
    c: &Common,
    chunk_tokens: usize,
    overlap: usize,
    segments: bool,
    files: &[PathBuf],
) -> Result<()> {
    use docpipe_ingest::extract::Extractor;
    use docpipe_ingest::prepare::{DocumentText, ModelInput};
    let input = ModelInput::load(&model_dir(c)?, chunk_tokens, overlap)?;
    let extractor = Extractor { exe: std::env::current_exe()?, limits: ExtractLimits::default() };
    for f in files {
        let pdf = std::fs::read(f).with_context(|| format!("reading {}", f.display()))?;
        let pages = extractor.extract(&pdf).await.with_context(|| format!("extracting {}", f.display()))?;
        let doc = DocumentText::from_pages(&pages.pages);
        let prepared = input.prepare(&doc.text)?;
        if segments {
            for (i, s) in prepared.segments.iter().enumerate() {
                let pages = doc.pages_of(&s.chars);
                let text: String = doc.text.chars().skip(s.chars.start).take(s.chars.len()).collect();
                let line = serde_json::json!({
                    "file": f.display().to_string(), "segment": i, "chars": [s.chars.start, s.chars.end],
                    "tokens": [s.tokens.start, s.tokens.end], "pages": [pages.start, pages.end - 1], "text": text,
                });
                println!("{line}");
            }
            continue;
        }
        for p in prepared.chunks {
            let span = |r: &std::ops::Range<usize>| [r.start, r.end];
            let line = serde_json::json!({
                "file": f.display().to_string(), "index": p.chunk.index, "tokens": span(&p.chunk.tokens),
                "owned": span(&p.chunk.owned), "chars": span(&p.chunk.chars), "input_ids": p.input_ids,
                "segments": p.segments,
            });
            println!("{line}");
        }
    }
    Ok(())
}

async fn search(
    c: &Common,
    w: &WorkerArgs,
    query: &str,
    top: i64,
    bucket: Option<&str>,
    category: Option<&str>,
) -> Result<()> {
    let pool = connect_db(c).await?;
    if let Some(cat) = category {
        let known: Option<(String,)> =
            sqlx::query_as("SELECT name FROM clause_categories WHERE lower(name) = lower($1)")
                .bind(cat)
                .fetch_optional(&pool)
                .await?;
        if known.is_none() {
            let names: Vec<(String,)> =
                sqlx::query_as("SELECT name FROM clause_categories ORDER BY name").fetch_all(&pool).await?;
            let names: Vec<String> = names.into_iter().map(|n| n.0).collect();
            bail!("unknown clause category {cat:?}; known: {}", names.join(", "));
        }
    }
    let model = load_model(c, w)?;
    let q = model.embed_texts(Some("query"), &[query])?.remove(0);
    // An exact scan when filtering by bucket or category: the HNSW index returns the
    // ef_search (40) nearest segments of all buckets, and the filter runs after it, so the
    // segments of a small bucket next to a large one would never come back.
    // (`order` is one of two constants: no input reaches the SQL text)
    let order = if bucket.is_some() || category.is_some() { "score DESC" } else { "s.embedding <=> $1" };
    let sql = format!(
        "SELECT d.key, s.segment_index, s.page_start, 1 - (s.embedding <=> $1) AS score,
                substr(d.text, s.char_start + 1, s.char_end - s.char_start) AS text
         FROM segments s JOIN documents d ON d.id = s.document_id
         WHERE s.embedding IS NOT NULL AND ($3::text IS NULL OR d.bucket = $3)
           AND ($4::text IS NULL OR EXISTS (
                SELECT 1 FROM segment_scores x JOIN clause_categories c ON c.name = x.category
                WHERE x.document_id = s.document_id AND x.segment_index = s.segment_index
                  AND lower(c.name) = lower($4) AND x.score >= c.threshold))
         ORDER BY {order} LIMIT $2"
    );
    let rows: Vec<(String, i32, i32, f64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(pgvector::Vector::from(q))
        .bind(top)
        .bind(bucket)
        .bind(category)
        .fetch_all(&pool)
        .await?;
    if rows.is_empty() {
        println!("no matching segments");
    }
    for (key, segment, page, score, text) in rows {
        let text: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let excerpt: String = text.chars().take(240).collect();
        let more = if excerpt.len() < text.len() { "…" } else { "" };
        println!("{score:.3}  {key}  page {page}  segment {segment}\n       {excerpt}{more}");
    }
    Ok(())
}

/// Make sure the clause categories are embedded (loading the model only when they are not,
/// unless one is given), and apply `--label-threshold` where the categories are zero-shot.
async fn ensure_labels(
    pool: &PgPool,
    a: &LabelArgs,
    model: Option<&SentenceEmbedder>,
    load: impl FnOnce() -> Result<SentenceEmbedder>,
) -> Result<()> {
    if !labels::is_current(pool).await? {
        let n = match model {
            Some(m) => labels::ensure(pool, m, a.label_threshold).await?,
            None => labels::ensure(pool, &load()?, a.label_threshold).await?,
        };
        info!(categories = n, "clause categories embedded");
    }
    let changed = sqlx::query("UPDATE clause_categories SET threshold = $1 WHERE source = 'query' AND threshold <> $1")
        .bind(a.label_threshold)
        .execute(pool)
        .await?
        .rows_affected();
    if changed > 0 {
        info!(threshold = a.label_threshold, "zero-shot presence threshold changed; relabelling");
        labels::relabel_all(pool).await?;
    }
    Ok(())
}

async fn labels_cmd(
    c: &Common,
    w: &WorkerArgs,
    a: &LabelArgs,
    learn: Option<&std::path::Path>,
    bucket: Option<&str>,
) -> Result<()> {
    let pool = connect_db(c).await?;
    labels::backfill_terms(&pool).await?;
    labels::backfill_standalone(&pool, || load_model(c, w)).await?;
    ensure_labels(&pool, a, None, || load_model(c, w)).await?;
    if let Some(path) = learn {
        let bucket = bucket.context("--learn needs --bucket (where the labelled documents are)")?;
        let gold = eval::read_labels(path)?;
        let (docs, _) = eval::load_docs(&pool, bucket, &gold).await?;
        if docs.len() < 2 {
            bail!("found {} labelled documents that are done in bucket {bucket}; need at least 2", docs.len());
        }
        let cats = labels::load(&pool).await?;
        let refs: Vec<&eval::Doc> = docs.iter().collect();
        let scorers = eval::learn(&refs, &cats);
        let learned: Vec<(String, eval::Scorer)> = cats.iter().map(|c| c.name.clone()).zip(scorers).collect();
        let source = format!("learned from {} documents of {}", docs.len(), path.display());
        labels::store_learned(&pool, &learned, &source).await?;
        println!("{source}");
    }
    let rows: Vec<(String, f32, String, i64)> = sqlx::query_as(
        "SELECT c.name, c.threshold, c.source, count(l.*) FILTER (WHERE l.present)
         FROM clause_categories c LEFT JOIN document_labels l ON l.category = c.name
         GROUP BY c.name, c.threshold, c.source ORDER BY c.name",
    )
    .fetch_all(&pool)
    .await?;
    println!("{:<38} {:>9} {:>9}  source", "category", "threshold", "documents");
    for (name, t, source, n) in rows {
        println!("{name:<38} {t:>9.3} {n:>9}  {source}");
    }
    Ok(())
}
