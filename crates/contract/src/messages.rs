//! The messages between stages, defined once. They travel as JSON (persistent AMQP
//! messages, `content_type: application/json`); [`SCHEMA_VERSION`] is bumped on any change
//! that an older consumer could misread.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub const SCHEMA_VERSION: u32 = 2;

/// Half-open `[start, end)` range, serialised as a two-element array.
pub type Span = [u32; 2];

/// Where a chunk sits in its document. Travels on the task and, unchanged, on its result,
/// so the aggregator can store the result without looking anything up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkMeta {
    pub run_id: Uuid,
    pub document_id: Uuid,
    /// Bumped each time the document is (re)ingested; results of older generations are dropped.
    pub generation: i32,
    pub index: u32,
    pub count: u32,
    /// Document-token range the chunk covers (without prompt and special tokens).
    pub tokens: Span,
    /// Document-token range the chunk owns (ownership rule).
    pub owned_tokens: Span,
    /// Character range of `tokens` in the document text.
    pub chars: Span,
    /// Character range of `owned_tokens` in the document text.
    pub owned_chars: Span,
}

/// ingest → worker: one chunk to embed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChunkTask {
    pub schema: u32,
    pub meta: ChunkMeta,
    /// The model's full input: `<bos>`, document prompt, the chunk's tokens, `<eos>`.
    pub input_ids: Vec<u32>,
    /// The document's segments that overlap this chunk.
    #[serde(default)]
    pub segments: Vec<SegmentRef>,
    /// When ingest published the chunk, in Unix milliseconds (0: unknown); the worker's queue
    /// wait is measured from it.
    #[serde(default)]
    pub published_ms: u64,
}

/// A clause segment, by its index in the document and its whole document-token range (which
/// may reach past the chunk: the worker pools the part inside it, and the aggregator keeps
/// the segment from the chunk that owns its middle token).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentRef {
    pub index: u32,
    pub tokens: Span,
}

/// A segment's contextual embedding: mean of its token states inside the chunk, then the
/// model's Dense layers and normalisation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentEmbedding {
    pub index: u32,
    /// The segment's whole document-token range, as sent (decides ownership).
    pub tokens: Span,
    /// Document tokens actually pooled (the part of the segment inside the chunk).
    pub pooled: Span,
    pub embedding: Vec<f32>,
    /// The pooled tokens embedded on their own (`<bos>`, document prompt, the tokens, `<eos>`):
    /// what clause labels score, as it tells clause types apart better than the contextual
    /// embedding. Only on segments the chunk owns; absent when the worker was told not to
    /// compute it or it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standalone: Option<Vec<f32>>,
    /// The worker left this owned segment out of its standalone pass on purpose
    /// (`--standalone-segments none`, or `candidates` where no clause category finds it
    /// likely): labels score its contextual embedding, and `labels` / `eval` do not embed it
    /// on its own later.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub standalone_skipped: bool,
}

/// worker → aggregator: what became of one chunk.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChunkResult {
    pub schema: u32,
    pub meta: ChunkMeta,
    /// Model name and precision, e.g. `embeddinggemma-300m/bf16`.
    pub model: String,
    pub input_tokens: u32,
    pub outcome: ChunkOutcome,
    /// The forward pass that embedded the chunk (absent for a chunk that failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<BatchStats>,
}

/// One forward pass of a worker, as seen by each chunk in it: the figures behind the run
/// report's batch and latency plots.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchStats {
    /// Unique per forward pass.
    pub id: Uuid,
    /// The worker that ran it (host name).
    pub worker: String,
    pub chunks: u32,
    /// Real tokens in the pass, and tokens including padding (chunks × longest).
    pub tokens: u32,
    pub padded_tokens: u32,
    pub prefill_ms: f64,
    /// From ingest publishing this chunk to its forward pass starting.
    pub queue_wait_ms: f64,
}

/// aggregator → fields workers: a document whose embeddings and clause labels are stored, to
/// extract its contract fields from. Extraction stores only for this generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldsTask {
    pub schema: u32,
    pub run_id: Uuid,
    pub document_id: Uuid,
    pub generation: i32,
}

/// Milliseconds since the Unix epoch, for [`ChunkTask::published_ms`].
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ChunkOutcome {
    /// L2-normalised sentence embedding of the chunk, and one per overlapping segment
    /// (late chunking: pooled from the same prefill).
    Embedded {
        embedding: Vec<f32>,
        #[serde(default)]
        segments: Vec<SegmentEmbedding>,
    },
    /// The model rejected this chunk on its own (not a batch-wide failure); the aggregator
    /// fails the document with this reason, so nothing waits for it forever.
    Failed { error: String },
}

impl ChunkMeta {
    /// `document_id/index` — for logs and error messages.
    pub fn label(&self) -> String {
        format!("{}/{}", self.document_id, self.index)
    }
}
