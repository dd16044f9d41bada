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
