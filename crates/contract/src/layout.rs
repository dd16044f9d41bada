//! The model-input layout of a chunk, and the offset arithmetic that follows from it.
//!
//! A chunk's input is `<bos>` + the model's document prompt + the chunk's document tokens +
//! `<eos>` — the layout sentence-transformers uses for `prompt + text` (one difference at the
//! seam: the prompt's trailing space stays its own token, so token ranges stay exact).
//! Ingest builds inputs with [`InputLayout::input`]; the worker finds the document tokens back
//! in a [`ChunkTask`] with [`head_len`], [`segment_positions`] and [`standalone_input`].

use std::ops::Range;

use crate::messages::{ChunkTask, Span};

/// The special tokens and prompt around a chunk's document tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputLayout {
    pub bos: u32,
    pub eos: u32,
    /// The document prompt's token ids.
    pub prompt: Vec<u32>,
}

impl InputLayout {
    /// Input positions that are not document tokens: `<bos>`, the prompt, `<eos>`.
    pub fn overhead(&self) -> usize {
        self.prompt.len() + 2
    }

    /// The model input for these document tokens.
    pub fn input(&self, doc_tokens: &[u32]) -> Vec<u32> {
        let mut input = Vec::with_capacity(doc_tokens.len() + self.overhead());
        input.push(self.bos);
        input.extend_from_slice(&self.prompt);
        input.extend_from_slice(doc_tokens);
        input.push(self.eos);
        input
    }
}

fn range(s: Span) -> Range<usize> {
    s[0] as usize..s[1] as usize
}

/// Input positions before the chunk's first document token (`<bos>` and the prompt), worked
/// back from the input's length and the chunk's token range; `None` when they do not fit.
pub fn head_len(task: &ChunkTask) -> Option<usize> {
    let tokens = range(task.meta.tokens);
    task.input_ids.len().checked_sub(1 + tokens.end.checked_sub(tokens.start)?)
}

/// Why a chunk's segment ranges do not fit its input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutError(pub String);

impl std::fmt::Display for LayoutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LayoutError {}

/// For each of a chunk's segments: the document tokens pooled (the segment's part inside the
/// chunk) and those tokens' positions in the model input.
pub type SegmentSpans = Vec<(Range<usize>, Range<usize>)>;

/// Where a chunk's segments sit in its model input ([`SegmentSpans`]).
pub fn segment_positions(task: &ChunkTask) -> Result<SegmentSpans, LayoutError> {
    let chunk = range(task.meta.tokens);
    let Some(offset) = head_len(task).filter(|o| *o >= 1) else {
        return Err(LayoutError(format!(
            "chunk covers tokens {}..{} but has only {} input ids",
            chunk.start,
            chunk.end,
            task.input_ids.len()
        )));
    };
    let mut out = Vec::with_capacity(task.segments.len());
    for seg in &task.segments {
        let pooled = (seg.tokens[0] as usize).max(chunk.start)..(seg.tokens[1] as usize).min(chunk.end);
        if pooled.is_empty() {
            return Err(LayoutError(format!(
                "segment {} (tokens {:?}) does not overlap the chunk's tokens {}..{}",
                seg.index, seg.tokens, chunk.start, chunk.end
            )));
        }
        let positions = offset + pooled.start - chunk.start..offset + pooled.end - chunk.start;
        out.push((pooled, positions));
    }
    Ok(out)
}

/// Whether the chunk owns the segment over document tokens `tokens` ([`docpipe_chunker::owns`],
/// the aggregator's rule).
pub fn owns_segment(task: &ChunkTask, tokens: Span) -> bool {
    docpipe_chunker::owns(&range(task.meta.owned_tokens), &range(tokens))
}

/// The model input that embeds a segment on its own: the chunk input's head (`<bos>` and the
/// document prompt), the pooled document tokens, and its closing `<eos>`; `None` when the chunk
/// does not own the segment ([`docpipe_chunker::owns`], the aggregator's rule) or the ranges
/// do not fit the input.
pub fn standalone_input(task: &ChunkTask, tokens: Span, pooled: Span) -> Option<Vec<u32>> {
    let chunk = range(task.meta.tokens);
    if !owns_segment(task, tokens) {
        return None;
    }
    let head = head_len(task)?;
    let (a, b) = ((pooled[0] as usize).checked_sub(chunk.start)?, (pooled[1] as usize).checked_sub(chunk.start)?);
    let body = task.input_ids.get(head + a..head + b).filter(|b| !b.is_empty())?;
    let mut ids = Vec::with_capacity(head + body.len() + 1);
    ids.extend_from_slice(&task.input_ids[..head]);
    ids.extend_from_slice(body);
    ids.push(*task.input_ids.last()?);
    Some(ids)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::{ChunkMeta, SegmentRef, SCHEMA_VERSION};

    /// A chunk over document tokens 100..110 owning 104..110, with a 2-token prompt: input
    /// `<bos> p p t100..t109 <eos>` where token `t` has id `t`.
    fn task() -> ChunkTask {
        let layout = InputLayout { bos: 2, eos: 1, prompt: vec![7, 8] };
        let doc: Vec<u32> = (100..110).collect();
        ChunkTask {
            schema: SCHEMA_VERSION,
            meta: ChunkMeta {
                run_id: uuid::Uuid::nil(),
                document_id: uuid::Uuid::nil(),
                generation: 1,
                index: 1,
                count: 2,
                tokens: [100, 110],
                owned_tokens: [104, 110],
                chars: [0, 10],
                owned_chars: [4, 10],
            },
            input_ids: layout.input(&doc),
            segments: vec![],
            published_ms: 0,
        }
    }

    #[test]
    fn input_is_bos_prompt_tokens_eos() {
        let t = task();
        assert_eq!(t.input_ids[..4], [2, 7, 8, 100]);
        assert_eq!(*t.input_ids.last().unwrap(), 1);
        assert_eq!(head_len(&t), Some(3));
    }

    #[test]
    fn standalone_input_is_head_segment_tokens_and_eos() {
        let t = task();
        // owned: middle token 106
        assert_eq!(standalone_input(&t, [105, 108], [105, 108]), Some(vec![2, 7, 8, 105, 106, 107, 1]));
        // reaching past the chunk: the pooled part only (middle token 109 is owned)
        assert_eq!(standalone_input(&t, [108, 111], [108, 110]), Some(vec![2, 7, 8, 108, 109, 1]));
        // middle token 101 belongs to the previous chunk
        assert_eq!(standalone_input(&t, [100, 103], [100, 103]), None);
        // ranges that do not fit the input
        assert_eq!(standalone_input(&t, [105, 108], [105, 120]), None);
        assert_eq!(standalone_input(&t, [105, 108], [90, 108]), None);
    }

    #[test]
    fn segment_positions_clip_to_the_chunk() {
        let mut t = task();
        t.segments = vec![SegmentRef { index: 0, tokens: [95, 102] }, SegmentRef { index: 1, tokens: [105, 108] }];
        let p = segment_positions(&t).unwrap();
        assert_eq!(p, vec![(100..102, 3..5), (105..108, 8..11)]);
        t.segments.push(SegmentRef { index: 2, tokens: [120, 130] });
        assert!(segment_positions(&t).unwrap_err().0.contains("does not overlap"));
        t.input_ids.truncate(5);
        assert!(segment_positions(&t).unwrap_err().0.contains("input ids"));
    }
}
