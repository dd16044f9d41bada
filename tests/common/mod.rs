//! Helpers shared by the integration tests that run against the real services.

pub fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run the tests with `make test`, which starts the services and exports their URLs")
    })
}

/// Remove a test's queues and exchanges (quorum queues keep a log each).
pub async fn delete_queues(prefix: &str) {
    let conn = docpipe_bus::connect(&env("DOCPIPE_AMQP_URL"), "test-cleanup", std::time::Duration::from_secs(10))
        .await
        .unwrap();
    let ch = conn.create_channel().await.unwrap();
    docpipe_bus::Topology::new(prefix).delete(&ch).await.unwrap();
}

/// Run `docpipe` with the test's queue prefix, no metrics listener, and print what it said
/// (shown when the test fails).
#[allow(dead_code)] // not every test binary runs the CLI
pub fn docpipe(args: &[&str], prefix: &str) -> std::process::Output {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_docpipe"))
        .args(args)
        .env("DOCPIPE_QUEUE_PREFIX", prefix)
        .env("DOCPIPE_LOG", "info,lapin=warn,sqlx=warn")
        .env("DOCPIPE_METRICS_ADDR", "off")
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
