//! The small `docpipe-extract` binary serves the extractor child's protocol: a PDF in, its
//! pages out, through [`Extractor`] as ingest runs it.

use std::path::PathBuf;

use docpipe_text::extract::{ExtractError, ExtractLimits, Extractor};
use docpipe_text::ocr::{Ocr, OcrConfig, OcrMode};
use lopdf::content::{Content, Operation};
use lopdf::{dictionary, Document, Object, Stream};

/// A one-page PDF whose text layer says `text` (Helvetica).
fn pdf(text: &str) -> Vec<u8> {
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font = doc.add_object(dictionary! { "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica" });
    let resources = doc.add_object(dictionary! { "Font" => dictionary! { "F1" => font } });
    let ops = vec![
        Operation::new("BT", vec![]),
        Operation::new("Tf", vec!["F1".into(), 12.into()]),
        Operation::new("Td", vec![72.into(), 720.into()]),
        Operation::new("Tj", vec![Object::string_literal(text)]),
        Operation::new("ET", vec![]),
    ];
    let content = doc.add_object(Stream::new(dictionary! {}, Content { operations: ops }.encode().unwrap()));
    let page = doc.add_object(dictionary! {
        "Type" => "Page", "Parent" => pages_id, "Contents" => content, "Resources" => resources,
        "MediaBox" => vec![0.into(), 0.into(), 595.into(), 842.into()],
    });
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! { "Type" => "Pages", "Kids" => vec![page.into()], "Count" => 1 }),
    );
    let catalog = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    doc.trailer.set("Root", catalog);
    let mut out = Vec::new();
    doc.save_to(&mut out).unwrap();
    out
}

fn extractor() -> Extractor {
    let ocr = Ocr::new(OcrConfig { mode: OcrMode::Off, ..OcrConfig::default() });
    Extractor { exe: PathBuf::from(env!("CARGO_BIN_EXE_docpipe-extract")), limits: ExtractLimits::default(), ocr }
}

#[tokio::test]
async fn reads_the_text_layer_and_refuses_what_is_not_a_pdf() {
    let pages = extractor().extract(&pdf("This Agreement is governed by Delaware law.")).await.expect("extract");
    assert_eq!(pages.pages.len(), 1);
    assert!(pages.pages[0].contains("governed by Delaware law"), "{:?}", pages.pages[0]);
    assert!(pages.failed_pages.is_empty());
    // a damaged file: the child answers with the reason
    let mut broken = pdf("x");
    broken.truncate(60);
    let err = extractor().extract(&broken).await.expect_err("a truncated PDF");
    assert!(matches!(err, ExtractError::Malformed(_)), "{err}");
}
