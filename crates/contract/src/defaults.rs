//! The defaults every role and the command line share, each defined here once.

use std::time::Duration;

/// Model sequence length per chunk, prompt and special tokens included.
pub const CHUNK_TOKENS: usize = docpipe_chunker::DEFAULT_WINDOW;
/// Tokens shared by neighbouring chunks.
pub const CHUNK_OVERLAP: usize = docpipe_chunker::DEFAULT_OVERLAP;
/// Padded tokens per forward pass on the CPU: four full chunks. Larger CPU batches add
/// latency, not throughput, and memory is rarely what limits them.
pub const CPU_BATCH_TOKENS: usize = 8192;
/// Longest wait for more chunks once a worker's batch has one.
pub const MAX_WAIT: Duration = Duration::from_millis(75);
/// Unacknowledged chunk deliveries a worker holds (the next batches wait there).
pub const WORKER_PREFETCH: u16 = 32;
/// Unacknowledged result deliveries an aggregator holds.
pub const AGGREGATOR_PREFETCH: u16 = 64;
/// Results an aggregator stores at the same time (each on its own connection of the pool):
/// Postgres's work per result (mostly the vector indexes' inserts) runs in parallel, and a
/// document's results wait for each other only to count themselves in.
pub const STORE_CONCURRENCY: usize = 4;
/// Unacknowledged S3 event deliveries `ingest --listen` holds.
pub const LISTEN_PREFETCH: u16 = 4;
/// Deliveries of one message after which the broker dead-letters it.
pub const DELIVERY_LIMIT: u32 = 5;
/// Larger PDFs fail with a reason.
pub const MAX_PDF_MB: u64 = 100;
/// Documents with more pages fail with a reason.
pub const MAX_PAGES: usize = 2000;
/// Documents with more tokens fail with a reason (a limit on one document's share of a run).
pub const MAX_TOKENS: usize = 2_000_000;
/// Wall-clock limit for extracting one PDF, in seconds.
pub const EXTRACT_TIMEOUT_S: u64 = 120;
/// Address-space limit of the extraction child process, in MiB.
pub const EXTRACT_MEMORY_MB: u64 = 4096;
/// OCR: `auto` reads the pages without a usable text layer.
pub const OCR_MODE: &str = "auto";
/// Tesseract languages, `+`-separated.
pub const OCR_LANGUAGES: &str = "eng";
/// Resolution pages are rendered at for OCR.
pub const OCR_DPI: u32 = 200;
/// Longest side of a page rendered for OCR, in pixels (20 inches at 200 DPI); larger pages are
/// rendered at a lower resolution.
pub const OCR_MAX_SIDE_PX: u32 = 4000;
/// Wall-clock limit for rendering and reading one page, in seconds.
pub const OCR_PAGE_TIMEOUT_S: u64 = 90;
/// Pages read by OCR at the same time by one process (each uses one core).
pub const OCR_CONCURRENCY: u16 = 1;
/// Pages of one document read by OCR at most (about 15 minutes of one core at 200 DPI).
pub const OCR_MAX_PAGES: usize = 300;
/// OCR text with a lower mean word confidence (0–100) is noise, not text, and is not used.
pub const OCR_MIN_CONFIDENCE: f32 = 30.0;
/// Documents whose OCR pages have a lower mean word confidence are processed and flagged.
pub const OCR_FLAG_BELOW: f32 = 70.0;
/// Documents extracted at the same time by one ingest.
pub const INGEST_CONCURRENCY: usize = 2;
/// How long a role waits for Postgres or RabbitMQ to become reachable at start.
pub const PATIENCE: Duration = Duration::from_secs(60);
/// Longest a `run` or `ingest --once` waits for its documents, in seconds.
pub const RUN_TIMEOUT_S: u64 = 6 * 3600;
