//! Connecting (with the one retry policy), consumer channels, and sampling queue depths.

use std::time::Duration;

use backon::Retryable;
use docpipe_ops::{metrics, redact, retry};
use lapin::options::BasicQosOptions;
use lapin::{Channel, Connection, ConnectionProperties};

use crate::{op, AmqpError, Topology};

/// Connect, retrying with exponential backoff and jitter for up to about `patience`.
pub async fn connect(url: &str, name: &str, patience: Duration) -> Result<Connection, AmqpError> {
    // A malformed URL is not worth retrying, and the parser's message would repeat it verbatim.
    let uri: lapin::uri::AMQPUri = url.parse().map_err(|_| AmqpError::Url { url: redact::url(url) })?;
    let props = ConnectionProperties::default().with_connection_name(name.into());
    let backoff = retry::patient(patience);
    (|| Connection::connect_uri(uri.clone(), props.clone()))
        .retry(backoff)
        .notify(|e, d| tracing::warn!(url = %redact::url(url), error = %e, retry_in = ?d, "RabbitMQ not reachable, retrying"))
        .await
        .map_err(|source| AmqpError::Connect { url: redact::url(url), source })
}

/// A channel for consuming with at most `prefetch` unacknowledged deliveries.
pub async fn consumer_channel(conn: &Connection, prefetch: u16) -> Result<Channel, AmqpError> {
    let ch = conn.create_channel().await.map_err(op("create channel"))?;
    ch.basic_qos(prefetch, BasicQosOptions::default()).await.map_err(op("basic.qos"))?;
    Ok(ch)
}

/// Sample every queue's depth and consumer count into the metrics every `every`, on its own
/// channel of `conn`, until the connection fails (then the caller's reconnect starts anew).
pub async fn sample_queue_depths(conn: &Connection, topology: &Topology, every: Duration) {
    let m = metrics::get();
    let queues = topology.queues();
    loop {
        // a passive declare of a missing queue closes the channel: one channel per round
        let Ok(ch) = conn.create_channel().await else { return };
        for q in &queues {
            match topology.inspect(&ch, q).await {
                Ok((messages, consumers)) => {
                    let labels = vec![("queue", q.clone())];
                    m.queue_messages.get_or_create(&labels).set(messages as i64);
                    m.queue_consumers.get_or_create(&labels).set(consumers as i64);
                }
                Err(e) => {
                    tracing::debug!(queue = q, error = %e, "queue depth not sampled");
                    break;
                }
            }
        }
        let _ = ch.close(200, "sampled".into()).await;
        tokio::time::sleep(every).await;
    }
}
