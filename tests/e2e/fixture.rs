//! The one expensive setup every scenario shares: sample PDFs in a fresh bucket, a poison
//! message waiting in the chunks queue, and one `docpipe run` over them (it loads the model),
//! with what it served on `/metrics` and `/readyz`; then the documents it recorded.

use std::path::{Path, PathBuf};

use sqlx::PgPool;
use uuid::Uuid;

use crate::common::{delete_queues, env};
use crate::support::{docpipe, docpipe_scraped, long_contract, publish_poison, render};

/// The finished first run, and where its rows and queues are.
pub struct Run {
    pub bucket: String,
    /// Queue prefix of this test (`DOCPIPE_QUEUE_PREFIX`).
    pub prefix: String,
    /// Scratch directory: the sample PDFs, the report.
    pub dir: PathBuf,
    /// The arguments of `docpipe run` (a re-run uses them again).
    pub run_args: Vec<String>,
    /// Every `/metrics` body scraped while the run worked.
    pub scrapes: Vec<String>,
    /// Whether `/readyz` ever answered 200.
    pub ready: bool,
    /// What the first run printed (with `--timings`).
    pub stdout: String,
    pub pool: PgPool,
    /// The bucket's documents, by key ([`Run::load_documents`]).
    pub docs: Vec<Doc>,
}

/// A row of `documents`, as the run left it.
#[derive(Debug, Clone)]
pub struct Doc {
    pub id: Uuid,
    pub key: String,
    pub status: String,
    pub error: Option<String>,
    pub chunk_count: Option<i32>,
    pub token_count: Option<i32>,
    pub chunks_done: i32,
    pub pages: Option<i32>,
}

type DocRow = (Uuid, String, String, Option<String>, Option<i32>, Option<i32>, i32, Option<i32>);

impl From<DocRow> for Doc {
    fn from((id, key, status, error, chunk_count, token_count, chunks_done, pages): DocRow) -> Self {
        Self { id, key, status, error, chunk_count, token_count, chunks_done, pages }
    }
}

/// Upload the samples, park a poison message, and run `docpipe run` once over the bucket.
pub async fn start() -> Run {
    let db_url = env("DOCPIPE_DATABASE_URL");
    env("DOCPIPE_S3_ENDPOINT");
    let tag = Uuid::new_v4().simple().to_string()[..8].to_string();
    let bucket = format!("e2e-{tag}");
    let prefix = format!("test-{tag}");
    let dir = std::env::temp_dir().join(format!("docpipe-e2e-{tag}"));
    std::fs::create_dir_all(&dir).unwrap();
    upload_samples(&dir, &bucket, &prefix);

    // a poison message already waiting in the chunks queue must not stop the run
    publish_poison(&prefix).await;

    // with the fields stage, on the small decoder the tests provision
    let decoder = small_decoder();
    let run_args: Vec<String> = [
        "run",
        "--bucket",
        bucket.as_str(),
        "--chunk-tokens",
        "512",
        "--overlap",
        "64",
        "--run-timeout-s",
        "900",
        "--timings",
        // not the default (`none`: no standalone pass, every owned segment marked skipped):
        // `candidates` exercises the pass, both kinds of embeddings and the skip marks
        "--standalone-segments",
        "candidates",
        "--fields",
        "--decoder",
        decoder.as_str(),
    ]
    .map(String::from)
    .to_vec();
    let args: Vec<&str> = run_args.iter().map(String::as_str).collect();
    let (out, scrapes, ready) = docpipe_scraped(&args, &prefix);
    assert!(out.status.success(), "docpipe run failed");

    let pool = PgPool::connect(&db_url).await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    Run { bucket, prefix, dir, run_args, scrapes, ready, stdout, pool, docs: Vec::new() }
}

/// The 0.5B decoder `make provision` fetches into `$DOCPIPE_HOME`.
fn small_decoder() -> String {
    let home = std::env::var("DOCPIPE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env("HOME")).join(".cache/docpipe"));
    let path = home.join("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    assert!(path.exists(), "{} is missing: run `make provision`", path.display());
    path.display().to_string()
}

/// Two good contracts (a long one with non-ASCII text, a short one), a corrupt PDF and a file
/// that is not a PDF at all, put in `bucket`.
fn upload_samples(dir: &Path, bucket: &str, prefix: &str) {
    let long = render(dir, "long-supply-agreement", &long_contract());
    let short = render(
        dir,
        "short-nda",
        "MUTUAL NDA. Each party shall keep the other's confidential information secret for three years.",
    );
    let corrupt = dir.join("corrupt.pdf");
    std::fs::write(
        &corrupt,
        b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\ngarbage without xref or trailer",
    )
    .unwrap();
    let not_pdf = dir.join("notes.pdf");
    std::fs::write(&not_pdf, "these are meeting notes, not a PDF").unwrap();

    let files: Vec<&str> = [&long, &short, &corrupt, &not_pdf].iter().map(|p| p.to_str().unwrap()).collect();
    let mut put = vec!["put", "--bucket", bucket];
    put.extend(files);
    assert!(docpipe(&put, prefix).status.success(), "docpipe put failed");
}

impl Run {
    /// The arguments of the first `docpipe run`.
    pub fn run_args(&self) -> Vec<&str> {
        self.run_args.iter().map(String::as_str).collect()
    }

    /// Read the bucket's documents: one per uploaded file.
    pub async fn load_documents(&mut self) {
        let rows: Vec<DocRow> = sqlx::query_as(
            "SELECT id, key, status, error, chunk_count, token_count, chunks_done, pages FROM documents WHERE bucket = $1 ORDER BY key",
        )
        .bind(&self.bucket)
        .fetch_all(&self.pool)
        .await
        .unwrap();
        self.docs = rows.into_iter().map(Doc::from).collect();
        assert_eq!(self.docs.len(), 4, "{:?}", self.docs);
    }

    /// The document of `key` ([`Run::load_documents`] first).
    pub fn doc(&self, key: &str) -> &Doc {
        self.docs.iter().find(|d| d.key == key).unwrap_or_else(|| panic!("no document {key}"))
    }

    /// Remove the scratch directory and the test's queues.
    pub async fn finish(self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        delete_queues(&self.prefix).await;
    }
}
