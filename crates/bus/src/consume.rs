//! The consuming side every stage shares: one [`Inbox`] over one or more queues, and
//! [`decode`], which dead-letters a message that is not what the queue carries.

use futures_util::stream::{select_all, BoxStream, StreamExt};
use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicRejectOptions};
use lapin::types::FieldTable;
use lapin::{Channel, Connection};
use serde::de::DeserializeOwned;

use crate::{consumer_channel, op, AmqpError};

/// Deliveries from one or more queues on one channel (one prefetch window for all of them).
pub struct Inbox {
    ch: Channel,
    queues: Vec<String>,
    stream: BoxStream<'static, (usize, Result<Delivery, lapin::Error>)>,
}

impl Inbox {
    /// Consume `queues` (name, consumer tag) with at most `prefetch` unacknowledged deliveries.
    pub async fn open(conn: &Connection, prefetch: u16, queues: &[(String, &str)]) -> Result<Self, AmqpError> {
        let ch = consumer_channel(conn, prefetch).await?;
        let mut streams = Vec::with_capacity(queues.len());
        for (i, (queue, tag)) in queues.iter().enumerate() {
            let consumer = ch
                .basic_consume(
                    queue.as_str().into(),
                    (*tag).into(),
                    BasicConsumeOptions::default(),
                    FieldTable::default(),
                )
                .await
                .map_err(op(format!("consume {queue}")))?;
            streams.push(consumer.map(move |d| (i, d)).boxed());
        }
        Ok(Self { ch, queues: queues.iter().map(|q| q.0.clone()).collect(), stream: select_all(streams).boxed() })
    }

    /// The next delivery and the index of its queue in [`Inbox::open`]'s list. An error when
    /// the broker closed the consumers or the channel failed (the supervisor reconnects).
    pub async fn recv(&mut self) -> Result<(usize, Delivery), AmqpError> {
        match self.stream.next().await {
            Some((i, Ok(d))) => Ok((i, d)),
            Some((i, Err(e))) => Err(AmqpError::Op { op: format!("consume {}", self.queues[i]), source: e }),
            None => Err(AmqpError::ConsumerClosed { queue: self.queues.join(", ") }),
        }
    }

    /// Close the channel: deliveries taken but not acknowledged return to their queues.
    pub async fn close(self, why: &str) {
        let _ = self.ch.close(200, why.into()).await;
    }
}

/// Acknowledge a delivery (its outcome is safely stored or published).
pub async fn ack(d: &Delivery) -> Result<(), AmqpError> {
    d.ack(BasicAckOptions::default()).await.map(|_| ()).map_err(op("ack"))
}

/// Return a delivery to its queue (a quorum queue counts it towards the delivery limit).
pub async fn requeue(d: &Delivery) -> Result<(), AmqpError> {
    d.nack(BasicNackOptions { requeue: true, ..Default::default() }).await.map(|_| ()).map_err(op("nack"))
}

/// Reject a delivery without requeueing it: the broker dead-letters it.
pub async fn dead_letter(d: &Delivery) -> Result<(), AmqpError> {
    d.reject(BasicRejectOptions { requeue: false }).await.map(|_| ()).map_err(op("reject"))
}

/// Parse a delivery's JSON as `T` and check it with `valid`; a message that does not parse or
/// that `valid` refuses is logged with the reason and dead-lettered, and yields `None`.
pub async fn decode<T: DeserializeOwned>(
    d: &Delivery,
    what: &str,
    valid: impl FnOnce(&T) -> Result<(), String>,
) -> Result<Option<T>, AmqpError> {
    let why = match serde_json::from_slice::<T>(&d.data) {
        Ok(v) => match valid(&v) {
            Ok(()) => return Ok(Some(v)),
            Err(why) => why,
        },
        Err(e) => format!("undecodable: {e}"),
    };
    tracing::warn!(message = what, error = %why, bytes = d.data.len(), "bad message; dead-lettering it");
    dead_letter(d).await?;
    Ok(None)
}
