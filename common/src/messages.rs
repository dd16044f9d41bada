//! The messages between stages, defined once. They travel as JSON (persistent AMQP
//! messages, `content_type: application/json`); [`SCHEMA_VERSION`] is bumped on any change
//! that an older consumer could misread.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub const SCHEMA_VERSION: u32 = 1;

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
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ChunkOutcome {
    /// L2-normalised sentence embedding of the chunk.
    Embedded { embedding: Vec<f32> },
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
