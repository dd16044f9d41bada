//! Helpers shared by the integration tests that run against the real services.

use lapin::options::{ExchangeDeleteOptions, QueueDeleteOptions};

pub fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run the tests with `make test`, which starts the services and exports their URLs")
    })
}

/// Remove a test's queues and exchanges (quorum queues keep a log each).
pub async fn delete_queues(prefix: &str) {
    let topo = docpipe_bus::Topology::new(prefix);
    let conn = docpipe_bus::connect(&env("DOCPIPE_AMQP_URL"), "test-cleanup", std::time::Duration::from_secs(10))
        .await
        .unwrap();
    let ch = conn.create_channel().await.unwrap();
    for q in [topo.chunks(), topo.results(), topo.events()] {
        for name in [topo.dead_queue(&q), q] {
            ch.queue_delete(name.as_str().into(), QueueDeleteOptions::default()).await.unwrap();
        }
    }
    ch.queue_delete(topo.poison().as_str().into(), QueueDeleteOptions::default()).await.unwrap();
    for x in [topo.dead_exchange(), topo.events()] {
        ch.exchange_delete(x.as_str().into(), ExchangeDeleteOptions::default()).await.unwrap();
    }
}
