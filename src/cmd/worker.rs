//! `docpipe worker`: embed chunks from RabbitMQ until SIGTERM.

use std::sync::{Arc, Mutex};

use anyhow::Result;

use crate::cli::{Common, WorkerArgs};
use crate::setup::{self, SharedModel};

pub async fn run(c: &Common, worker: &WorkerArgs) -> Result<()> {
    // off the runtime's threads, so /healthz answers while the model loads
    let (model, cfg) = tokio::task::block_in_place(|| {
        let model = setup::load_model(c, worker)?;
        let cfg = setup::worker_config(worker, &model)?;
        anyhow::Ok((model, cfg))
    })?;
    serve(c, Arc::new(Mutex::new(model)), cfg, "docpipe-worker", docpipe_ops::shutdown_signal()).await;
    Ok(())
}

/// The worker role, kept connected across broker restarts, until `stop`.
pub async fn serve(
    c: &Common,
    model: SharedModel,
    cfg: docpipe_worker::WorkerConfig,
    name: &str,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    docpipe_bus::supervise(&setup::broker(c), name, stop, |conn, topology, stop| {
        let (model, cfg) = (model.clone(), cfg.clone());
        async move { docpipe_worker::run(&conn, &topology, model, cfg, stop).await }
    })
    .await
}
