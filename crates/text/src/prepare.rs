//! From page texts to model inputs: the document text, page character ranges, tokens, and
//! the chunk plan (via the pure `docpipe-chunker`).
//!
//! A chunk's model input follows [`docpipe_contract::layout`]: `<bos>` + the model's document
//! prompt + the chunk's tokens + `<eos>`. `chunk_tokens` is that whole sequence length
//! (default 2048, the model's maximum), so a chunk holds `chunk_tokens - prompt - 2` document
//! tokens.

use docpipe_chunker::segment::{self, SegmentConfig};
use docpipe_chunker::{Chunk, ChunkConfig};
use docpipe_contract::layout::{standalone_input, InputLayout};
use docpipe_contract::messages::{ChunkMeta, ChunkTask, SegmentRef, SCHEMA_VERSION};
use std::ops::Range;
use tokenizers::Tokenizer;

use crate::model_dir::{ModelDir, ModelDirError};

/// Separator between pages in the document text.
pub const PAGE_SEPARATOR: &str = "\n\n";

#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error(transparent)]
    ModelDir(#[from] ModelDirError),
    #[error("{path}: no {token} token")]
    NoSpecialToken { path: String, token: &'static str },
    #[error("tokenizer failed: {0}")]
    Encode(String),
    #[error("chunk_tokens {chunk_tokens} leaves no room for text after the prompt and special tokens ({overhead} tokens) and overlap {overlap}")]
    ChunkTooSmall { chunk_tokens: usize, overhead: usize, overlap: usize },
    #[error("chunk_tokens {chunk_tokens} is more than the model's {max_positions} positions")]
    ChunkTooLarge { chunk_tokens: usize, max_positions: usize },
    #[error(transparent)]
    Chunk(#[from] docpipe_chunker::ChunkError),
}

/// Document text assembled from pages, with each page's character range.
#[derive(Debug, Clone)]
pub struct DocumentText {
    pub text: String,
    /// Character range of page `i + 1` in `text`.
    pub pages: Vec<Range<usize>>,
}

impl DocumentText {
    pub fn from_pages(pages: &[String]) -> Self {
        let mut text = String::new();
        let mut ranges = Vec::with_capacity(pages.len());
        let mut chars = 0;
        for (i, page) in pages.iter().enumerate() {
            if i > 0 {
                text.push_str(PAGE_SEPARATOR);
                chars += PAGE_SEPARATOR.chars().count();
            }
            // NUL bytes are not allowed in Postgres text
            let page = page.replace('\0', " ");
            let n = page.chars().count();
            text.push_str(&page);
            ranges.push(chars..chars + n);
            chars += n;
        }
        Self { text, pages: ranges }
    }

    /// 1-based page numbers a character range touches.
    pub fn pages_of(&self, chars: &Range<usize>) -> Range<usize> {
        let first = self.pages.iter().position(|p| p.end > chars.start).unwrap_or(self.pages.len().saturating_sub(1));
        let last = self.pages.iter().rposition(|p| p.start < chars.end.max(chars.start + 1)).unwrap_or(first);
        first + 1..last.max(first) + 2
    }
}

/// One chunk ready to publish.
#[derive(Debug, Clone)]
pub struct PreparedChunk {
    pub chunk: Chunk,
    pub input_ids: Vec<u32>,
    /// The document's segments that overlap the chunk's tokens.
    pub segments: Vec<SegmentRef>,
}

/// Which document a chunk message belongs to.
#[derive(Debug, Clone, Copy)]
pub struct TaskIds {
    pub run_id: uuid::Uuid,
    pub document_id: uuid::Uuid,
    pub generation: i32,
    /// Chunks in the document.
    pub count: u32,
    pub published_ms: u64,
}

impl PreparedChunk {
    /// The chunk as the message ingest publishes.
    pub fn into_task(self, ids: TaskIds) -> ChunkTask {
        let span = |r: &Range<usize>| [r.start as u32, r.end as u32];
        ChunkTask {
            schema: SCHEMA_VERSION,
            meta: ChunkMeta {
                run_id: ids.run_id,
                document_id: ids.document_id,
                generation: ids.generation,
                index: self.chunk.index as u32,
                count: ids.count,
                tokens: span(&self.chunk.tokens),
                owned_tokens: span(&self.chunk.owned),
                chars: span(&self.chunk.chars),
                owned_chars: span(&self.chunk.owned_chars),
            },
            input_ids: self.input_ids,
            segments: self.segments,
            published_ms: ids.published_ms,
        }
    }
}

/// A clause segment of the document (see `docpipe_chunker::segment`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// Character range in the document text.
    pub chars: Range<usize>,
    /// Document-token range (non-empty).
    pub tokens: Range<usize>,
}

/// A tokenized document cut into chunks and segments.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub n_tokens: usize,
    pub chunks: Vec<PreparedChunk>,
    pub segments: Vec<Segment>,
}

impl Prepared {
    /// Each segment's standalone model input, exactly as the worker builds it from the chunk
    /// that owns the segment ([`standalone_input`]); `None` where no chunk yields one.
    pub fn standalone_inputs(&self) -> Vec<Option<Vec<u32>>> {
        let mut out = vec![None; self.segments.len()];
        let ids = TaskIds {
            run_id: uuid::Uuid::nil(),
            document_id: uuid::Uuid::nil(),
            generation: 0,
            count: self.chunks.len() as u32,
            published_ms: 0,
        };
        for c in &self.chunks {
            let task = c.clone().into_task(ids);
            for seg in &task.segments {
                let Some(slot) = out.get_mut(seg.index as usize).filter(|s| s.is_none()) else { continue };
                let pooled = [seg.tokens[0].max(task.meta.tokens[0]), seg.tokens[1].min(task.meta.tokens[1])];
                *slot = standalone_input(&task, seg.tokens, pooled);
            }
        }
        out
    }
}

/// Tokenizer plus the model's input layout.
pub struct ModelInput {
    tokenizer: Tokenizer,
    layout: InputLayout,
    chunking: ChunkConfig,
}

impl ModelInput {
    /// The tokenizer, special tokens and document prompt of a model directory, for chunks of
    /// `chunk_tokens` model positions overlapping by `overlap` tokens.
    pub fn load(dir: &ModelDir, chunk_tokens: usize, overlap: usize) -> Result<Self, PrepareError> {
        let tokenizer = dir.tokenizer()?;
        let special = |token: &'static str| {
            tokenizer.token_to_id(token).ok_or_else(|| PrepareError::NoSpecialToken {
                path: dir.join("tokenizer.json").display().to_string(),
                token,
            })
        };
        let (bos, eos) = (special("<bos>")?, special("<eos>")?);
        let prompt = tokenizer
            .encode(dir.prompt("document")?.as_str(), false)
            .map_err(|e| PrepareError::Encode(e.to_string()))?
            .get_ids()
            .to_vec();
        let layout = InputLayout { bos, eos, prompt };
        let max_positions = dir.max_positions()?;
        if chunk_tokens > max_positions {
            return Err(PrepareError::ChunkTooLarge { chunk_tokens, max_positions });
        }
        let overhead = layout.overhead();
        if chunk_tokens <= overhead + overlap {
            return Err(PrepareError::ChunkTooSmall { chunk_tokens, overhead, overlap });
        }
        let chunking = ChunkConfig { window: chunk_tokens - overhead, overlap };
        chunking.validate()?;
        Ok(Self { tokenizer, layout, chunking })
    }

    pub fn chunking(&self) -> ChunkConfig {
        self.chunking
    }

    /// Longest segment, in tokens: half a chunk, so that the chunk owning a segment's middle
    /// token holds most of it. Longer segments are split (the same way every time).
    pub fn max_segment_tokens(&self) -> usize {
        (self.chunking.window / 2).max(1)
    }

    /// Tokenize the document, cut it into chunks with their model inputs, and into segments.
    pub fn prepare(&self, text: &str) -> Result<Prepared, PrepareError> {
        let enc = self.tokenizer.encode(text, false).map_err(|e| PrepareError::Encode(e.to_string()))?;
        let ids = enc.get_ids();
        let token_chars = docpipe_chunker::char_offsets(text, enc.get_offsets())?;
        let chunks = docpipe_chunker::chunk_chars(&token_chars, self.chunking)?;
        let segments = self.segments(text, &token_chars);
        let prepared = chunks
            .into_iter()
            .map(|chunk| {
                let input = self.layout.input(&ids[chunk.tokens.clone()]);
                let overlapping = segments
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.tokens.start < chunk.tokens.end && s.tokens.end > chunk.tokens.start)
                    .map(|(i, s)| SegmentRef { index: i as u32, tokens: [s.tokens.start as u32, s.tokens.end as u32] })
                    .collect();
                PreparedChunk { chunk, input_ids: input, segments: overlapping }
            })
            .collect();
        Ok(Prepared { n_tokens: ids.len(), chunks: prepared, segments })
    }

    /// Segments with their token ranges; long ones split into token pieces.
    fn segments(&self, text: &str, token_chars: &[(usize, usize)]) -> Vec<Segment> {
        let max = self.max_segment_tokens();
        let mut out = Vec::new();
        for chars in segment::segments(text, SegmentConfig::default()) {
            let tokens = segment::token_range(&chars, token_chars);
            if tokens.is_empty() {
                continue;
            }
            if tokens.len() <= max {
                out.push(Segment { chars, tokens });
                continue;
            }
            for piece in segment::split_long(std::slice::from_ref(&tokens), max) {
                let start = token_chars[piece.start].0.max(chars.start);
                let end = token_chars[piece.start..piece.end].iter().map(|t| t.1).max().unwrap_or(start).min(chars.end);
                out.push(Segment { chars: start..end.max(start), tokens: piece });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_map_to_character_ranges() {
        let doc = DocumentText::from_pages(&["Prémière".into(), "".into(), "third\0page".into()]);
        assert_eq!(doc.pages, vec![0..8, 10..10, 12..22]);
        assert!(!doc.text.contains('\0'));
        let sub: String = doc.text.chars().skip(12).take(10).collect();
        assert_eq!(sub, "third page");
        assert_eq!(doc.pages_of(&(0..3)), 1..2);
        assert_eq!(doc.pages_of(&(5..14)), 1..4);
        assert_eq!(doc.pages_of(&(13..14)), 3..4);
    }
}
