//! OCR on generated scans — text rendered to page images inside a PDF, with no text layer,
//! upright, sideways and upside down: the words come back through the extractor with
//! `--ocr auto`; in a PDF with one page scanned, that page alone. A page with a good text
//! layer is not read by OCR unless forced, and with
//! `--ocr off` a scan stays empty. A recogniser that hangs, crashes or floods its error output
//! fails (or slows) one page only. Needs Tesseract and pdftoppm (`make test` installs them),
//! no services.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::Command;

use docpipe_text::extract::{ExtractLimits, Extractor, Pages};
use docpipe_text::ocr::{Ocr, OcrConfig, OcrMode};

const BIN: &str = env!("CARGO_BIN_EXE_docpipe");

const LEASE: &str = include_str!("fixtures/lease.txt");

fn scratch() -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("docpipe-ocrtest-{}-{}", std::process::id(), uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `text` as a PDF: scanned (`Some(rotation)`) or with a text layer (`None`).
fn pdf(text: &str, scan: Option<u16>) -> Vec<u8> {
    match scan {
        Some(r) => pdf_with(text, &["--scan", "--rotate", &r.to_string()]),
        None => pdf_with(text, &[]),
    }
}

/// `docpipe render-pdf [args] text`.
fn pdf_with(text: &str, args: &[&str]) -> Vec<u8> {
    let dir = scratch();
    let (txt, out) = (dir.join("in.txt"), dir.join("out.pdf"));
    std::fs::write(&txt, text).unwrap();
    let mut cmd = Command::new(BIN);
    cmd.arg("render-pdf").args(args).arg(&txt).arg(&out);
    let st = cmd.status().unwrap();
    assert!(st.success(), "docpipe render-pdf failed");
    let bytes = std::fs::read(&out).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    bytes
}

fn extractor(mode: OcrMode) -> Extractor {
    Extractor {
        exe: BIN.into(),
        limits: ExtractLimits::default(),
        ocr: Ocr::new(OcrConfig { mode, ..OcrConfig::default() }),
    }
}

fn words(text: &str) -> HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

/// Share of the source's words that the extracted text has.
fn recall(source: &str, pages: &Pages) -> f64 {
    let (want, got) = (words(source), words(&pages.pages.join("\n")));
    want.iter().filter(|w| got.contains(*w)).count() as f64 / want.len() as f64
}

#[tokio::test]
async fn scans_are_read_by_ocr_upright_sideways_and_upside_down() {
    let ocr = extractor(OcrMode::Auto);
    ocr.ocr.check().await.expect("Tesseract and pdftoppm are installed (scripts/provision.sh ocr)");
    for rotate in [0, 90, 180] {
        let scan = pdf(LEASE, Some(rotate));
        // the scan really has no text layer
        let layer = extractor(OcrMode::Off).extract(&scan).await.unwrap();
        assert!(layer.pages.iter().all(|p| p.trim().is_empty()), "rotation {rotate}: {:?}", layer.pages);
        assert_eq!(layer.ocr_pages(), 0);

        let pages = ocr.extract(&scan).await.unwrap();
        assert_eq!(pages.pages.len(), 1);
        let read = pages.ocr[0].unwrap_or_else(|| panic!("rotation {rotate}: page 1 not read by OCR: {pages:?}"));
        assert!(read.confidence > 80.0 && read.words > 80, "rotation {rotate}: {read:?}");
        let r = recall(LEASE, &pages);
        assert!(r >= 0.95, "rotation {rotate}: OCR recovered {:.1}% of the words: {:?}", 100.0 * r, pages.pages[0]);
        assert!(pages.pages[0].contains("Copperfield Analytics"), "rotation {rotate}: {:?}", pages.pages[0]);
        assert!(pages.failed_pages.is_empty() && pages.ocr_seconds > 0.0);
    }
}

#[tokio::test]
async fn a_mixed_pdf_is_read_page_by_page() {
    // three pages of 52 short lines each; the middle one scanned back in
    let page = |line: &dyn Fn(usize) -> String| (1..=52).map(line).collect::<Vec<_>>().join("\n");
    let text = [
        page(&|i| format!("Schedule A item {i}: delivery of widgets to the Buyer at the agreed price.")),
        page(&|i| format!("Lease clause {i}: Copperfield Analytics renews yearly unless notice is given.")),
        page(&|i| format!("Schedule C item {i}: payment by wire transfer within thirty days.")),
    ]
    .join("\n");
    let mixed = pdf_with(&text, &["--scan", "--scan-pages", "2"]);

    let without = extractor(OcrMode::Off).extract(&mixed).await.unwrap();
    assert_eq!(without.pages.len(), 3);
    assert!(without.pages[1].trim().is_empty(), "page 2 is a scan: {:?}", without.pages[1]);
    assert!(without.pages[0].contains("Schedule A item 52") && without.pages[2].contains("Schedule C item 1:"));

    let pages = extractor(OcrMode::Auto).extract(&mixed).await.unwrap();
    let read: Vec<bool> = pages.ocr.iter().map(Option::is_some).collect();
    assert_eq!(read, [false, true, false], "only the scanned page is read by OCR");
    assert_eq!(
        (&pages.pages[0], &pages.pages[2]),
        (&without.pages[0], &without.pages[2]),
        "text layers kept as they were"
    );
    let lines = pages.pages[1].lines().filter(|l| l.contains("Copperfield Analytics renews yearly")).count();
    assert!(lines >= 50, "{lines} of 52 lines of the scanned page read: {:?}", pages.pages[1]);
}

#[tokio::test]
async fn a_good_text_layer_is_kept_unless_ocr_is_forced() {
    let born_digital = pdf(LEASE, None);
    let auto = extractor(OcrMode::Auto).extract(&born_digital).await.unwrap();
    assert_eq!(auto.ocr_pages(), 0, "a good text layer was read by OCR: {auto:?}");
    assert_eq!(auto.ocr_seconds, 0.0);
    assert!(recall(LEASE, &auto) > 0.99);

    let forced = extractor(OcrMode::Force).extract(&born_digital).await.unwrap();
    assert_eq!(forced.ocr_pages(), 1, "{forced:?}");
    assert!(recall(LEASE, &forced) >= 0.95, "{:?}", forced.pages);
    assert!(forced.ocr_confidence().unwrap() > 80.0);
}

#[tokio::test]
async fn a_blank_scan_stays_empty_and_says_why() {
    // a page image with nothing on it: OCR finds no text, and the page is not made up
    let blank = pdf(" ", Some(0));
    let pages = extractor(OcrMode::Auto).extract(&blank).await.unwrap();
    assert_eq!(pages.ocr_pages(), 0, "{pages:?}");
    assert!(pages.pages.iter().all(|p| p.trim().is_empty()));
    assert_eq!(pages.ocr_discarded.len(), 1, "{pages:?}");
    assert!(pages.ocr_discarded[0].1.contains("OCR found no text"), "{:?}", pages.ocr_discarded);
}

#[tokio::test]
async fn missing_tools_and_languages_are_one_clear_error() {
    let missing = Ocr::new(OcrConfig { tesseract: "/nonexistent/tesseract".into(), ..OcrConfig::default() });
    let e = missing.check().await.unwrap_err().to_string();
    assert!(e.contains("tesseract-ocr") && e.contains("--ocr off"), "{e}");
    let klingon = Ocr::new(OcrConfig { languages: "eng+tlh".into(), ..OcrConfig::default() });
    let e = klingon.check().await.unwrap_err().to_string();
    assert!(e.contains("tlh") && e.contains("--ocr-lang"), "{e}");
    // off needs nothing
    let off = Ocr::new(OcrConfig { mode: OcrMode::Off, tesseract: "/nonexistent".into(), ..OcrConfig::default() });
    off.check().await.unwrap();
}

/// A stand-in for `tesseract`: it answers `--list-langs` as the real one does, and runs
/// `behaviour` (a shell snippet) when asked to read a page.
fn fake_tesseract(behaviour: &str) -> PathBuf {
    let dir = scratch();
    let path = dir.join("tesseract");
    let script = format!(
        "#!/bin/sh\nif [ \"$1\" = --list-langs ]; then printf 'List of available languages (2):\\neng\\nosd\\n'; exit 0; fi\n{behaviour}\n"
    );
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn with_tesseract(tesseract: PathBuf, page_timeout_s: u64) -> Extractor {
    let config =
        OcrConfig { tesseract, page_timeout: std::time::Duration::from_secs(page_timeout_s), ..OcrConfig::default() };
    Extractor { exe: BIN.into(), limits: ExtractLimits::default(), ocr: Ocr::new(config) }
}

#[tokio::test]
async fn a_hanging_or_crashing_recogniser_fails_the_page_not_the_process() {
    let scan = pdf(LEASE, Some(0));
    let started = std::time::Instant::now();
    let hung = with_tesseract(fake_tesseract("sleep 60"), 2).extract(&scan).await.unwrap();
    assert!(started.elapsed().as_secs() < 20, "the page time limit was not applied");
    assert_eq!((hung.ocr_pages(), hung.ocr_failed), (0, 1), "{hung:?}");
    assert!(hung.failed_pages[0].1.contains("time limit"), "{:?}", hung.failed_pages);

    let crashed = with_tesseract(fake_tesseract("kill -SEGV $$"), 30).extract(&scan).await.unwrap();
    assert_eq!((crashed.ocr_pages(), crashed.ocr_failed), (0, 1), "{crashed:?}");
    assert!(crashed.failed_pages[0].1.contains("SIGSEGV"), "{:?}", crashed.failed_pages);
}

#[tokio::test]
async fn a_tool_that_floods_its_error_output_is_drained_not_waited_on() {
    // 4 MB of noise on stderr before the real work: the pipe must be emptied, or the tool
    // blocks on it and the page times out
    let noisy = fake_tesseract("head -c 4000000 /dev/zero | tr '\\0' x >&2\nexec tesseract \"$@\"");
    let pages = with_tesseract(noisy, 60).extract(&pdf(LEASE, Some(0))).await.unwrap();
    assert_eq!(pages.ocr_pages(), 1, "{pages:?}");
    assert!(recall(LEASE, &pages) >= 0.95);
}

#[tokio::test]
async fn pages_past_the_per_document_limit_are_not_read_and_say_so() {
    let config = OcrConfig { max_pages: 0, ..OcrConfig::default() };
    let capped = Extractor { exe: BIN.into(), limits: ExtractLimits::default(), ocr: Ocr::new(config) };
    let pages = capped.extract(&pdf(LEASE, Some(0))).await.unwrap();
    assert_eq!(pages.ocr_pages(), 0);
    assert!(pages.failed_pages[0].1.contains("--ocr-max-pages"), "{:?}", pages.failed_pages);
}
