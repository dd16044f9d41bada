//! What ingest decides, against the real services (S3 server, RabbitMQ, Postgres; `make test`
//! exports their URLs and `DOCPIPE_MODEL`), without a successful extraction: this crate has no
//! docpipe binary to serve `extract-pdf`, so the extractor is `/bin/false` (it crashes) or a
//! path that does not exist. Each test has its own bucket and queue prefix.
//!
//! - an object over `max_pdf_bytes` fails at `fetch` with one `failures` row and publishes
//!   nothing; one exactly at the limit is downloaded;
//! - a PDF the extractor cannot read fails at `extract`, and the run counts it as failed;
//! - `retry_failed` of a run takes exactly that run's failed documents, as a new generation;
//! - a missing bucket, or an S3 endpoint that does not answer, is an `IngestError`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use docpipe_bus::{Broker, Publisher, Topology};
use docpipe_ingest::s3::{self, S3Config, S3Error};
use docpipe_ingest::{IngestConfig, IngestError, Ingestor, RunSummary};
use docpipe_store::PgPool;
use docpipe_text::ModelDir;
use uuid::Uuid;

/// `max_pdf_bytes` in these tests.
const LIMIT: u64 = 1024;
/// An extractor that exits 1 at once, whatever it is given.
const CRASHING_EXTRACTOR: &str = "/bin/false";
/// How long to wait for Postgres and RabbitMQ.
const PATIENCE: Duration = Duration::from_secs(30);

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run the tests with `make test`, which starts the services and exports their URLs")
    })
}

/// Remove a test's queues and exchanges (quorum queues keep a log each).
async fn delete_queues(prefix: &str) {
    let conn = docpipe_bus::connect(&env("DOCPIPE_AMQP_URL"), "test-cleanup", Duration::from_secs(10)).await.unwrap();
    let ch = conn.create_channel().await.unwrap();
    Topology::new(prefix).delete(&ch).await.unwrap();
}

/// `len` bytes that pass ingest's PDF sniffing (`%PDF-` up front): the extractor is never
/// reached with anything it could read, so the rest is padding.
fn pdf_bytes(len: u64) -> Vec<u8> {
    let mut body = b"%PDF-1.4\n% docpipe ingest test\n".to_vec();
    body.resize(len as usize, b' ');
    body
}

/// The ingest configuration the binary builds, with the model of `DOCPIPE_MODEL` (or the
/// default model directory), `extractor` as the extraction child and [`LIMIT`].
fn config(extractor: impl Into<PathBuf>) -> IngestConfig {
    let model = std::env::var_os("DOCPIPE_MODEL");
    let dir = ModelDir::resolve(model.as_deref().map(Path::new))
        .unwrap_or_else(|e| panic!("no model directory (run the tests with `make test`): {e}"));
    let mut cfg = IngestConfig::new(dir, extractor.into());
    cfg.max_pdf_bytes = LIMIT;
    cfg
}

/// A row of `documents`.
#[derive(Debug)]
struct Document {
    run_id: Uuid,
    status: String,
    error: Option<String>,
    generation: i32,
}

/// A row of `failures`.
#[derive(Debug)]
struct FailureRow {
    run_id: Option<Uuid>,
    stage: String,
    class: String,
    message: String,
}

/// One test's bucket, queues and connections.
struct Fixture {
    tag: String,
    bucket: String,
    queue_prefix: String,
    pool: PgPool,
    s3: aws_sdk_s3::Client,
    conn: lapin::Connection,
    topology: Topology,
}

impl Fixture {
    /// A fresh bucket and queue prefix; Postgres migrated, the topology declared.
    async fn new() -> Self {
        let tag = Uuid::new_v4().simple().to_string()[..8].to_string();
        let bucket = format!("ingest-{tag}");
        let queue_prefix = format!("test-ingest-{tag}");
        let pool = docpipe_store::open(&env("DOCPIPE_DATABASE_URL"), PATIENCE).await.expect("open Postgres");
        let s3 = s3::client(&S3Config { endpoint: Some(env("DOCPIPE_S3_ENDPOINT")), region: "us-east-1".into() }).await;
        s3::ensure_bucket(&s3, &bucket).await.unwrap_or_else(|e| panic!("creating bucket {bucket}: {e}"));
        let broker = Broker { url: env("DOCPIPE_AMQP_URL"), queue_prefix: queue_prefix.clone(), patience: PATIENCE };
        let (conn, topology) =
            docpipe_bus::connect_and_declare(&broker, "docpipe-ingest-test").await.expect("connect to RabbitMQ");
        Self { tag, bucket, queue_prefix, pool, s3, conn, topology }
    }

    /// An ingestor on this fixture's S3 server, database and queues.
    async fn ingestor(&self, cfg: IngestConfig) -> Ingestor {
        self.ingestor_on(cfg, self.s3.clone()).await
    }

    /// An ingestor with its own S3 client.
    async fn ingestor_on(&self, cfg: IngestConfig, s3: aws_sdk_s3::Client) -> Ingestor {
        let publisher = Publisher::new(&self.conn).await.expect("open a publisher channel");
        Ingestor::new(cfg, s3, self.pool.clone(), publisher, self.topology.clone()).expect("build the ingestor")
    }

    async fn upload(&self, key: &str, body: Vec<u8>) {
        s3::put(&self.s3, &self.bucket, key, body).await.unwrap_or_else(|e| panic!("uploading {key}: {e}"));
    }

    /// A new run that ingests everything under `prefix` of the bucket.
    async fn ingest(&self, ingestor: &Ingestor, prefix: &str) -> RunSummary {
        let run = ingestor.start_run("test", &self.bucket, prefix).await.expect("start a run");
        let summary = ingestor.ingest(run, &self.bucket, prefix).await.unwrap_or_else(|e| {
            panic!("ingesting s3://{}/{prefix} must fail documents, not the run: {e}", self.bucket)
        });
        assert_eq!(summary.run_id, run, "the summary is of the run it was asked for");
        summary
    }

    async fn document(&self, key: &str) -> Document {
        let row: Option<(Uuid, String, Option<String>, i32)> =
            sqlx::query_as("SELECT run_id, status, error, generation FROM documents WHERE bucket = $1 AND key = $2")
                .bind(&self.bucket)
                .bind(key)
                .fetch_optional(&self.pool)
                .await
                .expect("read documents");
        let (run_id, status, error, generation) =
            row.unwrap_or_else(|| panic!("no document row for s3://{}/{key}", self.bucket));
        Document { run_id, status, error, generation }
    }

    /// The document's failures, oldest first.
    async fn failures(&self, key: &str) -> Vec<FailureRow> {
        let rows: Vec<(Option<Uuid>, String, String, String)> = sqlx::query_as(
            "SELECT f.run_id, f.stage, f.class, f.message FROM failures f JOIN documents d ON d.id = f.document_id
             WHERE d.bucket = $1 AND d.key = $2 ORDER BY f.id",
        )
        .bind(&self.bucket)
        .bind(key)
        .fetch_all(&self.pool)
        .await
        .expect("read failures");
        rows.into_iter().map(|(run_id, stage, class, message)| FailureRow { run_id, stage, class, message }).collect()
    }

    /// Messages waiting in `P.chunks` (nothing consumes them in these tests).
    async fn chunk_messages(&self) -> u32 {
        // inspecting a queue that is missing closes the channel: a channel per look
        let ch = self.conn.create_channel().await.expect("open a channel");
        self.topology.depth(&ch, &self.topology.chunks()).await.expect("inspect the chunks queue")
    }

    async fn finish(self) {
        delete_queues(&self.queue_prefix).await;
    }
}

/// The document of `key` failed at `stage`: its status and error, and exactly one `failures`
/// row of `class` in `run`. Returns the error.
async fn assert_failed_once(f: &Fixture, key: &str, run: Uuid, stage: &str, class: &str) -> String {
    let doc = f.document(key).await;
    assert_eq!(doc.status, "failed", "{key}: {doc:?}");
    assert_eq!(doc.run_id, run, "{key}: the document belongs to the run that failed it");
    let error = doc.error.clone().unwrap_or_default();
    assert!(error.starts_with(&format!("{stage}: ")), "{key}: the error {error:?} should start with {stage:?}");
    let failures = f.failures(key).await;
    assert_eq!(failures.len(), 1, "{key}: exactly one failures row, not {failures:?}");
    let row = &failures[0];
    assert_eq!((row.stage.as_str(), row.class.as_str()), (stage, class), "{key}: (stage, class) of {row:?}");
    assert_eq!(row.run_id, Some(run), "{key}: the failure is recorded in the run");
    assert_eq!(format!("{}: {}", row.stage, row.message), error, "{key}: documents.error is `stage: message`");
    error
}

#[tokio::test(flavor = "multi_thread")]
async fn an_object_over_max_pdf_bytes_fails_at_fetch_and_publishes_nothing() {
    let f = Fixture::new().await;
    f.upload("over.pdf", pdf_bytes(LIMIT + 1)).await;
    f.upload("at-limit.pdf", pdf_bytes(LIMIT)).await;
    let ingestor = f.ingestor(config(CRASHING_EXTRACTOR)).await;

    let s = f.ingest(&ingestor, "").await;
    assert_eq!((s.objects, s.failed, s.queued, s.skipped, s.chunks), (2, 2, 0, 0, 0), "{s:?}");

    let error = assert_failed_once(&f, "over.pdf", s.run_id, "fetch", "permanent").await;
    for part in [(LIMIT + 1).to_string(), LIMIT.to_string(), "max_pdf_bytes".to_string()] {
        assert!(error.contains(&part), "over.pdf: the error {error:?} should name the size and the limit ({part:?})");
    }
    // exactly at the limit is not over it: downloaded, then failed by the extractor
    assert_failed_once(&f, "at-limit.pdf", s.run_id, "extract", "permanent").await;
    assert_eq!(f.chunk_messages().await, 0, "no chunk message is published for a failed document");
    f.finish().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pdf_the_extractor_crashes_on_fails_at_extract() {
    assert!(Path::new(CRASHING_EXTRACTOR).exists(), "this test needs {CRASHING_EXTRACTOR}");
    let f = Fixture::new().await;
    f.upload("contract.pdf", pdf_bytes(600)).await;
    let ingestor = f.ingestor(config(CRASHING_EXTRACTOR)).await;

    let s = f.ingest(&ingestor, "").await;
    assert_eq!((s.objects, s.failed, s.queued, s.chunks), (1, 1, 0, 0), "{s:?}");
    // the document is at fault (the extractor ran and failed on it): not worth retrying
    let error = assert_failed_once(&f, "contract.pdf", s.run_id, "extract", "permanent").await;
    assert!(
        error.contains("extractor crashed") && error.contains("exit status 1"),
        "contract.pdf: the error {error:?} should say the extractor crashed, and how"
    );
    let (finished, seen): (bool, i32) =
        sqlx::query_as("SELECT finished_at IS NOT NULL, objects_seen FROM runs WHERE id = $1")
            .bind(s.run_id)
            .fetch_one(&f.pool)
            .await
            .expect("read the run");
    assert_eq!((finished, seen), (true, 1), "(run finished, objects seen) of the run row");
    assert_eq!(f.chunk_messages().await, 0, "no chunk message is published for a failed document");
    f.finish().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_extractor_fails_the_pdf_at_extract_naming_it() {
    let f = Fixture::new().await;
    f.upload("contract.pdf", pdf_bytes(600)).await;
    let missing = format!("/nonexistent/docpipe-{}/docpipe", f.tag);
    let ingestor = f.ingestor(config(&missing)).await;

    let s = f.ingest(&ingestor, "").await;
    assert_eq!((s.objects, s.failed, s.queued, s.chunks), (1, 1, 0, 0), "{s:?}");
    // not the document's fault: worth retrying once the extractor is there
    let error = assert_failed_once(&f, "contract.pdf", s.run_id, "extract", "retryable").await;
    assert!(error.contains(&missing), "contract.pdf: the error {error:?} should name the extractor {missing}");
    assert_eq!(f.chunk_messages().await, 0, "no chunk message is published for a failed document");
    f.finish().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn retry_failed_takes_exactly_the_failed_documents_of_the_run() {
    let f = Fixture::new().await;
    f.upload("first/broken.pdf", pdf_bytes(600)).await;
    f.upload("second/broken.pdf", pdf_bytes(600)).await;
    f.upload("second/over.pdf", pdf_bytes(LIMIT + 1)).await;
    let ingestor = f.ingestor(config(CRASHING_EXTRACTOR)).await;
    let first = f.ingest(&ingestor, "first/").await;
    let second = f.ingest(&ingestor, "second/").await;
    assert_eq!((first.objects, first.failed, second.objects, second.failed), (1, 1, 2, 2), "{first:?} {second:?}");

    let retry = ingestor.start_run("retry-failed", "*", "").await.expect("start the retry run");
    let s = ingestor.retry_failed(retry, Some(second.run_id)).await.expect("retry the failed documents");
    assert_eq!((s.run_id, s.objects, s.failed, s.queued, s.skipped), (retry, 2, 2, 0, 0), "{s:?}");

    for (key, stage) in [("second/broken.pdf", "extract"), ("second/over.pdf", "fetch")] {
        let doc = f.document(key).await;
        assert_eq!((doc.run_id, doc.generation), (retry, 2), "{key}: taken again by the retry run, as generation 2");
        assert_eq!(doc.status, "failed", "{key}: it fails again, for the same reason");
        let failures = f.failures(key).await;
        let runs: Vec<Option<Uuid>> = failures.iter().map(|r| r.run_id).collect();
        assert_eq!(runs, [Some(second.run_id), Some(retry)], "{key}: one failure per attempt: {failures:?}");
        assert!(failures.iter().all(|r| r.stage == stage), "{key}: both attempts fail at {stage}: {failures:?}");
    }
    let other = f.document("first/broken.pdf").await;
    assert_eq!((other.run_id, other.generation), (first.run_id, 1), "a failed document of another run is left alone");
    assert_eq!(f.failures("first/broken.pdf").await.len(), 1, "first/broken.pdf: not retried");
    f.finish().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_bucket_is_an_ingest_error() {
    let f = Fixture::new().await;
    let missing = format!("no-such-bucket-{}", f.tag);
    let ingestor = f.ingestor(config(CRASHING_EXTRACTOR)).await;
    let run = ingestor.start_run("test", &missing, "").await.expect("start a run");

    match ingestor.ingest(run, &missing, "").await {
        Err(IngestError::S3(S3Error::List { bucket, retryable, .. })) => {
            assert_eq!(bucket, missing, "the listing error names the bucket");
            assert!(!retryable, "a missing bucket is not worth retrying");
        }
        other => panic!("listing s3://{missing} should be an IngestError::S3(S3Error::List), not {other:?}"),
    }
    let (documents,): (i64,) = sqlx::query_as("SELECT count(*) FROM documents WHERE run_id = $1")
        .bind(run)
        .fetch_one(&f.pool)
        .await
        .expect("count the run's documents");
    assert_eq!(documents, 0, "nothing is recorded for a bucket that cannot be listed");
    f.finish().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_s3_endpoint_that_does_not_answer_is_an_ingest_error() {
    let f = Fixture::new().await;
    // a loopback port nobody listens on: connections are refused
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let dead = s3::client(&S3Config { endpoint: Some(endpoint.clone()), region: "us-east-1".into() }).await;
    let ingestor = f.ingestor_on(config(CRASHING_EXTRACTOR), dead).await;
    let run = ingestor.start_run("test", &f.bucket, "").await.expect("start a run");

    // retried (a network error is transient), then given up: an error, not a hang or a panic
    let listed = tokio::time::timeout(Duration::from_secs(120), ingestor.ingest(run, &f.bucket, "")).await;
    match listed {
        Ok(Err(IngestError::S3(S3Error::List { bucket, retryable, .. }))) => {
            assert_eq!(bucket, f.bucket, "the listing error names the bucket");
            assert!(retryable, "a refused connection is a transient error");
        }
        Ok(other) => panic!("listing through {endpoint} should be an IngestError::S3(S3Error::List), not {other:?}"),
        Err(_) => panic!("listing through {endpoint} did not give up within 120 s"),
    }
    f.finish().await;
}
