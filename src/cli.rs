//! The command line: every flag with its environment variable (`DOCPIPE_*`) and default
//! (the defaults themselves live in `docpipe_contract::defaults`).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use docpipe_contract::defaults;
use uuid::Uuid;

#[derive(Parser)]
#[command(name = "docpipe", version, about = "Contracts in S3 → chunked, embedded rows in Postgres")]
pub struct Cli {
    #[command(flatten)]
    pub common: Common,
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Args, Clone)]
pub struct Common {
    /// RabbitMQ URL (amqps:// for TLS).
    #[arg(
        long,
        global = true,
        env = "DOCPIPE_AMQP_URL",
        default_value = "amqp://guest:guest@127.0.0.1:5672/%2f",
        hide_env_values = true
    )]
    pub amqp_url: String,
    /// Postgres URL (`?sslmode=require` or `verify-full&sslrootcert=…` for TLS).
    #[arg(
        long,
        global = true,
        env = "DOCPIPE_DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/docpipe",
        hide_env_values = true
    )]
    pub database_url: String,
    /// Prefix of the RabbitMQ queue names (`P.chunks`, `P.results`, ...).
    #[arg(long, global = true, env = "DOCPIPE_QUEUE_PREFIX", default_value = "docpipe")]
    pub queue_prefix: String,
    /// Results the aggregator (`aggregate`, `run`) stores at the same time, each on its own
    /// database connection.
    #[arg(long, global = true, env = "DOCPIPE_STORE_CONCURRENCY", default_value_t = defaults::STORE_CONCURRENCY, value_parser = clap::value_parser!(usize))]
    pub store_concurrency: usize,
    /// sentence-transformers model directory.
    #[arg(long, global = true, env = "DOCPIPE_MODEL")]
    pub model: Option<PathBuf>,
    /// TOML config file; its keys are the environment variables' names in lower case without
    /// `DOCPIPE_` (precedence: flag > environment > file > default).
    #[arg(long, global = true, env = "DOCPIPE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address of the HTTP listener for `/metrics`, `/healthz` and `/readyz` of the long-running
    /// roles (ingest, worker, aggregate, run, retry-failed); `off` disables it, port 0 picks a
    /// free port (logged).
    #[arg(long, global = true, env = "DOCPIPE_METRICS_ADDR", default_value = "0.0.0.0:9464")]
    pub metrics_addr: String,
    /// Log format: text or json.
    #[arg(long, global = true, env = "DOCPIPE_LOG_FORMAT", default_value = "text")]
    pub log_format: String,
}

#[derive(Args, Clone)]
pub struct S3Args {
    /// S3 endpoint for S3-compatible servers (MinIO, SeaweedFS); unset for AWS.
    #[arg(long, env = "DOCPIPE_S3_ENDPOINT")]
    pub s3_endpoint: Option<String>,
    #[arg(long, env = "AWS_REGION", default_value = "us-east-1")]
    pub s3_region: String,
}

#[derive(Args, Clone)]
pub struct SourceArgs {
    #[arg(long, env = "DOCPIPE_BUCKET")]
    pub bucket: String,
    #[arg(long, env = "DOCPIPE_PREFIX", default_value = "")]
    pub prefix: String,
}

#[derive(Args, Clone)]
pub struct IngestArgs {
    #[command(flatten)]
    pub s3: S3Args,
    /// Model sequence length per chunk, prompt and special tokens included.
    #[arg(long, env = "DOCPIPE_CHUNK_TOKENS", default_value_t = defaults::CHUNK_TOKENS)]
    pub chunk_tokens: usize,
    /// Tokens shared by neighbouring chunks.
    #[arg(long, env = "DOCPIPE_CHUNK_OVERLAP", default_value_t = defaults::CHUNK_OVERLAP)]
    pub overlap: usize,
    /// Larger PDFs fail with a reason.
    #[arg(long, env = "DOCPIPE_MAX_PDF_MB", default_value_t = defaults::MAX_PDF_MB)]
    pub max_pdf_mb: u64,
    #[arg(long, env = "DOCPIPE_MAX_PAGES", default_value_t = defaults::MAX_PAGES)]
    pub max_pages: usize,
    #[arg(long, env = "DOCPIPE_MAX_TOKENS", default_value_t = defaults::MAX_TOKENS)]
    pub max_tokens: usize,
    /// Wall-clock limit for extracting one PDF.
    #[arg(long, env = "DOCPIPE_EXTRACT_TIMEOUT_S", default_value_t = defaults::EXTRACT_TIMEOUT_S)]
    pub extract_timeout_s: u64,
    /// Address-space limit of the extraction child process.
    #[arg(long, env = "DOCPIPE_EXTRACT_MEMORY_MB", default_value_t = defaults::EXTRACT_MEMORY_MB)]
    pub extract_memory_mb: u64,
    /// Documents extracted at the same time.
    #[arg(long, env = "DOCPIPE_INGEST_CONCURRENCY", default_value_t = defaults::INGEST_CONCURRENCY)]
    pub concurrency: usize,
    #[command(flatten)]
    pub ocr: OcrArgs,
}

#[derive(Args, Clone)]
pub struct OcrArgs {
    /// OCR of scanned pages: auto (pages without a usable text layer), off, force (every page).
    #[arg(long = "ocr", env = "DOCPIPE_OCR", default_value = defaults::OCR_MODE)]
    pub ocr_mode: docpipe_text::ocr::OcrMode,
    /// Tesseract languages, `+`-separated (eng, eng+fra, deu); each needs tesseract-ocr-<lang>.
    #[arg(long = "ocr-lang", env = "DOCPIPE_OCR_LANG", default_value = defaults::OCR_LANGUAGES)]
    pub ocr_languages: String,
    /// Resolution pages are rendered at for OCR (72-1200).
    #[arg(long = "ocr-dpi", env = "DOCPIPE_OCR_DPI", default_value_t = defaults::OCR_DPI,
          value_parser = clap::value_parser!(u32).range(72..=1200))]
    pub ocr_dpi: u32,
    /// Wall-clock limit for rendering and reading one page.
    #[arg(long = "ocr-page-timeout-s", env = "DOCPIPE_OCR_PAGE_TIMEOUT_S", default_value_t = defaults::OCR_PAGE_TIMEOUT_S,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub ocr_page_timeout_s: u64,
    /// Pages read by OCR at the same time (each takes one core from the model threads).
    #[arg(long = "ocr-concurrency", env = "DOCPIPE_OCR_CONCURRENCY", default_value_t = defaults::OCR_CONCURRENCY,
          value_parser = clap::value_parser!(u16).range(1..))]
    pub ocr_concurrency: u16,
    /// Pages of one document read by OCR at most; past it, pages stay without text and the
    /// document is flagged.
    #[arg(long = "ocr-max-pages", env = "DOCPIPE_OCR_MAX_PAGES", default_value_t = defaults::OCR_MAX_PAGES)]
    pub ocr_max_pages: usize,
    /// Documents whose OCR text has a lower mean word confidence (0-100) are flagged.
    #[arg(long = "ocr-flag-below", env = "DOCPIPE_OCR_FLAG_BELOW", default_value_t = defaults::OCR_FLAG_BELOW)]
    pub ocr_flag_below: f32,
}

impl OcrArgs {
    /// A name for the settings that change the text OCR reads (mode, languages, resolution,
    /// pages per document), to keep texts read with other settings apart from those read with
    /// the defaults: empty for the defaults, else `-ocr-force-eng-200dpi-3p`.
    pub fn text_variant(&self) -> String {
        let default_mode = defaults::OCR_MODE.parse::<docpipe_text::ocr::OcrMode>().ok() == Some(self.ocr_mode);
        if default_mode
            && self.ocr_languages == defaults::OCR_LANGUAGES
            && self.ocr_dpi == defaults::OCR_DPI
            && self.ocr_max_pages == defaults::OCR_MAX_PAGES
        {
            return String::new();
        }
        format!(
            "-ocr-{}-{}-{}dpi-{}p",
            self.ocr_mode,
            self.ocr_languages.replace('+', "_"),
            self.ocr_dpi,
            self.ocr_max_pages
        )
    }

    /// The OCR settings, with the extraction memory limit for its tools.
    pub fn config(&self, memory_mb: u64) -> docpipe_text::ocr::OcrConfig {
        docpipe_text::ocr::OcrConfig {
            mode: self.ocr_mode,
            languages: self.ocr_languages.clone(),
            dpi: self.ocr_dpi,
            page_timeout: std::time::Duration::from_secs(self.ocr_page_timeout_s),
            concurrency: self.ocr_concurrency as usize,
            max_pages: self.ocr_max_pages,
            memory_bytes: memory_mb << 20,
            flag_below: self.ocr_flag_below,
            ..Default::default()
        }
    }
}

#[derive(Args, Clone)]
pub struct WorkerArgs {
    /// auto, cpu, cuda or cuda:N.
    #[arg(long, env = "DOCPIPE_DEVICE", default_value = "auto")]
    pub device: String,
    /// auto (bf16 on CUDA, on CPUs with AMX, and where a bf16 GEMM times clearly faster than
    /// fp32 at start; else fp32), fp32, bf16, fp16.
    #[arg(long, env = "DOCPIPE_DTYPE", default_value = "auto")]
    pub dtype: String,
    /// Padded tokens per forward pass, or `auto`: on CUDA derived from the free memory by a
    /// calibration pass at start (see --memory-fraction), on the CPU 8192 (four full chunks).
    #[arg(long, env = "DOCPIPE_MAX_BATCH_TOKENS", default_value = "auto")]
    pub max_batch_tokens: String,
    /// With `--max-batch-tokens auto` on CUDA: the share of the free device memory a forward
    /// pass may use.
    #[arg(long, env = "DOCPIPE_MEMORY_FRACTION", default_value_t = 0.5)]
    pub memory_fraction: f64,
    /// Longest wait for more chunks once a batch has one (none once it holds every chunk of
    /// its documents and no more are arriving).
    #[arg(long, env = "DOCPIPE_MAX_WAIT_MS", default_value_t = defaults::MAX_WAIT.as_millis() as u64)]
    pub max_wait_ms: u64,
    #[arg(long, env = "DOCPIPE_PREFETCH", default_value_t = defaults::WORKER_PREFETCH)]
    pub prefetch: u16,
    /// Which segments are also embedded on their own, for clause labels: `none` (labels score
    /// the contextual embeddings the chunk pass computes anyway, which the shipped scorer was
    /// learned from), `candidates` (those the shipped clause scorer finds likely for some
    /// category from their contextual embedding, see --standalone-margin; 5–8 % of them), or
    /// `all` (about as many model tokens again, in short sequences). `true` and `false` are
    /// read as `all` and `none`.
    #[arg(long, env = "DOCPIPE_STANDALONE_SEGMENTS", default_value = "none",
          value_parser = ["all", "candidates", "none", "true", "false"])]
    pub standalone_segments: String,
    /// With `--standalone-segments candidates`: a segment is embedded on its own when some
    /// category scores it, from its contextual embedding, at least this far (in log-odds)
    /// above that category's presence threshold. Lower embeds more.
    #[arg(long, env = "DOCPIPE_STANDALONE_MARGIN", default_value_t = docpipe_clauses::candidates::DEFAULT_MARGIN,
          allow_negative_numbers = true)]
    pub standalone_margin: f32,
    /// Intra-op threads for CPU inference (0 = libtorch's default).
    #[arg(long, env = "DOCPIPE_THREADS", default_value_t = 0)]
    pub threads: i32,
}

#[derive(Args, Clone)]
pub struct LabelArgs {
    /// Presence threshold of the zero-shot clause categories: a document has a clause when its
    /// best segment scores at least this (learned categories keep their own thresholds).
    #[arg(long, env = "DOCPIPE_LABEL_THRESHOLD", default_value_t = docpipe_clauses::DEFAULT_THRESHOLD)]
    pub label_threshold: f32,
    /// Learned clause scorers applied to the categories: `builtin` (the scorer shipped with
    /// docpipe, trained on 430 CUAD contracts), a scorer file written by `train-clauses`, or
    /// `none` (zero-shot). Categories learned with `labels --learn` keep their own.
    #[arg(long, env = "DOCPIPE_CLAUSE_SCORER", default_value = "builtin")]
    pub clause_scorer: docpipe_clauses::artifact::Source,
}

#[derive(Subcommand)]
pub enum Cmd {
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
        #[arg(long, env = "DOCPIPE_RUN_TIMEOUT_S", default_value_t = defaults::RUN_TIMEOUT_S)]
        run_timeout_s: u64,
    },
    /// Embed chunks from RabbitMQ.
    Worker {
        #[command(flatten)]
        worker: WorkerArgs,
    },
    /// Store results in Postgres and finish documents (with their clause labels).
    Aggregate {
        #[arg(long, env = "DOCPIPE_PREFETCH", default_value_t = defaults::AGGREGATOR_PREFETCH)]
        prefetch: u16,
        /// Queue each done document for field extraction on P.fields (run `docpipe
        /// fields-worker` to take them).
        #[arg(long, env = "DOCPIPE_FIELDS")]
        fields: bool,
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
        #[arg(long, env = "DOCPIPE_RUN_TIMEOUT_S", default_value_t = defaults::RUN_TIMEOUT_S)]
        run_timeout_s: u64,
        /// At the end, print where the time went: each pipeline stage's count and seconds in
        /// this process, and the run's document tokens per second (`make bench-pipeline`).
        #[arg(long)]
        timings: bool,
        /// Also extract the contract fields (a fields worker with the decoder in this
        /// process); the run ends when every document's fields are done or failed too.
        #[arg(long, env = "DOCPIPE_FIELDS")]
        fields: bool,
        #[arg(long, env = "DOCPIPE_FIELDS_GROUP", default_value_t = 4)]
        fields_group: usize,
        #[command(flatten)]
        decoder: crate::cmd::generate::DecoderArgs,
    },
    /// Ingest again only the failed documents (of run R, or all of them), and queue again the
    /// field extraction of done documents whose extraction failed; needs a worker and an
    /// aggregator (and a fields worker) running, like `ingest`.
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
    /// Recall@1/@5 of labelled clauses and presence precision/recall, per category, of the
    /// clause scorer (`--clause-scorer`, the shipped one by default) or, with `--folds N`, of
    /// scorers learned under cross-validation on the labelled documents themselves; the last
    /// line is `recall@5 X.XX`.
    Eval {
        #[arg(long)]
        labels: PathBuf,
        /// Bucket holding the labelled documents, run through the pipeline (matched by file
        /// name).
        #[arg(long, env = "DOCPIPE_BUCKET", required_unless_present = "pdfs")]
        bucket: Option<String>,
        /// Instead of a bucket: a folder of the labelled PDFs, each segment embedded on its own
        /// here exactly as the worker's standalone pass does (cached; no services needed).
        #[arg(long, conflicts_with = "bucket")]
        pdfs: Option<PathBuf>,
        /// 0: score with `--clause-scorer`; N ≥ 2: learn and score under N-fold
        /// cross-validation by document.
        #[arg(long, default_value_t = 0)]
        folds: usize,
        /// Segment embeddings scored: `labelled` (standalone where stored, as labelling does)
        /// or `contextual` (as if the standalone pass had not run). With `--pdfs`: `contextual`
        /// forwards every chunk here as the worker's chunk pass does, and scores each segment
        /// pooled inside the chunk that owns it (what the pipeline stores by default), where
        /// `labelled` embeds every segment on its own (as `--standalone-segments all` would).
        #[arg(long, default_value = "labelled", value_parser = ["labelled", "contextual"])]
        embeddings: String,
        /// Score as if the worker had run with `--standalone-segments candidates
        /// --standalone-margin M` (the candidates chosen by `--clause-scorer`), so that a
        /// margin's cost (the share of segments embedded on their own, printed) and its recall
        /// can be read before changing it. With `--bucket`: documents stored with every
        /// standalone embedding (a run with `--standalone-segments all`); with `--pdfs`: every
        /// segment embedded on its own and every chunk forwarded here (both cached).
        #[arg(long, value_name = "M", allow_negative_numbers = true)]
        standalone_candidates: Option<f32>,
        #[command(flatten)]
        ocr: OcrArgs,
        #[command(flatten)]
        label_args: LabelArgs,
        #[command(flatten)]
        worker: WorkerArgs,
    },
    /// Train the clause scorer from labelled PDFs (`make train-clauses`): forwards, as the
    /// worker's chunk pass does, the chunks of each training document that hold its positives
    /// and one drawn at random standing for the rest (or, with `--embeddings standalone`, embeds
    /// positives and a weighted sample of segments on their own, within a token budget), caches
    /// them (an interrupted run resumes), learns every category, and writes a scorer file with
    /// its sha256 and a fixture of recorded scores.
    TrainClauses {
        /// Labels file in `cuad_labels.tsv` format.
        #[arg(long)]
        labels: PathBuf,
        /// Folder of the labelled PDFs.
        #[arg(long)]
        pdfs: PathBuf,
        /// Scorer file to write (beside it: `.sha256` and `.fixture.json`).
        #[arg(long, default_value = docpipe_clauses::artifact::BUILTIN_PATH)]
        out: PathBuf,
        /// Name recorded in the scorer (and in the `source` of the categories it scores).
        #[arg(long, default_value = docpipe_clauses::artifact::BUILTIN_NAME)]
        name: String,
        /// Cache of extracted and embedded training segments (reused by later runs).
        #[arg(long, env = "DOCPIPE_TRAIN_CACHE")]
        cache: Option<PathBuf>,
        /// Use only the first N documents of a fixed shuffle (nested: N=50 ⊂ N=100 ⊂ …), for
        /// learning curves; 0 = all.
        #[arg(long, default_value_t = 0)]
        docs: usize,
        /// Model tokens embedded per training document, at most (bounds the training time).
        #[arg(long, default_value_t = 2500)]
        max_tokens_per_doc: usize,
        /// Positive segments per category and document, at most.
        #[arg(long, default_value_t = 2)]
        positives_per_category: usize,
        /// Segments drawn at random per document besides the positives.
        #[arg(long, default_value_t = 8)]
        negatives: usize,
        /// Segment embeddings learned from: `standalone` (each segment on its own, as the
        /// worker's standalone pass), `contextual` (pooled inside the chunk that owns it, as
        /// the worker's chunk pass: whole chunks are forwarded, chosen by
        /// `--positive-chunks` and `--random-chunks`), or `both` (the two samples of each
        /// document learned as one, for a scorer that reads either).
        #[arg(long, default_value = "contextual", value_parser = ["standalone", "contextual", "both"])]
        embeddings: String,
        /// Contextual: chunks per document forwarded for their positives, at most. `all` (the
        /// default, how the shipped scorer was trained), with `--random-chunks all`: every
        /// chunk of every document, so that the presence thresholds are set on whole documents'
        /// scores (the cache `eval --embeddings contextual` fills); `3` with `--random-chunks 1`
        /// embeds about 40 % of the chunks (clause-scorer-v4's recipe).
        #[arg(long, default_value = "all", value_parser = chunk_count)]
        positive_chunks: usize,
        /// Contextual: chunks per document drawn at random besides, standing for the rest
        /// (`all`: every other chunk).
        #[arg(long, default_value = "all", value_parser = chunk_count)]
        random_chunks: usize,
        #[arg(long, default_value_t = 20261202)]
        seed: u64,
        /// Also write every training document's out-of-fold segment scores (per category: the
        /// best ten, from scorers learned on the other folds) to this TSV, for work on presence.
        #[arg(long)]
        out_of_fold: Option<PathBuf>,
        #[command(flatten)]
        ocr: OcrArgs,
        #[command(flatten)]
        worker: WorkerArgs,
    },
    /// Generate text with the decoder model (a GGUF file) through the decode engine: each
    /// prompt becomes a user message in the model's chat template (unless --raw), all prompts
    /// decode together with continuous batching; one prompt streams its tokens to stdout.
    Generate {
        /// A prompt (repeatable: the prompts decode concurrently).
        #[arg(long)]
        prompt: Vec<String>,
        /// A text file: the prompt, or with --prompt the context put before every prompt (its
        /// KV cache is computed once and shared).
        #[arg(long)]
        prompt_file: Option<PathBuf>,
        /// A system message.
        #[arg(long)]
        system: Option<String>,
        /// Use the prompt as the model's raw input, without the chat template.
        #[arg(long)]
        raw: bool,
        /// greedy, or sampling as `top-p:0.9,t:0.8,seed:1` (keys top-p, top-k, t, seed).
        #[arg(long, default_value = "greedy")]
        sampling: docpipe_model::sampling::Sampling,
        /// Tokens generated per prompt, at most.
        #[arg(long, default_value_t = 256)]
        max_new_tokens: usize,
        /// Constrain the answers to a JSON schema (inline JSON or a file): object, array,
        /// string, enum, integer, number, boolean, null, and unions such as ["string", "null"].
        #[arg(long)]
        json_schema: Option<String>,
        #[command(flatten)]
        decoder: crate::cmd::generate::DecoderArgs,
    },
    /// Generate the contract fields (title, parties, dates, renewal term, notice period,
    /// governing law) of done documents that lack them, with the decoder, from each
    /// document's best passages; store them in `document_fields` with the clause scorer's
    /// presence answers.
    ExtractFields {
        /// Only documents of this bucket.
        #[arg(long, env = "DOCPIPE_BUCKET")]
        bucket: Option<String>,
        /// Only this document (id or object key; repeatable).
        #[arg(long)]
        document: Vec<String>,
        /// Extract again documents that have their fields already.
        #[arg(long)]
        redo: bool,
        /// Documents whose questions decode together.
        #[arg(long, env = "DOCPIPE_FIELDS_GROUP", default_value_t = 4)]
        group: usize,
        #[command(flatten)]
        decoder: crate::cmd::generate::DecoderArgs,
    },
    /// The decode role: take documents from P.fields and extract their contract fields
    /// (several documents' questions decode together), until SIGTERM.
    FieldsWorker {
        /// Documents whose questions decode together.
        #[arg(long, env = "DOCPIPE_FIELDS_GROUP", default_value_t = 4)]
        group: usize,
        #[command(flatten)]
        decoder: crate::cmd::generate::DecoderArgs,
    },
    /// A document's fields with their evidence (id or object key).
    Fields { document: String },
    /// Field accuracy against CUAD's answers (`make eval-fields`): extract what is missing in
    /// the bucket, then score the model's answers and a rule-based baseline.
    EvalFields {
        /// Labels file in `cuad_labels.tsv` format.
        #[arg(long)]
        labels: PathBuf,
        /// The bucket the labelled PDFs were processed from.
        #[arg(long, required_unless_present = "pdfs", conflicts_with = "pdfs")]
        bucket: Option<String>,
        /// Instead of a bucket: score the rule-based baseline alone on the PDFs of this
        /// folder (no services, no model; their text is cached under $DOCPIPE_HOME/text).
        #[arg(long)]
        pdfs: Option<PathBuf>,
        #[arg(long, env = "DOCPIPE_FIELDS_GROUP", default_value_t = 4)]
        group: usize,
        #[command(flatten)]
        decoder: crate::cmd::generate::DecoderArgs,
        #[command(flatten)]
        ocr: OcrArgs,
    },
    /// How well OCR reads (`make eval-ocr`): pages of born-digital PDFs rendered and read by
    /// OCR, compared with their own text layer; character and word error rates, pages/s.
    EvalOcr {
        /// Folder of born-digital PDFs.
        #[arg(long)]
        pdfs: PathBuf,
        /// PDFs used, in name order.
        #[arg(long, default_value_t = 10)]
        docs: usize,
        /// Pages per PDF, spread over the document.
        #[arg(long, default_value_t = 2)]
        pages_per_doc: usize,
        #[command(flatten)]
        ocr: OcrArgs,
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
        #[arg(long, env = "DOCPIPE_CHUNK_TOKENS", default_value_t = defaults::CHUNK_TOKENS)]
        chunk_tokens: usize,
        #[arg(long, env = "DOCPIPE_CHUNK_OVERLAP", default_value_t = defaults::CHUNK_OVERLAP)]
        overlap: usize,
        /// Print the clause segments (ranges, pages, text) instead of the chunks.
        #[arg(long)]
        segments: bool,
        #[command(flatten)]
        ocr: OcrArgs,
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
        #[arg(long, default_value_t = defaults::MAX_PAGES)]
        max_pages: usize,
    },
    /// (testing) Publish the JSON on stdin as one persistent message to a queue, with a
    /// confirm — e.g. a poison message for the fault suite.
    #[command(hide = true)]
    PublishRaw { queue: String },
    /// (internal) Render a text file as a PDF, for samples and tests; with --scan, a scanned PDF
    /// of a text file or of a PDF.
    #[command(hide = true)]
    RenderPdf {
        input: PathBuf,
        output: PathBuf,
        /// A scanned PDF instead: each page an image, no text layer (needs pdftoppm).
        #[arg(long)]
        scan: bool,
        /// With --scan: turn the page images clockwise by 0, 90, 180 or 270 degrees.
        #[arg(long, default_value_t = 0)]
        rotate: u16,
        /// With --scan: resolution of the page images.
        #[arg(long, default_value_t = 150)]
        dpi: u32,
        /// With --scan: scan only these pages (1-based, comma-separated); the others keep
        /// their text layer.
        #[arg(long, value_delimiter = ',')]
        scan_pages: Vec<u32>,
    },
}

/// A number of chunks, or `all`.
fn chunk_count(s: &str) -> Result<usize, String> {
    if s.eq_ignore_ascii_case("all") {
        return Ok(usize::MAX);
    }
    s.parse().map_err(|_| format!("`{s}` is neither a number of chunks nor `all`"))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{chunk_count, Cli, Cmd};

    fn ask_all(args: &[&str]) -> (bool, bool) {
        let cli = Cli::try_parse_from(["docpipe", "extract-fields"].iter().chain(args)).expect("the flags parse");
        match cli.cmd {
            Cmd::ExtractFields { decoder, .. } => (decoder.fields_ask_all, decoder.prefix_reuse),
            _ => unreachable!("extract-fields parsed as another command"),
        }
    }

    #[test]
    fn chunk_counts_are_numbers_or_all() {
        assert_eq!(chunk_count("3"), Ok(3));
        assert_eq!(chunk_count("all"), Ok(usize::MAX));
        assert!(chunk_count("-1").is_err());
        assert!(chunk_count("every").unwrap_err().contains("every"));
    }

    #[test]
    fn boolean_decoder_flags_work_alone_and_with_a_value() {
        assert_eq!(ask_all(&[]), (false, true));
        // as README writes them: the flag alone turns it on
        assert_eq!(ask_all(&["--fields-ask-all"]), (true, true));
        assert_eq!(ask_all(&["--fields-ask-all", "true", "--prefix-reuse", "false"]), (true, false));
        assert_eq!(ask_all(&["--fields-ask-all=false", "--prefix-reuse"]), (false, true));
    }
}
