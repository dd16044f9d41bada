//! Renders plain text to a simple PDF (Helvetica, A4, wrapped lines) — for the demo's sample
//! contracts and the tests' fixtures. Characters outside Latin-1 are replaced by `?`.

use lopdf::content::{Content, Operation};
use lopdf::{dictionary, Document, Object, Stream};

const LINES_PER_PAGE: usize = 52;
const CHARS_PER_LINE: usize = 95;

/// Word-wrap `text` into lines of at most `width` characters, keeping blank lines.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    for para in text.lines() {
        let mut line = String::new();
        for word in para.split_whitespace() {
            if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
                lines.push(std::mem::take(&mut line));
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
        lines.push(line);
    }
    lines
}

fn latin1(s: &str) -> Vec<u8> {
    s.chars().map(|c| if (c as u32) < 256 { c as u8 } else { b'?' }).collect()
}

/// A PDF of `text`, one page per 52 wrapped lines.
pub fn render(text: &str) -> Result<Vec<u8>, lopdf::Error> {
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font_id = doc.add_object(dictionary! {
        "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica", "Encoding" => "WinAnsiEncoding",
    });
    let resources_id = doc.add_object(dictionary! { "Font" => dictionary! { "F1" => font_id } });
    let lines = wrap(text, CHARS_PER_LINE);
    let mut kids = Vec::new();
    for page in lines.chunks(LINES_PER_PAGE) {
        let mut ops = vec![
            Operation::new("BT", vec![]),
            Operation::new("Tf", vec!["F1".into(), 10.into()]),
            Operation::new("TL", vec![14.into()]),
            Operation::new("Td", vec![50.into(), 790.into()]),
        ];
        for line in page {
            ops.push(Operation::new("Tj", vec![Object::String(latin1(line), lopdf::StringFormat::Literal)]));
            ops.push(Operation::new("T*", vec![]));
        }
        ops.push(Operation::new("ET", vec![]));
        let content_id = doc.add_object(Stream::new(dictionary! {}, Content { operations: ops }.encode()?));
        let page_id = doc.add_object(dictionary! { "Type" => "Page", "Parent" => pages_id, "Contents" => content_id });
        kids.push(page_id.into());
    }
    let count = kids.len() as i64;
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! {
            "Type" => "Pages", "Kids" => kids, "Count" => count, "Resources" => resources_id,
            "MediaBox" => vec![0.into(), 0.into(), 595.into(), 842.into()],
        }),
    );
    let catalog_id = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    doc.trailer.set("Root", catalog_id);
    doc.compress();
    let mut out = Vec::new();
    doc.save_to(&mut out)?;
    Ok(out)
}
