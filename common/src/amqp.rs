//! RabbitMQ: connecting with bounded retries, the queue topology, and publishing with
//! publisher confirms.
//!
//! Topology for a prefix `P` (default `docpipe`):
//! - `P.chunks` (ingest → worker) and `P.results` (worker → aggregator): durable **quorum**
//!   queues with a delivery limit, so a message that keeps failing (a poison message, a
//!   consumer that crashes on it) is dead-lettered instead of looping forever;
//! - `P.dead` (direct exchange) routes them to `P.chunks.dead` / `P.results.dead`, which the
//!   aggregator drains (failing the documents they name) into `P.poison` when they name none.

use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use lapin::options::{
    BasicPublishOptions, BasicQosOptions, ConfirmSelectOptions, ExchangeDeclareOptions, QueueBindOptions,
    QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::Confirmation;
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use serde::Serialize;

use crate::redact;

#[derive(Debug, thiserror::Error)]
pub enum AmqpError {
    #[error("invalid RabbitMQ URL {url}")]
    Url { url: String },
    #[error("cannot connect to RabbitMQ at {url}: {source}")]
    Connect { url: String, source: lapin::Error },
    #[error("RabbitMQ {op} failed: {source}")]
    Op { op: String, source: lapin::Error },
    #[error("RabbitMQ refused (nacked) a message published to {queue}")]
    Nacked { queue: String },
    #[error("cannot encode message for {queue}: {source}")]
    Encode { queue: String, source: serde_json::Error },
}

fn op(op: impl Into<String>) -> impl FnOnce(lapin::Error) -> AmqpError {
    let op = op.into();
    move |source| AmqpError::Op { op, source }
}

/// Queue and exchange names for one deployment (tests use their own prefix).
#[derive(Debug, Clone)]
pub struct Topology {
    pub prefix: String,
    /// Deliveries after which a message is dead-lettered.
    pub delivery_limit: u32,
}

impl Topology {
    pub fn new(prefix: impl Into<String>) -> Self {
        Self { prefix: prefix.into(), delivery_limit: 5 }
    }
    pub fn chunks(&self) -> String {
        format!("{}.chunks", self.prefix)
    }
    pub fn results(&self) -> String {
        format!("{}.results", self.prefix)
    }
    /// S3 event notifications for `docpipe ingest --listen` (also the name of the direct
    /// exchange bound to it, for brokers' notification targets such as MinIO's).
    pub fn events(&self) -> String {
        format!("{}.s3-events", self.prefix)
    }
    pub fn dead_exchange(&self) -> String {
        format!("{}.dead", self.prefix)
    }
    pub fn dead_queue(&self, queue: &str) -> String {
        format!("{queue}.dead")
    }
    /// Dead letters that name no document, kept for a person to inspect.
    pub fn poison(&self) -> String {
        format!("{}.poison", self.prefix)
    }

    /// Every queue of the topology, for depth sampling.
    pub fn queues(&self) -> Vec<String> {
        let mut out = Vec::new();
        for q in [self.chunks(), self.results(), self.events()] {
            out.push(self.dead_queue(&q));
            out.push(q);
        }
        out.push(self.poison());
        out
    }

    /// Declare exchanges and queues (idempotent).
    pub async fn declare(&self, ch: &Channel) -> Result<(), AmqpError> {
        let dlx = self.dead_exchange();
        ch.exchange_declare(
            dlx.as_str().into(),
            ExchangeKind::Direct,
            ExchangeDeclareOptions { durable: true, ..Default::default() },
            FieldTable::default(),
        )
        .await
        .map_err(op(format!("declare exchange {dlx}")))?;
        let mut quorum = FieldTable::default();
        quorum.insert("x-queue-type".into(), AMQPValue::LongString("quorum".into()));
        let poison = self.poison();
        ch.queue_declare(poison.as_str().into(), durable(), quorum)
            .await
            .map_err(op(format!("declare queue {poison}")))?;
        for queue in [self.chunks(), self.results(), self.events()] {
            let dead = self.dead_queue(&queue);
            let mut dead_args = FieldTable::default();
            dead_args.insert("x-queue-type".into(), AMQPValue::LongString("quorum".into()));
            ch.queue_declare(dead.as_str().into(), durable(), dead_args)
                .await
                .map_err(op(format!("declare queue {dead}")))?;
            ch.queue_bind(
                dead.as_str().into(),
                dlx.as_str().into(),
                dead.as_str().into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(op(format!("bind queue {dead}")))?;
            let mut args = FieldTable::default();
            args.insert("x-queue-type".into(), AMQPValue::LongString("quorum".into()));
            args.insert("x-delivery-limit".into(), AMQPValue::LongInt(self.delivery_limit as i32));
            args.insert("x-dead-letter-exchange".into(), AMQPValue::LongString(dlx.as_str().into()));
            args.insert("x-dead-letter-routing-key".into(), AMQPValue::LongString(dead.as_str().into()));
            ch.queue_declare(queue.as_str().into(), durable(), args)
                .await
                .map_err(op(format!("declare queue {queue}")))?;
        }
        let events = self.events();
        ch.exchange_declare(
            events.as_str().into(),
            ExchangeKind::Direct,
            ExchangeDeclareOptions { durable: true, ..Default::default() },
            FieldTable::default(),
        )
        .await
        .map_err(op(format!("declare exchange {events}")))?;
        ch.queue_bind(
            events.as_str().into(),
            events.as_str().into(),
            events.as_str().into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(op(format!("bind queue {events}")))?;
        Ok(())
    }

    /// Messages waiting in `queue`.
    pub async fn depth(&self, ch: &Channel, queue: &str) -> Result<u32, AmqpError> {
        Ok(self.inspect(ch, queue).await?.0)
    }

    /// Messages waiting in `queue` and its consumers. A queue that does not exist is an error,
    /// which closes the channel.
    pub async fn inspect(&self, ch: &Channel, queue: &str) -> Result<(u32, u32), AmqpError> {
        let q = ch
            .queue_declare(
                queue.into(),
                QueueDeclareOptions { passive: true, ..Default::default() },
                FieldTable::default(),
            )
            .await
            .map_err(op(format!("inspect queue {queue}")))?;
        Ok((q.message_count(), q.consumer_count()))
    }
}

fn durable() -> QueueDeclareOptions {
    QueueDeclareOptions { durable: true, ..Default::default() }
}

/// Connect, retrying with exponential backoff and jitter for up to about `patience`.
pub async fn connect(url: &str, name: &str, patience: Duration) -> Result<Connection, AmqpError> {
    // A malformed URL is not worth retrying, and the parser's message would repeat it verbatim.
    let uri: lapin::uri::AMQPUri = url.parse().map_err(|_| AmqpError::Url { url: redact::url(url) })?;
    let props = ConnectionProperties::default().with_connection_name(name.into());
    let backoff = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(Duration::from_secs(5))
        .with_total_delay(Some(patience))
        .with_max_times(usize::MAX)
        .with_jitter();
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

/// Publishes persistent JSON messages and waits for the broker's confirm of each.
///
/// A publisher made with [`Publisher::reconnecting`] owns its connection: when the broker
/// goes away mid-batch it reconnects with backoff and publishes the whole batch again (a
/// message may then arrive twice; every consumer is idempotent).
#[derive(Clone)]
pub struct Publisher {
    ch: std::sync::Arc<tokio::sync::Mutex<Channel>>,
    reconnect: Option<std::sync::Arc<Reconnect>>,
}

struct Reconnect {
    url: String,
    name: String,
    patience: Duration,
    /// The connection the channel belongs to (kept alive here).
    conn: tokio::sync::Mutex<Option<Connection>>,
}

async fn confirm_channel(conn: &Connection) -> Result<Channel, AmqpError> {
    let ch = conn.create_channel().await.map_err(op("create channel"))?;
    ch.confirm_select(ConfirmSelectOptions::default()).await.map_err(op("confirm.select"))?;
    Ok(ch)
}

impl Publisher {
    /// A publisher on a channel of `conn`; it fails when the connection does.
    pub async fn new(conn: &Connection) -> Result<Self, AmqpError> {
        let ch = confirm_channel(conn).await?;
        Ok(Self { ch: std::sync::Arc::new(tokio::sync::Mutex::new(ch)), reconnect: None })
    }

    /// A publisher with its own connection to `url`, re-established (for up to `patience`
    /// each time) when the broker restarts.
    pub async fn reconnecting(url: &str, name: &str, patience: Duration) -> Result<Self, AmqpError> {
        let conn = connect(url, name, patience).await?;
        let ch = confirm_channel(&conn).await?;
        Ok(Self {
            ch: std::sync::Arc::new(tokio::sync::Mutex::new(ch)),
            reconnect: Some(std::sync::Arc::new(Reconnect {
                url: url.into(),
                name: name.into(),
                patience,
                conn: tokio::sync::Mutex::new(Some(conn)),
            })),
        })
    }

    /// Publish `msgs` to `queue`; returns once the broker has confirmed every one of them.
    /// On a connection failure a reconnecting publisher reconnects and starts the batch over
    /// (at most 5 times).
    pub async fn publish_all<T: Serialize>(&self, queue: &str, msgs: &[T]) -> Result<(), AmqpError> {
        let mut attempt = 0;
        loop {
            let result = {
                let ch = self.ch.lock().await;
                publish_batch(&ch, queue, msgs).await
            };
            match (result, &self.reconnect) {
                (Err(AmqpError::Op { op, source }), Some(r)) if attempt < 5 => {
                    attempt += 1;
                    tracing::warn!(queue, error = %source, op, attempt, "publishing failed; reconnecting to RabbitMQ");
                    let conn = connect(&r.url, &r.name, r.patience).await?;
                    let ch = confirm_channel(&conn).await?;
                    *self.ch.lock().await = ch;
                    *r.conn.lock().await = Some(conn);
                }
                (result, _) => return result,
            }
        }
    }
}

/// Publish a batch on a confirm channel and wait for every confirm.
async fn publish_batch<T: Serialize>(ch: &Channel, queue: &str, msgs: &[T]) -> Result<(), AmqpError> {
    let mut pending = Vec::with_capacity(msgs.len());
    for m in msgs {
        let body = serde_json::to_vec(m).map_err(|source| AmqpError::Encode { queue: queue.into(), source })?;
        let props = BasicProperties::default().with_delivery_mode(2).with_content_type("application/json".into());
        let confirm = ch
            .basic_publish(
                "".into(),
                queue.into(),
                BasicPublishOptions { mandatory: true, ..Default::default() },
                &body,
                props,
            )
            .await
            .map_err(op(format!("publish to {queue}")))?;
        pending.push(confirm);
    }
    for confirm in pending {
        match confirm.await.map_err(op(format!("confirm from {queue}")))? {
            Confirmation::Ack(None) => {}
            // mandatory + unroutable: the queue does not exist
            Confirmation::Ack(Some(_)) | Confirmation::Nack(_) => {
                return Err(AmqpError::Nacked { queue: queue.into() })
            }
            Confirmation::NotRequested => unreachable!("confirm.select was enabled"),
        }
    }
    Ok(())
}

/// Sample every queue's depth and consumer count into the metrics every `every`, on its own
/// channel of `conn`, until the connection fails (then the caller's reconnect starts anew).
pub async fn sample_queue_depths(conn: &Connection, topology: &Topology, every: Duration) {
    let m = crate::metrics::get();
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
