//! From page texts to model inputs: the document text, page character ranges, tokens, and
//! the chunk plan (via the pure `docpipe-chunker`).
//!
//! A chunk's model input is `<bos>` + the model's document prompt + the chunk's tokens +
//! `<eos>`: the layout sentence-transformers uses for `prompt + text`. One difference at the
//! seam: the prompt's trailing space stays its own token here, where tokenizing `prompt + text`
//! as one string can merge it into the first word (`▁` + `MUTUAL` vs `▁MUTUAL`). Chunks keep
//! the document's own tokens so their token ranges stay exact.
//! `chunk_tokens` is that whole sequence length (default 2048, the model's maximum), so a
//! chunk holds `chunk_tokens - prompt - 2` document tokens.

use std::ops::Range;
use std::path::Path;

use docpipe_chunker::segment::{self, SegmentConfig};
use docpipe_chunker::{Chunk, ChunkConfig};
use docpipe_common::messages::SegmentRef;
use tokenizers::Tokenizer;

/// Separator between pages in the document text.
pub const PAGE_SEPARATOR: &str = "\n\n";

#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error("cannot load tokenizer {path}: {message}")]
    Tokenizer { path: String, message: String },
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("bad {path}: {message}")]
    Config { path: String, message: String },
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

/// Tokenizer plus the model's input layout.
pub struct ModelInput {
    tokenizer: Tokenizer,
    bos: u32,
    eos: u32,
    prompt_ids: Vec<u32>,
    chunking: ChunkConfig,
}

impl ModelInput {
    /// Load `tokenizer.json` and the document prompt from a sentence-transformers model dir.
    pub fn load(model_dir: &Path, chunk_tokens: usize, overlap: usize) -> Result<Self, PrepareError> {
        let tok_path = model_dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tok_path)
            .map_err(|e| PrepareError::Tokenizer { path: tok_path.display().to_string(), message: e.to_string() })?;
        // The bundled tokenizer may carry truncation/padding settings: chunking needs every token.
        tokenizer
            .with_truncation(None)
            .map_err(|e| PrepareError::Tokenizer { path: tok_path.display().to_string(), message: e.to_string() })?;
        tokenizer.with_padding(None);
        let special = |name: &str| {
            tokenizer.token_to_id(name).ok_or_else(|| PrepareError::Config {
                path: tok_path.display().to_string(),
                message: format!("no {name} token"),
            })
        };
        let (bos, eos) = (special("<bos>")?, special("<eos>")?);
        let prompt = document_prompt(model_dir)?;
        let prompt_ids = tokenizer
            .encode(prompt.as_str(), false)
            .map_err(|e| PrepareError::Encode(e.to_string()))?
            .get_ids()
            .to_vec();
        let max_positions = max_positions(model_dir)?;
        if chunk_tokens > max_positions {
            return Err(PrepareError::ChunkTooLarge { chunk_tokens, max_positions });
        }
        let overhead = prompt_ids.len() + 2;
        if chunk_tokens <= overhead + overlap {
            return Err(PrepareError::ChunkTooSmall { chunk_tokens, overhead, overlap });
        }
        let chunking = ChunkConfig { window: chunk_tokens - overhead, overlap };
        chunking.validate()?;
        Ok(Self { tokenizer, bos, eos, prompt_ids, chunking })
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
                let mut input = Vec::with_capacity(chunk.tokens.len() + self.prompt_ids.len() + 2);
                input.push(self.bos);
                input.extend_from_slice(&self.prompt_ids);
                input.extend_from_slice(&ids[chunk.tokens.clone()]);
                input.push(self.eos);
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

/// `max_position_embeddings` from the model's `config.json`.
fn max_positions(model_dir: &Path) -> Result<usize, PrepareError> {
    let path = model_dir.join("config.json");
    let raw = std::fs::read_to_string(&path)
        .map_err(|source| PrepareError::Read { path: path.display().to_string(), source })?;
    let v: serde_json::Value = serde_json::from_str(&raw)
        .map_err(|e| PrepareError::Config { path: path.display().to_string(), message: e.to_string() })?;
    v.get("max_position_embeddings").and_then(|m| m.as_u64()).map(|m| m as usize).ok_or_else(|| PrepareError::Config {
        path: path.display().to_string(),
        message: "no max_position_embeddings".into(),
    })
}

/// The `document` prompt from `config_sentence_transformers.json` (empty if absent).
fn document_prompt(model_dir: &Path) -> Result<String, PrepareError> {
    let path = model_dir.join("config_sentence_transformers.json");
    if !path.exists() {
        return Ok(String::new());
    }
    let raw = std::fs::read_to_string(&path)
        .map_err(|source| PrepareError::Read { path: path.display().to_string(), source })?;
    let v: serde_json::Value = serde_json::from_str(&raw)
        .map_err(|e| PrepareError::Config { path: path.display().to_string(), message: e.to_string() })?;
    Ok(v.pointer("/prompts/document").and_then(|p| p.as_str()).unwrap_or_default().to_string())
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
