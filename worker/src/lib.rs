//! **worker** — the prefill stage: chunks from RabbitMQ, batched through the embedding model,
//! results back to RabbitMQ.
//!
//! Three stages run concurrently so the model never waits on the broker:
//! ```text
//! RabbitMQ chunks ─► assemble batch ─► model thread ─► publish results ─► ack chunks
//!                    (token budget,    (one batch      (confirm first,
//!                     max wait)         at a time)      then ack)
//! ```
//! A chunk is acknowledged only after its result is confirmed by the broker, so a crash at
//! any point redelivers it (at-least-once; the aggregator's writes are idempotent). A message
//! that cannot be decoded is dead-lettered. A batch that fails as a whole (out of memory) is
//! split and retried; a chunk the model rejects on its own becomes a `Failed` result, so its
//! document ends `failed` with the reason; a single chunk that fails for other reasons is
//! requeued (and dead-lettered after the delivery limit).
//!
//! One chunk pass gives the chunk embedding and every segment's contextual (late-chunked)
//! embedding; a second pass over short sequences embeds segments the chunk owns on their own,
//! for clause labels ([`batch`]): all of them, the candidates a rule keeps, or none
//! ([`Standalone`]). Batches are filled by
//! [`assemble`]; the model is any [`docpipe_batching::Backend`] (`docpipe-model`'s in the binary),
//! so this crate does not link libtorch.

pub mod assemble;
pub mod batch;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use docpipe_batching::Backend;
use docpipe_bus::{self as bus, AmqpError, Inbox, Publisher, Topology};
use docpipe_contract::defaults;
use docpipe_contract::messages::{ChunkMeta, ChunkOutcome, ChunkResult, ChunkTask, SCHEMA_VERSION};
use docpipe_ops::metrics::{self, Metrics};
use lapin::message::Delivery;
use tokio::sync::{mpsc, watch};
use tracing::{debug, error, info, warn};

use assemble::{assemble, Source};
use batch::{embed_chunks, embed_standalone, Embedding};

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Upper bound on the padded tokens (batch × longest) of one forward pass.
    pub max_batch_tokens: usize,
    /// How long to wait for more chunks once a batch has one.
    pub max_wait: Duration,
    /// Unacknowledged deliveries held from the broker (the next batches wait here).
    pub prefetch: u16,
    /// Which owned segments are also embedded on their own (see
    /// `SegmentEmbedding::standalone`).
    pub standalone: Standalone,
}

/// Which owned segments the standalone pass embeds on their own. Each costs its tokens again
/// through the model, in a short sequence: all of them, about as many tokens as the chunk pass.
#[derive(Clone, Default)]
pub enum Standalone {
    /// Every owned segment.
    #[default]
    All,
    /// Those the rule keeps, given the segment's index in its document and its contextual
    /// embedding; the others are marked `standalone_skipped`.
    Candidates(Arc<dyn Fn(u32, &[f32]) -> bool + Send + Sync>),
    /// None: no standalone pass; every owned segment is marked `standalone_skipped` (labels
    /// score its contextual embedding, and `labels` does not embed it on its own later).
    Off,
}

impl std::fmt::Debug for Standalone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Standalone::All => "All",
            Standalone::Candidates(_) => "Candidates",
            Standalone::Off => "Off",
        })
    }
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            max_batch_tokens: defaults::CPU_BATCH_TOKENS,
            max_wait: defaults::MAX_WAIT,
            prefetch: defaults::WORKER_PREFETCH,
            standalone: Standalone::All,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error(transparent)]
    Amqp(#[from] AmqpError),
    #[error("model thread stopped")]
    ModelGone,
}

/// A chunk task and the delivery that brought it (acknowledged once its result is published).
struct Job {
    delivery: Delivery,
    task: ChunkTask,
}

/// Whether chunks `metas` are every chunk of each document (generation) they belong to: then
/// a batch of them need not wait for more ([`assemble`]).
fn complete<'a>(metas: impl Iterator<Item = &'a ChunkMeta>) -> bool {
    let mut seen: std::collections::BTreeMap<(uuid::Uuid, i32), (u32, std::collections::BTreeSet<u32>)> =
        std::collections::BTreeMap::new();
    for m in metas {
        seen.entry((m.document_id, m.generation)).or_insert_with(|| (m.count, Default::default())).1.insert(m.index);
    }
    seen.values().all(|(count, indices)| indices.len() >= *count as usize)
}

/// Chunk tasks from the inbox; a message that is not one is dead-lettered.
struct Chunks<'a>(&'a mut Inbox);

impl Source for Chunks<'_> {
    type Raw = Delivery;
    type Item = Job;
    type Error = AmqpError;

    async fn recv(&mut self) -> Result<Delivery, AmqpError> {
        Ok(self.0.recv().await?.1)
    }

    async fn accept(&mut self, delivery: Delivery) -> Result<Option<Job>, AmqpError> {
        let task = bus::decode::<ChunkTask>(&delivery, "chunk", |t| {
            if t.schema != SCHEMA_VERSION || t.input_ids.is_empty() {
                let (schema, doc) = (t.schema, t.meta.document_id);
                return Err(format!("schema {schema} (expected {SCHEMA_VERSION}) or no tokens, document {doc}"));
            }
            Ok(())
        })
        .await?;
        Ok(task.map(|task| Job { delivery, task }))
    }
}

/// Consume `topology.chunks()` until `shutdown` turns true, then finish what is in flight.
pub async fn run<B: Backend + Send + 'static>(
    conn: &lapin::Connection,
    topology: &Topology,
    model: Arc<Mutex<B>>,
    cfg: WorkerConfig,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), WorkerError> {
    let queue = topology.chunks();
    let mut inbox = Inbox::open(conn, cfg.prefetch, &[(queue.clone(), "docpipe-worker")]).await?;
    let publisher = Publisher::new(conn).await?;
    let label = model.lock().map_err(|_| WorkerError::ModelGone)?.label();
    info!(queue, model = %label, max_batch_tokens = cfg.max_batch_tokens, max_wait_ms = cfg.max_wait.as_millis() as u64, "worker consuming");

    let (batch_tx, batch_rx) = mpsc::channel::<Vec<Job>>(1);
    let (done_tx, done_rx) = mpsc::channel::<Vec<(Job, Embedding)>>(2);
    let model_thread = spawn_model_thread(model, &cfg, batch_rx, done_tx)?;
    let mut publish = tokio::spawn(publish_results(publisher, topology.results(), label, done_rx));

    let mut chunks = Chunks(&mut inbox);
    loop {
        let assembled = tokio::select! {
            a = assemble(&mut chunks, cfg.max_batch_tokens, cfg.max_wait, |j| j.task.input_ids.len(), |jobs: &[Job]| complete(jobs.iter().map(|j| &j.task.meta)), &mut shutdown) => a?,
            // the publisher only ends early on an error: stop taking work and report it
            r = &mut publish => return Err(r.map_err(|_| WorkerError::ModelGone)?.err().unwrap_or(WorkerError::ModelGone)),
        };
        if !assembled.items.is_empty() {
            debug!(chunks = assembled.items.len(), tokens = assembled.tokens, "batch assembled");
            if batch_tx.send(assembled.items).await.is_err() {
                break; // the model thread stopped: the publisher's result says why
            }
        }
        if assembled.stopping {
            break;
        }
    }
    // Stop taking deliveries; what was fetched but not batched is requeued by the broker when
    // the channel closes. Finish the batches in flight.
    drop(batch_tx);
    let published = publish.await.map_err(|_| WorkerError::ModelGone)?;
    let _ = model_thread.join();
    published?;
    inbox.close("worker stopping").await;
    info!("worker stopped");
    Ok(())
}

/// The model thread: one batch at a time, off the async runtime.
fn spawn_model_thread<B: Backend + Send + 'static>(
    model: Arc<Mutex<B>>,
    cfg: &WorkerConfig,
    mut batches: mpsc::Receiver<Vec<Job>>,
    done: mpsc::Sender<Vec<(Job, Embedding)>>,
) -> Result<std::thread::JoinHandle<()>, WorkerError> {
    let (budget, standalone) = (cfg.max_batch_tokens, cfg.standalone.clone());
    std::thread::Builder::new()
        .name("docpipe-model".into())
        .spawn(move || {
            let m = metrics::get();
            let mut waiting = Instant::now();
            while let Some(mut jobs) = batches.blocking_recv() {
                m.stage("worker_idle", waiting.elapsed().as_secs_f64());
                // a panic inside libtorch poisons the lock: stop, the caller reports it
                let Ok(model) = model.lock() else { break };
                jobs.sort_by_key(|j| j.task.input_ids.len());
                let tasks: Vec<&ChunkTask> = jobs.iter().map(|j| &j.task).collect();
                let t = Instant::now();
                let mut embedded = embed_chunks(&*model, &tasks, budget);
                m.stage("chunk_forward", t.elapsed().as_secs_f64());
                debug_assert_eq!(embedded.len(), tasks.len(), "one outcome per chunk");
                // with `Off` this only marks the owned segments as skipped on purpose
                let t = Instant::now();
                embed_standalone(&*model, &tasks, &mut embedded, budget, &standalone);
                m.stage("standalone_pass", t.elapsed().as_secs_f64());
                record_memory_peak(model.memory_in_use());
                drop(model);
                let t = Instant::now();
                if done.blocking_send(jobs.into_iter().zip(embedded).collect()).is_err() {
                    break;
                }
                m.stage("worker_blocked", t.elapsed().as_secs_f64());
                waiting = Instant::now();
            }
        })
        .map_err(|e| {
            error!(error = %e, "cannot start the model thread");
            WorkerError::ModelGone
        })
}

fn record_memory_peak(in_use: Option<u64>) {
    if let Some(used) = in_use {
        let peak = &metrics::get().device_memory_peak_bytes;
        if used as i64 > peak.get() {
            peak.set(used as i64);
        }
    }
}

/// Publisher: results first, then the acks of their chunks. A chunk the model rejects on its
/// own becomes a `Failed` result (its document fails with the reason); a transient failure
/// (out of memory on a single chunk) is requeued, and after the queue's delivery limit it is
/// dead-lettered, which the aggregator also turns into a failed document.
async fn publish_results(
    publisher: Publisher,
    queue: String,
    model: String,
    mut done: mpsc::Receiver<Vec<(Job, Embedding)>>,
) -> Result<(), WorkerError> {
    while let Some(batch) = done.recv().await {
        let mut results = Vec::with_capacity(batch.len());
        let mut acks = Vec::with_capacity(batch.len());
        let metrics = metrics::get();
        for (job, embedded) in batch {
            let m = &job.task.meta;
            let (outcome, stats) = match embedded {
                Ok(e) => {
                    Metrics::outcome(&metrics.chunks, "embedded");
                    (ChunkOutcome::Embedded { embedding: e.embedding, segments: e.segments }, Some(e.batch))
                }
                Err(e) if e.permanent => {
                    error!(run_id = %m.run_id, document_id = %m.document_id, chunk = m.index, error = %e.message, "chunk rejected by the model");
                    Metrics::outcome(&metrics.chunks, "rejected");
                    (ChunkOutcome::Failed { error: e.message }, None)
                }
                Err(e) => {
                    warn!(run_id = %m.run_id, document_id = %m.document_id, chunk = m.index, error = %e.message, "chunk failed; requeueing it");
                    Metrics::outcome(&metrics.chunks, "requeued");
                    bus::requeue(&job.delivery).await?;
                    continue;
                }
            };
            let input_tokens = u32::try_from(job.task.input_ids.len()).unwrap_or(u32::MAX);
            results.push(ChunkResult {
                schema: SCHEMA_VERSION,
                meta: m.clone(),
                model: model.clone(),
                input_tokens,
                outcome,
                batch: stats,
            });
            acks.push(job.delivery);
        }
        let t = Instant::now();
        publisher.publish_all(&queue, &results).await?;
        for delivery in &acks {
            bus::ack(delivery).await?;
        }
        metrics.stage("results_publish", t.elapsed().as_secs_f64());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(document: u128, generation: i32, index: u32, count: u32) -> ChunkMeta {
        ChunkMeta {
            run_id: uuid::Uuid::nil(),
            document_id: uuid::Uuid::from_u128(document),
            generation,
            index,
            count,
            tokens: [0, 1],
            owned_tokens: [0, 1],
            chars: [0, 1],
            owned_chars: [0, 1],
        }
    }

    #[test]
    fn a_batch_is_complete_when_it_holds_every_chunk_of_its_documents() {
        let all = [meta(1, 0, 0, 2), meta(2, 0, 0, 1), meta(1, 0, 1, 2)];
        assert!(complete(all.iter()));
        assert!(!complete(all[..2].iter()), "document 1 lacks its chunk 1");
        // a redelivered chunk is not a second chunk; an older generation's is not this one's
        assert!(!complete([meta(1, 0, 0, 2), meta(1, 0, 0, 2)].iter()));
        assert!(!complete([meta(1, 0, 0, 2), meta(1, 1, 1, 2)].iter()));
        assert!(complete(std::iter::empty()), "nothing to wait for");
    }
}
