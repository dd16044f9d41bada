//! `docpipe ingest --listen` against the real services: S3 event notifications in the format
//! MinIO publishes, sent to the `P.s3-events` exchange as MinIO's AMQP target would, make
//! separate ingest, worker and aggregator processes turn an upload into a done document —
//! without listing the bucket. A message that is not an S3 event is dead-lettered; an event
//! for another bucket is skipped.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lapin::options::BasicPublishOptions;
use lapin::BasicProperties;
use sqlx::PgPool;
use uuid::Uuid;

mod common;
use common::{delete_queues, env};

const BIN: &str = env!("CARGO_BIN_EXE_docpipe");

fn spawn(args: &[&str], prefix: &str) -> Child {
    Command::new(BIN)
        .args(args)
        .env("DOCPIPE_QUEUE_PREFIX", prefix)
        .env("DOCPIPE_LOG", "info,lapin=warn,sqlx=warn")
        .stdout(Stdio::piped())
        .spawn()
        .expect("start docpipe")
}

fn stop(mut child: Child) -> std::process::Output {
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    if child.try_wait().unwrap().is_none() {
        let _ = child.kill();
    }
    child.wait_with_output().unwrap()
}

/// An S3 event as MinIO's AMQP target publishes it.
fn minio_event(bucket: &str, key_encoded: &str, size: usize) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "EventName": "s3:ObjectCreated:Put",
        "Key": format!("{bucket}/{key_encoded}"),
        "Records": [{
            "eventVersion": "2.0", "eventSource": "minio:s3", "awsRegion": "", "eventTime": "2026-11-30T02:00:00.000Z",
            "eventName": "s3:ObjectCreated:Put", "userIdentity": {"principalId": "docpipe"},
            "requestParameters": {"sourceIPAddress": "127.0.0.1"}, "responseElements": {},
            "s3": {"s3SchemaVersion": "1.0", "configurationId": "Config",
                   "bucket": {"name": bucket, "ownerIdentity": {"principalId": "docpipe"}, "arn": format!("arn:aws:s3:::{bucket}")},
                   "object": {"key": key_encoded, "size": size, "eTag": "", "contentType": "application/pdf", "sequencer": "187A"}},
            "source": {"host": "127.0.0.1", "port": "", "userAgent": "MinIO (linux; amd64) minio-go/v7"}
        }]
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn s3_events_drive_ingest_without_listing() {
    let tag = Uuid::new_v4().simple().to_string()[..8].to_string();
    let (bucket, prefix) = (format!("listen-{tag}"), format!("listen-{tag}"));
    let dir = std::env::temp_dir().join(format!("docpipe-listen-{tag}"));
    std::fs::create_dir_all(&dir).unwrap();
    let txt = dir.join("nda.txt");
    std::fs::write(
        &txt,
        "MUTUAL NDA. Each party shall keep the other's confidential information secret.\n\n1. Term. Three years.",
    )
    .unwrap();
    let pdf = dir.join("acme msa.pdf");
    assert!(Command::new(BIN)
        .args(["render-pdf", txt.to_str().unwrap(), pdf.to_str().unwrap()])
        .status()
        .unwrap()
        .success());
    let size = std::fs::metadata(&pdf).unwrap().len() as usize;
    let put = Command::new(BIN).args(["put", "--bucket", &bucket, pdf.to_str().unwrap()]).output().unwrap();
    assert!(put.status.success(), "{}", String::from_utf8_lossy(&put.stderr));

    let aggregator = spawn(&["aggregate"], &prefix);
    let worker = spawn(&["worker"], &prefix);
    let ingest = spawn(&["ingest", "--bucket", &bucket, "--listen"], &prefix);

    let conn = docpipe_bus::connect(&env("DOCPIPE_AMQP_URL"), "listen-test", Duration::from_secs(10)).await.unwrap();
    let topo = docpipe_bus::Topology::new(&prefix);
    let ch = conn.create_channel().await.unwrap();
    topo.declare(&ch).await.unwrap();
    let events = topo.events();
    for body in [
        minio_event("some-other-bucket", "x.pdf", 10),
        b"this is not an S3 event".to_vec(),
        minio_event(&bucket, "acme+msa.pdf", size),
    ] {
        ch.basic_publish(
            events.as_str().into(),
            events.as_str().into(),
            BasicPublishOptions::default(),
            &body,
            BasicProperties::default().with_delivery_mode(2),
        )
        .await
        .unwrap();
    }

    let pool = PgPool::connect(&env("DOCPIPE_DATABASE_URL")).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        let row: Option<(String, Option<String>)> =
            sqlx::query_as("SELECT status, error FROM documents WHERE bucket = $1 AND key = 'acme msa.pdf'")
                .bind(&bucket)
                .fetch_optional(&pool)
                .await
                .unwrap();
        match row {
            Some((s, e)) if s == "done" || s == "failed" => break (s, e),
            _ if Instant::now() > deadline => panic!("the uploaded document was not processed within 300 s"),
            _ => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    };
    assert_eq!(status.0, "done", "{status:?}");
    let (others,): (i64,) = sqlx::query_as("SELECT count(*) FROM documents WHERE bucket = 'some-other-bucket'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(others, 0, "the event for another bucket was skipped");
    assert_eq!(topo.depth(&ch, &topo.dead_queue(&events)).await.unwrap(), 1, "the non-event was dead-lettered");

    let out = stop(ingest);
    let summary: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("ingest --listen prints its summary on SIGTERM");
    assert_eq!((summary["objects"].as_u64(), summary["queued"].as_u64()), (Some(1), Some(1)), "{summary}");
    let (trigger, finished): (String, bool) = sqlx::query_as(
        "SELECT r.trigger, r.finished_at IS NOT NULL FROM runs r JOIN documents d ON d.run_id = r.id
         WHERE d.bucket = $1",
    )
    .bind(&bucket)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((trigger.as_str(), finished), ("listen", true));
    stop(worker);
    stop(aggregator);

    delete_queues(&prefix).await;
    let _ = std::fs::remove_dir_all(&dir);
}
