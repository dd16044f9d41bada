//! Keeping a consuming role connected: connect (marking RabbitMQ not ready meanwhile), declare
//! the topology, run the role, and when the connection drops, reconnect with backoff and run
//! it again. Unacknowledged deliveries return to their queue and are redelivered; every write
//! downstream is idempotent.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use backon::BackoffBuilder;
use docpipe_ops::{metrics, redact, retry};
use lapin::Connection;
use tokio::sync::watch;
use tracing::warn;

use crate::{connect, sample_queue_depths, AmqpError, Topology};

/// Where the broker is and how the queues are named.
#[derive(Debug, Clone)]
pub struct Broker {
    pub url: String,
    pub queue_prefix: String,
    /// How long to keep trying to connect before giving up.
    pub patience: Duration,
}

/// How often queue depths are sampled into the metrics while a role runs.
const DEPTH_SAMPLING: Duration = Duration::from_secs(15);
/// A role that ran this long before losing the broker starts its backoff over.
const HEALTHY_RUN: Duration = Duration::from_secs(60);
/// How often the connection's state is checked for `/readyz` while a role runs.
const LIVENESS_POLL: Duration = Duration::from_millis(250);

/// Connect as `name` (RabbitMQ is not ready on `/readyz` meanwhile) and declare the topology.
pub async fn connect_and_declare(broker: &Broker, name: &str) -> Result<(Connection, Topology), AmqpError> {
    let m = metrics::get();
    m.set_ready("rabbitmq", Err(format!("connecting to {}", redact::url(&broker.url))));
    let conn = connect(&broker.url, name, broker.patience).await?;
    m.set_ready("rabbitmq", Ok(()));
    let topology = Topology::new(&broker.queue_prefix);
    let ch = conn.create_channel().await.map_err(crate::op("create channel"))?;
    topology.declare(&ch).await?;
    let _ = ch.close(200, "declared".into()).await;
    Ok((conn, topology))
}

/// Run a consuming role until `stop` turns true, reconnecting to RabbitMQ with backoff
/// whenever the connection drops (a broker restart). The role returns `Ok` when it stopped
/// on request, an error when it lost the broker.
pub async fn supervise<F, Fut, E>(broker: &Broker, name: &str, mut stop: watch::Receiver<bool>, mut role: F)
where
    F: FnMut(Arc<Connection>, Topology, watch::Receiver<bool>) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    let policy = || retry::unbounded(Duration::from_secs(1), Duration::from_secs(30)).build();
    let mut delays = policy();
    loop {
        if *stop.borrow() {
            return;
        }
        match connect_and_declare(broker, name).await {
            Ok((conn, topology)) => {
                let conn = Arc::new(conn);
                let started = Instant::now();
                let sampler = {
                    let (conn, topology) = (conn.clone(), topology.clone());
                    tokio::spawn(async move { sample_queue_depths(&conn, &topology, DEPTH_SAMPLING).await })
                };
                let watchdog = tokio::spawn(mark_unready_when_lost(conn.clone()));
                let outcome = role(conn.clone(), topology, stop.clone()).await;
                sampler.abort();
                watchdog.abort();
                match outcome {
                    Ok(()) => return,
                    Err(e) => {
                        warn!(role = name, error = %e, "lost RabbitMQ; reconnecting");
                        metrics::get().set_ready("rabbitmq", Err(format!("reconnecting: {e}")));
                    }
                }
                let _ = conn.close(200, "reconnecting".into()).await;
                if started.elapsed() > HEALTHY_RUN {
                    delays = policy();
                }
            }
            Err(e) => warn!(role = name, error = %e, "cannot reach RabbitMQ; retrying"),
        }
        let delay = delays.next().unwrap_or(Duration::from_secs(30));
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stop.changed() => return,
        }
    }
}

/// `/readyz` turns 503 as soon as the connection is lost, not only when the role notices: a
/// worker in the middle of a long forward pass reads its queue again only afterwards.
async fn mark_unready_when_lost(conn: Arc<Connection>) {
    loop {
        tokio::time::sleep(LIVENESS_POLL).await;
        if !conn.status().connected() {
            let how = if conn.status().errored() { "failed" } else { "closed" };
            metrics::get().set_ready("rabbitmq", Err(format!("connection {how}; reconnecting")));
            return;
        }
    }
}
