//! Queue and exchange names, and declaring them (see the crate docs for the topology).

use lapin::options::{
    ExchangeDeclareOptions, ExchangeDeleteOptions, QueueBindOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Channel, ExchangeKind};

use crate::{op, AmqpError};

/// Queue and exchange names for one deployment (tests use their own prefix).
#[derive(Debug, Clone)]
pub struct Topology {
    pub prefix: String,
    /// Deliveries after which a message is dead-lettered.
    pub delivery_limit: u32,
}

impl Topology {
    pub fn new(prefix: impl Into<String>) -> Self {
        Self { prefix: prefix.into(), delivery_limit: docpipe_contract::defaults::DELIVERY_LIMIT }
    }
    pub fn chunks(&self) -> String {
        format!("{}.chunks", self.prefix)
    }
    pub fn results(&self) -> String {
        format!("{}.results", self.prefix)
    }
    /// Documents whose contract fields are to be extracted (the decode workers' queue).
    pub fn fields(&self) -> String {
        format!("{}.fields", self.prefix)
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
        for q in [self.chunks(), self.results(), self.fields(), self.events()] {
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
        for queue in [self.chunks(), self.results(), self.fields(), self.events()] {
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

    /// Delete every queue and exchange of the topology (a test's own prefix, or a deployment
    /// being removed): quorum queues keep a log each until deleted.
    pub async fn delete(&self, ch: &Channel) -> Result<(), AmqpError> {
        for queue in self.queues() {
            ch.queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
                .await
                .map_err(op(format!("delete queue {queue}")))?;
        }
        for exchange in [self.dead_exchange(), self.events()] {
            ch.exchange_delete(exchange.as_str().into(), ExchangeDeleteOptions::default())
                .await
                .map_err(op(format!("delete exchange {exchange}")))?;
        }
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
