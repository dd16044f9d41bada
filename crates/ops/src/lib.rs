//! **ops** — what every role of docpipe needs to be run in production, and nothing about
//! contracts: Prometheus metrics with health and readiness ([`metrics`]), secret redaction
//! for logs ([`redact`]), the one retry policy ([`retry`]) and the shutdown signal
//! ([`shutdown_signal`]).

pub mod metrics;
pub mod redact;
pub mod retry;

use tokio::sync::watch;

/// A watch that turns true on SIGINT or SIGTERM: roles finish their in-flight work and stop.
pub fn shutdown_signal() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
        match term {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch SIGTERM; only SIGINT stops this process gracefully");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
        tracing::info!("shutdown requested; finishing in-flight work");
        let _ = tx.send(true);
    });
    rx
}
