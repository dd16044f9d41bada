//! Text extraction, one page at a time, in a child process.
//!
//! pdf-extract panics, aborts, loops or eats memory on some malformed PDFs. The parent never
//! calls it: it starts `<exe> extract-pdf` ([`extractor_exe`]: the small `docpipe-extract`
//! binary where it is installed, else the docpipe binary itself), writes the PDF on its
//! stdin and reads the pages back, under a wall-clock timeout and with rlimits on address
//! space and CPU time. Whatever happens to the child, the parent gets an [`ExtractError`] that
//! says what, and the worker process carries on with the next document.
//!
//! Pages whose text layer is missing or unusable are then read by OCR ([`crate::ocr`]), one
//! page at a time, each in child processes of its own.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::ocr::{self, Ocr, OcrError, OcrMode};

/// Marks the start of the child's answer on stdout (pdf-extract may print its own noise).
const MARKER: &str = "\n@@docpipe-extract-result@@\n";

/// Largest answer read from the child (text of all pages, JSON-encoded).
const MAX_OUTPUT_BYTES: u64 = 256 << 20;

#[derive(Debug, Clone)]
pub struct ExtractLimits {
    /// Wall-clock limit for one document.
    pub timeout: Duration,
    /// Address-space limit of the child (RLIMIT_AS), in bytes.
    pub memory_bytes: u64,
    /// Pages beyond this fail the document.
    pub max_pages: usize,
}

impl Default for ExtractLimits {
    fn default() -> Self {
        use docpipe_contract::defaults as d;
        Self {
            timeout: Duration::from_secs(d::EXTRACT_TIMEOUT_S),
            memory_bytes: d::EXTRACT_MEMORY_MB << 20,
            max_pages: d::MAX_PAGES,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    #[error("not a PDF (file starts with {0:?})")]
    NotPdf(String),
    #[error("encrypted PDF: cannot be opened without a password")]
    Encrypted,
    #[error("PDF has {pages} pages, over the limit of {limit} (max_pages)")]
    TooManyPages { pages: usize, limit: usize },
    #[error("cannot parse PDF: {0}")]
    Malformed(String),
    #[error("extractor crashed ({status}): {stderr}")]
    Crashed { status: String, stderr: String },
    #[error("extracted text is over {limit} bytes")]
    TooMuchText { limit: u64 },
    #[error("extraction exceeded the time limit of {0:?} (extract_timeout)")]
    Timeout(Duration),
    #[error("cannot run the extractor {exe}: {source}")]
    Spawn { exe: PathBuf, source: std::io::Error },
    #[error("extractor I/O failed: {0}")]
    Io(std::io::Error),
    #[error("extractor answered something unreadable: {0}")]
    Protocol(String),
    #[error(transparent)]
    Ocr(OcrError),
    #[error("cannot prepare OCR scratch space {path}: {source}")]
    Scratch { path: PathBuf, source: std::io::Error },
}

impl ExtractError {
    /// Whether trying again could help (the document itself is not at fault).
    pub fn is_retryable(&self) -> bool {
        match self {
            ExtractError::Spawn { .. } | ExtractError::Io(_) | ExtractError::Scratch { .. } => true,
            ExtractError::Ocr(e) => e.is_retryable(),
            _ => false,
        }
    }
}

/// What the child sends back.
#[derive(Debug, Serialize, Deserialize)]
enum ChildAnswer {
    Pages {
        pages: Vec<String>,
        failed_pages: Vec<(u32, String)>,
        /// Page sizes in points (MediaBox), where the PDF says.
        #[serde(default)]
        sizes: Vec<Option<[f32; 2]>>,
    },
    Encrypted,
    TooManyPages {
        pages: usize,
    },
    Malformed(String),
}

/// Extracted text of a document, one string per page (1-based page `i+1`).
#[derive(Debug, Clone, Default)]
pub struct Pages {
    pub pages: Vec<String>,
    /// Pages whose text could not be extracted (page number, reason); they are empty in `pages`.
    pub failed_pages: Vec<(u32, String)>,
    /// Per page: how OCR read it, when its text came from OCR.
    pub ocr: Vec<Option<OcrRead>>,
    /// Pages OCR was tried on whose text stayed what the text layer gave (page number, why):
    /// OCR found no text (a blank page), or no more than the layer has, or OCR's text was not
    /// used on a page that keeps some text of its own. Pages left without text by OCR are in
    /// `failed_pages` instead.
    pub ocr_discarded: Vec<(u32, String)>,
    /// Pages whose OCR failed (render or recognition error, crash, time limit).
    pub ocr_failed: usize,
    /// Wall time of the document's OCR.
    pub ocr_seconds: f64,
    /// Per page: its size in points (MediaBox), where the PDF says.
    pub sizes: Vec<Option<[f32; 2]>>,
}

/// How OCR read one page.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OcrRead {
    /// Mean word confidence, 0–100.
    pub confidence: f32,
    pub words: usize,
    pub seconds: f64,
}

impl Pages {
    /// Pages whose text came from OCR.
    pub fn ocr_pages(&self) -> usize {
        self.ocr.iter().flatten().count()
    }

    /// Mean confidence of the OCR pages, weighted by their words.
    pub fn ocr_confidence(&self) -> Option<f32> {
        let (sum, words) = self
            .ocr
            .iter()
            .flatten()
            .fold((0f64, 0usize), |(s, n), r| (s + r.confidence as f64 * r.words as f64, n + r.words));
        (words > 0).then(|| (sum / words as f64) as f32)
    }
}

/// The program to run as the extractor child, for a process whose binary is `docpipe`:
/// `DOCPIPE_EXTRACTOR` where set; else `docpipe-extract` beside the docpipe binary where it
/// exists (it links no model, so it starts in milliseconds: the docpipe binary spends about
/// 0.2 s of CPU initialising libtorch before it reads a byte); else the docpipe binary itself
/// (its hidden `extract-pdf` subcommand does the same).
pub fn extractor_exe(docpipe: &Path) -> PathBuf {
    choose_extractor(docpipe, std::env::var_os("DOCPIPE_EXTRACTOR"))
}

/// [`extractor_exe`] with the setting given.
fn choose_extractor(docpipe: &Path, setting: Option<std::ffi::OsString>) -> PathBuf {
    if let Some(exe) = setting.filter(|v| !v.is_empty()) {
        return PathBuf::from(exe);
    }
    let small = docpipe.with_file_name(format!("docpipe-extract{}", std::env::consts::EXE_SUFFIX));
    if small.is_file() {
        small
    } else {
        docpipe.to_path_buf()
    }
}

/// Runs the extractor child for one PDF, then OCR on the pages that need it.
#[derive(Debug, Clone)]
pub struct Extractor {
    /// A binary that serves `extract-pdf` ([`extractor_exe`]).
    pub exe: PathBuf,
    pub limits: ExtractLimits,
    pub ocr: Ocr,
}

impl Extractor {
    /// Text of every page: the text layer, and OCR where that is missing or unusable (or
    /// everywhere with `--ocr force`).
    pub async fn extract(&self, pdf: &[u8]) -> Result<Pages, ExtractError> {
        let mut pages = self.text_layer(pdf).await?;
        if self.ocr.mode() != OcrMode::Off {
            self.read_by_ocr(pdf, &mut pages).await?;
        }
        Ok(pages)
    }

    /// OCR the pages that need it, and keep what it read where that is better.
    async fn read_by_ocr(&self, pdf: &[u8], pages: &mut Pages) -> Result<(), ExtractError> {
        let force = self.ocr.mode() == OcrMode::Force;
        let failed = |n: u32| pages.failed_pages.iter().any(|(p, _)| *p == n);
        let mut targets: Vec<u32> = (1..=pages.pages.len() as u32)
            .filter(|&n| force || failed(n) || ocr::needs_ocr(&pages.pages[n as usize - 1]).is_some())
            .collect();
        if targets.is_empty() {
            return Ok(());
        }
        let limit = self.ocr.config.max_pages;
        for n in targets.split_off(limit.min(targets.len())) {
            let why = format!("not read by OCR: over the limit of {limit} pages per document (--ocr-max-pages)");
            unread(pages, n, why);
        }
        let started = std::time::Instant::now();
        let scratch = Scratch::new()?;
        let path = scratch.0.join("document.pdf");
        tokio::fs::write(&path, pdf).await.map_err(|source| ExtractError::Scratch { path: path.clone(), source })?;
        let mut reads = tokio::task::JoinSet::new();
        for n in targets {
            let (ocr, path, dir) = (self.ocr.clone(), path.clone(), scratch.0.clone());
            let size = pages.sizes.get(n as usize - 1).copied().flatten();
            reads.spawn(async move { (n, ocr.read_page(&path, n, size, &dir).await) });
        }
        let floor = self.ocr.config.min_confidence;
        while let Some(joined) = reads.join_next().await {
            let (n, result) = joined.map_err(|e| ExtractError::Protocol(format!("OCR task stopped: {e}")))?;
            let i = n as usize - 1;
            let read = match result {
                Ok(r) => r,
                Err(e) if e.is_retryable() => return Err(ExtractError::Ocr(e)),
                Err(e) => {
                    pages.ocr_failed += 1;
                    unread(pages, n, e.to_string());
                    continue;
                }
            };
            if read.words == 0 {
                // a blank page (the back of a sheet): nothing lost
                pages.ocr_discarded.push((n, "OCR found no text".into()));
            } else if read.confidence < floor {
                unread(pages, n, format!("OCR confidence {:.0} below the floor of {floor:.0}", read.confidence));
            } else if !force && ocr::letters(&read.text) <= ocr::letters(&pages.pages[i]) {
                pages.ocr_discarded.push((n, "the text layer has as many letters as OCR read".into()));
            } else {
                pages.pages[i] = read.text;
                pages.ocr[i] = Some(OcrRead { confidence: read.confidence, words: read.words, seconds: read.seconds });
                pages.failed_pages.retain(|(p, _)| *p != n);
            }
        }
        pages.failed_pages.sort_by_key(|(p, _)| *p);
        pages.ocr_discarded.sort_by_key(|(p, _)| *p);
        pages.ocr_seconds = started.elapsed().as_secs_f64();
        Ok(())
    }

    /// The PDF's own text, page by page, from the isolated child; and the page sizes.
    async fn text_layer(&self, pdf: &[u8]) -> Result<Pages, ExtractError> {
        let head = &pdf[..pdf.len().min(1024)];
        if !head.windows(5).any(|w| w == b"%PDF-") {
            let shown: String =
                String::from_utf8_lossy(&pdf[..pdf.len().min(16)]).chars().filter(|c| !c.is_control()).collect();
            return Err(ExtractError::NotPdf(shown));
        }
        let mut cmd = tokio::process::Command::new(&self.exe);
        cmd.arg("extract-pdf")
            .arg("--max-pages")
            .arg(self.limits.max_pages.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env("RUST_BACKTRACE", "0")
            .kill_on_drop(true);
        limit_child(&mut cmd, self.limits.memory_bytes, self.limits.timeout.as_secs() + 5);
        let mut child = cmd.spawn().map_err(|source| ExtractError::Spawn { exe: self.exe.clone(), source })?;
        let mut stdin = child.stdin.take().ok_or_else(|| ExtractError::Protocol("no stdin".into()))?;
        let mut stdout = child.stdout.take().ok_or_else(|| ExtractError::Protocol("no stdout".into()))?;
        let mut stderr = child.stderr.take().ok_or_else(|| ExtractError::Protocol("no stderr".into()))?;
        let input = pdf.to_vec();
        let work = async move {
            // The child may die before reading everything: a broken pipe is reported through
            // its exit status, not as an I/O error of ours.
            let writer = async move {
                let _ = stdin.write_all(&input).await;
                drop(stdin);
            };
            // bounded reads: a runaway child cannot make the parent buffer gigabytes
            let (_, out, err) = tokio::join!(
                writer,
                read_capped(&mut stdout, MAX_OUTPUT_BYTES + 1),
                read_capped(&mut stderr, 64 << 10)
            );
            let (out, err) = (out.map_err(ExtractError::Io)?, err.map_err(ExtractError::Io)?);
            let status = child.wait().await.map_err(ExtractError::Io)?;
            Ok::<_, ExtractError>((status, out, err))
        };
        let (status, out, err) = match tokio::time::timeout(self.limits.timeout, work).await {
            Ok(r) => r?,
            // dropping the future drops the child handle, which kills it (kill_on_drop)
            Err(_) => return Err(ExtractError::Timeout(self.limits.timeout)),
        };
        if out.len() as u64 > MAX_OUTPUT_BYTES {
            return Err(ExtractError::TooMuchText { limit: MAX_OUTPUT_BYTES });
        }
        let stderr = tail(&String::from_utf8_lossy(&err), 600);
        if !status.success() {
            return Err(ExtractError::Crashed { status: describe(status, &stderr), stderr });
        }
        let out = String::from_utf8_lossy(&out);
        let Some(pos) = out.rfind(MARKER) else {
            return Err(ExtractError::Protocol(format!("no result marker; stderr: {stderr}")));
        };
        let answer: ChildAnswer = serde_json::from_str(out[pos + MARKER.len()..].trim())
            .map_err(|e| ExtractError::Protocol(format!("bad result JSON: {e}")))?;
        match answer {
            ChildAnswer::Pages { pages, failed_pages, sizes } => {
                let ocr = vec![None; pages.len()];
                Ok(Pages { pages, failed_pages, ocr, sizes, ..Pages::default() })
            }
            ChildAnswer::Encrypted => Err(ExtractError::Encrypted),
            ChildAnswer::TooManyPages { pages } => {
                Err(ExtractError::TooManyPages { pages, limit: self.limits.max_pages })
            }
            ChildAnswer::Malformed(m) => Err(ExtractError::Malformed(m)),
        }
    }
}

/// At most `cap` bytes of `r`, the rest read and dropped until the end: a child that writes
/// more than we keep must not block on a full pipe.
pub(crate) async fn read_capped<R: tokio::io::AsyncRead + Unpin>(r: &mut R, cap: u64) -> std::io::Result<Vec<u8>> {
    let mut kept = Vec::new();
    (&mut *r).take(cap).read_to_end(&mut kept).await?;
    tokio::io::copy(r, &mut tokio::io::sink()).await?;
    Ok(kept)
}

/// Scheduling priority of the children that read documents: below the model's threads, so
/// that where ingest shares a host with a worker (`docpipe run`, a small deployment) reading
/// the next documents takes the CPU the forward pass leaves instead of slowing it down (a
/// forward pass on all cores waits for its slowest thread). Alone on a host it changes nothing.
/// `DOCPIPE_CHILD_NICE` sets another level (0: the parent's).
const CHILD_NICE: libc::c_int = 10;

fn child_nice() -> libc::c_int {
    static NICE: std::sync::OnceLock<libc::c_int> = std::sync::OnceLock::new();
    *NICE.get_or_init(|| match std::env::var("DOCPIPE_CHILD_NICE") {
        Ok(v) => v.trim().parse().unwrap_or_else(|_| {
            tracing::warn!(value = v, default = CHILD_NICE, "DOCPIPE_CHILD_NICE is not an integer; using the default");
            CHILD_NICE
        }),
        Err(_) => CHILD_NICE,
    })
}

/// The limits of every child docpipe runs on a document (the extractor, pdftoppm, tesseract):
/// address space, CPU seconds, no core dumps, and a lower priority ([`CHILD_NICE`]).
pub(crate) fn limit_child(cmd: &mut tokio::process::Command, memory_bytes: u64, cpu_secs: u64) {
    let nice = child_nice();
    // SAFETY: only async-signal-safe calls (setrlimit, setpriority) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            set_rlimit(libc::RLIMIT_AS, memory_bytes)?;
            set_rlimit(libc::RLIMIT_CPU, cpu_secs)?;
            set_rlimit(libc::RLIMIT_CORE, 0)?;
            // best effort: a child at normal priority still reads its document
            if nice != 0 {
                let _ = libc::setpriority(libc::PRIO_PROCESS, 0, nice);
            }
            Ok(())
        });
    }
}

fn set_rlimit(resource: libc::__rlimit_resource_t, value: u64) -> std::io::Result<()> {
    let lim = libc::rlimit { rlim_cur: value as libc::rlim_t, rlim_max: value as libc::rlim_t };
    // SAFETY: plain syscall on a valid struct.
    if unsafe { libc::setrlimit(resource, &lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// OCR did not give page `n` text: a page left without letters is a failed page (with why);
/// one that keeps its text layer only notes why OCR's text was not used.
fn unread(pages: &mut Pages, n: u32, why: String) {
    if ocr::letters(&pages.pages[n as usize - 1]) > 0 {
        pages.ocr_discarded.push((n, why));
        return;
    }
    match pages.failed_pages.iter_mut().find(|(p, _)| *p == n) {
        Some((_, first)) => *first = format!("{first}; {why}"),
        None => pages.failed_pages.push((n, why)),
    }
}

/// Scratch folders are `$TMPDIR/docpipe-ocr-<pid>-<n>`.
const SCRATCH_PREFIX: &str = "docpipe-ocr-";

/// Remove the scratch folders of processes that are gone (killed before they could clean up);
/// how many were removed.
pub(crate) fn remove_stale_scratch() -> usize {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return 0 };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        // exactly docpipe-ocr-<pid>-<n>: nothing else in $TMPDIR is ours to remove
        let Some((pid, n)) = name.strip_prefix(SCRATCH_PREFIX).and_then(|r| r.split_once('-')) else { continue };
        let (Ok(pid), Ok(_)) = (pid.parse::<u32>(), n.parse::<u64>()) else { continue };
        if !Path::new(&format!("/proc/{pid}")).exists() && std::fs::remove_dir_all(e.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// A directory of one document's OCR images, removed with everything in it when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Result<Self, ExtractError> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let name = format!("{SCRATCH_PREFIX}{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let path = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&path).map_err(|source| ExtractError::Scratch { path: path.clone(), source })?;
        Ok(Self(path))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// How a child ended, in words (the signal, a panic, running out of memory, the exit status).
pub(crate) fn describe(status: std::process::ExitStatus, stderr: &str) -> String {
    use std::os::unix::process::ExitStatusExt;
    if let Some(sig) = status.signal() {
        let name = match sig {
            libc::SIGABRT => "SIGABRT (abort, often out of memory under the extraction memory limit)",
            libc::SIGSEGV => "SIGSEGV",
            libc::SIGKILL => "SIGKILL",
            libc::SIGXCPU => "SIGXCPU (CPU time limit)",
            _ => "signal",
        };
        return format!("killed by {name} ({sig})");
    }
    if stderr.contains("panicked") {
        return "panicked".into();
    }
    if stderr.contains("memory allocation") {
        return "out of memory under the extraction memory limit".into();
    }
    format!("exit status {}", status.code().unwrap_or(-1))
}

/// The last `max` bytes of `s` (whole characters), marked as cut when cut.
pub(crate) fn tail(s: &str, max: usize) -> String {
    let s = s.trim();
    if s.len() <= max {
        return s.to_string();
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &s[start..])
}

/// The child side: read a PDF on stdin, write its pages on stdout. Runs inside the
/// `extract-pdf` subcommand; a panic here only ends this process.
pub fn child_main(max_pages: usize) -> std::io::Result<()> {
    let mut pdf = Vec::new();
    std::io::stdin().read_to_end(&mut pdf)?;
    let answer = extract_in_process(&pdf, max_pages);
    let mut out = std::io::stdout().lock();
    out.write_all(MARKER.as_bytes())?;
    serde_json::to_writer(&mut out, &answer).map_err(std::io::Error::other)?;
    out.write_all(b"\n")?;
    out.flush()
}

fn extract_in_process(pdf: &[u8], max_pages: usize) -> ChildAnswer {
    let mut doc = match lopdf::Document::load_mem(pdf) {
        Ok(d) => d,
        Err(lopdf::Error::Decryption(_)) => return ChildAnswer::Encrypted,
        Err(e) => return ChildAnswer::Malformed(e.to_string()),
    };
    if doc.is_encrypted() && doc.decrypt("").is_err() {
        return ChildAnswer::Encrypted;
    }
    let page_numbers: Vec<u32> = doc.get_pages().keys().copied().collect();
    if page_numbers.is_empty() {
        // lopdf leaves an encrypted file it could not decrypt with no readable page tree
        if doc.trailer.get(b"Encrypt").is_ok() {
            return ChildAnswer::Encrypted;
        }
        return ChildAnswer::Malformed("no readable pages (damaged page tree)".into());
    }
    if page_numbers.len() > max_pages {
        return ChildAnswer::TooManyPages { pages: page_numbers.len() };
    }
    let mut pages = Vec::with_capacity(page_numbers.len());
    let mut failed_pages = Vec::new();
    let sizes = doc.get_pages().values().map(|&id| page_size(&doc, id)).collect();
    for n in page_numbers {
        // A panic inside one page (pdf-extract has asserts and unwraps on odd fonts) loses
        // that page only; an abort or a hang is caught by the parent.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut text = String::new();
            let mut output = pdf_extract::PlainTextOutput::new(&mut text);
            pdf_extract::output_doc_page(&doc, &mut output, n).map(|_| text)
        }));
        match result {
            Ok(Ok(text)) => pages.push(text),
            Ok(Err(e)) => {
                failed_pages.push((n, e.to_string()));
                pages.push(String::new());
            }
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "panic".into());
                failed_pages.push((n, format!("extractor panicked: {msg}")));
                pages.push(String::new());
            }
        }
    }
    ChildAnswer::Pages { pages, failed_pages, sizes }
}

/// Width and height in points of a page's MediaBox, inherited from its parents if need be.
fn page_size(doc: &lopdf::Document, page: lopdf::ObjectId) -> Option<[f32; 2]> {
    let mut node = doc.get_dictionary(page).ok()?;
    // a bounded walk: a page tree with a cycle must not hang the child
    for _ in 0..32 {
        if let Ok(b) = node.get(b"MediaBox") {
            let b = match b {
                lopdf::Object::Reference(id) => doc.get_object(*id).ok()?,
                other => other,
            };
            let v: Vec<f32> = b.as_array().ok()?.iter().filter_map(|x| x.as_float().ok()).collect();
            return (v.len() == 4).then(|| [(v[2] - v[0]).abs(), (v[3] - v[1]).abs()]);
        }
        node = doc.get_dictionary(node.get(b"Parent").ok()?.as_reference().ok()?).ok()?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_small_extractor_is_found_beside_docpipe_unless_one_is_set() {
        let dir = std::env::temp_dir().join(format!("docpipe-extractor-exe-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let docpipe = dir.join("docpipe");
        assert_eq!(choose_extractor(&docpipe, None), docpipe, "without the small binary, docpipe's own subcommand");
        let small = dir.join(format!("docpipe-extract{}", std::env::consts::EXE_SUFFIX));
        std::fs::write(&small, b"").unwrap();
        assert_eq!(choose_extractor(&docpipe, None), small);
        assert_eq!(choose_extractor(&docpipe, Some("".into())), small, "an empty setting is no setting");
        assert_eq!(choose_extractor(&docpipe, Some("/opt/x/extract".into())), PathBuf::from("/opt/x/extract"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_scratch_folders_of_dead_processes_are_removed() {
        let tmp = std::env::temp_dir();
        // no process has this id (above the kernel's pid_max)
        let dead = tmp.join(format!("{SCRATCH_PREFIX}4294967295-7"));
        let mine = tmp.join(format!("{SCRATCH_PREFIX}{}-9999", std::process::id()));
        let other = tmp.join(format!("{SCRATCH_PREFIX}notes-of-someone"));
        for d in [&dead, &mine, &other] {
            std::fs::create_dir_all(d).unwrap();
        }
        remove_stale_scratch();
        assert!(!dead.exists(), "a dead process's scratch folder stays");
        assert!(mine.exists() && other.exists(), "a live process's folder, or one not ours, was removed");
        for d in [&mine, &other] {
            std::fs::remove_dir_all(d).unwrap();
        }
    }
}
