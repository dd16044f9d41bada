//! End to end against the real services (S3 server, RabbitMQ, Postgres with pgvector) and the
//! real model: PDFs uploaded to a fresh bucket go through `docpipe run`, and the rows are
//! checked. `make test` starts the services and exports their URLs (scripts/services.sh).

use std::path::{Path, PathBuf};
use std::process::Command;

use docpipe_common::messages::{ChunkMeta, ChunkOutcome, ChunkResult, SCHEMA_VERSION};
use sqlx::PgPool;
use uuid::Uuid;

mod common;
use common::{delete_queues, env};

const BIN: &str = env!("CARGO_BIN_EXE_docpipe");

fn docpipe(args: &[&str], prefix: &str) -> std::process::Output {
    let out = Command::new(BIN)
        .args(args)
        .env("DOCPIPE_QUEUE_PREFIX", prefix)
        .env("DOCPIPE_LOG", "info,lapin=warn,sqlx=warn")
        .output()
        .expect("run docpipe");
    eprintln!(
        "$ docpipe {}\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `docpipe` with its metrics listener on a free loopback port, scraping `/metrics` and `/readyz`
/// every 200 ms while it runs; returns its output, every `/metrics` body, and whether `/readyz`
/// ever answered 200.
fn docpipe_scraped(args: &[&str], prefix: &str) -> (std::process::Output, Vec<String>, bool) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let child = Command::new(BIN)
        .args(args)
        .env("DOCPIPE_QUEUE_PREFIX", prefix)
        .env("DOCPIPE_METRICS_ADDR", &addr)
        .env("DOCPIPE_LOG", "info,lapin=warn,sqlx=warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run docpipe");
    let running = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let scraper = {
        let running = running.clone();
        std::thread::spawn(move || {
            let (mut bodies, mut ready) = (Vec::new(), false);
            while running.load(std::sync::atomic::Ordering::Relaxed) {
                if let Some((status, body)) = http_get(&addr, "/metrics") {
                    if status.contains("200") {
                        bodies.push(body);
                    }
                }
                ready |= http_get(&addr, "/readyz").is_some_and(|(status, _)| status.contains("200"));
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            (bodies, ready)
        })
    };
    let out = child.wait_with_output().expect("wait for docpipe");
    running.store(false, std::sync::atomic::Ordering::Relaxed);
    let (bodies, ready) = scraper.join().unwrap();
    eprintln!(
        "$ docpipe {}\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out, bodies, ready)
}

/// A plain HTTP/1.1 GET: (status line, body).
fn http_get(addr: &str, path: &str) -> Option<(String, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(5))).ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\n\r\n").as_bytes()).ok()?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).ok()?;
    let (head, body) = raw.split_once("\r\n\r\n")?;
    Some((head.lines().next()?.to_string(), body.to_string()))
}

/// The largest value of a metric sample (exact name and labels) across scrapes.
fn metric(bodies: &[String], sample: &str) -> f64 {
    bodies
        .iter()
        .flat_map(|b| b.lines())
        .filter_map(|l| l.strip_prefix(sample)?.strip_prefix(' ')?.split_whitespace().next()?.parse::<f64>().ok())
        .fold(0.0, f64::max)
}

fn render(dir: &Path, name: &str, text: &str) -> PathBuf {
    let txt = dir.join(format!("{name}.txt"));
    std::fs::write(&txt, text).unwrap();
    let pdf = dir.join(format!("{name}.pdf"));
    let st = Command::new(BIN).args(["render-pdf", txt.to_str().unwrap(), pdf.to_str().unwrap()]).status().unwrap();
    assert!(st.success());
    pdf
}

/// A contract long enough for several 512-token chunks, with non-ASCII text.
fn long_contract() -> String {
    let mut s = String::from(
        "SUPPLY AGREEMENT between Société Générale de Pièces (\"Supplier\") and Acme Corp. (\"Buyer\").\n\n",
    );
    for i in 1..=40 {
        s.push_str(&format!(
            "{i}. Section {i}. The Supplier shall deliver lot {i} of the components within {d} days of the purchase order, \
             at the unit price in Schedule {i}. Late delivery entitles the Buyer to a credit of {p}% of the price of lot {i}. \
             Either party may terminate this section on {n} days' written notice.\n\n",
            d = 10 + i,
            p = i % 7 + 1,
            n = 30 + i
        ));
    }
    s
}

#[tokio::test(flavor = "multi_thread")]
async fn pdfs_in_s3_become_rows_in_postgres() {
    let db_url = env("DOCPIPE_DATABASE_URL");
    env("DOCPIPE_S3_ENDPOINT");
    let tag = Uuid::new_v4().simple().to_string()[..8].to_string();
    let bucket = format!("e2e-{tag}");
    let prefix = format!("test-{tag}");
    let dir = std::env::temp_dir().join(format!("docpipe-e2e-{tag}"));
    std::fs::create_dir_all(&dir).unwrap();

    let long = render(&dir, "long-supply-agreement", &long_contract());
    let short = render(
        &dir,
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
    let mut put = vec!["put", "--bucket", &bucket];
    put.extend(files);
    assert!(docpipe(&put, &prefix).status.success());

    // a poison message already waiting in the chunks queue must not stop the run
    publish_poison(&prefix).await;

    let run_args = ["run", "--bucket", &bucket, "--chunk-tokens", "512", "--overlap", "64", "--run-timeout-s", "600"];
    let (out, scrapes, ready) = docpipe_scraped(&run_args, &prefix);
    assert!(out.status.success(), "docpipe run failed");

    // the run served its metrics and readiness while it worked
    assert!(ready, "/readyz never answered 200");
    assert!(!scrapes.is_empty(), "no /metrics scrape succeeded");
    assert_eq!(metric(&scrapes, r#"docpipe_ingest_documents_total{outcome="queued"}"#), 2.0);
    assert_eq!(metric(&scrapes, r#"docpipe_ingest_documents_total{outcome="failed"}"#), 2.0);
    assert!(metric(&scrapes, r#"docpipe_failures_total{stage="extract",class="permanent"}"#) >= 1.0);
    assert!(metric(&scrapes, "docpipe_worker_prefill_seconds_count") >= 1.0);
    assert!(metric(&scrapes, r#"docpipe_worker_chunks_total{outcome="embedded"}"#) >= 1.0);
    assert!(metric(&scrapes, "docpipe_worker_tokens_total") > 0.0);
    assert!(metric(&scrapes, "docpipe_ingest_extract_seconds_per_page_count") == 2.0);
    assert!(metric(&scrapes, r#"docpipe_aggregator_results_total{outcome="stored"}"#) >= 1.0);
    assert!(metric(&scrapes, "docpipe_process_peak_resident_memory_bytes") > 1e6);
    let chunks_queue = format!(r#"docpipe_queue_messages{{queue="{prefix}.chunks"}}"#);
    assert!(scrapes.iter().any(|b| b.contains(&chunks_queue)), "queue depth of {prefix}.chunks sampled");

    let pool = PgPool::connect(&db_url).await.unwrap();
    let docs: Vec<(Uuid, String, String, Option<String>, Option<i32>, Option<i32>, i32, Option<i32>)> = sqlx::query_as(
        "SELECT id, key, status, error, chunk_count, token_count, chunks_done, pages FROM documents WHERE bucket = $1 ORDER BY key",
    )
    .bind(&bucket)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(docs.len(), 4, "{docs:?}");
    let by_key = |k: &str| docs.iter().find(|d| d.1 == k).unwrap_or_else(|| panic!("no document {k}"));

    // the corrupt and the non-PDF files fail with a reason, recorded in `failures` too
    for (key, why) in [("corrupt.pdf", "extract"), ("notes.pdf", "not a PDF")] {
        let d = by_key(key);
        assert_eq!(d.2, "failed", "{key}: {d:?}");
        let err = d.3.as_deref().unwrap_or_default();
        assert!(err.contains(why), "{key}: error {err:?} should mention {why:?}");
        let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM failures WHERE document_id = $1")
            .bind(d.0)
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(n, 1, "{key}: one failure row");
    }

    // the good ones are done, every chunk stored once, owned ranges tile the tokens
    for key in ["long-supply-agreement.pdf", "short-nda.pdf"] {
        let (id, _, status, _, chunk_count, token_count, chunks_done, pages) = by_key(key).clone();
        assert_eq!(status, "done", "{key}");
        let (chunk_count, token_count) = (chunk_count.unwrap(), token_count.unwrap());
        assert_eq!(chunks_done, chunk_count);
        assert!(pages.unwrap() >= 1);
        let chunks: Vec<(i32, i32, i32, i32, i32, i32, i32, f64)> = sqlx::query_as(
            "SELECT chunk_index, token_start, token_end, owned_token_start, owned_token_end, char_start, char_end,
                    vector_norm(embedding)::float8
             FROM chunks WHERE document_id = $1 ORDER BY chunk_index",
        )
        .bind(id)
        .fetch_all(&pool)
        .await
        .unwrap();
        assert_eq!(chunks.len() as i32, chunk_count, "{key}");
        let mut next_owned = 0;
        for (i, c) in chunks.iter().enumerate() {
            assert_eq!(c.0, i as i32);
            assert_eq!(c.3, next_owned, "{key} chunk {i}: owned range must start where the previous ended");
            assert!(c.1 <= c.3 && c.4 <= c.2, "{key} chunk {i}: owned inside the window");
            assert!(c.5 < c.6, "{key} chunk {i}: character range");
            assert!((c.7 - 1.0).abs() < 1e-3, "{key} chunk {i}: embedding norm {}", c.7);
            next_owned = c.4;
        }
        assert_eq!(next_owned, token_count, "{key}: the last chunk owns up to the end");
    }
    let (_, _, _, _, long_chunks, ..) = by_key("long-supply-agreement.pdf").clone();
    assert!(long_chunks.unwrap() >= 3, "the long contract spans several chunks");

    // every chunk records its forward pass, every document its stage times; `report` draws them
    let (unbatched, bad): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE c.batch_id IS NULL OR c.prefill_ms <= 0 OR c.worker IS NULL),
                count(*) FILTER (WHERE c.batch_padded_tokens < c.batch_tokens OR c.batch_tokens < c.input_tokens)
         FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.bucket = $1",
    )
    .bind(&bucket)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((unbatched, bad), (0, 0), "batch stats on every chunk");
    let (timed,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM documents WHERE bucket = $1 AND status = 'done'
           AND ingest_started_at <= extracted_at AND extracted_at <= done_at AND extract_seconds > 0",
    )
    .bind(&bucket)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(timed, 2, "stage timestamps of the done documents");
    let (run_id,): (Uuid,) = sqlx::query_as("SELECT run_id FROM documents WHERE bucket = $1 AND key = 'short-nda.pdf'")
        .bind(&bucket)
        .fetch_one(&pool)
        .await
        .unwrap();
    let html_path = dir.join("report.html");
    let out = docpipe(&["report", "--run", &run_id.to_string(), "-o", html_path.to_str().unwrap()], &prefix);
    assert!(out.status.success(), "docpipe report failed");
    let html = std::fs::read_to_string(&html_path).unwrap();
    for part in [
        "Throughput over time",
        "Latency by stage",
        "prefill (per forward pass)",
        "Worker batches",
        "notes.pdf",
        "not a PDF",
    ] {
        assert!(html.contains(part), "report lacks {part:?}");
    }
    assert!(html.matches("<svg").count() >= 4, "throughput, documents, latency, batches and failures plots");
    assert!(!html.contains("src=") && !html.contains("href="), "the report loads nothing external");

    // the poison message was dead-lettered, then parked in P.poison (it names no document)
    let conn = docpipe_common::amqp::connect(&env("DOCPIPE_AMQP_URL"), "e2e-check", std::time::Duration::from_secs(10))
        .await
        .unwrap();
    let topo = docpipe_common::amqp::Topology::new(&prefix);
    let ch = conn.create_channel().await.unwrap();
    assert_eq!(topo.depth(&ch, &topo.poison()).await.unwrap(), 1, "poison message parked");
    assert_eq!(topo.depth(&ch, &topo.dead_queue(&topo.chunks())).await.unwrap(), 0, "dead letters drained");

    // the long contract's text round-trips through the character offsets
    let (excerpt,): (String,) = sqlx::query_as(
        "SELECT substr(d.text, c.char_start + 1, c.char_end - c.char_start) FROM chunks c JOIN documents d ON d.id = c.document_id
         WHERE d.bucket = $1 AND d.key = 'long-supply-agreement.pdf' AND c.chunk_index = 0",
    )
    .bind(&bucket)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(excerpt.trim_start().starts_with("SUPPLY AGREEMENT between Société Générale de Pièces"), "{excerpt:?}");

    // clause segments: every one embedded once (by the chunk owning its middle token), in
    // context and on its own (two different unit vectors), the numbered sections of the long
    // contract are segments, each done document has a label per category and a row in
    // contract_summary
    let segs: Vec<(String, i64, i64, i64, i64, f64)> = sqlx::query_as(
        "SELECT d.key, count(*), count(s.embedding), count(*) FILTER (WHERE s.chunk_index IS NULL),
                count(s.standalone), max(abs(vector_norm(s.standalone) - 1)) + 0
         FROM segments s JOIN documents d ON d.id = s.document_id WHERE d.bucket = $1 GROUP BY d.key ORDER BY d.key",
    )
    .bind(&bucket)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(segs.len(), 2, "{segs:?}");
    for (key, n, embedded, unowned, alone, off_unit) in &segs {
        assert!(*n >= 1 && n == embedded && *unowned == 0, "{key}: {n} segments, {embedded} embedded");
        assert!(alone == n && *off_unit < 1e-3, "{key}: {n} segments, {alone} standalone, |norm - 1| {off_unit}");
    }
    let (same,): (i64,) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE s.embedding <=> s.standalone < 1e-4) FROM segments s
         JOIN documents d ON d.id = s.document_id WHERE d.bucket = $1",
    )
    .bind(&bucket)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(same * 4 < segs.iter().map(|s| s.1).sum::<i64>(), "{same} standalone embeddings equal the contextual ones");
    assert!(segs.iter().any(|s| s.0 == "long-supply-agreement.pdf" && s.1 >= 40), "{segs:?}");
    let (section,): (String,) = sqlx::query_as(
        "SELECT substr(d.text, s.char_start + 1, s.char_end - s.char_start) FROM segments s
         JOIN documents d ON d.id = s.document_id
         WHERE d.bucket = $1 AND d.key = 'long-supply-agreement.pdf' AND s.segment_index = 7",
    )
    .bind(&bucket)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(section.starts_with("7. Section 7.") && section.ends_with("notice."), "{section:?}");
    let (labels, cats): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM document_labels l JOIN documents d ON d.id = l.document_id WHERE d.bucket = $1),
                (SELECT count(*) FROM clause_categories)",
    )
    .bind(&bucket)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((cats, labels), (41, 2 * 41));
    let (summaries, with_embedding): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(d.embedding) FROM contract_summary s JOIN documents d ON d.id = s.document_id
         WHERE s.bucket = $1 AND s.status = 'done'",
    )
    .bind(&bucket)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((summaries, with_embedding), (2, 2));
    let out = docpipe(&["search", "termination on written notice", "--bucket", &bucket, "--top", "3"], &prefix);
    let hits = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && hits.contains("long-supply-agreement.pdf  page"), "{hits}");
    let out = docpipe(&["search", "x", "--category", "No Such Clause"], &prefix);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("unknown clause category"));

    // a redelivered result changes nothing
    let long_id = by_key("long-supply-agreement.pdf").0;
    let (generation, ts, te, os, oe, cs, ce, ocs, oce, emb, count): (
        i32,
        i32,
        i32,
        i32,
        i32,
        i32,
        i32,
        i32,
        i32,
        pgvector::Vector,
        i32,
    ) = sqlx::query_as(
        "SELECT c.generation, token_start, token_end, owned_token_start, owned_token_end, char_start, char_end,
                    owned_char_start, owned_char_end, c.embedding, d.chunk_count
             FROM chunks c JOIN documents d ON d.id = c.document_id WHERE c.document_id = $1 AND chunk_index = 1",
    )
    .bind(long_id)
    .fetch_one(&pool)
    .await
    .unwrap();
    let (run_id,): (Uuid,) =
        sqlx::query_as("SELECT run_id FROM documents WHERE id = $1").bind(long_id).fetch_one(&pool).await.unwrap();
    let span = |a: i32, b: i32| [a as u32, b as u32];
    let duplicate = ChunkResult {
        schema: SCHEMA_VERSION,
        meta: ChunkMeta {
            run_id,
            document_id: long_id,
            generation,
            index: 1,
            count: count as u32,
            tokens: span(ts, te),
            owned_tokens: span(os, oe),
            chars: span(cs, ce),
            owned_chars: span(ocs, oce),
        },
        outcome: ChunkOutcome::Embedded { embedding: emb.to_vec(), segments: vec![] },
        model: "test".into(),
        input_tokens: 1,
        batch: None,
    };
    let stored = docpipe_aggregator::store(&pool, &duplicate).await.unwrap();
    assert_eq!(stored, docpipe_aggregator::Stored::Duplicate);
    let (done, status): (i32, String) = sqlx::query_as("SELECT chunks_done, status FROM documents WHERE id = $1")
        .bind(long_id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!((done, status.as_str()), (count, "done"));

    // re-ingesting the unchanged bucket skips the done documents and adds no rows
    let before: (i64,) =
        sqlx::query_as("SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.bucket = $1")
            .bind(&bucket)
            .fetch_one(&pool)
            .await
            .unwrap();
    let out = docpipe(&run_args, &prefix);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("2 skipped"), "second run should skip the two done documents: {stdout}");
    let after: (i64,) =
        sqlx::query_as("SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.bucket = $1")
            .bind(&bucket)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(before, after, "no duplicate chunk rows after a re-run");

    // retry-failed takes only the failed documents of a run: the two broken files, again
    let (last_run,): (Uuid,) = sqlx::query_as("SELECT run_id FROM documents WHERE bucket = $1 AND key = 'corrupt.pdf'")
        .bind(&bucket)
        .fetch_one(&pool)
        .await
        .unwrap();
    let out = docpipe(&["retry-failed", "--run", &last_run.to_string()], &prefix);
    assert!(out.status.success());
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("retry-failed prints a JSON summary");
    assert_eq!((summary["objects"].as_u64(), summary["failed"].as_u64()), (Some(2), Some(2)), "{summary}");
    let (done,): (i64,) = sqlx::query_as("SELECT count(*) FROM documents WHERE bucket = $1 AND status = 'done'")
        .bind(&bucket)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(done, 2, "done documents are untouched");

    let _ = std::fs::remove_dir_all(&dir);
    delete_queues(&prefix).await;
}

async fn publish_poison(prefix: &str) {
    let topo = docpipe_common::amqp::Topology::new(prefix);
    let conn =
        docpipe_common::amqp::connect(&env("DOCPIPE_AMQP_URL"), "e2e-poison", std::time::Duration::from_secs(10))
            .await
            .unwrap();
    topo.declare(&conn.create_channel().await.unwrap()).await.unwrap();
    let publisher = docpipe_common::amqp::Publisher::new(&conn).await.unwrap();
    publisher.publish_all(&topo.chunks(), &[serde_json::json!({"not": "a chunk"})]).await.unwrap();
}
