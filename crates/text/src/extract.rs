//! Text extraction, one page at a time, in a child process.
//!
//! pdf-extract panics, aborts, loops or eats memory on some malformed PDFs. The parent never
//! calls it: it starts `<exe> extract-pdf` (the same docpipe binary), writes the PDF on its
//! stdin and reads the pages back, under a wall-clock timeout and with rlimits on address
//! space and CPU time. Whatever happens to the child, the parent gets an [`ExtractError`] that
//! says what, and the worker process carries on with the next document.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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
}

impl ExtractError {
    /// Whether trying again could help (the document itself is not at fault).
    pub fn is_retryable(&self) -> bool {
        matches!(self, ExtractError::Spawn { .. } | ExtractError::Io(_))
    }
}

/// What the child sends back.
#[derive(Debug, Serialize, Deserialize)]
enum ChildAnswer {
    Pages { pages: Vec<String>, failed_pages: Vec<(u32, String)> },
    Encrypted,
    TooManyPages { pages: usize },
    Malformed(String),
}

/// Extracted text of a document, one string per page (1-based page `i+1`).
#[derive(Debug, Clone)]
pub struct Pages {
    pub pages: Vec<String>,
    /// Pages whose text could not be extracted (page number, reason); they are empty in `pages`.
    pub failed_pages: Vec<(u32, String)>,
}

/// Runs the extractor child for one PDF.
#[derive(Debug, Clone)]
pub struct Extractor {
    /// The docpipe binary (it has the hidden `extract-pdf` subcommand).
    pub exe: PathBuf,
    pub limits: ExtractLimits,
}

impl Extractor {
    pub async fn extract(&self, pdf: &[u8]) -> Result<Pages, ExtractError> {
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
        let memory = self.limits.memory_bytes;
        let cpu_secs = self.limits.timeout.as_secs() + 5;
        // SAFETY: only async-signal-safe calls (setrlimit) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                set_rlimit(libc::RLIMIT_AS, memory)?;
                set_rlimit(libc::RLIMIT_CPU, cpu_secs)?;
                set_rlimit(libc::RLIMIT_CORE, 0)?;
                Ok(())
            });
        }
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
            let mut out = Vec::new();
            let mut err = Vec::new();
            // bounded reads: a runaway child cannot make the parent buffer gigabytes
            let mut stdout = (&mut stdout).take(MAX_OUTPUT_BYTES + 1);
            let mut stderr = (&mut stderr).take(64 << 10);
            let (_, o, e) = tokio::join!(writer, stdout.read_to_end(&mut out), stderr.read_to_end(&mut err));
            o.map_err(ExtractError::Io)?;
            e.map_err(ExtractError::Io)?;
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
            ChildAnswer::Pages { pages, failed_pages } => Ok(Pages { pages, failed_pages }),
            ChildAnswer::Encrypted => Err(ExtractError::Encrypted),
            ChildAnswer::TooManyPages { pages } => {
                Err(ExtractError::TooManyPages { pages, limit: self.limits.max_pages })
            }
            ChildAnswer::Malformed(m) => Err(ExtractError::Malformed(m)),
        }
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

fn describe(status: std::process::ExitStatus, stderr: &str) -> String {
    use std::os::unix::process::ExitStatusExt;
    if let Some(sig) = status.signal() {
        let name = match sig {
            libc::SIGABRT => "SIGABRT (abort, often out of memory under the extract memory limit)",
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
        return "out of memory under the extract memory limit".into();
    }
    format!("exit status {}", status.code().unwrap_or(-1))
}

fn tail(s: &str, max: usize) -> String {
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
    ChildAnswer::Pages { pages, failed_pages }
}
