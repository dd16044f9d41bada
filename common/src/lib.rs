//! What every stage of docpipe shares, and nothing more: the messages exchanged between
//! stages ([`messages`]), the RabbitMQ topology and publishing with confirms ([`amqp`]), the
//! Postgres pool and migrations ([`db`]), secret redaction for logs ([`redact`]), and the
//! Prometheus metrics with health and readiness endpoints every role serves ([`metrics`]).
//!
//! No stage reaches into another stage's internals; they meet only here.

pub mod amqp;
pub mod db;
pub mod messages;
pub mod metrics;
pub mod redact;
