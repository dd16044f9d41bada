//! Publishing persistent JSON messages with publisher confirms.

use std::time::Duration;

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::{BasicProperties, Channel, Confirmation, Connection};
use serde::Serialize;

use crate::{connect, op, AmqpError};

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
