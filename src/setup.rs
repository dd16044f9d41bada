//! What several subcommands set up the same way: the metrics listener, Postgres, the broker,
//! the model and the worker's batch budget, the ingestor, the clause categories.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use docpipe_bus::{Broker, Publisher, Topology};
use docpipe_contract::defaults;
use docpipe_ingest::{IngestConfig, Ingestor};
use docpipe_model::{calibrate::calibrate_budget, device, SentenceEmbedder};
use docpipe_store::PgPool;
use docpipe_text::extract::ExtractLimits;
use docpipe_text::ModelDir;
use docpipe_worker::{Standalone, WorkerConfig};
use tracing::{info, warn};

use crate::cli::{Common, IngestArgs, LabelArgs, WorkerArgs};

/// Start the `/metrics`, `/healthz`, `/readyz` listener. A port already in use is logged and
/// the role runs without it (several roles on one host); a malformed address is an error.
pub async fn serve_metrics(addr: &str) -> Result<()> {
    if addr.is_empty() || addr == "off" {
        return Ok(());
    }
    let parsed: std::net::SocketAddr = addr
        .parse()
        .with_context(|| format!("DOCPIPE_METRICS_ADDR {addr:?} is not an address like 0.0.0.0:9464 (or off)"))?;
    match docpipe_ops::metrics::serve(parsed).await {
        Ok(bound) => info!(addr = %bound, "serving /metrics, /healthz and /readyz"),
        Err(e) => warn!(error = %e, "metrics, health and readiness are not served"),
    }
    Ok(())
}

/// Postgres, migrated.
pub async fn db(c: &Common) -> Result<PgPool> {
    Ok(docpipe_store::open(&c.database_url, defaults::PATIENCE).await?)
}

/// Where the broker is and how the queues are named.
pub fn broker(c: &Common) -> Broker {
    Broker { url: c.amqp_url.clone(), queue_prefix: c.queue_prefix.clone(), patience: defaults::PATIENCE }
}

/// Connect to RabbitMQ as `name` and declare the topology.
pub async fn amqp(c: &Common, name: &str) -> Result<(lapin::Connection, Topology)> {
    Ok(docpipe_bus::connect_and_declare(&broker(c), name).await?)
}

pub fn model_dir(c: &Common) -> Result<ModelDir> {
    Ok(ModelDir::resolve(c.model.as_deref())?)
}

/// The extractor child's binary ([`docpipe_text::extract::extractor_exe`]).
pub fn extractor_exe() -> Result<std::path::PathBuf> {
    let exe = std::env::current_exe().context("locating the docpipe binary for extraction")?;
    let chosen = docpipe_text::extract::extractor_exe(&exe);
    tracing::debug!(extractor = %chosen.display(), "text extraction");
    Ok(chosen)
}

pub async fn ingestor(
    c: &Common,
    a: &IngestArgs,
    pool: PgPool,
    conn_name: &str,
    topology: Topology,
) -> Result<Ingestor> {
    let mut cfg = IngestConfig::new(model_dir(c)?, extractor_exe()?);
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
    cfg.ocr = a.ocr.config(a.extract_memory_mb);
    let s3 = docpipe_ingest::s3::client(&docpipe_ingest::s3::S3Config {
        endpoint: a.s3.s3_endpoint.clone(),
        region: a.s3.s3_region.clone(),
    })
    .await;
    // its own connection, re-established if the broker restarts mid-run
    let publisher = Publisher::reconnecting(&c.amqp_url, &format!("{conn_name}-publisher"), defaults::PATIENCE).await?;
    let ingestor = Ingestor::new(cfg, s3, pool, publisher, topology)?;
    ingestor.check_ocr().await?;
    Ok(ingestor)
}

pub fn load_model(c: &Common, w: &WorkerArgs) -> Result<SentenceEmbedder> {
    load_model_on(c, &w.device, &w.dtype, w.threads)
}

pub fn load_model_on(c: &Common, device: &str, dtype: &str, threads: i32) -> Result<SentenceEmbedder> {
    let dir = model_dir(c)?;
    let m = docpipe_ops::metrics::get();
    m.set_ready("model", Err(format!("loading {}", dir.path().display())));
    let (device, dtype, path) = (device.to_string(), dtype.to_string(), dir.path().to_path_buf());
    // Every libtorch call of the load (the precision probe's GEMMs with `auto`, the weights'
    // conversion) runs on a thread of its own that then exits, taking with it the OpenMP
    // thread pool those calls started. Left beside the model thread's pool, it makes libgomp
    // count more threads than cores and give up spinning at its barriers almost at once: the
    // model's two threads then sleep and wake thousands of times a second, and the pipeline's
    // forward passes ran at 0.8 of forward_bench's rate (docs/benchmarks.md).
    let load = move || -> Result<SentenceEmbedder> {
        let dev = device::resolve(device.parse().map_err(anyhow::Error::msg)?)?;
        let precision = device::precision(&dtype, dev)?;
        if threads > 0 {
            device::set_threads(threads);
        }
        let t0 = Instant::now();
        let model = SentenceEmbedder::load(&path, dev, precision)
            .with_context(|| format!("loading model {}", path.display()))?;
        info!(model = %model.label(), device = ?dev, seconds = t0.elapsed().as_secs_f64(), "model loaded");
        Ok(model)
    };
    let model = std::thread::Builder::new()
        .name("docpipe-load".into())
        .spawn(load)
        .context("starting the model's loading thread")?
        .join()
        .map_err(|_| anyhow::anyhow!("the model's loading thread panicked"))??;
    m.set_ready("model", Ok(()));
    Ok(model)
}

pub fn worker_config(w: &WorkerArgs, model: &SentenceEmbedder) -> Result<WorkerConfig> {
    let max_batch_tokens = match w.max_batch_tokens.as_str() {
        "auto" if model.device().is_cuda() => {
            if !(w.memory_fraction > 0.0 && w.memory_fraction <= 1.0) {
                bail!("--memory-fraction must be in (0, 1], not {}", w.memory_fraction);
            }
            let cap = w.prefetch as usize * model.max_len();
            let c = calibrate_budget(model, model.max_len(), w.memory_fraction, cap)
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
        "auto" => defaults::CPU_BATCH_TOKENS,
        n => match n.parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => bail!("--max-batch-tokens must be a positive number of tokens or auto, not {n:?}"),
        },
    };
    Ok(WorkerConfig {
        max_batch_tokens,
        max_wait: Duration::from_millis(w.max_wait_ms),
        prefetch: w.prefetch,
        standalone: standalone(w, &model.label())?,
    })
}

/// The worker's standalone pass from `--standalone-segments` / `--standalone-margin`; the
/// candidate rule reads the shipped clause scorer, which must have been trained on `model`'s
/// embeddings (otherwise every segment is embedded, with a warning).
fn standalone(w: &WorkerArgs, model: &str) -> Result<Standalone> {
    use docpipe_clauses::candidates::Candidates;
    Ok(match w.standalone_segments.as_str() {
        "all" | "true" => Standalone::All,
        "none" | "false" => Standalone::Off,
        _ => {
            if !w.standalone_margin.is_finite() {
                bail!("--standalone-margin must be a finite number of log-odds, not {}", w.standalone_margin);
            }
            let (artifact, _) = docpipe_clauses::artifact::builtin()?;
            let model = model.split('/').next().unwrap_or(model);
            if artifact.model != model {
                warn!(
                    scorer = %artifact.name, trained_on = %artifact.model, model,
                    "the shipped clause scorer was trained on another model's embeddings: every segment is embedded on its own"
                );
                return Ok(Standalone::All);
            }
            let c = Candidates::new(&artifact, w.standalone_margin);
            Standalone::Candidates(Arc::new(move |index, e| c.keeps(index as usize, e)))
        }
    })
}

/// Make sure the clause categories are embedded (loading the model only when they are not,
/// unless one is given), and apply `--label-threshold` where the categories are zero-shot.
pub async fn ensure_labels(
    pool: &PgPool,
    a: &LabelArgs,
    model: Option<&SentenceEmbedder>,
    load: impl FnOnce() -> Result<SentenceEmbedder>,
) -> Result<()> {
    use docpipe_clauses::stored;
    if !stored::is_current(pool).await? {
        let n = match model {
            Some(m) => stored::ensure(pool, m, a.label_threshold).await?,
            None => stored::ensure(pool, &load()?, a.label_threshold).await?,
        };
        info!(categories = n, "clause categories embedded");
    }
    let artifact = a.clause_scorer.load().with_context(|| format!("loading the clause scorer {}", a.clause_scorer))?;
    let applied =
        stored::apply_artifact(pool, artifact.as_ref().map(|(x, sha)| (x, sha.as_str())), a.label_threshold).await?;
    if let Some(why) = &applied.refused {
        warn!(reason = %why, "clause scorer not applied: every category is zero-shot");
    }
    if applied.changed > 0 {
        info!(covered = applied.covered, changed = applied.changed, "clause scorer applied; documents relabelled");
    }
    if !applied.zero_shot.is_empty() {
        info!(categories = ?applied.zero_shot, "categories without a learned scorer fall back to zero-shot");
    }
    if !applied.learned_here.is_empty() {
        info!(categories = ?applied.learned_here, "categories learned here (labels --learn) keep their scorers");
    }
    if stored::set_zero_shot_threshold(pool, a.label_threshold).await? {
        info!(threshold = a.label_threshold, "zero-shot presence threshold changed; documents relabelled");
    }
    Ok(())
}

/// The model, shared by the worker role's model thread.
pub type SharedModel = Arc<std::sync::Mutex<SentenceEmbedder>>;
