//! `docpipe chunks FILES…`: the chunks (or `--segments`: the clause segments) ingest would
//! publish for local PDFs, as JSON lines; no services needed.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use docpipe_text::extract::{ExtractLimits, Extractor};
use docpipe_text::ocr::Ocr;
use docpipe_text::prepare::{DocumentText, ModelInput, Prepared};

use crate::cli::{Common, OcrArgs};
use crate::setup;

pub async fn run(
    c: &Common,
    chunk_tokens: usize,
    overlap: usize,
    segments: bool,
    ocr: &OcrArgs,
    files: &[PathBuf],
) -> Result<()> {
    let input = ModelInput::load(&setup::model_dir(c)?, chunk_tokens, overlap)?;
    let limits = ExtractLimits::default();
    let ocr = Ocr::new(ocr.config(limits.memory_bytes >> 20));
    ocr.check().await?;
    let extractor = Extractor { exe: setup::extractor_exe()?, limits, ocr };
    for f in files {
        let pdf = std::fs::read(f).with_context(|| format!("reading {}", f.display()))?;
        let pages = extractor.extract(&pdf).await.with_context(|| format!("extracting {}", f.display()))?;
        let doc = DocumentText::from_pages(&pages.pages);
        let prepared = input.prepare(&doc.text).with_context(|| format!("tokenizing {}", f.display()))?;
        if segments {
            print_segments(f, &doc, &prepared);
        } else {
            print_chunks(f, prepared);
        }
    }
    Ok(())
}

fn print_segments(f: &Path, doc: &DocumentText, prepared: &Prepared) {
    for (i, s) in prepared.segments.iter().enumerate() {
        let pages = doc.pages_of(&s.chars);
        let text: String = doc.text.chars().skip(s.chars.start).take(s.chars.len()).collect();
        let line = serde_json::json!({
            "file": f.display().to_string(), "segment": i, "chars": [s.chars.start, s.chars.end],
            "tokens": [s.tokens.start, s.tokens.end], "pages": [pages.start, pages.end - 1], "text": text,
        });
        println!("{line}");
    }
}

fn print_chunks(f: &Path, prepared: Prepared) {
    for p in prepared.chunks {
        let span = |r: &std::ops::Range<usize>| [r.start, r.end];
        let line = serde_json::json!({
            "file": f.display().to_string(), "index": p.chunk.index, "tokens": span(&p.chunk.tokens),
            "owned": span(&p.chunk.owned), "chars": span(&p.chunk.chars), "input_ids": p.input_ids,
            "segments": p.segments,
        });
        println!("{line}");
    }
}
