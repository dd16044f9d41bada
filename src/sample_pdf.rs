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

/// `text` as a scanned document: every page of [`render`] rasterised to a grey image at `dpi`
/// by poppler's `pdftoppm`, with no text layer left (what a scanner produces). `rotate` turns
/// the images clockwise (0, 90, 180, 270), as a sheet fed sideways or upside down; `only`
/// scans those pages (1-based) and keeps the others' text layer, as in a signed copy with one
/// page scanned back in. For the tests' and the demo's scanned fixtures.
pub fn render_scan(text: &str, dpi: u32, rotate: u16, only: Option<&[u32]>) -> anyhow::Result<Vec<u8>> {
    scan(&render(text)?, dpi, rotate, only)
}

/// A scan of `pdf`: each page (or each of `only`) replaced by a grey image of itself at `dpi`,
/// turned clockwise by `rotate`; the scanned pages lose their text layer.
pub fn scan(pdf: &[u8], dpi: u32, rotate: u16, only: Option<&[u32]>) -> anyhow::Result<Vec<u8>> {
    use anyhow::{bail, ensure, Context};
    if ![0, 90, 180, 270].contains(&rotate) {
        bail!("--rotate must be 0, 90, 180 or 270, not {rotate}");
    }
    let dir = std::env::temp_dir().join(format!("docpipe-scan-{}-{}", std::process::id(), rand_suffix()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let images = (|| {
        let source = dir.join("source.pdf");
        std::fs::write(&source, pdf).with_context(|| format!("writing {}", source.display()))?;
        let status = std::process::Command::new("pdftoppm")
            .args(["-gray", "-r", &dpi.to_string()])
            .arg(&source)
            .arg(dir.join("page"))
            .status()
            .context("running pdftoppm (Debian package poppler-utils)")?;
        if !status.success() {
            bail!("pdftoppm failed ({status})");
        }
        let mut images: Vec<_> = std::fs::read_dir(&dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "pgm"))
            .collect();
        // page-1.pgm … page-10.pgm: pdftoppm pads the numbers to the same width
        images.sort();
        images
            .iter()
            .map(|p| {
                let bytes = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
                let (w, h, px) = parse_pgm(&bytes).with_context(|| format!("reading {}", p.display()))?;
                Ok(rotate_gray(w, h, px, rotate))
            })
            .collect::<anyhow::Result<Vec<_>>>()
    })();
    let _ = std::fs::remove_dir_all(&dir);
    let images = images?;
    let mut doc = Document::load_mem(pdf).context("reading the PDF to scan")?;
    let pages: Vec<(u32, lopdf::ObjectId)> = doc.get_pages().into_iter().collect();
    ensure!(pages.len() == images.len(), "{} pages but pdftoppm rendered {}", pages.len(), images.len());
    for ((n, id), (w, h, px)) in pages.into_iter().zip(images) {
        if only.is_some_and(|o| !o.contains(&n)) {
            continue;
        }
        let image = dictionary! {
            "Type" => "XObject", "Subtype" => "Image", "Width" => w as i64, "Height" => h as i64,
            "ColorSpace" => "DeviceGray", "BitsPerComponent" => 8,
        };
        let image_id = doc.add_object(Stream::new(image, px));
        let (pw, ph) = (w as f32 * 72.0 / dpi as f32, h as f32 * 72.0 / dpi as f32);
        let ops = vec![
            Operation::new("q", vec![]),
            Operation::new("cm", vec![pw.into(), 0.into(), 0.into(), ph.into(), 0.into(), 0.into()]),
            Operation::new("Do", vec!["Im0".into()]),
            Operation::new("Q", vec![]),
        ];
        let content_id = doc.add_object(Stream::new(dictionary! {}, Content { operations: ops }.encode()?));
        let page = doc.get_object_mut(id)?.as_dict_mut()?;
        page.set("Contents", content_id);
        page.set("Resources", dictionary! { "XObject" => dictionary! { "Im0" => image_id } });
        page.set("MediaBox", vec![0.into(), 0.into(), pw.into(), ph.into()]);
        // the image is the page as rendered: no other box, rotation or annotation applies
        for key in ["CropBox", "TrimBox", "BleedBox", "ArtBox", "Rotate", "Annots"] {
            page.remove(key.as_bytes());
        }
    }
    doc.compress();
    let mut out = Vec::new();
    doc.save_to(&mut out)?;
    Ok(out)
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

/// Width, height and pixels of a binary 8-bit PGM (`P5`).
fn parse_pgm(b: &[u8]) -> anyhow::Result<(usize, usize, Vec<u8>)> {
    let mut fields = Vec::new();
    let mut i = 0;
    while fields.len() < 4 {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        let start = i;
        while i < b.len() && !b[i].is_ascii_whitespace() {
            i += 1;
        }
        anyhow::ensure!(i > start, "truncated PGM header");
        fields.push(std::str::from_utf8(&b[start..i])?.to_string());
    }
    anyhow::ensure!(fields[0] == "P5" && fields[3] == "255", "not an 8-bit binary PGM");
    let (w, h): (usize, usize) = (fields[1].parse()?, fields[2].parse()?);
    let px = b.get(i + 1..i + 1 + w * h).ok_or_else(|| anyhow::anyhow!("truncated PGM pixels"))?;
    Ok((w, h, px.to_vec()))
}

/// A grey image turned clockwise by `degrees`: (width, height, pixels).
fn rotate_gray(w: usize, h: usize, px: Vec<u8>, degrees: u16) -> (usize, usize, Vec<u8>) {
    match degrees {
        90 => (h, w, (0..w * h).map(|i| px[(h - 1 - i % h) * w + i / h]).collect()),
        180 => (w, h, px.into_iter().rev().collect()),
        270 => (h, w, (0..w * h).map(|i| px[(i % h) * w + (w - 1 - i / h)]).collect()),
        _ => (w, h, px),
    }
}

#[cfg(test)]
mod tests {
    use super::rotate_gray;

    #[test]
    fn rotations_turn_the_image_clockwise() {
        // 2 wide, 3 high:  a b / c d / e f
        let px = b"abcdef".to_vec();
        assert_eq!(rotate_gray(2, 3, px.clone(), 90), (3, 2, b"ecafdb".to_vec()));
        assert_eq!(rotate_gray(2, 3, px.clone(), 180), (2, 3, b"fedcba".to_vec()));
        assert_eq!(rotate_gray(2, 3, px.clone(), 270), (3, 2, b"bdface".to_vec()));
        assert_eq!(rotate_gray(2, 3, px.clone(), 0), (2, 3, px));
    }
}
