//! Overlapping token windows and the ownership rule — pure arithmetic, no I/O — and the
//! clause segments of a text ([`segment`]).
//!
//! A document of `n` tokens is cut into windows of `window` tokens that advance by
//! `window - overlap`; the last window is shorter and never a duplicate tail. Every chunk
//! **owns** the tokens from the middle of its left overlap to the middle of its right overlap
//! (the first from 0, the last to `n`), so each token is owned by exactly one chunk. Anything
//! produced per token or per span is kept only from the chunk that owns it.
//!
//! Token offsets come from the tokenizer as byte ranges into the document text;
//! [`CharIndex`] turns them into character (Unicode scalar) offsets, which is what is stored:
//! Postgres `substr`, Python slicing and the analyst's SQL all count characters.

use std::ops::Range;

pub mod segment;

/// Default tokens per window: the model's 2048 positions. (`docpipe-contract` uses the same
/// number for the whole model sequence, prompt and special tokens included.)
pub const DEFAULT_WINDOW: usize = 2048;
/// Default tokens shared by neighbouring windows.
pub const DEFAULT_OVERLAP: usize = 128;

/// Window geometry, in document tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChunkConfig {
    /// Tokens per window (the last one may be shorter).
    pub window: usize,
    /// Tokens shared by two neighbouring windows.
    pub overlap: usize,
}

impl Default for ChunkConfig {
    fn default() -> Self {
        Self { window: DEFAULT_WINDOW, overlap: DEFAULT_OVERLAP }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ChunkError {
    #[error("chunk window must be positive")]
    ZeroWindow,
    #[error("overlap ({overlap}) must be smaller than the window ({window})")]
    OverlapTooLarge { window: usize, overlap: usize },
    #[error("token {index} has offsets {start}..{end}, outside the text ({len} bytes)")]
    OffsetOutOfRange { index: usize, start: usize, end: usize, len: usize },
}

impl ChunkConfig {
    pub fn validate(&self) -> Result<(), ChunkError> {
        if self.window == 0 {
            return Err(ChunkError::ZeroWindow);
        }
        if self.overlap >= self.window {
            return Err(ChunkError::OverlapTooLarge { window: self.window, overlap: self.overlap });
        }
        Ok(())
    }

    /// How far each window advances.
    pub fn stride(&self) -> usize {
        self.window - self.overlap
    }
}

/// The ownership rule for spans: a span (a clause segment, by its document-token range) is
/// kept from the chunk whose owned range holds its middle token, so that each span is kept
/// exactly once even when it reaches across chunks.
pub fn owns(owned: &Range<usize>, span: &Range<usize>) -> bool {
    owned.contains(&segment::midpoint(span))
}

/// One window over a document, in token and character coordinates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub index: usize,
    /// Tokens the model sees for this chunk.
    pub tokens: Range<usize>,
    /// Tokens whose per-token outputs this chunk is responsible for.
    pub owned: Range<usize>,
    /// Characters of the document text covered by `tokens`.
    pub chars: Range<usize>,
    /// Characters covered by `owned`.
    pub owned_chars: Range<usize>,
}

/// Token windows for a document of `n_tokens` tokens: `(tokens, owned)` per chunk.
pub fn windows(n_tokens: usize, cfg: ChunkConfig) -> Result<Vec<(Range<usize>, Range<usize>)>, ChunkError> {
    cfg.validate()?;
    let mut spans: Vec<Range<usize>> = Vec::new();
    let mut start = 0;
    while start < n_tokens {
        let end = (start + cfg.window).min(n_tokens);
        spans.push(start..end);
        if end == n_tokens {
            break;
        }
        start += cfg.stride();
    }
    let mut out = Vec::with_capacity(spans.len());
    for (i, span) in spans.iter().enumerate() {
        let owned_start = if i == 0 { 0 } else { boundary(&spans[i - 1], span) };
        let owned_end = match spans.get(i + 1) {
            Some(next) => boundary(span, next),
            None => n_tokens,
        };
        out.push((span.clone(), owned_start..owned_end));
    }
    Ok(out)
}

/// The middle of the overlap between two consecutive windows.
fn boundary(left: &Range<usize>, right: &Range<usize>) -> usize {
    right.start + (left.end - right.start) / 2
}

/// Chunks for a document, given each token's byte range in `text`.
pub fn chunk(text: &str, token_offsets: &[(usize, usize)], cfg: ChunkConfig) -> Result<Vec<Chunk>, ChunkError> {
    chunk_chars(&char_offsets(text, token_offsets)?, cfg)
}

/// Each token's character range, from its byte range in `text`.
pub fn char_offsets(text: &str, token_offsets: &[(usize, usize)]) -> Result<Vec<(usize, usize)>, ChunkError> {
    let index = CharIndex::new(text);
    let mut char_offsets = Vec::with_capacity(token_offsets.len());
    for (i, &(s, e)) in token_offsets.iter().enumerate() {
        if s > e || e > text.len() {
            return Err(ChunkError::OffsetOutOfRange { index: i, start: s, end: e, len: text.len() });
        }
        char_offsets.push((index.char_floor(s), index.char_ceil(e)));
    }
    Ok(char_offsets)
}

/// Chunks for a document, given each token's character range ([`char_offsets`]).
pub fn chunk_chars(char_offsets: &[(usize, usize)], cfg: ChunkConfig) -> Result<Vec<Chunk>, ChunkError> {
    let spans = windows(char_offsets.len(), cfg)?;
    Ok(spans
        .into_iter()
        .enumerate()
        .map(|(i, (tokens, owned))| Chunk {
            index: i,
            chars: char_span(char_offsets, &tokens),
            owned_chars: char_span(char_offsets, &owned),
            tokens,
            owned,
        })
        .collect())
}

/// Character range covered by a (non-empty) token range.
fn char_span(char_offsets: &[(usize, usize)], tokens: &Range<usize>) -> Range<usize> {
    if tokens.is_empty() {
        let at = char_offsets.get(tokens.start).map(|o| o.0).unwrap_or(0);
        return at..at;
    }
    let start = char_offsets[tokens.start].0;
    let end = char_offsets[tokens.start..tokens.end].iter().map(|o| o.1).max().unwrap_or(start);
    start..end.max(start)
}

/// Maps byte offsets of a UTF-8 string to character offsets.
pub struct CharIndex {
    /// Byte offset of every character, plus `len` at the end.
    starts: Vec<usize>,
}

impl CharIndex {
    pub fn new(text: &str) -> Self {
        let mut starts: Vec<usize> = text.char_indices().map(|(b, _)| b).collect();
        starts.push(text.len());
        Self { starts }
    }

    /// Number of characters.
    pub fn len(&self) -> usize {
        self.starts.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Character offset of the character containing byte `b` (rounding down).
    pub fn char_floor(&self, b: usize) -> usize {
        match self.starts.binary_search(&b) {
            Ok(i) => i,
            Err(i) => i.saturating_sub(1),
        }
    }

    /// Character offset just past the character containing byte `b - 1` (rounding up).
    pub fn char_ceil(&self, b: usize) -> usize {
        match self.starts.binary_search(&b) {
            Ok(i) => i,
            Err(i) => i.min(self.len()),
        }
    }

    /// Byte offset of character `c`.
    pub fn byte(&self, c: usize) -> usize {
        self.starts[c.min(self.len())]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(window: usize, overlap: usize) -> ChunkConfig {
        ChunkConfig { window, overlap }
    }

    /// Every token owned exactly once, windows within the document, owned inside tokens.
    fn check_ownership(n: usize, c: ChunkConfig) {
        let spans = windows(n, c).unwrap();
        let mut owners = vec![0u32; n];
        for (tokens, owned) in &spans {
            assert!(tokens.end <= n && tokens.len() <= c.window);
            assert!(owned.start >= tokens.start && owned.end <= tokens.end, "{owned:?} not in {tokens:?}");
            for t in owned.clone() {
                owners[t] += 1;
            }
        }
        assert!(owners.iter().all(|&k| k == 1), "n={n} cfg={c:?}: ownership {owners:?}");
        // no chunk is a duplicate tail: each adds tokens the previous one did not cover
        for pair in spans.windows(2) {
            assert!(pair[1].0.end > pair[0].0.end);
            assert_eq!(pair[1].0.start, pair[0].0.start + c.stride());
        }
    }

    #[test]
    fn every_token_owned_exactly_once() {
        for &(w, o) in &[(2048, 128), (16, 4), (8, 1), (5, 0), (7, 6), (3, 1)] {
            for n in [0, 1, 2, w - 1, w, w + 1, 2 * w, 3 * w + 5, 10_000] {
                check_ownership(n, cfg(w, o));
            }
        }
    }

    #[test]
    fn defaults_are_2048_128() {
        assert_eq!(ChunkConfig::default(), cfg(2048, 128));
        let spans = windows(5000, ChunkConfig::default()).unwrap();
        let tokens: Vec<_> = spans.iter().map(|s| s.0.clone()).collect();
        assert_eq!(tokens, vec![0..2048, 1920..3968, 3840..5000]);
        let owned: Vec<_> = spans.iter().map(|s| s.1.clone()).collect();
        assert_eq!(owned, vec![0..1984, 1984..3904, 3904..5000]);
    }

    #[test]
    fn no_duplicate_tail() {
        // 2100 tokens: the second window holds tokens the first lacks, and there is no third.
        let spans = windows(2100, ChunkConfig::default()).unwrap();
        assert_eq!(spans.len(), 2);
        assert_eq!(spans[1].0, 1920..2100);
        // exactly one window's worth: one chunk, not a second one inside the overlap
        assert_eq!(windows(2048, ChunkConfig::default()).unwrap().len(), 1);
        assert_eq!(windows(2049, ChunkConfig::default()).unwrap().len(), 2);
    }

    #[test]
    fn sizes_are_configurable_and_validated() {
        assert_eq!(windows(10, cfg(4, 2)).unwrap().len(), 4);
        assert_eq!(windows(10, cfg(4, 4)), Err(ChunkError::OverlapTooLarge { window: 4, overlap: 4 }));
        assert_eq!(windows(10, cfg(0, 0)), Err(ChunkError::ZeroWindow));
    }

    /// Whitespace "tokenizer" with byte offsets, standing in for the model's.
    fn words(text: &str) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut start = None;
        for (b, ch) in text.char_indices() {
            match (ch.is_whitespace(), start) {
                (false, None) => start = Some(b),
                (true, Some(s)) => {
                    out.push((s, b));
                    start = None;
                }
                _ => {}
            }
        }
        if let Some(s) = start {
            out.push((s, text.len()));
        }
        out
    }

    fn char_slice(text: &str, r: &Range<usize>) -> String {
        text.chars().skip(r.start).take(r.len()).collect()
    }

    #[test]
    fn char_ranges_round_trip_on_multibyte_text() {
        let text = "Straße Œuvre naïve 契約 条項 🙂 Ελληνικά déjà-vu 💼💼 fin";
        let offs = words(text);
        let chunks = chunk(text, &offs, cfg(3, 1)).unwrap();
        assert!(chunks.len() > 3);
        for c in &chunks {
            let by_chars = char_slice(text, &c.chars);
            let by_bytes = &text[offs[c.tokens.start].0..offs[c.tokens.end - 1].1];
            assert_eq!(by_chars, by_bytes, "chunk {}", c.index);
        }
        // owned character ranges tile the text's tokens without gaps or overlaps
        let owned: String = chunks.iter().map(|c| char_slice(text, &c.owned_chars)).collect::<Vec<_>>().join(" ");
        assert_eq!(owned.split_whitespace().collect::<Vec<_>>(), text.split_whitespace().collect::<Vec<_>>());
    }

    #[test]
    fn offsets_inside_a_character_round_outwards() {
        let text = "a🙂b";
        let idx = CharIndex::new(text);
        assert_eq!(idx.len(), 3);
        assert_eq!(idx.char_floor(2), 1); // inside the emoji
        assert_eq!(idx.char_ceil(2), 2);
        assert_eq!(idx.byte(2), 5);
        // a byte-fallback token covering half the emoji still maps to the whole character
        let chunks = chunk(text, &[(0, 1), (1, 3), (3, 5), (5, 6)], cfg(2, 0)).unwrap();
        assert_eq!(chunks[0].chars, 0..2);
        assert_eq!(chunks[1].chars, 1..3);
    }

    #[test]
    fn rejects_offsets_outside_the_text() {
        let err = chunk("abc", &[(0, 9)], ChunkConfig::default()).unwrap_err();
        assert!(matches!(err, ChunkError::OffsetOutOfRange { index: 0, .. }));
    }
}
