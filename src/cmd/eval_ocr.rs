//! `docpipe eval-ocr --pdfs DIR` (`make eval-ocr`): how well OCR reads, measured on
//! born-digital PDFs against their own text layer. Pages with a good text layer are rendered
//! and read by OCR as if they were scans; the OCR text is compared with the layer's after both
//! are normalised (whitespace runs, ligatures, quote and dash forms). Prints one row per page
//! and the totals: character and word error rates (edit distance over the reference's length,
//! summed over pages) and pages per second.
//!
//! Two rates each. *Strict* counts reading order: a margin of section numbers or a footer that
//! the text layer puts elsewhere than Tesseract's layout analysis costs every character of it,
//! twice. *Moves free* first pairs the runs of 3 or more words that both texts share wherever
//! they are (a block moved is not misread), then counts the edits between what is left, in
//! order: the errors of reading characters and words, which is what OCR is for. The last line
//! is `ocr_cer X.XXXX`, the moves-free character error rate.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use docpipe_text::extract::{ExtractLimits, Extractor};
use docpipe_text::ocr::{self, Ocr, OcrConfig, OcrMode};

use crate::cli::OcrArgs;

pub async fn run(pdfs: &Path, docs: usize, pages_per_doc: usize, args: &OcrArgs) -> Result<()> {
    let limits = ExtractLimits::default();
    let layer = Extractor {
        exe: crate::setup::extractor_exe()?,
        limits: limits.clone(),
        ocr: Ocr::new(OcrConfig { mode: OcrMode::Off, ..OcrConfig::default() }),
    };
    let reader = Ocr::new(OcrConfig { mode: OcrMode::Force, ..args.config(limits.memory_bytes >> 20) });
    reader.check().await?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(pdfs)
        .with_context(|| format!("listing {}", pdfs.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x.eq_ignore_ascii_case("pdf")))
        .collect();
    files.sort();
    files.truncate(docs);
    if files.is_empty() {
        bail!("no PDFs in {}", pdfs.display());
    }
    let scratch = std::env::temp_dir().join(format!("docpipe-eval-ocr-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).with_context(|| format!("creating {}", scratch.display()))?;
    println!(
        "{:<48} {:>4} {:>6} {:>7} {:>7} {:>8} {:>8} {:>5} {:>6}",
        "document", "page", "chars", "CER", "WER", "CER-mv", "WER-mv", "conf", "s"
    );
    let mut total = Totals::default();
    let started = Instant::now();
    for f in &files {
        let pdf = std::fs::read(f).with_context(|| format!("reading {}", f.display()))?;
        let pages = match layer.extract(&pdf).await {
            Ok(p) => p,
            Err(e) => {
                println!("{:<48} skipped: {e}", name(f));
                continue;
            }
        };
        let good: Vec<usize> = (0..pages.pages.len()).filter(|&i| ocr::needs_ocr(&pages.pages[i]).is_none()).collect();
        for i in spread(&good, pages_per_doc) {
            let page = i as u32 + 1;
            let size = pages.sizes.get(i).copied().flatten();
            let read = match reader.read_page(f, page, size, &scratch).await {
                Ok(r) => r,
                Err(e) => {
                    println!("{:<48} {page:>4} skipped: {e}", name(f));
                    continue;
                }
            };
            let reference = normalise(&pages.pages[i]);
            let hypothesis = normalise(&read.text);
            let r: Vec<char> = reference.chars().collect();
            let h: Vec<char> = hypothesis.chars().collect();
            let rw: Vec<&str> = reference.split(' ').collect();
            let hw: Vec<&str> = hypothesis.split(' ').collect();
            let (ce, we) = (edit_distance(&r, &h), edit_distance(&rw, &hw));
            let (mce, mwe) = errors_moves_free(&rw, &hw);
            let pct = |e: usize, n: usize| 100.0 * e as f64 / n.max(1) as f64;
            println!(
                "{:<48} {page:>4} {:>6} {:>6.2}% {:>6.2}% {:>7.2}% {:>7.2}% {:>5.1} {:>6.2}",
                name(f),
                r.len(),
                pct(ce, r.len()),
                pct(we, rw.len()),
                pct(mce, r.len()),
                pct(mwe, rw.len()),
                read.confidence,
                read.seconds
            );
            total.add([ce, we, mce, mwe], r.len(), rw.len(), read.seconds);
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    if total.pages == 0 {
        bail!("no page with a usable text layer to compare with");
    }
    let wall = started.elapsed().as_secs_f64();
    println!(
        "{} pages of {} documents at {} DPI, languages {}: {:.2} s per page ({:.2} pages/s on one core; wall {wall:.0} s with text extraction)",
        total.pages,
        files.len(),
        args.ocr_dpi,
        args.ocr_languages,
        total.seconds / total.pages as f64,
        total.pages as f64 / total.seconds,
    );
    let [ce, we, mce, mwe] = total.errors;
    let (chars, words) = (total.chars as f64, total.words as f64);
    println!("strict (reading order counts): CER {:.4}, WER {:.4}", ce as f64 / chars, we as f64 / words);
    println!("ocr_wer {:.4}", mwe as f64 / words);
    println!("ocr_cer {:.4}", mce as f64 / chars);
    Ok(())
}

#[derive(Default)]
struct Totals {
    pages: usize,
    /// Character and word errors, strict then moves free.
    errors: [usize; 4],
    chars: usize,
    words: usize,
    seconds: f64,
}

impl Totals {
    fn add(&mut self, errors: [usize; 4], chars: usize, words: usize, seconds: f64) {
        self.pages += 1;
        for (t, e) in self.errors.iter_mut().zip(errors) {
            *t += e;
        }
        self.chars += chars;
        self.words += words;
        self.seconds += seconds;
    }
}

/// Shortest run of shared words that counts as a block (shorter ones are too common to say
/// where they came from).
const MIN_BLOCK_WORDS: usize = 3;

/// Character and word errors between `reference` and `hypothesis` (words) when blocks may move:
/// the longest runs of at least [`MIN_BLOCK_WORDS`] words the two share, wherever they are,
/// are paired first (greedily, longest first); the words left over on each side, in their
/// order, are then compared by edit distance.
pub fn errors_moves_free(reference: &[&str], hypothesis: &[&str]) -> (usize, usize) {
    let (mut rm, mut hm) = (vec![false; reference.len()], vec![false; hypothesis.len()]);
    loop {
        // longest common run of unpaired words: (length, end in reference, end in hypothesis)
        let mut best = (0usize, 0usize, 0usize);
        let mut prev = vec![0usize; hypothesis.len() + 1];
        let mut cur = vec![0usize; hypothesis.len() + 1];
        for (i, r) in reference.iter().enumerate() {
            for (j, h) in hypothesis.iter().enumerate() {
                cur[j + 1] = if !rm[i] && !hm[j] && r == h { prev[j] + 1 } else { 0 };
                if cur[j + 1] > best.0 {
                    best = (cur[j + 1], i + 1, j + 1);
                }
            }
            std::mem::swap(&mut prev, &mut cur);
        }
        let (len, ri, hi) = best;
        if len < MIN_BLOCK_WORDS {
            break;
        }
        rm[ri - len..ri].iter_mut().for_each(|m| *m = true);
        hm[hi - len..hi].iter_mut().for_each(|m| *m = true);
    }
    let left = |words: &[&str], paired: &[bool]| -> Vec<String> {
        words.iter().zip(paired).filter(|(_, p)| !**p).map(|(w, _)| w.to_string()).collect()
    };
    let (r, h) = (left(reference, &rm), left(hypothesis, &hm));
    let chars = |w: &[String]| w.join(" ").chars().collect::<Vec<char>>();
    (edit_distance(&chars(&r), &chars(&h)), edit_distance(&r, &h))
}

fn name(p: &Path) -> String {
    let n = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if n.chars().count() > 48 {
        n.chars().take(47).collect::<String>() + "…"
    } else {
        n
    }
}

/// Up to `n` items spread evenly over `items`.
fn spread(items: &[usize], n: usize) -> Vec<usize> {
    if items.len() <= n {
        return items.to_vec();
    }
    (0..n).map(|k| items[k * items.len() / n]).collect()
}

/// Text as both sides are compared: typographic forms folded to one, whitespace runs to one
/// space. What OCR reads differently in these is not an error a reader would notice.
pub fn normalise(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            'ﬁ' => out.push_str("fi"),
            'ﬂ' => out.push_str("fl"),
            'ﬀ' => out.push_str("ff"),
            'ﬃ' => out.push_str("ffi"),
            'ﬄ' => out.push_str("ffl"),
            '‘' | '’' | '‚' | '‛' | '′' | '`' | '´' => out.push('\''),
            '“' | '”' | '„' | '‟' | '″' => out.push('"'),
            '‐' | '‑' | '‒' | '–' | '—' | '―' | '−' => out.push('-'),
            c if c.is_whitespace() => out.push(' '),
            c => out.push(c),
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Levenshtein distance (insertions, deletions, substitutions) between two sequences.
pub fn edit_distance<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, x) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, y) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(x != y);
            cur[j + 1] = substitute.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_edits() {
        let c = |s: &str| s.chars().collect::<Vec<_>>();
        assert_eq!(edit_distance(&c("kitten"), &c("sitting")), 3);
        assert_eq!(edit_distance(&c(""), &c("abc")), 3);
        assert_eq!(edit_distance(&c("same"), &c("same")), 0);
        assert_eq!(edit_distance(&["a", "b", "c"], &["a", "c"]), 1);
    }

    #[test]
    fn moved_blocks_are_free_and_misreads_are_not() {
        let w = |s: &'static str| s.split(' ').collect::<Vec<_>>();
        let reference = w("Page 1 footer text 1. The Agreement is made between the parties today");
        // the footer moved to the end: strictly many errors, moves-free none
        let moved = w("1. The Agreement is made between the parties today Page 1 footer text");
        assert!(edit_distance(&reference, &moved) >= 8);
        assert_eq!(errors_moves_free(&reference, &moved), (0, 0));
        // one misread character in place
        let misread = w("Page 1 footer text 1. The Agreernent is made between the parties today");
        assert_eq!(errors_moves_free(&reference, &misread), (2, 1));
        // a word lost
        let lost = w("Page 1 footer text 1. The Agreement is made between parties today");
        assert_eq!(errors_moves_free(&reference, &lost).1, 1);
    }

    #[test]
    fn typography_and_whitespace_are_not_errors() {
        assert_eq!(normalise("The  “Licensee’s”\n\nbeneﬁts — 30 days"), "The \"Licensee's\" benefits - 30 days");
    }

    #[test]
    fn pages_are_spread_over_the_document() {
        assert_eq!(spread(&[0, 1, 2, 3, 4, 5, 6, 7], 2), vec![0, 4]);
        assert_eq!(spread(&[3, 4], 5), vec![3, 4]);
    }
}
