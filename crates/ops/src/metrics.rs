//! Prometheus metrics, health and readiness for every role, on one small HTTP listener.
//!
//! ```text
//! GET /metrics   Prometheus text format (OpenMetrics) — the names are in docs/operations.md
//! GET /healthz   200 while the process serves requests
//! GET /readyz    200 when every component the role registered is ready, else 503 + why
//! ```
//! One process-wide [`Metrics`] ([`get`]) holds every role's metrics, so `docpipe run` (all
//! roles in one process) serves them all on one port. Roles record into it directly; gauges
//! of the process (memory) are read when scraped.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, linear_buckets, Histogram};
use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Label pairs, e.g. `[("stage", "extract"), ("class", "permanent")]`.
pub type Labels = Vec<(&'static str, String)>;

type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

/// Every metric docpipe exports (names without the `docpipe_` prefix the registry adds).
pub struct Metrics {
    registry: Registry,
    // worker: one observation per forward pass unless noted
    pub prefill_seconds: Histogram,
    pub batch_chunks: Histogram,
    pub batch_tokens: Histogram,
    pub padding_ratio: Histogram,
    /// Per chunk: from ingest publishing it to its forward pass starting.
    queue_wait_seconds: Histogram,
    pub tokens: Counter,
    pub padded_tokens: Counter,
    pub tokens_per_second: Gauge<f64, AtomicU64>,
    /// Chunks by outcome: embedded, rejected (permanent), requeued.
    pub chunks: Family<Labels, Counter>,
    pub batch_splits: Counter,
    /// Owned segments by what the standalone pass did: embedded (on their own), skipped (not
    /// a clause candidate).
    pub standalone_segments: Family<Labels, Counter>,
    pub device_memory_peak_bytes: Gauge,
    // ingest
    pub extract_seconds_per_page: Histogram,
    /// Documents by outcome: queued, skipped, failed.
    pub documents_ingested: Family<Labels, Counter>,
    pub chunks_published: Counter,
    pub pages_extracted: Counter,
    /// Pages OCR read, by outcome: used (its text replaced the page's), discarded, failed.
    pub ocr_pages: Family<Labels, Counter>,
    /// Rendering and reading one page by OCR.
    pub ocr_seconds_per_page: Histogram,
    // every stage that records a failure: by stage and class
    pub failures: Family<Labels, Counter>,
    // aggregator
    /// Results by outcome: stored, duplicate, stale, failed.
    pub results: Family<Labels, Counter>,
    store_seconds: Histogram,
    /// Documents finished by status: done, failed.
    pub documents_finished: Family<Labels, Counter>,
    // decoder (the decode engine; fields workers)
    /// Per sequence: from being queued to its first generated token.
    pub decoder_ttft_seconds: Histogram,
    /// Per decode step (every running sequence advances one token).
    pub decoder_inter_token_seconds: Histogram,
    pub decoder_prefill_tokens: Counter,
    pub decoder_prefill_seconds: Counter<f64, AtomicU64>,
    pub decoder_decode_tokens: Counter,
    pub decoder_decode_seconds: Counter<f64, AtomicU64>,
    /// Prompt tokens whose KV blocks were taken from the prefix cache instead of computed.
    pub decoder_cached_prompt_tokens: Counter,
    pub decoder_preemptions: Counter,
    pub decoder_running: Gauge,
    pub decoder_waiting: Gauge,
    pub decoder_kv_blocks_used: Gauge,
    pub decoder_kv_blocks_free: Gauge,
    /// Fields extracted per document, by outcome (answered, none, unknown).
    pub fields_answers: Family<Labels, Counter>,
    pub fields_documents: Family<Labels, Counter>,
    // broker, sampled by every role
    pub queue_messages: Family<Labels, Gauge>,
    pub queue_consumers: Family<Labels, Gauge>,
    // process, read at scrape time
    rss_bytes: Gauge,
    peak_rss_bytes: Gauge,
    stage_seconds: HistogramFamily,
    /// Count and total seconds of each stage (and of `queue_wait`), for `docpipe run --timings`.
    stage_totals: Mutex<BTreeMap<String, (u64, f64)>>,
    ready: Mutex<BTreeMap<&'static str, Result<(), String>>>,
}

/// The stages `docpipe run --timings` prints, in pipeline order, with what one observation
/// covers: those of `stage_seconds`, and `store` (`aggregator_store_seconds`).
pub const STAGES: &[(&str, &str)] = &[
    ("fetch", "ingest: download one document from S3"),
    ("extract", "ingest: text of one document (OCR included)"),
    ("ocr", "ingest: OCR of one document's scanned pages"),
    ("tokenize", "ingest: tokens and chunks of one document"),
    ("publish", "ingest: publish one document's chunks"),
    ("worker_idle", "worker: model thread waiting for a batch"),
    ("chunk_forward", "worker: chunk forward passes of one batch"),
    ("standalone_pass", "worker: segments of one batch embedded on their own"),
    ("worker_blocked", "worker: model thread waiting to hand a batch's results over"),
    ("results_publish", "worker: publish one batch's results and ack its chunks"),
    ("store", "aggregator: store one result (labels of a finished document included)"),
];

fn seconds_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 16)) // 5 ms … ~164 s
}

impl Metrics {
    fn new() -> Self {
        let mut root = Registry::with_prefix("docpipe");
        let m = Self {
            registry: Registry::default(),
            prefill_seconds: Histogram::new(exponential_buckets(0.01, 2.0, 14)),
            batch_chunks: Histogram::new(exponential_buckets(1.0, 2.0, 10)),
            batch_tokens: Histogram::new(exponential_buckets(256.0, 2.0, 12)),
            padding_ratio: Histogram::new(linear_buckets(0.05, 0.05, 19)),
            queue_wait_seconds: Histogram::new(exponential_buckets(0.01, 2.0, 20)),
            tokens: Counter::default(),
            padded_tokens: Counter::default(),
            tokens_per_second: Gauge::default(),
            chunks: Family::default(),
            batch_splits: Counter::default(),
            standalone_segments: Family::default(),
            device_memory_peak_bytes: Gauge::default(),
            extract_seconds_per_page: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            documents_ingested: Family::default(),
            chunks_published: Counter::default(),
            pages_extracted: Counter::default(),
            ocr_pages: Family::default(),
            ocr_seconds_per_page: Histogram::new(exponential_buckets(0.05, 2.0, 12)),
            failures: Family::default(),
            results: Family::default(),
            store_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 14)),
            documents_finished: Family::default(),
            decoder_ttft_seconds: Histogram::new(exponential_buckets(0.05, 2.0, 14)),
            decoder_inter_token_seconds: Histogram::new(exponential_buckets(0.005, 2.0, 14)),
            decoder_prefill_tokens: Counter::default(),
            decoder_prefill_seconds: Counter::default(),
            decoder_decode_tokens: Counter::default(),
            decoder_decode_seconds: Counter::default(),
            decoder_cached_prompt_tokens: Counter::default(),
            decoder_preemptions: Counter::default(),
            decoder_running: Gauge::default(),
            decoder_waiting: Gauge::default(),
            decoder_kv_blocks_used: Gauge::default(),
            decoder_kv_blocks_free: Gauge::default(),
            fields_answers: Family::default(),
            fields_documents: Family::default(),
            queue_messages: Family::default(),
            queue_consumers: Family::default(),
            rss_bytes: Gauge::default(),
            peak_rss_bytes: Gauge::default(),
            stage_seconds: Family::new_with_constructor(seconds_buckets),
            stage_totals: Mutex::new(BTreeMap::new()),
            ready: Mutex::new(BTreeMap::new()),
        };
        m.register_worker(&mut root);
        m.register_stages(&mut root);
        m.register_decoder(&mut root);
        Self { registry: root, ..m }
    }

    /// The worker's metrics, under `docpipe_worker_*`.
    fn register_worker(&self, r: &mut Registry) {
        let m = self;
        r.register("worker_prefill_seconds", "Forward pass (prefill) time per batch", m.prefill_seconds.clone());
        r.register("worker_batch_chunks", "Chunks per forward pass", m.batch_chunks.clone());
        r.register("worker_batch_tokens", "Real (unpadded) tokens per forward pass", m.batch_tokens.clone());
        r.register("worker_padding_ratio", "Padding tokens / padded tokens per forward pass", m.padding_ratio.clone());
        r.register(
            "worker_queue_wait_seconds",
            "Per chunk: from ingest publishing it to its forward pass starting",
            m.queue_wait_seconds.clone(),
        );
        r.register("worker_tokens", "Real tokens embedded", m.tokens.clone());
        r.register("worker_padded_tokens", "Tokens computed including padding", m.padded_tokens.clone());
        r.register(
            "worker_tokens_per_second",
            "Real tokens per second of the last forward pass",
            m.tokens_per_second.clone(),
        );
        r.register("worker_chunks", "Chunks by outcome (embedded, rejected, requeued)", m.chunks.clone());
        r.register(
            "worker_standalone_segments",
            "Owned segments by standalone pass outcome (embedded, skipped: not a clause candidate)",
            m.standalone_segments.clone(),
        );
        r.register(
            "worker_batch_splits",
            "Forward passes that failed (out of memory) and were split",
            m.batch_splits.clone(),
        );
        r.register(
            "worker_device_memory_peak_bytes",
            "Peak device memory in use after a forward pass (CUDA; whole device)",
            m.device_memory_peak_bytes.clone(),
        );
    }

    /// The decode engine's and the fields workers' metrics, under `docpipe_decoder_*` and
    /// `docpipe_fields_*`. Prefill and decode rates are `rate(tokens) / rate(seconds)`.
    fn register_decoder(&self, r: &mut Registry) {
        let m = self;
        r.register("decoder_ttft_seconds", "Time to first token per sequence", m.decoder_ttft_seconds.clone());
        r.register(
            "decoder_inter_token_seconds",
            "Time of one decode step (each running sequence gains a token)",
            m.decoder_inter_token_seconds.clone(),
        );
        r.register("decoder_prefill_tokens", "Prompt tokens computed", m.decoder_prefill_tokens.clone());
        r.register(
            "decoder_prefill_seconds",
            "Time in forward passes that prefilled",
            m.decoder_prefill_seconds.clone(),
        );
        r.register("decoder_decode_tokens", "Tokens generated by decode steps", m.decoder_decode_tokens.clone());
        r.register("decoder_decode_seconds", "Time in decode steps", m.decoder_decode_seconds.clone());
        r.register(
            "decoder_cached_prompt_tokens",
            "Prompt tokens taken from the prefix cache (not computed)",
            m.decoder_cached_prompt_tokens.clone(),
        );
        r.register(
            "decoder_preemptions",
            "Sequences preempted (KV cache full; recomputed later)",
            m.decoder_preemptions.clone(),
        );
        r.register("decoder_running_sequences", "Sequences in the running batch", m.decoder_running.clone());
        r.register("decoder_waiting_sequences", "Sequences waiting to be admitted", m.decoder_waiting.clone());
        r.register("decoder_kv_blocks_used", "KV-cache blocks in use", m.decoder_kv_blocks_used.clone());
        r.register("decoder_kv_blocks_free", "KV-cache blocks free", m.decoder_kv_blocks_free.clone());
        r.register("fields_answers", "Field answers by outcome (answered, none, unknown)", m.fields_answers.clone());
        r.register(
            "fields_documents",
            "Documents by field extraction outcome (done, failed)",
            m.fields_documents.clone(),
        );
    }

    /// Ingest's, the aggregator's, the queues' and the process's metrics.
    fn register_stages(&self, r: &mut Registry) {
        let m = self;
        r.register(
            "ingest_extract_seconds_per_page",
            "PDF text extraction time divided by pages, per document",
            m.extract_seconds_per_page.clone(),
        );
        r.register("ingest_documents", "Documents by outcome (queued, skipped, failed)", m.documents_ingested.clone());
        r.register("ingest_chunks_published", "Chunks published to the chunks queue", m.chunks_published.clone());
        r.register("ingest_pages_extracted", "Pages extracted", m.pages_extracted.clone());
        r.register("ingest_ocr_pages", "Pages read by OCR, by outcome (used, discarded, failed)", m.ocr_pages.clone());
        r.register(
            "ingest_ocr_seconds_per_page",
            "Time to render and read one page by OCR",
            m.ocr_seconds_per_page.clone(),
        );
        r.register("failures", "Recorded failures by stage and class", m.failures.clone());
        r.register(
            "aggregator_results",
            "Chunk results by outcome (stored, duplicate, stale, failed)",
            m.results.clone(),
        );
        r.register(
            "aggregator_store_seconds",
            "Time to store a chunk result (waits during a database outage included)",
            m.store_seconds.clone(),
        );
        r.register(
            "aggregator_documents_finished",
            "Documents finished by status (done, failed)",
            m.documents_finished.clone(),
        );
        r.register("queue_messages", "Messages ready in a RabbitMQ queue (sampled)", m.queue_messages.clone());
        r.register("queue_consumers", "Consumers of a RabbitMQ queue (sampled)", m.queue_consumers.clone());
        r.register("process_resident_memory_bytes", "Resident memory of this process", m.rss_bytes.clone());
        r.register(
            "process_peak_resident_memory_bytes",
            "Peak resident memory of this process",
            m.peak_rss_bytes.clone(),
        );
        r.register(
            "stage_seconds",
            "Time spent in a pipeline stage: per document at ingest (fetch, extract (OCR included), ocr, \
             tokenize, publish), per batch in the worker (worker_idle, chunk_forward, standalone_pass, \
             worker_blocked, results_publish)",
            m.stage_seconds.clone(),
        );
    }

    /// Count a recorded failure.
    pub fn failure(&self, stage: &str, class: &str) {
        self.failures.get_or_create(&vec![("stage", stage.to_string()), ("class", class.to_string())]).inc();
    }

    /// Count one of a labelled counter's outcomes.
    pub fn outcome(family: &Family<Labels, Counter>, outcome: &str) {
        Self::outcomes(family, outcome, 1);
    }

    /// Count `n` of a labelled counter's outcomes.
    pub fn outcomes(family: &Family<Labels, Counter>, outcome: &str, n: u64) {
        family.get_or_create(&vec![("outcome", outcome.to_string())]).inc_by(n);
    }

    /// Time of one unit of work in a pipeline stage (one of [`STAGES`]).
    pub fn stage(&self, stage: &str, seconds: f64) {
        self.stage_seconds.get_or_create(&vec![("stage", stage.to_string())]).observe(seconds);
        self.add_to_total(stage, seconds);
    }

    /// Time to store one result in the aggregator (the `store` stage of the timings).
    pub fn store_time(&self, seconds: f64) {
        self.store_seconds.observe(seconds);
        self.add_to_total("store", seconds);
    }

    /// A chunk's wait from ingest publishing it to its forward pass.
    pub fn queue_wait(&self, seconds: f64) {
        self.queue_wait_seconds.observe(seconds);
        self.add_to_total("queue_wait", seconds);
    }

    fn add_to_total(&self, stage: &str, seconds: f64) {
        if let Ok(mut t) = self.stage_totals.lock() {
            let e = t.entry(stage.to_string()).or_insert((0, 0.0));
            *e = (e.0 + 1, e.1 + seconds);
        }
    }

    /// How often a stage (or `queue_wait`) was timed in this process, and its total seconds;
    /// `None` if never.
    pub fn stage_total(&self, stage: &str) -> Option<(u64, f64)> {
        self.stage_totals.lock().ok()?.get(stage).copied()
    }

    /// The text exposition, with the process gauges read now.
    pub fn render(&self) -> String {
        if let Some((rss, peak)) = process_memory() {
            self.rss_bytes.set(rss as i64);
            self.peak_rss_bytes.set(peak as i64);
        }
        let mut out = String::new();
        // writing to a String cannot fail
        let _ = encode(&mut out, &self.registry);
        out
    }

    /// Mark a component of this process ready or not (`Err(why)`); `/readyz` answers 200 only
    /// when every registered component is ready.
    pub fn set_ready(&self, component: &'static str, state: Result<(), String>) {
        if let Ok(mut r) = self.ready.lock() {
            r.insert(component, state);
        }
    }

    /// `Ok` when ready, else the components that are not, with why.
    pub fn readiness(&self) -> Result<(), String> {
        let r = self.ready.lock().map_err(|_| "readiness lock poisoned".to_string())?;
        if r.is_empty() {
            return Err("starting".into());
        }
        let waiting: Vec<String> =
            r.iter().filter_map(|(c, s)| s.as_ref().err().map(|why| format!("{c}: {why}"))).collect();
        if waiting.is_empty() {
            Ok(())
        } else {
            Err(waiting.join("; "))
        }
    }
}

/// The process's metrics.
pub fn get() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::new)
}

/// Resident and peak resident (`VmHWM`) memory of this process in bytes, from
/// `/proc/self/status` (Linux).
pub fn process_memory() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
    };
    Some((kb("VmRSS:")? * 1024, kb("VmHWM:")? * 1024))
}

/// Longest a scrape may take before its connection is dropped.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause after a failed accept (out of file descriptors, say) before the next.
const ACCEPT_RETRY: Duration = Duration::from_millis(200);

/// Bind `addr` and serve `/metrics`, `/healthz` and `/readyz` until the process exits. The
/// error names the address (a port in use, say); callers decide whether that is fatal.
pub async fn serve(addr: SocketAddr) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("binding the metrics listener on {addr}: {e}")))?;
    let local = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    tokio::spawn(async move {
                        let _ = tokio::time::timeout(REQUEST_TIMEOUT, respond(stream)).await;
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "metrics listener: accept failed");
                    tokio::time::sleep(ACCEPT_RETRY).await;
                }
            }
        }
    });
    Ok(local)
}

/// Answer one HTTP/1.x request and close the connection.
async fn respond(mut stream: TcpStream) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 8192 {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let line = String::from_utf8_lossy(&buf);
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let m = get();
    let (status, content_type, body) = match (method, path) {
        ("GET" | "HEAD", "/metrics") => {
            ("200 OK", "application/openmetrics-text; version=1.0.0; charset=utf-8", m.render())
        }
        ("GET" | "HEAD", "/healthz") => ("200 OK", "text/plain; charset=utf-8", "ok\n".to_string()),
        ("GET" | "HEAD", "/readyz") => match m.readiness() {
            Ok(()) => ("200 OK", "text/plain; charset=utf-8", "ready\n".to_string()),
            Err(why) => ("503 Service Unavailable", "text/plain; charset=utf-8", format!("not ready: {why}\n")),
        },
        ("GET" | "HEAD", _) => {
            ("404 Not Found", "text/plain; charset=utf-8", "try /metrics, /healthz or /readyz\n".into())
        }
        _ => ("405 Method Not Allowed", "text/plain; charset=utf-8", "GET only\n".to_string()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    if method != "HEAD" {
        stream.write_all(body.as_bytes()).await?;
    }
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get_path(addr: SocketAddr, path: &str) -> (String, String) {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        let (head, body) = out.split_once("\r\n\r\n").unwrap();
        (head.lines().next().unwrap().to_string(), body.to_string())
    }

    #[test]
    fn stages_add_up_for_timings_and_reach_the_exposition() {
        let m = Metrics::new();
        assert_eq!(m.stage_total("chunk_forward"), None);
        m.stage("chunk_forward", 1.5);
        m.stage("chunk_forward", 0.25);
        m.queue_wait(2.0);
        assert_eq!(m.stage_total("chunk_forward"), Some((2, 1.75)));
        assert_eq!(m.stage_total("queue_wait"), Some((1, 2.0)));
        m.store_time(0.5);
        assert_eq!(m.stage_total("store"), Some((1, 0.5)));
        let text = m.render();
        assert!(text.contains("docpipe_stage_seconds_count{stage=\"chunk_forward\"} 2"), "{text}");
        assert!(text.contains("docpipe_worker_queue_wait_seconds_count 1"), "{text}");
        assert!(text.contains("docpipe_aggregator_store_seconds_count 1"), "{text}");
        assert!(!text.contains("stage=\"store\""), "one histogram per measurement: {text}");
        assert!(STAGES.iter().any(|(s, _)| *s == "chunk_forward"));
    }

    #[tokio::test]
    async fn serves_metrics_health_and_readiness() {
        let addr = serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let m = get();
        m.prefill_seconds.observe(0.25);
        m.failure("extract", "permanent");
        Metrics::outcome(&m.chunks, "embedded");

        let (status, body) = get_path(addr, "/metrics").await;
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert!(body.contains("docpipe_worker_prefill_seconds_count 1"), "{body}");
        assert!(body.contains(r#"docpipe_failures_total{stage="extract",class="permanent"} 1"#), "{body}");
        assert!(body.contains(r#"docpipe_worker_chunks_total{outcome="embedded"} 1"#), "{body}");
        assert!(body.contains("docpipe_process_peak_resident_memory_bytes "), "{body}");
        assert!(body.ends_with("# EOF\n"));

        assert_eq!(get_path(addr, "/healthz").await.0, "HTTP/1.1 200 OK");
        let (status, body) = get_path(addr, "/readyz").await;
        assert_eq!(status, "HTTP/1.1 503 Service Unavailable");
        assert_eq!(body, "not ready: starting\n");
        m.set_ready("rabbitmq", Err("connecting to 127.0.0.1:5672".into()));
        m.set_ready("postgres", Ok(()));
        assert_eq!(get_path(addr, "/readyz").await.1, "not ready: rabbitmq: connecting to 127.0.0.1:5672\n");
        m.set_ready("rabbitmq", Ok(()));
        assert_eq!(get_path(addr, "/readyz").await, ("HTTP/1.1 200 OK".to_string(), "ready\n".to_string()));
        assert_eq!(get_path(addr, "/nope").await.0, "HTTP/1.1 404 Not Found");
    }
}
