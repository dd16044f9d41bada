//! OCR for pages without a usable text layer: scans, faxes, text drawn as curves.
//!
//! A page is read by OCR when its text layer is missing or unusable ([`needs_ocr`]), or on
//! every page with [`OcrMode::Force`]. The page is rasterised by poppler's `pdftoppm` (grey,
//! `dpi`, the longer side capped at `max_side_px` so that an enormous page cannot eat memory)
//! and read by Tesseract with automatic page segmentation and orientation detection
//! (`--psm 1`: rotated and upside-down scans read correctly; Tesseract deskews small angles
//! itself). Both run as child processes of their own, under the same address-space and CPU
//! rlimits as the extraction child, with a wall-clock limit per page: a crash or a hang fails
//! that page, not the document and not the worker. A process-wide semaphore bounds how many
//! pages are read at once, so OCR cannot starve the model threads.
//!
//! Tesseract's TSV output gives the words with a confidence (0–100); the page's text keeps
//! its lines and paragraphs, and its confidence is the mean over its words.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use crate::extract::{describe, tail};

/// Largest TSV answer read from Tesseract for one page.
const MAX_TSV_BYTES: u64 = 32 << 20;

/// When pages are read by OCR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OcrMode {
    /// Never: a page without a text layer stays empty.
    Off,
    /// Pages whose text layer is missing or unusable.
    Auto,
    /// Every page, whatever its text layer holds.
    Force,
}

impl FromStr for OcrMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "off" => Ok(OcrMode::Off),
            "auto" => Ok(OcrMode::Auto),
            "force" => Ok(OcrMode::Force),
            other => Err(format!("OCR mode {other:?} is not one of auto, off, force")),
        }
    }
}

impl std::fmt::Display for OcrMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            OcrMode::Off => "off",
            OcrMode::Auto => "auto",
            OcrMode::Force => "force",
        })
    }
}

#[derive(Debug, Clone)]
pub struct OcrConfig {
    pub mode: OcrMode,
    /// Tesseract languages, `+`-separated (`eng`, `eng+fra`); each needs its traineddata.
    pub languages: String,
    /// Rendering resolution.
    pub dpi: u32,
    /// Longest side of a rendered page in pixels; larger pages are rendered at a lower DPI.
    pub max_side_px: u32,
    /// Wall-clock limit for rendering and reading one page.
    pub page_timeout: Duration,
    /// Pages read at the same time by this process.
    pub concurrency: usize,
    /// Pages of one document read by OCR at most; the others stay as their text layer left
    /// them, and the document is flagged.
    pub max_pages: usize,
    /// Address-space limit of `pdftoppm` and `tesseract` (RLIMIT_AS), in bytes.
    pub memory_bytes: u64,
    /// OCR text whose mean word confidence is below this is noise, not text: the page keeps
    /// its (empty) text layer.
    pub min_confidence: f32,
    /// A document whose OCR pages have a mean confidence below this is processed, and flagged.
    pub flag_below: f32,
    /// The rasteriser and the recogniser (found on `PATH` unless absolute).
    pub pdftoppm: PathBuf,
    pub tesseract: PathBuf,
}

impl Default for OcrConfig {
    fn default() -> Self {
        use docpipe_contract::defaults as d;
        Self {
            mode: OcrMode::Auto,
            languages: d::OCR_LANGUAGES.into(),
            dpi: d::OCR_DPI,
            max_side_px: d::OCR_MAX_SIDE_PX,
            page_timeout: Duration::from_secs(d::OCR_PAGE_TIMEOUT_S),
            concurrency: d::OCR_CONCURRENCY as usize,
            max_pages: d::OCR_MAX_PAGES,
            memory_bytes: d::EXTRACT_MEMORY_MB << 20,
            min_confidence: d::OCR_MIN_CONFIDENCE,
            flag_below: d::OCR_FLAG_BELOW,
            pdftoppm: "pdftoppm".into(),
            tesseract: "tesseract".into(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OcrError {
    #[error("OCR needs {tool} ({package}), which cannot be run: {source}; install it, or set --ocr off")]
    Missing { tool: String, package: &'static str, source: std::io::Error },
    #[error("Tesseract has no language data for {missing:?} (it has {available:?}); install tesseract-ocr-<lang> (osd: tesseract-ocr-osd), or change --ocr-lang")]
    Language { missing: Vec<String>, available: Vec<String> },
    #[error("rendering page {page} failed ({status}): {stderr}")]
    Render { page: u32, status: String, stderr: String },
    #[error("Tesseract failed on page {page} ({status}): {stderr}")]
    Recognise { page: u32, status: String, stderr: String },
    #[error("OCR of page {page} exceeded the time limit of {limit:?} (ocr_page_timeout)")]
    Timeout { page: u32, limit: Duration },
    #[error("OCR of page {page}: {what}: {source}")]
    Io { page: u32, what: &'static str, source: std::io::Error },
}

impl OcrError {
    /// Whether the failure is the machine's (a missing tool, I/O), not the page's.
    pub fn is_retryable(&self) -> bool {
        matches!(self, OcrError::Missing { .. } | OcrError::Language { .. } | OcrError::Io { .. })
    }
}

/// A page read by OCR.
#[derive(Debug, Clone, PartialEq)]
pub struct OcrPage {
    pub text: String,
    /// Mean word confidence, 0–100 (0 when no word was found).
    pub confidence: f32,
    pub words: usize,
    pub seconds: f64,
}

/// Why a page's text layer is not good enough, or `None` when it is.
///
/// Unusable: no letters at all; mostly replacement, private-use or control characters (a font
/// without a usable encoding); or only a handful of letters (a page number, a stamp, the
/// text layer of a scan that has one line typed over it).
pub fn needs_ocr(text: &str) -> Option<String> {
    let mut letters = 0usize;
    let mut garbage = 0usize;
    let mut visible = 0usize;
    for c in text.chars() {
        if c.is_whitespace() {
            continue;
        }
        visible += 1;
        if c.is_alphabetic() {
            letters += 1;
        }
        if c == '\u{FFFD}' || c.is_control() || ('\u{E000}'..='\u{F8FF}').contains(&c) {
            garbage += 1;
        }
    }
    if letters == 0 {
        return Some(if visible == 0 { "no text layer".into() } else { format!("no letters in {visible} characters") });
    }
    if garbage * 2 > visible {
        return Some(format!("{garbage} of {visible} characters unreadable"));
    }
    if letters < MIN_LETTERS {
        return Some(format!("only {letters} letters"));
    }
    None
}

/// Fewer letters than this on a page, and its text layer is checked against OCR.
pub const MIN_LETTERS: usize = 24;

/// Letters in `text` (what the choice between a text layer and OCR compares).
pub fn letters(text: &str) -> usize {
    text.chars().filter(|c| c.is_alphabetic()).count()
}

/// The OCR engine of a process: its settings and the semaphore that bounds it.
#[derive(Debug, Clone)]
pub struct Ocr {
    pub config: OcrConfig,
    permits: Arc<Semaphore>,
}

impl Ocr {
    pub fn new(config: OcrConfig) -> Self {
        let permits = Arc::new(Semaphore::new(config.concurrency.max(1)));
        Self { config, permits }
    }

    pub fn mode(&self) -> OcrMode {
        self.config.mode
    }

    /// Check that the tools run and that Tesseract has every language asked for. Call at start,
    /// so a missing install is one clear error, not a failure per document.
    pub async fn check(&self) -> Result<(), OcrError> {
        if self.config.mode == OcrMode::Off {
            return Ok(());
        }
        crate::extract::remove_stale_scratch();
        let version = |exe: &Path, arg: &'static str| {
            let mut cmd = tokio::process::Command::new(exe);
            cmd.arg(arg).stdout(Stdio::null()).stderr(Stdio::null()).kill_on_drop(true);
            cmd
        };
        version(&self.config.pdftoppm, "-v").status().await.map_err(|source| OcrError::Missing {
            tool: self.config.pdftoppm.display().to_string(),
            package: "poppler-utils",
            source,
        })?;
        let out = tokio::process::Command::new(&self.config.tesseract)
            .arg("--list-langs")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|source| OcrError::Missing {
                tool: self.config.tesseract.display().to_string(),
                package: "tesseract-ocr",
                source,
            })?;
        // Tesseract 4 prints the list on stderr, 5 on stdout
        let listed = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let available: Vec<String> = listed
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.contains(' ') && !l.ends_with(':'))
            .map(String::from)
            .collect();
        // osd: the orientation and script data `--psm 1` needs to read turned pages
        let missing: Vec<String> = self
            .config
            .languages
            .split('+')
            .chain(["osd"])
            .map(str::trim)
            .filter(|l| !l.is_empty() && !available.iter().any(|a| a == l))
            .map(String::from)
            .collect();
        if !missing.is_empty() {
            return Err(OcrError::Language { missing, available });
        }
        Ok(())
    }

    /// Render page `page` (1-based) of the PDF at `pdf` and read it. `size` is the page's
    /// size in points when known (it caps the resolution); `scratch` is a directory of this
    /// document's where the image is written.
    pub async fn read_page(
        &self,
        pdf: &Path,
        page: u32,
        size: Option<[f32; 2]>,
        scratch: &Path,
    ) -> Result<OcrPage, OcrError> {
        let _permit = self.permits.acquire().await.map_err(|_| OcrError::Io {
            page,
            what: "waiting for an OCR slot",
            source: std::io::Error::other("semaphore closed"),
        })?;
        let started = Instant::now();
        let limit = self.config.page_timeout;
        let work = self.render_and_read(pdf, page, size, scratch);
        let result = match tokio::time::timeout(limit, work).await {
            Ok(r) => r,
            Err(_) => Err(OcrError::Timeout { page, limit }),
        };
        let _ = std::fs::remove_file(scratch.join(format!("p{page}.pgm")));
        let (text, confidence, words) = result?;
        Ok(OcrPage { text, confidence, words, seconds: started.elapsed().as_secs_f64() })
    }

    async fn render_and_read(
        &self,
        pdf: &Path,
        page: u32,
        size: Option<[f32; 2]>,
        scratch: &Path,
    ) -> Result<(String, f32, usize), OcrError> {
        let c = &self.config;
        let dpi = render_dpi(c.dpi, c.max_side_px, size);
        let root = scratch.join(format!("p{page}"));
        let mut render = tokio::process::Command::new(&c.pdftoppm);
        render
            .args(["-gray", "-singlefile", "-r"])
            .arg(dpi.to_string())
            .arg("-f")
            .arg(page.to_string())
            .arg("-l")
            .arg(page.to_string());
        if size.is_none() {
            // an unknown page size: cap the image instead of the resolution
            render.arg("-scale-to").arg(c.max_side_px.to_string());
        }
        render.arg(pdf).arg(&root);
        let (status, _, stderr) = self.run(render, page, "running pdftoppm", "poppler-utils").await?;
        let image = root.with_extension("pgm");
        if !status.success() || !image.exists() {
            return Err(OcrError::Render { page, status: describe(status, &stderr), stderr: tail(&stderr, 400) });
        }
        let mut read = tokio::process::Command::new(&c.tesseract);
        read.arg(&image)
            .arg("stdout")
            .args(["-l", &c.languages, "--psm", "1", "--dpi"])
            .arg(dpi.to_string())
            .arg("tsv")
            // one thread per page: concurrency is ours to bound, not OpenMP's
            .env("OMP_THREAD_LIMIT", "1");
        let (status, tsv, stderr) = self.run(read, page, "running tesseract", "tesseract-ocr").await?;
        if !status.success() {
            return Err(OcrError::Recognise { page, status: describe(status, &stderr), stderr: tail(&stderr, 400) });
        }
        Ok(parse_tsv(&String::from_utf8_lossy(&tsv)))
    }

    /// Run one tool under the rlimits; its stdout (bounded) and stderr.
    async fn run(
        &self,
        mut cmd: tokio::process::Command,
        page: u32,
        what: &'static str,
        package: &'static str,
    ) -> Result<(std::process::ExitStatus, Vec<u8>, String), OcrError> {
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        crate::extract::limit_child(&mut cmd, self.config.memory_bytes, self.config.page_timeout.as_secs() + 5);
        let program = cmd.as_std().get_program().to_string_lossy().into_owned();
        let mut child = cmd.spawn().map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                OcrError::Missing { tool: program, package, source }
            } else {
                OcrError::Io { page, what, source }
            }
        })?;
        let io = |source| OcrError::Io { page, what, source };
        let mut stdout = child.stdout.take().ok_or_else(|| io(std::io::Error::other("no stdout")))?;
        let mut stderr = child.stderr.take().ok_or_else(|| io(std::io::Error::other("no stderr")))?;
        // bounded, and drained: pdftoppm can print megabytes of syntax errors on a damaged PDF
        let (out, err) = tokio::join!(
            crate::extract::read_capped(&mut stdout, MAX_TSV_BYTES),
            crate::extract::read_capped(&mut stderr, 64 << 10)
        );
        let (out, err) = (out.map_err(io)?, err.map_err(io)?);
        let status = child.wait().await.map_err(io)?;
        Ok((status, out, String::from_utf8_lossy(&err).into_owned()))
    }
}

/// The resolution a page is rendered at: `dpi`, lowered so that its longer side stays within
/// `max_side_px`.
pub fn render_dpi(dpi: u32, max_side_px: u32, size: Option<[f32; 2]>) -> u32 {
    let Some([w, h]) = size else { return dpi };
    let longest_in = w.abs().max(h.abs()) / 72.0;
    if longest_in <= 0.0 || !longest_in.is_finite() {
        return dpi;
    }
    let cap = (max_side_px as f32 / longest_in).floor() as u32;
    dpi.min(cap.max(1))
}

/// Text, mean word confidence and word count from Tesseract's TSV: one line per text line,
/// a blank line between paragraphs.
pub fn parse_tsv(tsv: &str) -> (String, f32, usize) {
    let mut text = String::new();
    let mut last: Option<(u32, u32, u32, u32)> = None;
    let (mut conf_sum, mut words) = (0f64, 0usize);
    for row in tsv.lines().skip(1) {
        let f: Vec<&str> = row.split('\t').collect();
        if f.len() < 12 || f[0] != "5" {
            continue;
        }
        let word = f[11].trim();
        let conf: f64 = f[10].parse().unwrap_or(-1.0);
        if word.is_empty() || conf < 0.0 {
            continue;
        }
        let num = |i: usize| f[i].parse::<u32>().unwrap_or(0);
        let key = (num(1), num(2), num(3), num(4));
        match last {
            Some(prev) if (prev.0, prev.1, prev.2) != (key.0, key.1, key.2) => text.push_str("\n\n"),
            Some(prev) if prev.3 != key.3 => text.push('\n'),
            Some(_) => text.push(' '),
            None => {}
        }
        last = Some(key);
        text.push_str(word);
        conf_sum += conf;
        words += 1;
    }
    let confidence = if words == 0 { 0.0 } else { (conf_sum / words as f64) as f32 };
    (text, confidence, words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_good_text_layer_needs_no_ocr() {
        assert_eq!(needs_ocr("This Agreement is made between Acme Corp. and Beta LLC on 4 June 2007."), None);
        // CJK text is text
        assert_eq!(needs_ocr("本契約は、甲と乙との間で締結される売買契約であり、双方はこれに合意する。本契約の有効期間は一年とする。"), None);
    }

    #[test]
    fn missing_or_unusable_text_layers_need_ocr() {
        assert_eq!(needs_ocr("").as_deref(), Some("no text layer"));
        assert_eq!(needs_ocr(" \n\t ").as_deref(), Some("no text layer"));
        assert_eq!(needs_ocr("12  - 3 -").as_deref(), Some("no letters in 5 characters"));
        assert_eq!(needs_ocr("Page 7").as_deref(), Some("only 4 letters"));
        let garbage: String = "\u{FFFD}".repeat(300) + "abc defgh ijklmnop qrstuvwxyz";
        assert!(needs_ocr(&garbage).unwrap().contains("unreadable"), "{:?}", needs_ocr(&garbage));
    }

    #[test]
    fn modes_parse_and_print() {
        for m in [OcrMode::Off, OcrMode::Auto, OcrMode::Force] {
            assert_eq!(m.to_string().parse::<OcrMode>(), Ok(m));
        }
        assert_eq!("FORCE".parse::<OcrMode>(), Ok(OcrMode::Force));
        assert!("sometimes".parse::<OcrMode>().unwrap_err().contains("auto, off, force"));
    }

    #[test]
    fn enormous_pages_are_rendered_at_a_lower_resolution() {
        let letter = Some([612.0, 792.0]);
        assert_eq!(render_dpi(200, 4000, letter), 200);
        // 2160 pt = 30 in: 4000 px / 30 in
        assert_eq!(render_dpi(200, 4000, Some([2160.0, 2160.0])), 133);
        assert_eq!(render_dpi(200, 4000, Some([8400.0, 8400.0])), 34);
        assert_eq!(render_dpi(200, 4000, None), 200);
        assert_eq!(render_dpi(200, 4000, Some([0.0, 0.0])), 200);
    }

    #[test]
    fn tsv_becomes_lines_and_paragraphs_with_a_mean_confidence() {
        let tsv = "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext
1\t1\t0\t0\t0\t0\t0\t0\t1700\t2200\t-1\t
5\t1\t1\t1\t1\t1\t10\t10\t50\t20\t96.5\tThis
5\t1\t1\t1\t1\t2\t70\t10\t50\t20\t93.5\tAgreement
5\t1\t1\t1\t2\t1\t10\t40\t50\t20\t90\tcontinues
5\t1\t1\t1\t2\t2\t10\t40\t50\t20\t-1\t
5\t1\t2\t1\t1\t1\t10\t90\t50\t20\t80\tNext
";
        let (text, conf, words) = parse_tsv(tsv);
        assert_eq!(text, "This Agreement\ncontinues\n\nNext");
        assert_eq!(words, 4);
        assert!((conf - 90.0).abs() < 1e-4, "{conf}");
        assert_eq!(parse_tsv("level\tpage_num\n"), (String::new(), 0.0, 0));
    }
}
