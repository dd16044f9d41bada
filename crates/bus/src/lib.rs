//! **bus** — RabbitMQ for every stage: the queue topology ([`Topology`]), connecting with the
//! one retry policy ([`connect()`]), publishing with confirms ([`Publisher`]), consuming with
//! dead-lettering of what cannot be decoded ([`Inbox`], [`decode`]), and the supervisor that
//! keeps a consuming role connected across broker restarts ([`supervise()`]).
//!
//! Topology for a prefix `P` (default `docpipe`):
//! - `P.chunks` (ingest → worker) and `P.results` (worker → aggregator): durable **quorum**
//!   queues with a delivery limit, so a message that keeps failing (a poison message, a
//!   consumer that crashes on it) is dead-lettered instead of looping forever;
//! - `P.s3-events` (S3 event notifications → `ingest --listen`), with an exchange of the same
//!   name for brokers' notification targets;
//! - `P.dead` (direct exchange) routes them to `P.chunks.dead` / `P.results.dead`, which the
//!   aggregator drains (failing the documents they name) into `P.poison` when they name none.

mod connect;
mod consume;
mod publisher;
mod supervise;
mod topology;

pub use connect::{connect, consumer_channel, sample_queue_depths};
pub use consume::{ack, dead_letter, decode, requeue, Inbox};
pub use publisher::Publisher;
pub use supervise::{connect_and_declare, supervise, Broker};
pub use topology::Topology;

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
    #[error("the broker closed the consumer of {queue} (connection lost?)")]
    ConsumerClosed { queue: String },
}

fn op(op: impl Into<String>) -> impl FnOnce(lapin::Error) -> AmqpError {
    let op = op.into();
    move |source| AmqpError::Op { op, source }
}
