//! Helpers of the end-to-end test: running the docpipe binary (optionally while scraping its
//! `/metrics` and `/readyz`), reading metric samples, rendering sample PDFs, and a poison
//! message for the chunks queue.

use std::path::{Path, PathBuf};
use std::process::Command;

pub use crate::common::docpipe;
use crate::common::env;

const BIN: &str = env!("CARGO_BIN_EXE_docpipe");

/// `docpipe` with its metrics listener on a free loopback port, scraping `/metrics` and `/readyz`
/// every 200 ms while it runs; returns its output, every `/metrics` body, and whether `/readyz`
/// ever answered 200.
pub fn docpipe_scraped(args: &[&str], prefix: &str) -> (std::process::Output, Vec<String>, bool) {
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
pub fn http_get(addr: &str, path: &str) -> Option<(String, String)> {
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
pub fn metric(bodies: &[String], sample: &str) -> f64 {
    bodies
        .iter()
        .flat_map(|b| b.lines())
        .filter_map(|l| l.strip_prefix(sample)?.strip_prefix(' ')?.split_whitespace().next()?.parse::<f64>().ok())
        .fold(0.0, f64::max)
}

/// `text` as a PDF (`docpipe render-pdf`) named `name.pdf` in `dir`.
pub fn render(dir: &Path, name: &str, text: &str) -> PathBuf {
    let txt = dir.join(format!("{name}.txt"));
    std::fs::write(&txt, text).unwrap();
    let pdf = dir.join(format!("{name}.pdf"));
    let st = Command::new(BIN).args(["render-pdf", txt.to_str().unwrap(), pdf.to_str().unwrap()]).status().unwrap();
    assert!(st.success(), "docpipe render-pdf {} failed", txt.display());
    pdf
}

/// A contract long enough for several 512-token chunks, with non-ASCII text.
pub fn long_contract() -> String {
    let mut s = String::from(
        "SUPPLY AGREEMENT between Société Générale de Pièces (\"Supplier\") and Acme Corp. (\"Buyer\"), dated as of \
         March 3, 2021.\n\n",
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
    s.push_str("41. Governing law. This Agreement shall be governed by and construed in accordance with the laws of the State of Delaware.\n");
    s
}

/// Declare the topology of `prefix` and put a message that is not a chunk task on its chunks
/// queue.
pub async fn publish_poison(prefix: &str) {
    let topo = docpipe_bus::Topology::new(prefix);
    let conn =
        docpipe_bus::connect(&env("DOCPIPE_AMQP_URL"), "e2e-poison", std::time::Duration::from_secs(10)).await.unwrap();
    topo.declare(&conn.create_channel().await.unwrap()).await.unwrap();
    let publisher = docpipe_bus::Publisher::new(&conn).await.unwrap();
    publisher.publish_all(&topo.chunks(), &[serde_json::json!({"not": "a chunk"})]).await.unwrap();
}
