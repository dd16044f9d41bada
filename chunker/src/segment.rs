//! Clause-sized segments of a document text — numbered sections, paragraphs, and sentences
//! of very long paragraphs — as character ranges; and their token ranges.
//!
//! The rules, in order:
//! 1. A block is a run of non-blank lines. A line that opens with a section marker (`12.`,
//!    `4.2`, `(b)`, `Section 7`, `ARTICLE IV`, …) also starts a new block: extracted PDF text
//!    often has no blank line between clauses.
//! 2. A block shorter than `min_chars` (a heading, a lone page number) joins the block after
//!    it, so a heading stays with its clause; the last one joins the block before it.
//! 3. A block longer than `max_chars` is cut at sentence ends into pieces of at most
//!    `max_chars`, and a sentence longer than that at whitespace.
//!
//! Ranges are trimmed of surrounding whitespace, disjoint, and in text order.
//! [`split_long`] then cuts any segment over a token limit into equal token pieces, the same
//! way whoever computes it, so the chunks that overlap a segment agree on what it is.

use std::ops::Range;

/// Segment size limits, in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SegmentConfig {
    /// Blocks shorter than this join their neighbour.
    pub min_chars: usize,
    /// Blocks longer than this are cut into sentences.
    pub max_chars: usize,
}

impl Default for SegmentConfig {
    fn default() -> Self {
        Self { min_chars: 60, max_chars: 1200 }
    }
}

/// Character ranges of the segments of `text` (see the module docs).
pub fn segments(text: &str, cfg: SegmentConfig) -> Vec<Range<usize>> {
    let chars: Vec<char> = text.chars().collect();
    let max = cfg.max_chars.max(1);
    let mut blocks = merge_short(&chars, blocks(&chars), cfg.min_chars);
    let mut out = Vec::with_capacity(blocks.len());
    for b in blocks.drain(..) {
        if b.len() <= max {
            out.push(b);
        } else {
            out.extend(split_sentences(&chars, b, max));
        }
    }
    out.into_iter().filter_map(|r| trim(&chars, r)).collect()
}

/// Runs of non-blank lines, also broken before a line that opens with a section marker.
fn blocks(chars: &[char]) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    let mut line_start = 0;
    while line_start < chars.len() {
        let line_end = chars[line_start..].iter().position(|&c| c == '\n').map_or(chars.len(), |p| line_start + p);
        let line = &chars[line_start..line_end];
        if line.iter().all(|c| c.is_whitespace()) {
            if let Some(s) = start.take() {
                out.push(s..line_start);
            }
        } else if starts_section(line) {
            if let Some(s) = start.replace(line_start) {
                out.push(s..line_start);
            }
        } else if start.is_none() {
            start = Some(line_start);
        }
        line_start = line_end + 1;
    }
    if let Some(s) = start {
        out.push(s..chars.len());
    }
    out.into_iter().filter_map(|r| trim(chars, r)).collect()
}

/// Whether a line opens with a section marker: `12.`, `4.2`, `3.1(a)`, `(b)`, `(iv)`,
/// `Section 7`, `ARTICLE IV`, `§ 5`.
fn starts_section(line: &[char]) -> bool {
    let s: String = line.iter().collect::<String>();
    let s = s.trim_start();
    let lower = s.to_lowercase();
    for word in ["section ", "article ", "§"] {
        if let Some(rest) = lower.strip_prefix(word) {
            return rest.trim_start().chars().next().is_some_and(|c| c.is_ascii_digit() || "ivxlc".contains(c));
        }
    }
    let mut it = s.chars().peekable();
    if it.peek() == Some(&'(') {
        it.next();
        let inner: String = it.by_ref().take_while(|&c| c != ')').collect();
        let ok = (1..=4).contains(&inner.len())
            && (inner.chars().all(|c| c.is_ascii_digit())
                || (inner.len() == 1 && inner.chars().all(|c| c.is_ascii_lowercase()))
                || inner.chars().all(|c| "ivxlc".contains(c)));
        return ok && it.next().is_some_and(char::is_whitespace);
    }
    // 12.  4.2  4.2.1  followed by whitespace (or "(a)"), and not a sentence-ending number
    let digits: String = s.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
    if digits.is_empty() || !digits.starts_with(|c: char| c.is_ascii_digit()) || digits.len() > 12 {
        return false;
    }
    let number = digits.split('.').next().unwrap_or("");
    if number.len() > 3 {
        return false; // a year or an amount, not a section number
    }
    let after = s[digits.len()..].chars().next();
    let dotted = digits.contains('.');
    dotted && after.is_none_or(|c| c.is_whitespace() || c == '(')
}

/// Blocks shorter than `min` join the next block (the last joins the previous one).
fn merge_short(chars: &[char], blocks: Vec<Range<usize>>, min: usize) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::with_capacity(blocks.len());
    let mut pending: Option<usize> = None;
    for b in blocks {
        let start = pending.take().unwrap_or(b.start);
        let merged = start..b.end;
        if letters(chars, &merged) < min {
            pending = Some(start);
        } else {
            out.push(merged);
        }
    }
    if let Some(start) = pending {
        match out.last_mut() {
            Some(last) => last.end = chars.len().min(trailing_end(chars, start)),
            None => out.push(start..trailing_end(chars, start)),
        }
    }
    out
}

fn trailing_end(chars: &[char], from: usize) -> usize {
    chars.len() - chars[from..].iter().rev().take_while(|c| c.is_whitespace()).count()
}

fn letters(chars: &[char], r: &Range<usize>) -> usize {
    chars[r.clone()].iter().filter(|c| !c.is_whitespace()).count()
}

/// Cut a long block at sentence ends into pieces of at most `max` characters.
fn split_sentences(chars: &[char], block: Range<usize>, max: usize) -> Vec<Range<usize>> {
    let mut ends = Vec::new();
    for i in block.start..block.end.saturating_sub(1) {
        if is_sentence_end(chars, i, block.start) {
            ends.push(i + 1);
        }
    }
    ends.push(block.end);
    let mut out = Vec::new();
    let mut start = block.start;
    let mut last_end = start;
    for &end in &ends {
        if end - start > max && last_end > start {
            out.push(start..last_end);
            start = last_end;
        }
        while end - start > max {
            let cut = whitespace_cut(chars, start, start + max);
            out.push(start..cut);
            start = cut;
        }
        last_end = end;
    }
    if start < block.end {
        out.push(start..block.end);
    }
    out
}

/// `.`, `;`, `?` or `!` followed by whitespace, closing the sentence (not `Inc.`, `No. 5`, `U.S.`).
fn is_sentence_end(chars: &[char], i: usize, floor: usize) -> bool {
    if !matches!(chars[i], '.' | ';' | '?' | '!') || !chars.get(i + 1).is_some_and(|c| c.is_whitespace()) {
        return false;
    }
    if chars[i] != '.' {
        return true;
    }
    let word_start = (floor..i).rev().find(|&j| chars[j].is_whitespace()).map_or(floor, |j| j + 1);
    let word: String = chars[word_start..i].iter().collect::<String>().to_lowercase();
    const ABBREVIATIONS: &[&str] = &[
        "inc", "co", "corp", "ltd", "no", "nos", "sec", "art", "mr", "ms", "mrs", "dr", "st", "e.g", "i.e", "etc",
        "vs", "u.s", "n.a", "para", "p",
    ];
    if ABBREVIATIONS.contains(&word.trim_start_matches('(')) || word.len() == 1 {
        return false;
    }
    // the next word opens a sentence: capital, digit, quote or bracket
    let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
    next.is_none_or(|c| c.is_uppercase() || c.is_ascii_digit() || matches!(c, '(' | '"' | '“' | '\''))
}

/// Last whitespace in `(start, limit]`, or `limit` when there is none.
fn whitespace_cut(chars: &[char], start: usize, limit: usize) -> usize {
    (start + 1..=limit).rev().find(|&j| chars[j - 1].is_whitespace()).unwrap_or(limit)
}

fn trim(chars: &[char], r: Range<usize>) -> Option<Range<usize>> {
    let mut s = r.start;
    let mut e = r.end.min(chars.len());
    while s < e && chars[s].is_whitespace() {
        s += 1;
    }
    while e > s && chars[e - 1].is_whitespace() {
        e -= 1;
    }
    (s < e).then_some(s..e)
}

/// Token range of a character range, given each token's character range (sorted): the tokens
/// that start inside it, plus one that starts before and reaches into it.
pub fn token_range(chars: &Range<usize>, token_chars: &[(usize, usize)]) -> Range<usize> {
    let first = token_chars.partition_point(|t| t.1 <= chars.start);
    let end = token_chars.partition_point(|t| t.0 < chars.end);
    first..end.max(first)
}

/// Cut every token range longer than `max_tokens` into the fewest pieces of (nearly) equal
/// length. Deterministic: the same input gives the same pieces wherever it is computed.
pub fn split_long(tokens: &[Range<usize>], max_tokens: usize) -> Vec<Range<usize>> {
    let max = max_tokens.max(1);
    let mut out = Vec::with_capacity(tokens.len());
    for t in tokens {
        let pieces = t.len().div_ceil(max).max(1);
        for p in 0..pieces {
            let s = t.start + t.len() * p / pieces;
            let e = t.start + t.len() * (p + 1) / pieces;
            if s < e || t.is_empty() {
                out.push(s..e);
            }
        }
    }
    out
}

/// The token that decides which chunk keeps a segment: its middle one.
pub fn midpoint(tokens: &Range<usize>) -> usize {
    tokens.start + tokens.len().saturating_sub(1) / 2
}

/// Buckets that [`terms`] hashes into.
pub const TERM_SPACE: u32 = 1 << 20;

/// The lexical [`terms`] of each character range of `text` (a segment's words and word pairs);
/// a range that is reversed or reaches past the text is clipped to it (no terms when empty).
pub fn terms_of_ranges(text: &str, ranges: impl IntoIterator<Item = Range<usize>>) -> Vec<Vec<i32>> {
    let chars: Vec<char> = text.chars().collect();
    ranges
        .into_iter()
        .map(|r| {
            let (a, b) = (r.start.min(chars.len()), r.end.min(chars.len()));
            let t: String = chars.get(a..b.max(a)).unwrap_or_default().iter().collect();
            terms(&t)
        })
        .collect()
}

/// The lexical features of a segment's text: its words (runs of letters and digits,
/// lower-cased) and pairs of adjacent words, each hashed (FNV-1a, 32 bit) into one of
/// [`TERM_SPACE`] buckets. Sorted, without repeats. Clause scorers learn a weight per bucket.
pub fn terms(text: &str) -> Vec<i32> {
    fn fnv(parts: &[&str]) -> i32 {
        let mut h: u32 = 0x811c_9dc5;
        for (i, p) in parts.iter().enumerate() {
            let sep: &[u8] = if i > 0 { b" " } else { b"" };
            for &b in sep.iter().chain(p.as_bytes()) {
                h = (h ^ b as u32).wrapping_mul(0x0100_0193);
            }
        }
        (h % TERM_SPACE) as i32
    }
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
    let mut out: Vec<i32> = words.iter().map(|w| fnv(&[w])).chain(words.windows(2).map(fnv)).collect();
    out.sort_unstable();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(text: &str, cfg: SegmentConfig) -> Vec<String> {
        segments(text, cfg).iter().map(|r| text.chars().skip(r.start).take(r.len()).collect()).collect()
    }

    const SMALL: SegmentConfig = SegmentConfig { min_chars: 10, max_chars: 200 };

    #[test]
    fn paragraphs_and_numbered_sections() {
        let text = "MASTER SERVICES AGREEMENT\n\nThis Agreement is made between Acme Inc. and Beta LLC.\n\
                    1. Definitions. Words have meanings\nacross two lines.\n1.1 Term. The term is one year.\n\
                    (a) first item of the list\n(b) second item of the list\n\n\nSection 7 Governing law of New York.";
        let got = texts(text, SMALL);
        assert_eq!(
            got,
            vec![
                "MASTER SERVICES AGREEMENT",
                "This Agreement is made between Acme Inc. and Beta LLC.",
                "1. Definitions. Words have meanings\nacross two lines.",
                "1.1 Term. The term is one year.",
                "(a) first item of the list",
                "(b) second item of the list",
                "Section 7 Governing law of New York.",
            ]
        );
    }

    #[test]
    fn headings_join_the_clause_after_them() {
        let text = "ARTICLE 5\n\nTERM\n\nThis agreement runs for five years from signing.\n\n3";
        let got = texts(text, SegmentConfig { min_chars: 20, max_chars: 500 });
        assert_eq!(got, vec!["ARTICLE 5\n\nTERM\n\nThis agreement runs for five years from signing.\n\n3"]);
    }

    #[test]
    fn long_paragraphs_split_at_sentences() {
        let s = "The Supplier shall deliver the goods to the site of Acme Corp. in good order. ";
        let text = s.repeat(8);
        let got = texts(&text, SegmentConfig { min_chars: 10, max_chars: 170 });
        assert_eq!(got.len(), 4);
        for g in &got {
            assert!(g.chars().count() <= 170, "{g}");
            assert!(g.ends_with("order."), "{g}");
            assert!(!g.ends_with("Corp."));
        }
        // one endless sentence is cut at whitespace
        let long = "word ".repeat(100);
        let got = texts(&long, SegmentConfig { min_chars: 10, max_chars: 42 });
        assert!(got.iter().all(|g| g.chars().count() <= 42 && !g.starts_with(' ') && g.starts_with("word")));
        assert_eq!(got.join(" ").split_whitespace().count(), 100);
    }

    #[test]
    fn segments_are_disjoint_ordered_and_cover_all_words() {
        let text = "Préambule — l'accord 契約.\n\n2. Objet: café ☕ livré.\n\n\n(c) fin 🙂 du texte. ".repeat(30);
        let segs = segments(&text, SegmentConfig { min_chars: 5, max_chars: 120 });
        for w in segs.windows(2) {
            assert!(w[0].end <= w[1].start);
        }
        let chars: Vec<char> = text.chars().collect();
        let joined: Vec<String> = segs.iter().map(|r| chars[r.clone()].iter().collect()).collect();
        assert_eq!(
            joined.join(" ").split_whitespace().collect::<Vec<_>>(),
            text.split_whitespace().collect::<Vec<_>>()
        );
    }

    #[test]
    fn section_markers() {
        for yes in
            ["1. Term", "12.3 Fees", "4.2.1(a) x", "(b) item", "(iv) item", "Section 9 Law", "ARTICLE IV", "§ 5 x"]
        {
            assert!(starts_section(&yes.chars().collect::<Vec<_>>()), "{yes}");
        }
        for no in ["2019 was a year", "1,000 dollars", "The end", "(Seller) shall", "3 months", "2024. The"] {
            assert!(!starts_section(&no.chars().collect::<Vec<_>>()), "{no}");
        }
    }

    #[test]
    fn token_ranges_and_splits() {
        // tokens at chars [0,3) [4,8) [9,12) [13,20)
        let toks = [(0, 3), (4, 8), (9, 12), (13, 20)];
        assert_eq!(token_range(&(4..12), &toks), 1..3);
        assert_eq!(token_range(&(5..10), &toks), 1..3);
        assert_eq!(token_range(&(12..13), &toks), 3..3);
        assert_eq!(split_long(&[0..10, 10..12], 4), vec![0..3, 3..6, 6..10, 10..12]);
        assert_eq!(midpoint(&(10..12)), 10);
        assert_eq!(midpoint(&(10..13)), 11);
    }

    #[test]
    fn terms_are_hashed_words_and_pairs() {
        let t = terms("Governing Law. This Agreement is governed by the LAWS of New York");
        assert_eq!(t, terms("governing  law this agreement is governed by the laws of new-york"));
        // 12 distinct words ("law" and "laws" differ) and 11 pairs
        assert_eq!(t.len(), 23);
        assert!(t.windows(2).all(|w| w[0] < w[1]));
        assert!(t.iter().all(|&h| (0..TERM_SPACE as i32).contains(&h)));
        assert_ne!(terms("new york"), terms("york new"));
        assert!(terms(" .,; ").is_empty());
    }

    #[test]
    fn terms_of_ranges_clips_bad_ranges() {
        let text = "Governing law. New York.";
        #[allow(clippy::reversed_empty_ranges)] // a reversed range, as a bad stored one would be
        let t = terms_of_ranges(text, [0..14, 15..24, 20..5, 10..1000, 500..600]);
        assert_eq!(t[0], terms("Governing law."));
        assert_eq!(t[1], terms("New York."));
        assert!(t[2].is_empty() && t[4].is_empty());
        assert_eq!(t[3], terms(&text[10..]));
    }
}
