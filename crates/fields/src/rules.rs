//! A rule-based baseline: regular expressions (no model) that pull the answer fields out of a
//! contract's plain text, reported beside the language-model extraction (and usable as its
//! fallback).
//!
//! The rules were written from how CUAD's *training* contracts phrase these clauses; they are
//! general patterns, not tuned on any evaluation contract. The text is matched in a working copy
//! whose whitespace runs are collapsed to one space and whose typographic quotes and dashes are
//! made plain; a char-offset map leads every match back to the original text, so each answer's
//! evidence is a range of the caller's text (in Unicode chars, half-open).

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::LazyLock;

use crate::normalize::{normalize, Value};
use crate::Kind;
use regex::{Regex, RegexBuilder};

/// One field's answer found by the rules: the raw text to normalise (short, like a human answer:
/// "April 1, 2007", "the State of New York", "successive one year periods", "ninety (90) days")
/// and the character range (in Unicode chars, 0-based half-open, of the input text) of the
/// sentence/clause it came from, as evidence.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub raw: String,
    pub evidence: Range<usize>,
}

/// Every field the rules find, keyed by [`crate::Field::key`] ("document_name", "parties",
/// "agreement_date", "effective_date", "expiration_date", "renewal_term",
/// "notice_period_to_terminate_renewal", "governing_law"). A field not found is absent.
pub fn extract(text: &str) -> BTreeMap<&'static str, Found> {
    let mut out = BTreeMap::new();
    if text.trim().is_empty() {
        return out;
    }
    let w = Work::new(text);

    let parties = parties(&w).or_else(|| signature_parties(text));
    let names = parties.as_ref().map(|(list, _)| party_names_in_titles(list)).unwrap_or_default();
    let named = |f: &Found| !GENERIC_TITLE.is_match(&f.raw);
    if let Some(f) = document_name(text, &names).filter(named).or_else(|| document_name_from_preamble(&w).filter(named))
    {
        out.insert("document_name", f);
    }
    if let Some((_, f)) = parties {
        out.insert("parties", f);
    }
    let agreement = agreement_date(&w);
    if let Some(a) = &agreement {
        out.insert("agreement_date", w.found(a.raw.clone(), a.evidence.clone()));
    }
    if let Some(f) = effective_date(&w, agreement.as_ref()) {
        // no date of making, but an effective date: CUAD gives it as the agreement date too
        // (one that is written; not an event, "the Closing Date", which dates no making)
        if agreement.is_none() && !crate::normalize::is_date_event(&f.raw) {
            out.insert("agreement_date", f.clone());
        }
        out.insert("effective_date", f);
    }
    let expiration = expiration_date(&w);
    let initial_term = expiration.as_ref().and_then(|e| e.1.clone());
    if let Some((f, _)) = expiration {
        out.insert("expiration_date", f);
    }
    let renewal = renewal_term(&w, initial_term.as_deref());
    if let Some(r) = &renewal {
        out.insert("renewal_term", w.found(r.raw.clone(), r.evidence.clone()));
    }
    if let Some(f) = notice_period(&w, renewal.as_ref()) {
        out.insert("notice_period_to_terminate_renewal", f);
    }
    if let Some(f) = governing_law(&w) {
        out.insert("governing_law", f);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Working copy: collapsed whitespace, plain quotes, and a map back to the original chars.

/// Whether `s` ends with a word that a date follows ("as of", "dated"), so that a digit right
/// after it begins a date that lost its space.
fn glued_to_date(s: &str) -> bool {
    let tail = &s[floor_cb(s, s.len().saturating_sub(6))..];
    let lower = tail.to_ascii_lowercase();
    lower.ends_with(" as of") || lower.ends_with(" dated")
}

struct Work {
    /// The working copy.
    s: String,
    /// Where the map to the original restarts: (byte offset in `s`, original char index) at the
    /// start of each run of working chars whose original chars are consecutive. Runs break only
    /// where whitespace was collapsed or a char dropped, so the map stays small.
    anchors: Vec<(usize, usize)>,
    /// Number of chars in the original text.
    n_orig: usize,
}

impl Work {
    fn new(text: &str) -> Work {
        let mut s = String::with_capacity(text.len());
        let mut anchors: Vec<(usize, usize)> = Vec::new();
        // Original index the next working char would have if it continued the current run.
        let mut next_orig = usize::MAX;
        let mut pending_space: Option<usize> = None;
        let mut n = 0;
        let mut push = |s: &mut String, c: char, i: usize| {
            if i != next_orig {
                anchors.push((s.len(), i));
            }
            next_orig = i + 1;
            s.push(c);
        };
        for (i, c) in text.chars().enumerate() {
            n = i + 1;
            if c.is_whitespace() || c.is_control() || matches!(c, '\u{feff}' | '\u{200b}' | '\u{00ad}') {
                if !s.is_empty() && pending_space.is_none() {
                    pending_space = Some(i);
                }
                continue;
            }
            if let Some(j) = pending_space.take() {
                push(&mut s, ' ', j);
            } else if s.ends_with('_') && c.is_alphanumeric() {
                // a blank filled in without a space ("as of _Dec. 8, 2005_"): the words stand apart
                push(&mut s, ' ', i);
            } else if c.is_ascii_digit() && glued_to_date(&s) {
                // a date glued to the word before it ("made and effective as of1 August 2019")
                push(&mut s, ' ', i);
            }
            let c = match c {
                '\u{201c}' | '\u{201d}' | '\u{201e}' | '\u{201f}' | '\u{2033}' | '\u{00ab}' | '\u{00bb}'
                | '\u{ff02}' => '"',
                '\u{2018}' | '\u{2019}' | '\u{201a}' | '\u{201b}' | '\u{2032}' | '\u{00b4}' | '`' => '\'',
                '\u{2010}' | '\u{2011}' | '\u{2012}' | '\u{2013}' | '\u{2014}' | '\u{2015}' | '\u{2212}' => '-',
                c => c,
            };
            push(&mut s, c, i);
        }
        // OCR reads the 1 of a day's ordinal as a letter ("this Ist day of September"): the
        // same one byte as a 1, so the map to the original stays
        for b in crate::normalize::ocr_ordinal_ones(&s) {
            s.replace_range(b..b + 1, "1");
        }
        // OCR garbles the quotes of a defined term ("(“Bizzingo’”’)", "(““Theismann”)",
        // "(“World Book’)"): one straight double quote each side, the rest dropped
        let (mut drop, mut quote_at) = (Vec::new(), Vec::new());
        for c in OCR_TERM_QUOTES.captures_iter(&s) {
            let (Some(open), Some(close)) = (c.name("open"), c.name("close")) else { continue };
            if open.as_str() == "\"" && close.as_str() == "\"" {
                continue;
            }
            for q in [open, close] {
                quote_at.push(q.start());
                drop.extend(q.start() + 1..q.end());
            }
        }
        for b in quote_at {
            s.replace_range(b..b + 1, "\"");
        }
        // OCR splits month names ("J anuary 15, 2026"); the dates' patterns read them whole
        drop.extend(crate::normalize::split_month_spaces(&s));
        drop.sort_unstable();
        Work { s, anchors, n_orig: n }.without(&drop)
    }

    /// The working copy without the chars at the byte offsets `drop` (in order), the map back
    /// to the original kept.
    fn without(self, drop: &[usize]) -> Work {
        if drop.is_empty() {
            return self;
        }
        let mut s = String::with_capacity(self.s.len());
        let mut anchors = Vec::with_capacity(self.anchors.len() + drop.len());
        let mut next_orig = usize::MAX;
        let mut orig: Option<usize> = None;
        let mut old_anchors = self.anchors.iter().peekable();
        let mut drop = drop.iter().peekable();
        for (b, c) in self.s.char_indices() {
            // the original index of this char: its run's anchor, else one past the char before
            let o = match old_anchors.next_if(|a| a.0 == b) {
                Some(&(_, oc)) => oc,
                None => orig.map_or(0, |o| o + 1),
            };
            orig = Some(o);
            if drop.next_if(|&&d| d == b).is_some() {
                continue;
            }
            if o != next_orig {
                anchors.push((s.len(), o));
            }
            next_orig = o + 1;
            s.push(c);
        }
        Work { s, anchors, n_orig: self.n_orig }
    }

    /// The original char index of the working char starting at byte `b` (the original length at
    /// the end).
    fn orig_char(&self, b: usize) -> usize {
        let b = floor_cb(&self.s, b);
        if b >= self.s.len() {
            return self.n_orig;
        }
        let k = self.anchors.partition_point(|&(wb, _)| wb <= b);
        match k.checked_sub(1).and_then(|i| self.anchors.get(i)) {
            Some(&(wb, oc)) => oc + self.s.get(wb..b).map_or(0, |r| r.chars().count()),
            None => 0,
        }
    }

    /// The original char range of the working byte range `b0..b1`.
    fn orig_range(&self, b0: usize, b1: usize) -> Range<usize> {
        let start = self.orig_char(b0);
        let b1 = floor_cb(&self.s, b1);
        let end = match self.s[..b1].chars().next_back() {
            Some(c) if b1 > b0 => self.orig_char(b1 - c.len_utf8()) + 1,
            _ => start,
        };
        start..end.max(start).min(self.n_orig)
    }

    /// A [`Found`] whose evidence is the working byte range `ev`.
    fn found(&self, raw: String, ev: Range<usize>) -> Found {
        Found { raw, evidence: self.orig_range(ev.start, ev.end) }
    }

    /// The first `n` bytes (at most), cut at a char boundary.
    fn head(&self, n: usize) -> &str {
        &self.s[..floor_cb(&self.s, n.min(self.s.len()))]
    }

    /// `s[a..b]`, with both ends moved onto char boundaries (never panics).
    fn slice(&self, a: usize, b: usize) -> &str {
        slice(&self.s, a, b)
    }

    /// The sentence around the byte range `b0..b1` (at most 600 bytes either side).
    fn sentence(&self, b0: usize, b1: usize) -> Range<usize> {
        sentence_bounds(&self.s, b0, b1, 600)
    }
}

fn floor_cb(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_cb(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

fn slice(s: &str, a: usize, b: usize) -> &str {
    let a = ceil_cb(s, a);
    let b = floor_cb(s, b);
    if a >= b {
        ""
    } else {
        &s[a..b]
    }
}

/// Words whose trailing period does not end a sentence.
const ABBREVIATIONS: &[&str] = &[
    "inc", "corp", "co", "ltd", "llc", "no", "nos", "mr", "mrs", "ms", "dr", "st", "sec", "art", "para", "e.g", "i.e",
    "etc", "vs", "v", "pty", "jr", "sr", "plc", "bhd", "sa", "ag", "nv", "bv", "gmbh", "lp", "llp", "int'l", "intl",
    "dept", "ave", "blvd", "rd", "ste", "fl", "tel", "fax", "approx", "cf", "ref", "sect", "incl", "assoc", "bros",
    "mfg", "natl", "u.s", "u.k", "n.a", "s.a", "l.p", "l.l.c", "b.v", "n.v", "p.c", "a.g",
];

/// Whether the `.`/`?`/`!` at byte `i` ends a sentence.
fn is_sentence_end(s: &str, i: usize) -> bool {
    let b = s.as_bytes();
    let Some(&c) = b.get(i) else { return false };
    if !matches!(c, b'.' | b'?' | b'!') {
        return false;
    }
    // Followed by the end, or by a space and something that can open a sentence.
    match b.get(i + 1) {
        None => return true,
        Some(b' ') => {}
        _ => return false,
    }
    let next = s.get(i + 2..).and_then(|r| r.chars().next());
    match next {
        None => return true,
        Some(n) if n.is_uppercase() || n.is_ascii_digit() || matches!(n, '"' | '\'' | '[') => {}
        _ => return false,
    }
    if c != b'.' {
        return true;
    }
    // The word before the period: an abbreviation or an initial does not end a sentence.
    let before = &s[ceil_cb(s, i.saturating_sub(40))..i];
    let word_start = before.rfind([' ', '(', '"', ',']).map_or(0, |p| p + 1);
    let word = &before[word_start..];
    // An initial ("J."), or an abbreviation with inner periods ("U.S.A.", "N.V.").
    if word.chars().count() <= 1 || word.contains('.') {
        return false;
    }
    let lower = word.to_lowercase();
    // "April. 1st 2019": a month's name before a day is no sentence's end
    let month_before_day = next.is_some_and(|n| n.is_ascii_digit()) && MONTH_WORD.is_match(word);
    !ABBREVIATIONS.contains(&lower.as_str()) && !month_before_day
}

static MONTH_WORD: LazyLock<Regex> = LazyLock::new(|| re(&format!("(?i)^{MONTH}$")));

static NUMBERED_ITEM: LazyLock<Regex> = LazyLock::new(|| re(r"^\s+\d{1,2}(?:\.\d{1,2})*\.?\s+[A-Z]"));

/// The sentence around bytes `b0..b1` of `s`, at most `max` bytes either side.
fn sentence_bounds(s: &str, b0: usize, b1: usize, max: usize) -> Range<usize> {
    let b0 = floor_cb(s, b0);
    let b1 = ceil_cb(s, b1.max(b0));
    let lo = ceil_cb(s, b0.saturating_sub(max));
    let hi = floor_cb(s, b1.saturating_add(max));
    let bytes = s.as_bytes();
    let mut start = lo;
    let mut p = b0;
    while p > lo {
        p -= 1;
        if matches!(bytes[p], b'.' | b'?' | b'!') && is_sentence_end(s, p) {
            start = (p + 2).min(b0);
            break;
        }
        // "... under the following terms and conditions: 1. Term The term of ...": a numbered
        // section after a colon starts anew
        if bytes[p] == b':' && NUMBERED_ITEM.is_match(slice(s, p + 1, p + 16)) {
            start = (p + 2).min(b0);
            break;
        }
    }
    if start == lo && lo > 0 {
        // Cut mid-text: start at the next word.
        if let Some(sp) = s[lo..b0].find(' ') {
            start = lo + sp + 1;
        }
    }
    let mut end = hi;
    let mut p = b1;
    while p < hi {
        if matches!(bytes[p], b'.' | b'?' | b'!') && is_sentence_end(s, p) {
            end = p + 1;
            break;
        }
        p += 1;
    }
    start.min(b0)..end.max(b1)
}

// ---------------------------------------------------------------------------------------------
// Pattern pieces.

const MONTH: &str = r"(?:January|February|March|April|May|June|July|August|September|October|November|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)\.?";
/// A day number; PDF text often splits a superscript suffix ("1s t").
const ORD: &str = r"\d{1,2}(?:\s?(?:s\s?t|n\s?d|r\s?d|t\s?h))?";
/// A day written as an ordinal word ("first", "twenty-third", "thirtieth").
const ORD_WORD: &str = r"(?:(?:twenty|thirty)[\s-]?)?(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth)|tenth|eleventh|twelfth|thirteenth|fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth|thirtieth";
const YEAR: &str = r"(?:1[89]\d{2}|20\d{2})\b";
/// A blank left to fill in: `____`, `[ ]`, `[·]`, `[•]`.
const BLANK: &str = r"(?:_{2,}|\[[^\]\d\n]{0,5}\])";

/// A date as contracts write it (blanks for a date left to fill in included).
static DATE: LazyLock<String> = LazyLock::new(|| {
    format!(
        r"(?:(?:\b{ORD}|{BLANK}|\bthis|\b(?:{ORD_WORD}))\s+day\s+of\s*(?:-+\s*)?(?:{MONTH}|{BLANK})?\s*,?\s*(?:in\s+the\s+year\s+)?(?:A\.?D\.?\s*)?{YEAR}|\b{MONTH}\s*(?:{ORD}|{BLANK})\s*,?\s*{YEAR}|\b{MONTH}\s*,\s*{YEAR}|\b{ORD}(?:\s+of)?\s+{MONTH}\s*,?\s*{YEAR}|\b\d{{1,2}}/\d{{1,2}}/(?:\d{{4}}|\d{{2}})\b|\b\d{{1,2}}-\d{{1,2}}-(?:\d{{4}}|\d{{2}})\b|\b\d{{1,2}}\.\d{{1,2}}\.(?:19|20)\d{{2}}\b|\b(?:19|20)\d{{2}}-\d{{1,2}}-\d{{1,2}}\b|(?:_{{3,}}|\[[^\]\d\n]{{0,5}}\])\s*,?\s*{YEAR})"
    )
});

/// A date the template leaves blank, or writes without its year: "this _____ day of _________,
/// 20___", "this day of , 20" (the blanks lost), "________ day of ____, in the year ____", "30th
/// day of April" (the caller checks that no year follows).
static UNFILLED: LazyLock<String> = LazyLock::new(|| {
    format!(
        r"(?:(?:\b{ORD}|{BLANK}|\bthis|\b(?:{ORD_WORD}))\s+day\s+of\s*(?:{MONTH}|{BLANK})?\s*,?\s*(?:in\s+the\s+year\s*)?(?:(?:19|20)\d?\s*_+|{BLANK}|(?:19|20)\b)|\b{ORD}\s+day\s+of\s+{MONTH})"
    )
});
/// What follows a date of the preamble that has no year: the definition, the parties.
const AFTER_UNFILLED: &str = r"\s*,?\s*(?:\(|\b(?:by|between|among|is|in|and|entered|made|effective)\b|$)";
/// A date of the preamble without its year: `{UNFILLED}` (group 1), or a bare blank after
/// "dated", "as of", "effective" (group 2).
static UNFILLED_OR_DATED_BLANK: LazyLock<String> = LazyLock::new(|| {
    format!(
        r"(?:({{UNFILLED}})|\b(?:dated(?:\s+as\s+of)?|as\s+of|effective(?:\s+on)?|made\s+on|entered\s+into\s+on)\s*:?\s*(?:the\s+)?({BLANK}))"
    )
});
/// After a date, its definition as the effective date: `(the "Effective Date")`.
const DEFINED_EFFECTIVE: &str = r#"\s*,?\s*(?:the\s+)?\(\s*(?:the|hereinafter|herein|such\s+date|being|referred\s+to\s+as)?[^()"]{0,40}"(?:effective|commencement|start)\s+date""#;
/// Before the date of a signature: "executed this Agreement on", "signed at Pretoria on this".
const SIGNED_ON: &str = r"\b(?:executed|signed|done)\b[^.;]{0,80}?\b(?:on|this|as\s+of)\s+(?:this\s+|the\s+)?";

const NUMWORD: &str = r"(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred)";

/// A length of time: "ninety (90) days", "(6) months", "one-year", "12 calendar months".
static DUR: LazyLock<String> = LazyLock::new(|| {
    format!(
        r"(?:(?:\b(?:{NUMWORD}(?:[\s-]+(?:and[\s-]+)?{NUMWORD})*|\d{{1,4}})(?:\s*\(\s*(?:\d{{1,4}}|I)\s*\))?|\(\s*\d{{1,4}}\s*\))[\s~-]*(?:(?:calendar|business|full|consecutive|contract|working|fiscal)[\s-]+)?(?:years?|months?|weeks?|days?)\b(?:\(s\))?)"
    )
});

/// Compiles a pattern after substituting `{DATE}`, `{DUR}` and `{UNFILLED}`. Patterns are
/// constants, so a failure is a programming error caught by the tests.
fn re(p: &str) -> Regex {
    let p = p.replace("{DATE}", &DATE).replace("{DUR}", &DUR).replace("{UNFILLED}", &UNFILLED);
    RegexBuilder::new(&p).size_limit(64 << 20).dfa_size_limit(16 << 20).build().expect("valid built-in pattern")
}

static DATE_RE: LazyLock<Regex> = LazyLock::new(|| re(r"(?i){DATE}"));
static DUR_RE: LazyLock<Regex> = LazyLock::new(|| re(r"(?i){DUR}"));

// ---------------------------------------------------------------------------------------------
// Document name.

static TITLE_KEYWORD: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:agreements?|contract|licen[cs]e|lease|amendment|addendum|note|plan|terms|memorandum|arrangement|deed|indenture|supplement|protocol|charter|undertaking|statement\s+of\s+work)\b",
    )
});
static TITLE_SKIP: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)confidential\s+treatment|\bomitted\b|\bomissions?\b|\bportions\b|\bredacted\b|\[\s*\*|\*\s*\*\s*\*|securities\s+and\s+exchange|rule\s+24b|^confidential\b\s*(?:[-:]|$)|execution\s+(?:copy|version)|^draft\b|\bpage\s+\d|^source:|https?://|www\.|^this\b|^whereas\b|^now,?\s+therefore|^table\s+of\s+contents|^(?:article|section)\s+\d|\bdated\b|\bbetween\b|\bis\s+made\b|^\d+(?:\.\d*)?\s|^(?:contract|agreement)\s+(?:no\b|number|#)|\bno\.?\s*:\s*\w",
    )
});
static TITLE_LEAD: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:(?:exhibit|ex\.|ex-|schedule|annex|appendix|attachment)\s*[-\w.()]*\s*[-:.]?\s*|\[[^\]]{0,60}\]\s*|(?:execution\s+)?version\s+)*",
    )
});
/// A title line that is only "AMENDMENT NO. 2" (the agreement it amends follows).
static TITLE_HEADER_ONLY: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:[\w-]+\s+)?(?:amendment|addendum|supplement|amended\s+and\s+restated)(?:\s+(?:no\.?|number|#)\s*[\w.-]+)?$",
    )
});
static TITLE_RUN_ON: LazyLock<Regex> =
    LazyLock::new(|| re(r#"(?i)\s*\(\s*(?:the\s+|this\s+)?"|,\s*dated\b|\s+dated\s+as\s+of\b|,\s*d$"#));
static TITLE_PREAMBLE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(?:This|THIS)\s+((?:[A-Z][A-Za-z&'-]*,?\s+(?:(?:and|of|for|AND|OF|FOR)\s+)?){1,7}(?i:agreement|contract|licen[cs]e|lease|amendment|addendum|memorandum|plan))\b",
    )
});

/// Small words that title case leaves lower-case.
const SMALL_WORDS: &[&str] = &[
    "a", "an", "and", "as", "at", "by", "for", "from", "in", "into", "of", "on", "or", "the", "to", "with", "between",
    "among", "under", "no", "&",
];

fn looks_like_title(t: &str) -> bool {
    let words: Vec<&str> = t.split_whitespace().collect();
    if words.is_empty() || words.len() > 14 {
        return false;
    }
    let letters = t.chars().filter(|c| c.is_alphabetic()).count();
    if letters < 4 {
        return false;
    }
    let upper = t.chars().filter(|c| c.is_uppercase()).count();
    if upper * 10 >= letters * 8 {
        return true;
    }
    let mut significant = 0;
    let mut capitalised = 0;
    for wd in words {
        let wd = wd.trim_matches(|c: char| !c.is_alphanumeric());
        if wd.is_empty() || SMALL_WORDS.contains(&wd.to_lowercase().as_str()) {
            continue;
        }
        significant += 1;
        if wd.chars().next().is_some_and(|c| c.is_uppercase() || c.is_ascii_digit()) {
            capitalised += 1;
        }
    }
    if significant > 0 && capitalised == significant {
        return true;
    }
    // A short title with one word left lower-case ("Distributorship agreement", "e-business Hosting
    // Agreement").
    let first = t.split_whitespace().next().unwrap_or("");
    let first_ok = first.chars().next().is_some_and(|c| c.is_uppercase()) || first.contains('-');
    t.split_whitespace().count() <= 5 && first_ok && capitalised * 2 >= significant && !t.ends_with('.')
}

fn clean_title(t: &str) -> String {
    let t = t.split_whitespace().collect::<Vec<_>>().join(" ");
    // A title line that runs on into the preamble: stop at a defined term or "dated".
    let t = match TITLE_RUN_ON.find(&t) {
        Some(m) if m.start() > 0 => t[..m.start()].to_string(),
        _ => t,
    };
    let t = t.trim_matches(|c: char| {
        c.is_whitespace() || matches!(c, '.' | ',' | ';' | ':' | '-' | '*' | '"' | '\'' | '_' | '(' | '[')
    });
    t.to_string()
}

/// One non-empty line near the top, as a title candidate.
struct TitleLine<'a> {
    /// The line without surrounding space, an exhibit label or a bracketed logo note.
    body: &'a str,
    /// Char offset and char length of `body` in the original text.
    start: usize,
    len: usize,
    /// Upper- or title-case, not a header/notice line.
    usable: bool,
}

/// Words that leave a title unfinished at a line break ("AMENDMENT NO. 3 TO THE" / "... AGREEMENT").
const TITLE_GLUE: &[&str] = &["to", "of", "and", "for", "the", "&", "-", "on", "in", "under", "with"];

fn first_word_lower(t: &str) -> String {
    t.split_whitespace().next().unwrap_or("").to_lowercase()
}

fn last_word_lower(t: &str) -> String {
    t.split_whitespace().last().unwrap_or("").to_lowercase()
}

fn title_lines(text: &str) -> Vec<TitleLine<'_>> {
    const LIMIT: usize = 2000;
    let mut out = Vec::new();
    let mut off = 0usize;
    for line in text.split('\n') {
        if off >= LIMIT || out.len() >= 80 {
            break;
        }
        let line_chars = line.chars().count();
        let lead = line.chars().take_while(|c| c.is_whitespace()).count();
        let trimmed = line.trim();
        let start = off + lead;
        off += line_chars + 1;
        if trimmed.is_empty() {
            continue;
        }
        // Strip an exhibit label, a bracketed note ("[LOGO]") or "VERSION" left from "EXECUTION VERSION".
        let cut = TITLE_LEAD.find(trimmed).map_or(0, |m| m.end());
        let body = &trimmed[cut..];
        let body_start = start + trimmed[..cut].chars().count();
        let body_len = body.chars().count();
        let words = body.split_whitespace().count();
        let collapsed_len = body.split_whitespace().map(|w| w.chars().count() + 1).sum::<usize>();
        let usable = !body.is_empty()
            && collapsed_len <= 160
            && words <= 16
            && !TITLE_SKIP.is_match(body)
            && looks_like_title(body);
        out.push(TitleLine { body, start: body_start, len: body_len, usable });
    }
    out
}

fn all_upper(t: &str) -> bool {
    t.chars().filter(|c| c.is_alphabetic()).all(|c| c.is_uppercase())
}

/// The title: the first line near the top that is upper- or title-case and names a kind of
/// agreement, joined with a neighbouring line when the title is broken over two or three.
///
/// The parties' names (`names`, from [`party_names_in_titles`]) are not part of it
/// ("E-CENTIVES - EXCITE@HOME CO-BRANDING AGREEMENT" is a co-branding agreement); a line that
/// is only names and a kind of document ("PACIFICAP ENTERTAINMENT Agreement with THE HENRY FILM
/// AND ENTERTAINMENT CORPORATION") gives way to the next title line, and where no line is left
/// the first is taken as it stands. A title that ends mid-sentence is a line of prose.
fn document_name(text: &str, names: &[TitleName]) -> Option<Found> {
    let lines = title_lines(text);
    // a line of prose that holds the word ("... OF THIS AGREEMENT ACCORDINGLY,") is no title: a
    // title does not end in the middle of a sentence (one that goes on in the next line does
    // not end there: "SCHEDULE TO Software License," / "Customization and Maintenance Agreement")
    let mut titles =
        lines.iter().enumerate().filter(|(_, l)| l.usable && TITLE_KEYWORD.is_match(l.body)).filter_map(|(i, l)| {
            let found = title_at(&lines, i)?;
            let mid_sentence = l.body.trim_end().ends_with([',', ';']) && found.evidence.end <= l.start + l.len;
            (!mid_sentence).then_some(found)
        });
    let as_written = titles.next()?;
    if names.is_empty() {
        return Some(as_written);
    }
    for found in std::iter::once(as_written.clone()).chain(titles.take(3)) {
        match without_party_names(&found.raw, names) {
            None => return Some(found),
            Some(rest) if rest.split_whitespace().count() >= 2 && !GENERIC_TITLE.is_match(&rest) => {
                return Some(Found { raw: rest, ..found });
            }
            Some(_) => continue,
        }
    }
    Some(as_written)
}

/// The title that starts at title line `i`.
fn title_at(lines: &[TitleLine<'_>], i: usize) -> Option<Found> {
    let mut first = i;
    let cur = &lines[i];
    let short_upper = cur.body.split_whitespace().count() <= 2 && all_upper(cur.body);
    // a fragment above a short title or one that starts with a joining word, and "FORM OF" on a
    // line of its own, are part of the title ("FORM OF" / "TRADEMARK LICENSE AGREEMENT")
    let form_of_above = i > 0 && TITLE_FORM_OF.is_match(lines[i - 1].body);
    if i > 0 && (short_upper || form_of_above || TITLE_GLUE.contains(&first_word_lower(cur.body).as_str())) {
        let p = &lines[i - 1];
        let fragment = p.usable
            && all_upper(p.body)
            && p.body.split_whitespace().count() <= 8
            && !p.body.chars().any(|c| c.is_ascii_digit());
        if fragment {
            first = i - 1;
        }
    }
    let mut last = i;
    let mut joined: Vec<&str> = lines[first..=i].iter().map(|l| l.body).collect();
    while last + 1 < lines.len() && last < i + 3 {
        let next = &lines[last + 1];
        let so_far = joined.join(" ");
        let dangling = TITLE_GLUE.contains(&last_word_lower(&so_far).as_str()) || so_far.ends_with(',');
        let continues = TITLE_GLUE.contains(&first_word_lower(next.body).as_str());
        let header_only = TITLE_HEADER_ONLY.is_match(&so_far) && TITLE_KEYWORD.is_match(next.body);
        // "FIRST AMENDMENT TO SAGEBRUSH" / "MANAGEMENT AND MAINTENANCE AGREEMENT"
        let unfinished_to =
            TITLE_TO.find_iter(&so_far).last().is_some_and(|m| !TITLE_KEYWORD.is_match(&so_far[m.end()..]))
                && TITLE_KEYWORD.is_match(next.body);
        let glue_only = next.body.split_whitespace().all(|w| TITLE_GLUE.contains(&w.to_lowercase().as_str()));
        let usable = next.usable || glue_only;
        if usable
            && next.body.split_whitespace().count() <= 12
            && (dangling || continues || header_only || unfinished_to)
        {
            joined.push(next.body);
            last += 1;
        } else {
            break;
        }
    }
    let raw = drop_title_prefix(clean_title(&joined.join(" ")));
    if raw.chars().filter(|c| c.is_alphabetic()).count() < 4 {
        return None;
    }
    let end = lines[last].start + lines[last].len;
    Some(Found { raw, evidence: lines[first].start..end })
}

/// Role words that are no party's own name, even where a name holds them ("Tribune
/// Broadcasting Company" defined as the "Company").
static ROLE_NOUN: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:the\s+)?(?:company|corporation|licensor|licensee|distributor|supplier|customer|client|consultant|contractor|manufacturer|purchaser|buyer|seller|vendor|provider|agent|partner|owner|operator|lender|borrower|sponsor|franchisee|franchisor|reseller|developer|publisher|affiliate|member|bank|trust|fund|group|holdings|parent|subsidiary|employer|employee|executive|investor|shareholder|landlord|tenant|network|host|carrier|shipper|producer|marketer|servicer|issuer|guarantor|you|us|we)$",
    )
});
/// The legal forms that end a company's name (matched case-insensitively, a full stop after
/// them optional).
const LEGAL_FORMS: &str = r"inc|incorporated|corporation|corp|co|company|llc|l\.l\.c|ltd|limited|plc|l\.p|lp|n\.a|s\.a|ag|gmbh|b\.v|n\.v|pte|pty";
/// A corporate suffix that ends a name ("e-centives, Inc." is "e-centives" in a title).
static NAME_SUFFIX: LazyLock<Regex> = LazyLock::new(|| re(&format!(r"(?i)[\s,]+(?:{LEGAL_FORMS})\.?$")));
/// What joins a party's name to the rest of a title: dropped with the name.
static NAME_JOIN: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(?:[\s\-\u{2013}\u{2014},/&.:;]|\b(?:and|with|between|among|by|to)\b)*\x00(?:[\s\-\u{2013}\u{2014},/&.:;]|\b(?:and|with|between|among|by|to)\b)*",
    )
});

/// One way a title may name a party.
#[derive(Debug, Clone)]
struct TitleName {
    /// Which party of the list.
    party: usize,
    /// Its name, the name without its corporate suffix, or a role that is a name, as a pattern
    /// (built once per document, then tried on each title line).
    pattern: Regex,
    /// The whole name, corporate suffix included ("Stremick's Heritage Foods, LLC").
    legal: bool,
}

/// What may stand in a title for a party: its name, the name without its corporate suffix, and
/// a defined role that is a name rather than a role ("Heritage" for "Stremick's Heritage Foods,
/// LLC", an acronym such as "BII", "Excite@Home"); longest first.
fn party_names_in_titles(list: &[(String, Vec<String>)]) -> Vec<TitleName> {
    let letters = |s: &str| s.chars().filter(|c| c.is_alphabetic()).count();
    let usable = |s: &str| letters(s) >= 2 && !ROLE_NOUN.is_match(s) && !TITLE_KEYWORD.is_match(s);
    let mut out: Vec<(usize, TitleName)> = Vec::new();
    let mut push = |party: usize, text: &str, legal: bool| {
        if let Some(pattern) = name_pattern(text) {
            out.push((text.len(), TitleName { party, pattern, legal }));
        }
    };
    for (party, (name, roles)) in list.iter().enumerate() {
        let name = name.trim_end_matches(['.', ',', ' ']);
        let core = NAME_SUFFIX.replace(name, "").to_string();
        let legal = core != name;
        let words: Vec<String> = name.split(|c: char| !c.is_alphanumeric()).map(str::to_lowercase).collect();
        if letters(name) >= 3 && usable(name) {
            push(party, name, legal);
        }
        if legal && letters(&core) >= 3 && usable(&core) {
            push(party, &core, false);
        }
        for r in roles {
            let acronym =
                (2..=6).contains(&letters(r)) && r.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
            let marked = r.chars().any(|c| matches!(c, '@' | '.')) && !r.contains(' ');
            let in_name = !r.contains(' ') && words.contains(&r.to_lowercase());
            if (acronym || marked || in_name) && usable(r) {
                push(party, r, false);
            }
        }
    }
    out.sort_by_key(|(len, _)| std::cmp::Reverse(*len));
    out.into_iter().map(|(_, n)| n).collect()
}

/// A name as a pattern for titles: its words in order, anything but letters and digits between
/// them; apostrophes dropped, and optional before a final "s" ("Stremicks" for "STREMICK'S").
fn name_pattern(text: &str) -> Option<Regex> {
    let plain: String = text.chars().filter(|c| !matches!(c, '\'' | '\u{2019}')).collect();
    let words: Vec<String> = plain
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| match w.strip_suffix(['s', 'S']).filter(|stem| stem.chars().count() >= 3) {
            Some(stem) => format!("{}['\u{2019}]?{}", regex::escape(stem), &w[stem.len()..]),
            None => regex::escape(w),
        })
        .collect();
    if words.is_empty() {
        return None;
    }
    let body = words.join(r"[^\p{L}\p{N}]+");
    Regex::new(&format!(r"(?i)(?:^|[^\p{{L}}\p{{N}}@])({body})(?:$|[^\p{{L}}\p{{N}}@])")).ok()
}

/// `title` without the parties' names and the words that join them to it; `None` where it names
/// none of them, or only one party by a short name ("JACKSONVILLE JAGUARS SPONSORSHIP AGREEMENT",
/// "FIRST AMENDMENT TO SAGEBRUSH MANAGEMENT AND MAINTENANCE AGREEMENT": CUAD keeps those). A
/// title that names a party by its legal name ("... TO STREMICK'S HERITAGE FOODS, LLC and ..."),
/// or two parties ("E-CENTIVES - EXCITE@HOME CO-BRANDING AGREEMENT", "Collaboration Agreement,
/// BII/ XENCOR"), loses them.
fn without_party_names(title: &str, names: &[TitleName]) -> Option<String> {
    let mut t = title.to_string();
    let mut parties: Vec<usize> = Vec::new();
    let mut legal = false;
    for n in names {
        while let Some(m) = n.pattern.captures(&t).and_then(|c| c.get(1)) {
            t.replace_range(m.range(), "\x00");
            legal |= n.legal;
            if !parties.contains(&n.party) {
                parties.push(n.party);
            }
        }
    }
    if !legal && parties.len() < 2 {
        return None;
    }
    let t = NAME_JOIN.replace_all(&t, " ");
    Some(t.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// A kind of document without its name ("AGREEMENT", "Contract"): what a heading or the
/// preamble gives when the title is elsewhere, never a title on its own.
static GENERIC_TITLE: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)^\s*(?:the\s+|this\s+)?(?:agreement|contract|amendment|addendum|lease)\s*$"));
static TITLE_TO: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\bto\b"));
static TITLE_FORM_OF: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)^\s*form\s+of\s*:?\s*$"));
/// A company's name before the title ("NETZEE, INC. MAINTENANCE AGREEMENT").
static TITLE_COMPANY_PREFIX: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^.{2,60}?\b(?:inc|incorporated|corporation|corp|llc|l\.l\.c|ltd|limited|plc|l\.p|n\.a|s\.a|ag|gmbh)\b\.?,?\s+",
    )
});
/// The end of a sentence inside a title line ("EXCHANGE COMMISSION. SPONSORSHIP AGREEMENT"); not
/// "NO. 3".
static TITLE_SENTENCE_END: LazyLock<Regex> = LazyLock::new(|| re(r"\b[A-Za-z]{3,}\.\s+"));

/// What stands before the title in its line: a company's name, or the end of a notice's sentence.
/// The title left must still name a kind of agreement, and the part dropped must not.
fn drop_title_prefix(t: String) -> String {
    let keep = |rest: &str, dropped: &str| {
        TITLE_KEYWORD.is_match(rest) && !TITLE_KEYWORD.is_match(dropped) && rest.split_whitespace().count() >= 2
    };
    if let Some(m) = TITLE_SENTENCE_END.find_iter(&t).last() {
        if !matches!(t[m.start()..m.end()].trim().to_lowercase().as_str(), "inc." | "ltd." | "corp.")
            && keep(&t[m.end()..], &t[..m.end()])
        {
            return t[m.end()..].to_string();
        }
    }
    if let Some(m) = TITLE_COMPANY_PREFIX.find(&t) {
        if keep(&t[m.end()..], &t[..m.end()]) {
            return t[m.end()..].to_string();
        }
    }
    t
}

/// Fallback title: the agreement named in the opening sentence ("This Distribution Agreement
/// (the "Agreement") is made ...").
fn document_name_from_preamble(w: &Work) -> Option<Found> {
    let head = w.head(4000);
    let c = TITLE_PREAMBLE.captures(head)?;
    let m = c.get(1)?;
    let raw = clean_title(m.as_str());
    Some(w.found(raw, w.sentence(m.start(), m.end())))
}

// ---------------------------------------------------------------------------------------------
// Parties.

static PARTY_START: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i:\b(?:by\s+and\s+between|by\s+and\s+among|between|b\se\st\sw\se\se\sn|among(?:st)?|(?:entered\s+into|made|executed)\s+by)\b)\s*:?\s*|\bPARTIES\b\s*:?\s*",
    )
});
static PARTY_CONTEXT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:agreements?|contract|amendment|lease|licen[cs]e|memorandum|addendum|made|entered|executed|dated|concluded)\b",
    )
});
static PARTY_STOP: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i:\bwhereas\b|\brecitals?\b|\bwitnesseth\b|\bw\s?i\s?t\s?n\s?e\s?s\s?s\s?e\s?t\s?h\b|\bnow,?\s+therefore\b|\bin\s+consideration\s+of\b|\bpreamble\b|\bthe\s+parties\s+(?:hereto\s+)?(?:hereby\s+)?agree\b)|\bBACKGROUND\b|\bBackground\b\s*:?",
    )
});
/// A defined term: `(the "Company")`, `("Licensee")`, `, hereinafter referred to as "Agent"`,
/// `(hereinafter Licensee)`, and in single quotes `(hereinafter referred to as 'IMPCO', ...)`.
static DEFINED_TERM: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?P<paren>\([^()"]{0,120}"[^"()]{1,60}"[^()]{0,160}\))|(?P<here>,?\s*\b(?i:hereinafter|hereafter)\b[^"()]{0,40}"[^"]{1,60}")|(?P<unq>\(\s*(?:(?i:hereinafter|herein|hereafter)\s+(?i:referred\s+to\s+as\s+|called\s+|known\s+as\s+)?(?i:the\s+)?|the\s+)(?P<role>[A-Z][\w&-]*(?:\s+[A-Z][\w&-]*){0,3})\s*\))|(?P<single>\([^()"']{0,120}'(?P<srole>[^'()]{2,40})'[^()']{0,60}\))|(?P<shere>,?\s*\b(?i:hereinafter|hereafter)\b[^"'()]{0,40}'(?P<srole2>[^'()]{2,40})')"#,
    )
});
static QUOTED: LazyLock<Regex> = LazyLock::new(|| re(r#""\s*([^"]{1,60}?)\s*""#));
static NAME_LEAD: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:\s|[,;:.)]|-{2,}|-\s|\band\b|&|\bby\b|\bbetween\b|\bamong(?:st)?\b|\bon\s+the\s+(?:one|other)\s+hand\b|\bof\s+the\s+(?:one|other|first|second)\s+part\b|\bof\s+(?:one|other)\s+part\b|\bparties\s*:|\bparties\s+to\s+this\s+agreement\b\s*:?|\bparty\s+[a-d]\b(?:\s*\([^()]{1,30}\))?\s*:|\b(?:for|furnishing)\s+the\s+(?:personal\s+)?services\s+of\b|\bf/s/o\b|\(\s*(?:\d{1,2}|[a-h]|[ivx]{1,4})\s*\)|\b[a-h]\)|\d{1,2}[.)]\s)*",
    )
});
static NAME_CUT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?:,\s*(?i:an?|the)\s|\s(?-i:an?)\s|,\s*(?i:having|with|whose|located|organi[sz]ed|incorporated|existing|established|acting|represented|registered|residing|domiciled|duly|its|on\s+behalf|which|who|doing\s+business|address|principal|company\s+(?:no|number|registration)|\d)|\s+(?i:with\s+(?:its|a|an|offices?|principal|registered|an\s+address)\b|whose\s|having\s+(?:its|a|an)\s|located\s+at|residing\s+at|of\s+\d|organi[sz]ed\s+under|incorporated\s+under|hereinafter\b|herein\s+referred|on\s+the\s+one\s+hand|on\s+the\s+other\s+hand)|\s*\((?i:an?|the|as|on|for|formerly|acting|hereinafter|herein|each|individually|collectively|together|jointly|registration|registered|company\s+no|reg)\b|\s*;)",
    )
});
static NAME_TAIL_CUT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i),\s*(?:dated|effective|as\s+of|on|for|to|in|whereby|pursuant|under|which|regarding|each|collectively)\b|\.\s+[A-Z]|\s+(?:dated|effective\s+as\s+of|as\s+of|for\s+the\s+purpose|whereby|pursuant\s+to)\b|\.$",
    )
});
static GENERIC_ROLE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:party|parties|agreement|this\s+agreement|effective\s+date|each|both|either|contract|amendment)$|\sagreement$",
    )
});

/// A chunk that opens with the previous party's description rather than a name.
static DESCRIPTION_START: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:an?\s|the\s+(?:laws|state)\b|with\s|whose\s|having\s|located\s|organi[sz]ed|incorporated|existing|its\s|on\s+(?:her|his|its)\s+own|acting|represented|duly|\d+\s|registered|residing|doing\s+business|having)",
    )
});
/// "and <Name>" inside a description ("... New York, NY 10018 and ebix.com, Inc.").
/// A name may start in lower case where a corporate suffix follows ("and e-centives, Inc.").
static AND_NAME: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(?i:and),?\s+(?P<n>(?:the\s+|The\s+)?(?:[A-Z0-9]|[a-z][\w.-]*[A-Z.]|[a-z][\w.@-]*,?\s+(?:Inc|LLC|L\.L\.C|Ltd|Limited|Corp|Corporation|GmbH|AG|S\.A|N\.V|B\.V|plc|L\.P|LP)\b))",
    )
});
/// ", <Name>" inside a description without an address ("a Pennsylvania corporation, Gulf Houghton ...").
static COMMA_NAME: LazyLock<Regex> = LazyLock::new(|| re(r",\s+(?P<n>[A-Z])"));
static BETWEEN_ANY: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\b(?:between|among(?:st)?)\b"));

fn clean_party_name(chunk: &str) -> String {
    let mut c = chunk;
    if let Some(m) = BETWEEN_ANY.find_iter(c).last() {
        c = &c[m.end()..];
    }
    let lead = NAME_LEAD.find(c).map_or(0, |m| m.end());
    c = &c[lead..];
    if DESCRIPTION_START.is_match(c) {
        // The previous party's description, then this party's name.
        if let Some(n) = AND_NAME.captures(c).and_then(|m| m.name("n")) {
            c = &c[n.start()..];
        } else if !c.chars().any(|ch| ch.is_ascii_digit()) {
            match COMMA_NAME.captures(c).and_then(|m| m.name("n")) {
                Some(n) => c = &c[n.start()..],
                None => return String::new(),
            }
        } else {
            return String::new();
        }
    }
    let mut name = c;
    if let Some(m) = NAME_CUT.find(name) {
        name = &name[..m.start()];
    }
    let name = name.trim_matches(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | ':' | '"' | '\'' | '('));
    // A lone closing parenthesis with no opening one is debris.
    let name = if name.ends_with(')') && !name.contains('(') { name.trim_end_matches(')').trim_end() } else { name };
    name.to_string()
}

fn plausible_name(name: &str) -> bool {
    let n = name.chars().count();
    (2..=160).contains(&n) && name.chars().any(|c| c.is_alphabetic()) && name.split_whitespace().count() <= 20
}

/// A name found without a defined term must look like one: capitalised and short.
fn plausible_bare_name(name: &str) -> bool {
    plausible_name(name)
        && name.len() <= 120
        && name.split_whitespace().count() <= 10
        && name.chars().next().is_some_and(|c| c.is_uppercase() || c.is_ascii_digit())
}

/// The parties named in `seg` (the text after one "between"/"among"); `allow_bare` lets a
/// segment without defined terms give "X and Y".
fn parties_in(seg: &str, allow_bare: bool) -> Vec<(String, Vec<String>)> {
    let mut list: Vec<(String, Vec<String>)> = Vec::new();
    let mut prev = 0usize;
    for c in DEFINED_TERM.captures_iter(seg) {
        let Some(m) = c.get(0) else { continue };
        let chunk = &seg[prev..m.start()];
        prev = m.end();
        let mut roles: Vec<String> = Vec::new();
        if let Some(r) = c.name("role") {
            roles.push(r.as_str().trim().to_string());
        } else if let Some(r) = c.name("srole").or_else(|| c.name("srole2")) {
            let r = r.as_str().trim();
            let r = r.strip_prefix("the ").unwrap_or(r).trim();
            if !GENERIC_ROLE.is_match(r) {
                roles.push(r.to_string());
            }
        } else {
            for q in QUOTED.captures_iter(m.as_str()) {
                if let Some(t) = q.get(1) {
                    let t = t.as_str().trim().trim_end_matches(['.', ',']).trim();
                    if !t.is_empty() && !GENERIC_ROLE.is_match(t) && !roles.iter().any(|r| r == t) {
                        roles.push(t.to_string());
                    }
                }
            }
        }
        if roles.is_empty() {
            continue;
        }
        let name = clean_party_name(chunk);
        if plausible_name(&name) {
            list.push((name, roles));
        } else if name.is_empty() {
            // A second defined term for the party just named.
            if let Some(last) = list.last_mut() {
                for r in roles {
                    if !last.1.contains(&r) {
                        last.1.push(r);
                    }
                }
            }
        }
        if list.len() >= 8 {
            break;
        }
    }
    if list.is_empty() && allow_bare {
        // No defined terms: "between X and Y."
        let lead = NAME_LEAD.find(seg).map_or(0, |m| m.end());
        let body = &seg[lead..];
        if let Some(and) = AND_SPLIT.find(body) {
            let first = clean_party_name(&body[..and.start()]);
            let mut second = &body[and.end()..];
            if let Some(m) = NAME_TAIL_CUT.find(second) {
                second = &second[..m.start()];
            }
            let second = clean_party_name(second);
            if plausible_bare_name(&first) && plausible_bare_name(&second) {
                list.push((first, Vec::new()));
                list.push((second, Vec::new()));
            }
        }
    }
    list
}

/// What follows a name but is not part of it ("X Inc. and/or assigns", a filing's "Source:"
/// footer run into the name).
static PARTY_NAME_TAIL: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\s+(?:and/or\s+(?:its\s+|their\s+)?(?:permitted\s+)?(?:successors\s+and\s+)?assigns|source\s*:).*$|\s+(?-i:This|THIS)\s+(?i:agreement|amendment|contract)\b.*$|\s+(?:effective\s+)?(?-i:January|February|March|April|May|June|July|August|September|October|November|December|JANUARY|FEBRUARY|MARCH|APRIL|MAY|JUNE|JULY|AUGUST|SEPTEMBER|OCTOBER|NOVEMBER|DECEMBER)\s+\d{1,2}\b.*$|,?\s*\b(?:address\s*:|c/o\b|registration\s+n).*$",
    )
});
/// An address run into a name after its corporate suffix ("Xencor, Inc. 111 W. Lemon Ave.",
/// "DGT Corp. Suite 207", "Limited of Boston House, 1 ..."): everything after the suffix goes.
static PARTY_SUFFIX_ADDRESS: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?P<suffix>\b(?:Inc|INC|Corp|CORP|Ltd|LTD|LLC|L\.L\.C|GmbH|AG|S\.A|SA|B\.V|N\.V|plc|PLC|Limited|LIMITED|Corporation|CORPORATION|L\.P|LP|A/S|a\.s|Pte|SRL)\.?),?\s+(?:\d{2,}|\d{1,3}(?:st|nd|rd|th)\s+(?i:floor)|(?i:suite|room|unit|flat|level|building|bldg|p\.?\s?o\.?\s+box)\b|(?i:of\s+)?[A-Z][a-z]+\s+(?i:house|tower|centre|center|plaza)\b|(?:[A-Z]\S*\s+){1,2}\d{1,5}\b|(?i:of)\s+[^,;]{0,40}\d).*$",
    )
});
/// A capacity of the party before rather than a party ("as servicer", "as Administrator for ...").
static PARTY_CAPACITY: LazyLock<Regex> = LazyLock::new(|| re(r"^as\s"));
/// A "party" that is a piece of the sentence instead: it opens with a verb or a connective ("is
/// entered into as of the date last written below", "regarding the television programming
/// service ...", "sets forth the terms"), or a heading in capitals runs into a sentence
/// ("RIGHTS GRANTED Licensor grants to ...").
static PARTY_NOT_A_NAME: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^(?:is|are|was|were|shall|will|may|has|have|sets?|regarding|concerning|whereby|which|who|that|pursuant|hereby|agrees?|grants?|desires?|wishes|other\s+things|to|on\s+behalf|certain|amended|issued|relating|each|its|under|following|parties|in\s+addition|of)\b|^(?i:Inc|LLC|L\.L\.C|Ltd|Corp|Corporation|Limited|LP|L\.P)\.?$|\battached\s+hereto\b|\borganized\s+and\s+operated\b|\b[A-Z]{3,}(?:\s+[A-Z]{3,})+\s+[A-Z][a-z]+\s+[a-z]+\s+[a-z]+|\s(?:is|are|was|were|shall|will|owns|agrees|desires|provides|requires|operates|has|have|consists)\b",
    )
});

/// The parties as names: tails that are not part of a name cut, pieces of sentence dropped.
/// A capacity ("as servicer") adds its roles to the party before it. (A party named twice is
/// merged where every answer's party list is normalised: [`crate::normalize::parse_parties`].)
fn tidy_parties(list: Vec<(String, Vec<String>)>) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for (name, roles) in list {
        let name = PARTY_NAME_TAIL.replace(&name, "");
        let name = PARTY_SUFFIX_ADDRESS.replace(&name, "$suffix");
        let name = name.trim_end_matches([',', ';', ' ']).to_string();
        if PARTY_CAPACITY.is_match(&name) {
            if let Some(last) = out.last_mut() {
                for r in roles {
                    if !last.1.contains(&r) {
                        last.1.push(r);
                    }
                }
            }
            continue;
        }
        if !name.is_empty() && !PARTY_NOT_A_NAME.is_match(&name) {
            out.push((name, roles));
        }
    }
    out
}

/// A defined term in parentheses whose quotes OCR garbled: doubled, or a single quote for a
/// double one, on either side ([`Work::new`] straightens them).
static OCR_TERM_QUOTES: LazyLock<Regex> = LazyLock::new(|| {
    re(r#"\((?:(?i:the|a|an)\s+)?(?P<open>["']{1,3})(?P<term>[A-Z][^"'()]{0,60}?)(?P<close>["']{1,3})\)"#)
});

/// A party list as the rules find it: each name with its defined roles.
type PartyList = Vec<(String, Vec<String>)>;

/// Parties from the preamble: "by and between X (the "Company") and Y ("Licensee")", as
/// `X ("Company"); Y ("Licensee")`.
fn parties(w: &Work) -> Option<(PartyList, Found)> {
    let head = w.head(8000);
    let starts = PARTY_START.find_iter(head).filter(|m| {
        let before = w.slice(m.start().saturating_sub(600), m.start());
        PARTY_CONTEXT.is_match(before) || m.start() < 300
    });
    for start in starts.take(5) {
        let seg_start = start.end();
        // The segment runs to the end of the sentence (or the recitals), at most 2000 bytes; when
        // that holds fewer than two parties (an address's "St." or a stray full stop ended it),
        // on over the next full stops, as far as the recitals and 1000 bytes.
        let until_stop = |end: usize| match PARTY_STOP.find(w.slice(seg_start, end)) {
            Some(stop) => seg_start + stop.start(),
            None => end,
        };
        let mut seg_end = until_stop(sentence_bounds(&w.s, seg_start, seg_start, 2000).end);
        let allow_bare = start.start() < 3000;
        let mut list = tidy_parties(parties_in(w.slice(seg_start, seg_end), allow_bare));
        if list.len() < 2 {
            let longer_end = until_stop((seg_start + 1000).max(seg_end).min(w.s.len()));
            let longer = tidy_parties(parties_in(w.slice(seg_start, longer_end), false));
            if longer.len() >= 2 && longer.len() > list.len() {
                (list, seg_end) = (longer, longer_end);
            }
        }
        if list.is_empty() {
            continue;
        }
        let ev_start = sentence_bounds(&w.s, start.start(), start.end(), 400).start;
        let found = w.found(parties_raw(&list), ev_start..seg_end);
        return Some((list, found));
    }
    lettered_parties(w).or_else(|| hereinafter_parties(w)).or_else(|| defined_parties_without_between(w))
}

/// The document's heading run into the first party's name: an exhibit number, a title in
/// capitals ("Exhibit 10.7 CONSULTING AGREEMENT Aduro Biotech, Inc."), "together with".
static LEADING_TITLE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^(?i:exhibit\s+[\w.-]+\s+)?(?:[A-Z][A-Z&,'-]*\s+){0,8}?(?:AGREEMENT|CONTRACT|AMENDMENT)\s+|^(?i:together\s+with)\s+",
    )
});

/// Parties defined at the top without a "between" ("Aduro Biotech, Inc., with a place of
/// business at … ("Aduro") and IREYA B.V … ("Consultant") agree to …", "… (the "Effective
/// Date") INKTOMI CORPORATION ("Inktomi"), a California corporation, … and MICROSOFT
/// CORPORATION ("Microsoft")"): the defined terms of the text before the recitals, each after
/// a name with a corporate form; two at least.
fn defined_parties_without_between(w: &Work) -> Option<(PartyList, Found)> {
    let head = w.head(2500);
    let end = PARTY_STOP.find(head).map_or(head.len(), |m| m.start());
    let list: PartyList = tidy_parties(parties_in(&head[..end], false))
        .into_iter()
        .map(|(name, roles)| (LEADING_TITLE.replace(&name, "").to_string(), roles))
        .filter(|(name, _)| name.split_whitespace().count() <= 8 && ENTITY_WORD.is_match(name))
        .collect();
    (list.len() >= 2).then(|| {
        let found = w.found(parties_raw(&list), 0..end);
        (list, found)
    })
}

/// A line of a signature block that names no signing party: "By:", "Name:", "Title:", a
/// signature, a date, an address.
static SIGNATURE_LINE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:by|name|title|its|date|dated|signature|witness|address|attn|attention|tel|telephone|fax|e-?mail|print(?:ed)?\s+name)\b\s*:?|^/s/|:$|\bwitness\s+whereof\b",
    )
});
/// A date before the first party of a signature section ("DATED: April 8, 2020 SCULPTOR
/// CAPITAL LP").
static SIGNATURE_DATED: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)^dated?\s*:?\s*(?:[a-z]+\.?\s+\d{1,2},?\s+\d{4}|\d{1,2}/\d{1,2}/\d{2,4})\s+"));
/// What a signature block's next line starts with: the signing officer, or the signature.
static SIGNED_BY: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)^(?:by\s*:|/s/)"));
/// A word that makes a line an entity's name: a legal form, or a word that names a fund, a
/// trust, a bank or a partnership.
static ENTITY_WORD: LazyLock<Regex> = LazyLock::new(|| {
    re(&format!(
        r"(?i)(?:^|[\s,])(?:{LEGAL_FORMS}|lcc|llp|sa|kgaa|nv|bv|s\.?à\s+r\.?l|sarl|fund|trust|partners|holdings?|bank)\.?(?:$|[\s,])"
    ))
});

/// Where no preamble names the parties (a joint filing agreement, a statement "the undersigned"
/// sign): the entities of the signature blocks, each on a line of its own that a "By:" or a
/// "/s/" signature follows (a blank line between allowed). A name in capitals without a
/// corporate form is taken too: an individual who signs in person ("DANIEL KŘETÍNSKÝ" over
/// "/s/ Daniel Kretinsky"). Two at least; evidence from the first to the last.
fn signature_parties(text: &str) -> Option<(PartyList, Found)> {
    // each line with the char index of its start
    let mut lines: Vec<(usize, &str)> = Vec::new();
    let mut at = 0usize;
    for line in text.split('\n') {
        lines.push((at, line));
        at += line.chars().count() + 1;
    }
    let mut list: PartyList = Vec::new();
    let (mut first, mut last) = (usize::MAX, 0usize);
    for (i, &(start, line)) in lines.iter().enumerate() {
        let l = line.split_whitespace().collect::<Vec<_>>().join(" ");
        let l = SIGNATURE_DATED.replace(&l, "").to_string();
        if l.is_empty() || SIGNATURE_LINE.is_match(&l) {
            continue;
        }
        let Some(next) = lines[i + 1..].iter().map(|(_, t)| t.trim()).find(|t| !t.is_empty()) else { break };
        let blank_between = lines[i + 1..].iter().take(3).take_while(|(_, t)| t.trim().is_empty()).count();
        if blank_between > 1 || !SIGNED_BY.is_match(next) {
            continue;
        }
        // the same name twice side by side: two columns of signatures
        let words: Vec<&str> = l.split(' ').collect();
        let half = words.len() / 2;
        let line_name = if words.len().is_multiple_of(2) && half > 0 && words[..half] == words[half..] {
            words[..half].join(" ")
        } else {
            l.clone()
        };
        for name in signature_columns(&line_name) {
            let name = name.trim_end_matches([',', ';', ' ']);
            // "For Acme, Inc." over the signing officer's line
            let name = name.strip_prefix("For ").or_else(|| name.strip_prefix("FOR ")).unwrap_or(name).to_string();
            let n_words = name.split_whitespace().count();
            let in_capitals = name.chars().any(char::is_alphabetic) && !name.chars().any(char::is_lowercase);
            let entity = ENTITY_WORD.is_match(&name) && !PARTY_NOT_A_NAME.is_match(&name);
            if !plausible_bare_name(&name) || n_words < 2 || !(entity || (in_capitals && n_words <= 5)) {
                continue;
            }
            if list.iter().any(|(n, _)| n.eq_ignore_ascii_case(&name)) {
                continue;
            }
            list.push((name, Vec::new()));
            first = first.min(start);
            last = last.max(start + line.chars().count());
        }
        if list.len() >= 40 {
            break;
        }
    }
    (list.len() >= 2).then(|| {
        let found = Found { raw: parties_raw(&list), evidence: first..last };
        (list, found)
    })
}

/// A legal form that ends a name, followed by the next column's name ("UBS ONCOLOGY IMPACT FUND
/// L.P. ONCOLOGY IMPACT FUND (CAYMAN) MANAGEMENT L.P.").
static COLUMN_BREAK: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(?:L\.P\.|LP|LLC|L\.L\.C\.|Inc\.|INC\.|Ltd\.|LTD\.?|Limited|LIMITED|Corp\.|CORP\.|Corporation|CORPORATION|plc|PLC|GmbH|S\.A\.|AG|N\.V\.|B\.V\.)\s+(?P<next>[A-Z])",
    )
});

/// The names of one line of a signature section: two columns side by side are split after the
/// first name's legal form, where both parts hold two words at least.
fn signature_columns(line: &str) -> Vec<String> {
    if let Some(c) = COLUMN_BREAK.captures(line) {
        if let Some(next) = c.name("next") {
            let (a, b) = (line[..next.start()].trim(), line[next.start()..].trim());
            let enough = |t: &str| t.split_whitespace().count() >= 2 && ENTITY_WORD.is_match(t);
            if enough(a) && enough(b) {
                return vec![a.to_string(), b.to_string()];
            }
        }
    }
    vec![line.to_string()]
}

/// `<Name>, hereinafter referred to as the "Company"` — a party defined without a "between"
/// (a preamble in the Russian or Chinese style: "JSC NOC KazakhOil, hereinafter referred to as
/// the "Company", ... on the one side and JSC Karakudukmunay, hereinafter referred to as the
/// "Principal" ...").
static HEREINAFTER: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?i),?\s*\(?\s*hereinafter\s+(?:referred\s+to\s+as|called|named|designated\s+as)\s+(?:the\s+)?(?:"(?P<quoted>[^"]{1,40})"|(?P<bare>party\s+[a-d]|[A-Z][\w-]{1,30}))"#,
    )
});

/// The words of a name, read backwards from where its definition starts: capitalised words,
/// the connectives names hold ("and", "of", "&") and corporate punctuation, back to the start
/// of a sentence, a colon, or a word in lower case.
fn name_before(text: &str) -> &str {
    let is_connective = |w: &str| matches!(w.to_lowercase().as_str(), "and" | "of" | "&" | "de" | "du" | "la" | "del");
    let words: Vec<(usize, &str)> = text
        .split(' ')
        .scan(0usize, |at, w| {
            let here = *at;
            *at += w.len() + 1;
            Some((here, w))
        })
        .filter(|(_, w)| !w.is_empty())
        .collect();
    let mut start = text.len();
    for (k, &(at, word)) in words.iter().enumerate().rev() {
        // a colon, or a full stop after a word that is not an abbreviation in capitals ("Inc."),
        // ends what came before; the name's own last word may end so
        let ends = word.ends_with(':') || (word.ends_with('.') && !word.chars().any(char::is_uppercase));
        let capitalised = word.chars().find(|c| c.is_alphanumeric()).is_some_and(char::is_uppercase);
        if (ends && k + 1 < words.len()) || !(capitalised || is_connective(word)) {
            break;
        }
        start = at;
    }
    let mut name = text[start..].trim_start_matches(|c: char| !c.is_alphanumeric());
    // a heading before the first party ("PREAMBLE JSC NOC KazakhOil") is no part of it
    while let Some((first, rest)) = name.split_once(' ') {
        if !is_connective(first) && !matches!(first, "PREAMBLE" | "PARTIES" | "PARTIES:" | "BETWEEN") {
            break;
        }
        name = rest;
    }
    name.trim_end_matches([',', ' '])
}

/// Two parties or more, each defined by "hereinafter referred to as", near the top.
fn hereinafter_parties(w: &Work) -> Option<(PartyList, Found)> {
    let head = w.head(4000);
    let mut list: Vec<(String, Vec<String>)> = Vec::new();
    let (mut first, mut last, mut prev) = (usize::MAX, 0, 0);
    for c in HEREINAFTER.captures_iter(head) {
        let (Some(m), Some(role)) = (c.get(0), c.name("quoted").or_else(|| c.name("bare"))) else { continue };
        let before = w.slice(prev.max(m.start().saturating_sub(160)), m.start());
        prev = m.end();
        let name = name_before(before);
        if !plausible_bare_name(name) || list.iter().any(|(n, _)| n == name) {
            continue;
        }
        list.push((name.to_string(), vec![role.as_str().trim().to_string()]));
        // `name` lies inside the working text: its offset there starts the evidence
        first = first.min(name.as_ptr() as usize - w.s.as_ptr() as usize);
        last = last.max(m.end());
    }
    (list.len() >= 2).then(|| {
        let found = w.found(parties_raw(&list), first..last);
        (list, found)
    })
}

/// `X ("Company"); Y ("Licensee")`.
fn parties_raw(list: &[(String, Vec<String>)]) -> String {
    list.iter()
        .map(|(name, roles)| {
            if roles.is_empty() {
                name.clone()
            } else {
                let r: Vec<String> = roles.iter().map(|r| format!("\"{r}\"")).collect();
                format!("{name} ({})", r.join(", "))
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// "Party A (Shipper): ZTO Express Co., Ltd. Address: ..." — a heading per party, as contracts
/// drafted in China often open.
static LETTERED_PARTY: LazyLock<Regex> =
    LazyLock::new(|| re(r"\bParty\s+(?P<letter>[A-D])\b(?:\s*\([^()]{1,30}\))?\s*:\s*"));
/// Where a lettered party's name ends: its address, representative or contact lines, a
/// parenthesis that is not part of the name (a translation, "(hereinafter ..."), or the next
/// party.
static LETTERED_END: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\s+(?:(?:registered|registration|business|office|mailing)\s+)?(?:address|legal|contact|tel|telephone|fax|domicile|residence|authori[sz]ed|attn|attention|represented|postal|id|tax)\b|\s*\((?:[^A-Z]|(?i:hereinafter|herein|the)\b)|\s+party\s+[a-d]\b|;",
    )
});

/// Parties named under "Party A:", "Party B:" headings near the top (two at least).
fn lettered_parties(w: &Work) -> Option<(PartyList, Found)> {
    let head = w.head(6000);
    let mut seen: Vec<String> = Vec::new();
    let mut list: Vec<(String, Vec<String>)> = Vec::new();
    let (mut first, mut last) = (usize::MAX, 0);
    for c in LETTERED_PARTY.captures_iter(head) {
        let (Some(m), Some(letter)) = (c.get(0), c.name("letter")) else { continue };
        if seen.iter().any(|l| l == letter.as_str()) {
            continue;
        }
        let rest = w.slice(m.end(), (m.end() + 160).min(head.len()));
        let end = LETTERED_END.find(rest).map_or(rest.len(), |e| e.start());
        let name = rest[..end].trim_matches(|c: char| c.is_whitespace() || matches!(c, ',' | ':' | '.'));
        // keep the full stop of an abbreviation that ends the name ("Co., Ltd.")
        let name = match rest[..end].trim_end().strip_suffix('.') {
            Some(with_stop) if with_stop.trim_end() == name => rest[..end].trim_end(),
            _ => name,
        };
        if !plausible_bare_name(name) {
            continue;
        }
        seen.push(letter.as_str().to_string());
        list.push((name.to_string(), vec![format!("Party {}", letter.as_str())]));
        first = first.min(m.start());
        last = last.max(m.end() + end);
    }
    (list.len() >= 2).then(|| {
        let found = w.found(parties_raw(&list), first..last);
        (list, found)
    })
}

static AND_SPLIT: LazyLock<Regex> = LazyLock::new(|| re(r"(?i),?\s+and\s+"));

// ---------------------------------------------------------------------------------------------
// Dates.

static SPLIT_ORDINAL: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)\b(\d{1,2})\s?(s)\s?(t)\b|\b(\d{1,2})\s?(n)\s?(d)\b|\b(\d{1,2})\s?(r)\s?(d)\b|\b(\d{1,2})\s?(t)\s?(h)\b")
});

/// A date as written, with a superscript suffix that PDF text split ("1s t day") put back
/// together ("1st day").
fn tidy_date(raw: &str) -> String {
    let joined = SPLIT_ORDINAL
        .replace_all(raw, |c: &regex::Captures<'_>| c.iter().skip(1).flatten().map(|m| m.as_str()).collect::<String>());
    joined.split_whitespace().collect::<Vec<_>>().join(" ")
}

struct DateHit {
    raw: String,
    /// Working byte range of the evidence sentence.
    evidence: Range<usize>,
}

static AD_TRIGGER: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:dated|made|entered\s+into|executed|concluded|signed|effective|as\s+of|agreements?|amendment|contract|lease|addendum|memorandum|licen[cs]e|updated|revised)\b",
    )
});
static AD_PREFIX: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(?:\bon|\bas\s+of|\bdated(?:\s+as)?|\bdate|\beffective|\bthis|\bthe|\bof|\bmade|\binto|\bfrom|\bexecuted|\bsigned|,|:|\()\s*$",
    )
});
static AD_BAD_PREFIX: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(?:\b(?:filed|amended|restated|expir\w*|terminat\w*|through|until|ending|ended|end|prior\s+to|before|after|since|commenc\w*|begin\w*|effective\s+date|termination\s+date|expiration\s+date)\b[^.]{0,12}|\b(?:form|exhibit)\b[^.]{0,30}|\bsource\s*:[^:]{0,100})$",
    )
});
/// The date of another agreement this one amends or refers to ("to the Supply Agreement dated
/// April 1, 2017", "have previously entered into the Agreement dated ...", a recital's "entered
/// into a Split Dollar Agreement, dated as of ...").
static AD_OTHER_AGREEMENT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?i)(?:\b(?:to|under|of|(?:entered|enter|enters)\s+into|amends?|amending|amend|modif(?:y|ies)|supplements?|replaces?)\s+(?:the|that\s+certain|that|a|an|said)\s+(?:[\w&,'"()-]+\s+){0,10}?(?:agreement|contract|lease|license)\b(?:\s*\([^)]{0,40}\))?\s*,?\s*|\bpreviously\s+(?:entered\s+into|executed|signed)\b[^.;]{0,60}?)\b(?:dated|entered\s+into|made|executed|signed|effective)\b[^.;]{0,30}$"#,
    )
});
/// A date of some other document that the text mentions in passing ("that certain
/// Non-Disclosure Agreement between them dated ...", "supersedes ... dated", "a project
/// memorandum dated", "a Demand Note, dated ...", "the United Nations Convention on Contracts for
/// the International Sale of Goods dated 11 April 1980").
static AD_OTHER_DOCUMENT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(?:\bthat\s+certain\b|\bsupersed\w*|\breplac\w*|\bprior\b|\bprevious\w*|\boriginal\w*|\bexisting\b|\bmemorandum\b|\bletter\b|\bnon-?disclosure\b|\bconfidentiality\s+agreement\b|\bbetween\s+them\b|\bpurchase\s+order\b|\binvoice\b|\b(?:promissory|demand|convertible|secured)\s+notes?\b|\bnotice\b|\bconvention\b|\btreaty\b)[^.;]{0,80}\bdated\s*:?\s*(?:as\s+of\s+)?(?:(?:this|the)\s+)?$",
    )
});
static AD_DATED_ANY: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:this\s+(?:agreement|amendment|contract|lease|addendum)\s+(?:is|was|shall\s+be)\s+(?:dated|made|executed|signed|entered\s+into)(?:\s+(?:as\s+of|on|effective))?(?:\s+(?:this|the))?\s+|dated\s*:?\s*(?:(?:this|the)\s+)?|date\s*:\s*)({DATE})",
    )
});
static AD_LABEL_BAD: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:effective|termination|expiration|commencement|start|end|delivery|closing|launch|payment|due|invoice|birth|ship|shipping|filing|issue|maturity|completion|approval|review|revision|print|printed)\s*$",
    )
});

/// The date the agreement was made: the first date in the preamble introduced by "dated",
/// "made ... as of", "entered into on", "this 5th day of", ...; else "This Agreement is dated
/// <date>" or a "Date:" line anywhere.
fn agreement_date(w: &Work) -> Option<DateHit> {
    if let Some(hit) = letter_date(w) {
        return Some(hit);
    }
    let dated = |at: usize, prefixed: bool| {
        let sent = w.sentence(at, at);
        let before = w.slice(sent.start.max(at.saturating_sub(300)), at);
        let near = w.slice(at.saturating_sub(40), at);
        let wide = w.slice(at.saturating_sub(160), at);
        AD_TRIGGER.is_match(before)
            && (prefixed || AD_PREFIX.is_match(near))
            && !AD_BAD_PREFIX.is_match(near)
            && !AD_OTHER_AGREEMENT.is_match(wide)
            && !AD_OTHER_DOCUMENT.is_match(wide)
            && !SOURCE_LINE.is_match(wide)
    };
    let written = DATE_RE
        .find_iter(w.head(6000))
        .find(|m| dated(m.start(), false))
        .map(|m| (m.start(), DateHit { raw: tidy_date(m.as_str()), evidence: w.sentence(m.start(), m.end()) }));
    // a template's blank, or a day and month without a year, where the preamble dates it
    let unfilled = AD_UNFILLED.captures_iter(w.head(6000)).find_map(|c| {
        let (d, prefixed) = match (c.get(1), c.get(2)) {
            (Some(d), _) => (d, false),
            (None, Some(d)) => (d, true),
            _ => return None,
        };
        let at = c.get(0)?.start();
        dated(d.start(), prefixed)
            .then(|| (at, DateHit { raw: tidy_date(d.as_str()), evidence: w.sentence(d.start(), d.end()) }))
    });
    match (written, unfilled) {
        (Some((a, hit)), Some((b, blank))) => return Some(if b < a { blank } else { hit }),
        (Some((_, hit)), None) | (None, Some((_, hit))) => return Some(hit),
        (None, None) => {}
    }
    for c in AD_DATED_ANY.captures_iter(&w.s) {
        let (Some(all), Some(d)) = (c.get(0), c.get(1)) else { continue };
        let label = w.slice(all.start().saturating_sub(20), all.start());
        let wide = w.slice(d.start().saturating_sub(160), d.start());
        if AD_LABEL_BAD.is_match(label)
            || AD_OTHER_AGREEMENT.is_match(wide)
            || AD_OTHER_DOCUMENT.is_match(wide)
            || SOURCE_LINE.is_match(wide)
        {
            continue;
        }
        // a "Date:" line of a signature block: the agreement is made when the last party signs
        if DATE_LABEL.is_match(all.as_str()) {
            if let Some(hit) = last_signature_date(w, d.start()) {
                return Some(hit);
            }
        }
        return Some(DateHit { raw: tidy_date(d.as_str()), evidence: w.sentence(all.start(), d.end()) });
    }
    // "IN WITNESS WHEREOF ... executed this Agreement on the 1st day of June, 2006", "signed at
    // Pretoria on this 31st day of March 2001": the last such date
    AD_SIGNED_ON
        .captures_iter(&w.s)
        .filter_map(|c| {
            let (all, d) = (c.get(0)?, c.get(1)?);
            let date = crate::normalize::parse_date(d.as_str())?;
            Some((date, all.start(), d.end(), d.as_str().to_string()))
        })
        .max_by_key(|x| x.0)
        .map(|(_, s0, s1, raw)| DateHit { raw: tidy_date(&raw), evidence: w.sentence(s0, s1) })
        .or_else(|| signature_block_date(w))
        .or_else(|| heading_date(w))
        .or_else(|| empty_blank_date(w, &AD_EMPTY_BLANK))
        .or_else(|| {
            // "EXECUTED this ________ day of ________, in the year ________."
            let c = AD_SIGNED_UNFILLED.captures(&w.s)?;
            let (all, d) = (c.get(0)?, c.get(1)?);
            Some(DateHit { raw: tidy_date(d.as_str()), evidence: w.sentence(all.start(), d.end()) })
        })
}

/// A date of the preamble left blank or written without its year (`{UNFILLED}`, or a bare blank
/// after "dated", "as of", "effective"), followed by what follows such a date.
static AD_UNFILLED: LazyLock<Regex> =
    LazyLock::new(|| re(&format!(r"(?i){}{AFTER_UNFILLED}", *UNFILLED_OR_DATED_BLANK)));
static AD_SIGNED_UNFILLED: LazyLock<Regex> = LazyLock::new(|| re(&format!(r"(?i){SIGNED_ON}({{UNFILLED}})")));

/// A template's date whose blank the PDF drew as a line, so the text has none: "is effective
/// as of , 2020 (the "Effective Date")", "AGREEMENT made as of  , 2013, between": the year
/// alone, at the opening.
static AD_EMPTY_BLANK: LazyLock<Regex> = LazyLock::new(|| {
    re(&format!(
        r"(?i)\b(?:(?:made|dated|entered\s+into|effective)(?:\s+(?:and\s+)?(?:effective|entered\s+into))?\s+(?:as\s+of|on)|dated)\s*,\s*({YEAR})"
    ))
});
static ED_EMPTY_BLANK: LazyLock<Regex> =
    LazyLock::new(|| re(&format!(r"(?i)\beffective\s+(?:as\s+of|on)\s*,\s*({YEAR})")));

/// The first match of `pattern` (a year after an empty blank) in the opening, unless it dates
/// another agreement; the raw answer is the text from the pattern's first word ("as of , 2020").
fn empty_blank_date(w: &Work, pattern: &Regex) -> Option<DateHit> {
    let head = w.head(3000);
    pattern.captures_iter(head).find_map(|c| {
        let (all, year) = (c.get(0)?, c.get(1)?);
        let wide = w.slice(year.start().saturating_sub(160), year.start());
        if AD_OTHER_AGREEMENT.is_match(wide) || AD_OTHER_DOCUMENT.is_match(wide) || SOURCE_LINE.is_match(wide) {
            return None;
        }
        Some(DateHit { raw: all.as_str().to_string(), evidence: w.sentence(all.start(), all.end()) })
    })
}

/// A letter's salutation: what follows the addressee of a letter agreement.
static SALUTATION: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)\b(?:(?:dear\s+)?ladies\s+and\s+gentlemen|dear\s+sirs?(?:\s+(?:and|or)\s+(?:madam|mesdames))?)\b")
});
/// The date line of a letter agreement: a date, or one the template leaves blank ("November
/// ___, 2006", "___________ __, 2000", or the blank lost: "AGENCY AGREEMENT , 2006").
static LETTER_DATE: LazyLock<Regex> = LazyLock::new(|| {
    re(&format!(
        r"(?i)(?:{{DATE}}|{BLANK}(?:\s+{BLANK})*\s*,\s*{YEAR}|\b(?:agreement|contract)\s*,\s*(?P<year>{YEAR}))"
    ))
});

/// A letter agreement is dated by the line between its title and the salutation ("REMARKETING
/// AGREEMENT February 15, 2011 Barclays Capital Inc. 745 Seventh Avenue … Ladies and Gentlemen:",
/// "AGENCY AGREEMENT ____________, 1996 Capital Resources, Inc. … Ladies and Gentlemen:"), not by
/// the dates its body refers to: the last date within the 400 bytes before the salutation, where
/// no sentence of prose comes between them.
fn letter_date(w: &Work) -> Option<DateHit> {
    let salutation = SALUTATION.find(w.head(6000))?;
    let from = ceil_cb(&w.s, salutation.start().saturating_sub(400));
    let window = &w.s[from..salutation.start()];
    let c = LETTER_DATE.captures_iter(window).last()?;
    let m = c.get(0)?;
    let (start, end) = (from + m.start(), from + m.end());
    // the blank lost: the year alone is what the text says
    let raw = c.name("year").map_or_else(|| tidy_date(m.as_str()), |y| y.as_str().to_string());
    let wide = w.slice(start.saturating_sub(160), start);
    if PROSE_SENTENCE_END.is_match(&window[m.end()..])
        || AD_OTHER_AGREEMENT.is_match(wide)
        || AD_OTHER_DOCUMENT.is_match(wide)
        || SOURCE_LINE.is_match(wide)
    {
        return None;
    }
    Some(DateHit { raw, evidence: w.sentence(start, end) })
}

/// The end of a sentence of prose ("... was approved. Final"), not of an abbreviation ("INC. 8.250%").
static PROSE_SENTENCE_END: LazyLock<Regex> = LazyLock::new(|| re(r"[a-z]{3,}[.!?]\s+[A-Z]"));

/// A date standing in the heading, before the text begins ("AGENCY AGREEMENT May 21, 2015
/// Tribute Pharmaceuticals ...", a letter agreement's date line).
fn heading_date(w: &Work) -> Option<DateHit> {
    let head = w.head(300);
    let m = DATE_RE.find(head)?;
    // Only a date of the heading: no sentence has ended before it.
    if PROSE_SENTENCE_END.is_match(w.slice(0, m.start())) {
        return None;
    }
    let near = w.slice(m.start().saturating_sub(40), m.start());
    let wide = w.slice(m.start().saturating_sub(160), m.start());
    if AD_BAD_PREFIX.is_match(near) || SOURCE_LINE.is_match(wide) || AD_OTHER_AGREEMENT.is_match(wide) {
        return None;
    }
    crate::normalize::parse_date(m.as_str())?;
    Some(DateHit { raw: tidy_date(m.as_str()), evidence: w.sentence(m.start(), m.end()) })
}

/// A "Date" label of a signature block, before or after the date ("/s/ Jane Doe 5/17/12 JANE
/// DOE Date", "Signature /s/ J. Doe Date 13/07/05").
static SIG_DATE_LABEL: LazyLock<Regex> = LazyLock::new(|| re(r"\b(?:Date|DATE)\b"));
/// What marks a signature block: a conformed signature, "By:", "IN WITNESS WHEREOF".
static SIG_MARK: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)/s/|\bby\s*:|\bin\s+witness\s+whereof\b|\bsignature\b"));

/// The agreement is made when the last party signs: the latest date that a signature block
/// labels "Date", when nothing else dates the agreement.
fn signature_block_date(w: &Work) -> Option<DateHit> {
    DATE_RE
        .find_iter(&w.s)
        .filter(|m| {
            let before = w.slice(m.start().saturating_sub(40), m.start());
            let after = w.slice(m.end(), m.end() + 40);
            let labelled = SIG_DATE_LABEL.find_iter(before).any(|l| !AD_LABEL_BAD.is_match(&before[..l.start()]))
                || SIG_DATE_LABEL.find_iter(after).any(|l| !AD_LABEL_BAD.is_match(&after[..l.start()]));
            labelled
                && SIG_MARK.is_match(w.slice(m.start().saturating_sub(400), m.start()))
                && !SOURCE_LINE.is_match(w.slice(m.start().saturating_sub(160), m.start()))
        })
        .filter_map(|m| Some((crate::normalize::parse_date(m.as_str())?, m.start(), m.end(), m.as_str().to_string())))
        .max_by_key(|x| x.0)
        .map(|(_, s0, s1, raw)| DateHit { raw: tidy_date(&raw), evidence: w.sentence(s0, s1) })
}

static AD_SIGNED_ON: LazyLock<Regex> = LazyLock::new(|| re(&format!(r"(?i){SIGNED_ON}({{DATE}})")));

/// "Source: COMPANY, 10-K, 2/27/2020": the EDGAR filing's footer, never a date of the contract.
static SOURCE_LINE: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\bsource\s*:[^:]{0,100},\s*$"));
static DATE_LABEL: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)^date\s*:"));
static SIGNED_DATE: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\bdate(?:d|\s+signed)?\s*:+\s*({DATE})"));

/// The latest of the "Date:" lines within 500 bytes of the one at byte `at` (the parties of a
/// signature block sign on different days).
fn last_signature_date(w: &Work, at: usize) -> Option<DateHit> {
    let a = ceil_cb(&w.s, at.saturating_sub(500));
    let b = floor_cb(&w.s, (at + 500).min(w.s.len())).max(a);
    let (window, base) = (&w.s[a..b], a);
    SIGNED_DATE
        .captures_iter(window)
        .filter_map(|c| {
            let d = c.get(1)?;
            let date = crate::normalize::parse_date(d.as_str())?;
            Some((date, d.start() + base, d.end() + base, d.as_str().to_string()))
        })
        .max_by_key(|x| x.0)
        .map(|(_, s0, s1, raw)| DateHit { raw: tidy_date(&raw), evidence: w.sentence(s0, s1) })
}

/// `<date> (the "Effective Date")`, `"Effective Date" means <date>`, `Effective Date: <date>`.
static ED_DEFINED: LazyLock<Regex> = LazyLock::new(|| {
    re(&format!(
        r#"(?i)(?P<a>{{DATE}})(?:\s*,\s*(?:19|20)\d\d\b)?{DEFINED_EFFECTIVE}|"?\b(?:effective|commencement)\s+dates?"?\)?\s*(?:(?:for|of)\s+this\s+(?:agreement|contract)\s+)?(?:shall\s+mean|means|is|shall\s+be|will\s+be|:|-)\s*(?:\d{{1,2}}:\d\d\s*[ap]\.?m\.?\s*(?:[A-Za-z]+\s+){{0,3}}?time\s+)?(?:the\s+date\s+of\s+|on\s+|as\s+of\s+)?(?P<b>{{DATE}})"#
    ))
});
/// The preamble's date left blank, or without its year, defined as the effective date: "as of
/// [●] (the "Effective Date")", "made this 30th day of April (the "Effective Date")".
static ED_DEFINED_UNFILLED: LazyLock<Regex> =
    LazyLock::new(|| re(&format!(r"(?i){}{DEFINED_EFFECTIVE}", *UNFILLED_OR_DATED_BLANK)));
/// "entered into effective this ____ day of ________, 19__, by and between".
static ED_EFFECTIVE_UNFILLED: LazyLock<Regex> = LazyLock::new(|| {
    re(&format!(r"(?i)\beffective\s+(?:as\s+of\s+|on\s+)?(?:this\s+|the\s+)?({{UNFILLED}}){AFTER_UNFILLED}"))
});
/// "effective as of <date>", "effective <date>".
static ED_EFFECTIVE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\beffective\s+(?:as\s+of\s+|as\s+from\s+|on\s+|from\s+|upon\s+|beginning\s+|commencing\s+(?:on\s+)?|date\s+of\s+)?(?:this\s+|the\s+)?({DATE})",
    )
});
/// "commencing on <date>", "shall come into force as of <date>".
static ED_COMMENCE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:commenc(?:e|es|ing|ed)|begin(?:s|ning)?|start(?:s|ing)?|comes?\s+into\s+(?:force|effect)|takes?\s+effect|becomes?\s+effective)\s+(?:on\s+|upon\s+|as\s+of\s+|from\s+|effective\s+|with\s+effect\s+from\s+)?(?:this\s+|the\s+)?({DATE})",
    )
});
static TERM_OR_AGREEMENT: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)\bterm\b|\bagreement\b|\bcontract\b|\bamendment\b|\blease\b"));
/// The agreement takes effect when the last party signs ("effective as of the last date signed
/// below", "the term will begin on the date this Agreement is signed by the last signatory",
/// "effective on the date of signed acceptance"), or on the date its signature block gives
/// ("executed and effective as of the date set forth below", "entered into as of the date noted
/// below (the "Effective Date")", "as of the latest date referenced on the signature page
/// below").
static ED_ON_SIGNATURE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?i)\b(?:effective|takes?\s+effect|enters?\s+into\s+(?:force|effect)|comes?\s+into\s+(?:force|effect)|becomes?\s+effective|(?:will|shall)\s+(?:begin|commence))\b[^.;]{0,40}?\b(?:(?:the\s+)?last\s+date\s+signed|(?:the\s+)?date\s+of\s+(?:its\s+|the\s+)?(?:(?:last|final|most\s+recent)\s+(?:final\s+)?)?signature|(?:the\s+)?date\s+of\s+signed\s+acceptance|(?:the\s+)?signatures?\s+and\s+seals?|upon\s+(?:the\s+)?signatures?\b|(?:when|upon|on\s+the\s+date)\s+(?:it\s+is\s+|this\s+agreement\s+is\s+|this\s+agreement\s+has\s+been\s+)?(?:signed|executed)\s+by\s+(?:both|all|each|the)\b|(?:the\s+)?later\s+of\s+the\s+(?:two\s+)?(?:signature\s+)?dates\b|(?:as\s+of\s+|on\s+)the\s+(?:(?:latest|last|later)\s+)?date\s+(?:set\s+forth|noted|indicated|shown|stated|referenced)\s+(?:on\s+the\s+signature\s+pages?\s+)?below)|\bas\s+of\s+the\s+(?:(?:latest|last|later)\s+)?date\s+(?:set\s+forth|noted|indicated|shown|stated|referenced)\s+(?:on\s+the\s+signature\s+pages?\s+)?below\s*\(\s*(?:the\s+|this\s+)?["“]?effective\s+date"#,
    )
});
/// The effective date is the agreement's own date.
static ED_SAME_AS_AGREEMENT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?i)"?\b(?:effective|commencement)\s+date"?\)?\s*(?:shall\s+)?(?:mean|means|is|shall\s+be)\s+the\s+date\s+(?:first\s+)?(?:above\s+written|written\s+above|set\s+forth\s+above|(?:first\s+)?(?:written|set\s+forth)\s+above|hereof|of\s+this\s+agreement)|\b(?:effective|into\s+force|into\s+effect|(?:this\s+agreement|the\s+"?term|initial\s+"?term)\b(?:[^.;()]|\([^()]{0,30}\)){0,60}?\b(?:commence|commences|commencing|begin|begins|beginning))\s+(?:as\s+of\s+|on\s+|from\s+|upon\s+)?(?:the\s+)?(?:date\s+(?:first\s+)?(?:above\s+written|written\s+above|set\s+forth\s+above|hereof|of\s+(?:the\s+|this\s+)?agreement|of\s+execution(?:\s+(?:hereof|of\s+this\s+agreement))?)|first\s+date\s+(?:above\s+written|written\s+above)|day\s+and\s+year\s+first\s+(?:above\s+written|written\s+above)|execution\s+date|execution\s+of\s+this\s+(?:agreement|document))"#,
    )
});

static ED_OTHER_PERIOD: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\b(?:period|during)\b"));
/// Before "effective as of <date>": an ending that someone makes take effect then ("may
/// terminate this Agreement,"), not the agreement; "unless sooner terminated, shall be effective
/// as of" is the agreement's.
static ED_OTHER_EVENT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:may|shall|will|to|hereby|being)\s+(?:\w+\s+){0,2}(?:terminat|expir|cancel|resign|withdraw|replac)\w*\b[^.;]*$",
    )
});
/// Before "beginning <date>": a year or a period of the business that starts then, not the term.
static ED_OTHER_START: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:(?:fiscal|financial|calendar|contract|accounting|budget)\s+years?|quarters?|production\s+period|season)\s*(?:which\s+|that\s+)?(?:shall\s+|will\s+|to\s+)?$",
    )
});

/// The effective date: a date defined as the "Effective Date", "effective as of <date>",
/// "commencing on <date>"; else the agreement date when the text says the two are the same
/// ("Effective Date" means the date first above written, effective on the date of execution).
fn effective_date(w: &Work, agreement: Option<&DateHit>) -> Option<Found> {
    if let Some(c) = ED_DEFINED.captures(&w.s) {
        if let (Some(all), Some(d)) = (c.get(0), c.name("a").or_else(|| c.name("b"))) {
            return Some(w.found(tidy_date(d.as_str()), w.sentence(all.start(), all.end())));
        }
    }
    for pattern in [&*ED_DEFINED_UNFILLED, &*ED_EFFECTIVE_UNFILLED] {
        if let Some(c) = pattern.captures(w.head(6000)) {
            if let (Some(all), Some(d)) = (c.get(0), c.get(1).or_else(|| c.get(2))) {
                return Some(w.found(tidy_date(d.as_str()), w.sentence(all.start(), all.end())));
            }
        }
    }
    // the date something else takes effect or starts is not the agreement's ("may terminate this
    // Agreement, effective as of December 31, 2023", "Licensee's fiscal year beginning April 1,
    // 1999")
    let lead = |all: &regex::Match<'_>| {
        let sent = w.sentence(all.start(), all.end());
        w.slice(sent.start.max(all.start().saturating_sub(80)), all.start())
    };
    for c in ED_EFFECTIVE.captures_iter(&w.s) {
        let (Some(all), Some(d)) = (c.get(0), c.get(1)) else { continue };
        if ED_OTHER_EVENT.is_match(lead(&all)) {
            continue;
        }
        return Some(w.found(tidy_date(d.as_str()), w.sentence(all.start(), all.end())));
    }
    for c in ED_COMMENCE.captures_iter(&w.s) {
        let (Some(all), Some(d)) = (c.get(0), c.get(1)) else { continue };
        let sent = w.sentence(all.start(), all.end());
        if ED_OTHER_START.is_match(lead(&all)) {
            continue;
        }
        if TERM_OR_AGREEMENT.is_match(w.slice(sent.start, sent.end)) {
            return Some(w.found(tidy_date(d.as_str()), sent));
        }
    }
    if let Some(hit) = empty_blank_date(w, &ED_EMPTY_BLANK) {
        return Some(w.found(hit.raw, hit.evidence));
    }
    // "effective as of the last date signed below", "takes effect upon the signatures and seals of
    // both Parties": the date the last party signed
    if let Some(m) = ED_ON_SIGNATURE.find(&w.s) {
        if let Some(raw) = signature_block_date(w).map(|d| d.raw).or_else(|| agreement.map(|a| a.raw.clone())) {
            return Some(w.found(raw, w.sentence(m.start(), m.end())));
        }
    }
    if let Some(a) = agreement {
        // (not "during the period commencing on the date hereof": a period of the agreement's, not its term)
        if let Some(m) = ED_SAME_AS_AGREEMENT.find_iter(&w.s).find(|m| !ED_OTHER_PERIOD.is_match(m.as_str())) {
            return Some(w.found(a.raw.clone(), w.sentence(m.start(), m.end())));
        }
    }
    effective_event(w)
}

/// `"Effective Date" means the Closing Date …`, `"Effective Date" shall be the date of the last
/// signature …`.
static ED_EVENT_DEFINED: LazyLock<Regex> = LazyLock::new(|| {
    re(&format!(
        r#"(?i)"?\b(?:effective|commencement)\s+date"?\)?\s*(?:shall\s+mean|means|is|shall\s+be|will\s+be)\s+(?P<ev>{}[^.;]{{5,200}})"#,
        crate::normalize::DATE_EVENT_HEAD
    ))
});
/// `will begin on the date this Agreement is signed by the last signatory ("Effective Date")`,
/// `shall become effective upon the completion of the execution by both Parties (hereinafter
/// referred to as the "Effective Date")`.
static ED_EVENT_LABELLED: LazyLock<Regex> = LazyLock::new(|| {
    re(&format!(
        r#"(?i)\b(?:effective|commence|commences|commencing|begin|begins|beginning|start|starts|come\s+into\s+(?:force|effect))\b[^.;()]{{0,40}}?\b(?:on|upon|as\s+of|from)\s+(?P<ev>{}[^.;()]{{5,200}}?)\s*\((?:hereinafter[^()"“]{{0,30}}?)?(?:the\s+)?["“]?(?:[\w-]+\s+)?(?:effective|commencement)\s+date\b"#,
        crate::normalize::DATE_EVENT_HEAD
    ))
});

/// `The term of this Agreement will commence on the date that the Affiliate Registration Form is
/// approved by Chase`, `This agreement shall begin upon the date of its execution by MA`.
static ED_EVENT_TERM: LazyLock<Regex> = LazyLock::new(|| {
    re(&format!(
        r"(?i)\b(?:(?:the\s+)?(?:initial\s+)?term\s+of\s+this\s+(?:agreement|contract)|this\s+(?:agreement|contract))\s+(?:shall|will)\s+(?:commence|begin|start|become\s+effective|be\s+effective|take\s+effect|come\s+into\s+(?:force|effect))\s+(?:on|upon|as\s+of|from)\s+(?P<ev>{}[^.;()]{{5,200}})",
        crate::normalize::DATE_EVENT_HEAD
    ))
});

/// The definition the other way round: `The date upon which MediWound shall have acknowledged in
/// writing that the Conditions Precedent have all been met shall be the "Effective Date"`.
static ED_EVENT_REVERSED: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?i)\b(?P<ev>the\s+(?:first\s+|last\s+)?(?:date|day)\s+(?:on|upon)\s+which\s+[^.;"“”]{5,200}?)\s+(?:shall|will)\s+be\s+(?:deemed\s+(?:to\s+be\s+)?)?(?:the\s+)?["“]?effective\s+date\b"#,
    )
});

/// Where the sentence that names an event goes on to something else.
static EVENT_CLAUSE_END: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i),?\s+(?:and|but)\s+(?:shall|will|is|remains?|continues?|expires?)\b|,\s+(?:unless|subject|provided)\b")
});

/// An effective date that the contract defines by an event and no date: "the Closing Date as
/// set forth in the Share Purchase Agreement", "the date of the last signature on the last page
/// of this Agreement" (found only where no date is). Not the agreement's own date ("the date
/// first above written"), which has no event to tell.
fn effective_event(w: &Work) -> Option<Found> {
    [&*ED_EVENT_DEFINED, &*ED_EVENT_LABELLED, &*ED_EVENT_TERM, &*ED_EVENT_REVERSED].into_iter().find_map(|pattern| {
        pattern.captures_iter(&w.s).find_map(|c| {
            let (all, ev) = (c.get(0)?, c.name("ev")?);
            // up to where the sentence goes on to say something else ("… and shall remain in force")
            let event = ev.as_str();
            let event = EVENT_CLAUSE_END.find(event).map_or(event, |m| &event[..m.start()]);
            let event = event.trim().trim_end_matches([',', ' ']);
            crate::normalize::is_date_event(event)
                .then(|| w.found(event.to_string(), w.sentence(all.start(), all.end())))
        })
    })
}

// ---------------------------------------------------------------------------------------------
// Expiration date.

/// A defined end date: `"Expiration Date" means <date>`, `Termination Date: <date>`.
static EX_DEFINED: LazyLock<Regex> = LazyLock::new(|| {
    re(r#"(?i)\b(?:expiration|expiry|termination|end)\s+date"?\)?\s*(?:shall\s+mean|means|is|shall\s+be|:)\s*({DATE})"#)
});
/// "expire on <date>", "continue in full force and effect until <date>", "through <date>".
static EX_DATE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:expire|expires|expiring|expiration|terminate|terminates|terminating|end|ends|ending|conclude|concludes|concluding|through|thru|until|till|to|and\s+including)\s+(?:to\s+|on\s+|at\s+|as\s+of\s+)?(?:the\s+(?:later|earlier)\s+of\s+(?:\(\s*[a-z1i]{1,3}\s*\)\s*)?)?(?:(?:the\s+)?close\s+of\s+business\s+(?:on\s+)?|midnight\s+(?:on\s+)?|11:59\s*(?:p\.?m\.?)?\s*(?:[a-z]+\s+time\s+)?(?:on\s+)?)?({DATE})",
    )
});
/// "continue (in full force and effect) for a period of <duration>", "remain valid for <duration>".
static EX_CONTINUE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:continue|continues|remain|remains|be\s+in\s+(?:full\s+)?(?:force|effect)|be\s+valid|run|last|be\s+effective|be\s+binding)\b(?:\s+in\s+(?:full\s+)?(?:force|effect)(?:\s+and\s+effect)?)?(?:\s+(?:thereafter|valid|effective|in\s+effect|in\s+force))?(?:\s+from\s+the\s+(?:effective\s+date|date\s+hereof|date\s+of\s+this\s+agreement))?(?:\s+initially)?\s+(?:for\s+)?(?:at\s+least\s+)?(?:an?\s+(?:(?:minimum|initial|fixed)\s+)?(?:period|term)\s+of\s+|the\s+entire\s+|an\s+initial\s+(?:period|term)\s+of\s+|the\s+(?:period|term)\s+of\s+|the\s+|an?\s+)?({DUR})",
    )
});
/// "the term of this Agreement shall be <duration>", "initial term of <duration>".
static EX_TERM_IS: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?i)\b(?:(?:initial|original)\s+(?:term|period)(?:\s+of\s+(?:this|the)\s+(?:[a-z]+\s+)?(?:agreement|contract|lease))?|(?:the\s+)?term\s+of\s+(?:this|the)\s+(?:agreement|contract|lease)|the\s+term\s+hereof|the\s+term|this\s+(?:agreement|contract))\s+(?:\([^)]{0,40}\)\s+)?(?:shall\s+be|is|will\s+be|of)\s+(?:for\s+)?(?:the\s+(?:sooner|earlier)\s+of\s*:?\s*(?:\(\s*[a-z1i]{1,3}\s*\)\s*)?)?(?:a\s+(?:period|term)\s+of\s+)?(?:an?\s+)?({DUR})"#,
    )
});
/// A length that starts "for a period of" (not "for a term of", not after a verb of the term).
static EX_FOR_A_PERIOD: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)^for\s+an?\s+(?:initial\s+)?period\b"));
/// The word before "for a period of" that makes it a period of something else than the term.
static EX_OTHER_PERIOD: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)\b(?:\w+ed|existed|agreement|contract|default|outages?)\s*$"));
/// "for an initial term of <duration>", "Term: <duration>".
static EX_FOR_TERM: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)(?:\b(?:for|have)\s+an?\s+(?:initial\s+)?(?:term|period)\s+of|(?:^|\s)term\s*:)\s+({DUR})")
});
/// "shall end fifteen months therefrom", "continue until five (5) years following the Effective
/// Date", "expires in five (5) years from ...".
static EX_END_AFTER: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:end|ends|ending|expire|expires|terminate|terminates|(?:continue|continues|remain|remains)(?:\s+in\s+(?:full\s+)?(?:force|effect)(?:\s+and\s+effect)?)?\s+until|(?:expire|expires|end|ends)\s+in)(?:\s+on\s+the\s+(?:day|date)\s+(?:that|which)\s+is)?\s+({DUR})\s+(?:after|from|following|therefrom|thereafter|later|subsequent\s+to)\b",
    )
});
/// "until the fifth anniversary of the Effective Date".
static EX_ANNIVERSARY: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:until|through|on|expire\s+on|end\s+on|ending\s+on|expiring\s+on)\s+(?:the\s+(?:later|earlier|latest|earliest)\s+(?:to\s+occur\s+)?of\s*:?\s*(?:\(\s*[a-z1i]\s*\)\s*)?)?(the\s+(?:day\s+(?:prior|before)\s+(?:to\s+)?the\s+)?(?:[\w()-]+\s+){0,4}anniversary\s+of\s+the\s+(?:[\w-]+\s+){0,3}?(?:date|agreement)(?:\s+(?:hereof|of\s+this\s+agreement))?)",
    )
});
/// A term the copy does not give: redacted from the filing ("remain in effect for [***]", "an
/// initial term of **** from the Supply Commencement Date", "for a period of [***] years") or
/// left blank ("through and until _______", "terminate in ________"). The answer is the mark
/// and what the term counts from; it normalises to a blank date ("blank"), which says the
/// contract has an end the copy leaves out, where "none" would say it has none.
static EX_WITHHELD: LazyLock<Regex> = LazyLock::new(|| {
    re(&format!(
        r"(?i)\b(?:(?:continue|continues|remain|remains|be\s+valid|be\s+in\s+(?:full\s+)?(?:force|effect)|be\s+effective|expire|expires|terminate|terminates|end|ends|run|last|extend)\b(?:\s+in\s+(?:full\s+)?(?:force|effect)(?:\s+and\s+effect)?)?(?:\s+thereafter)?(?:\s+from\s+the\s+(?:effective\s+)?date\b[^.;,_*]{{0,40}}?)?\s+(?:for|until|on|upon|through|in|(?:through\s+)?and\s+until)|(?:initial|original)\s+(?:term|period)\s+(?:of\s+this\s+agreement\s+)?(?:shall\s+be|is|will\s+be|of))\s+(?:an?\s+(?:initial\s+|minimum\s+|fixed\s+)?(?:period|term)\s+of\s+|the\s+)?(?P<mark>{WITHHELD}(?:\s+(?:years?|months?|days?|weeks?)\b)?)",
    ))
});
/// The term of another document than the agreement, whose form is attached to it: "The term of
/// this Statement of Work will begin on ________ and shall terminate on ________."
static EX_FORM_TERM: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\bterm\s+of\s+(?:this|each|the|any|such)\s+(?:statement\s+of\s+work|sow|(?:work|purchase)\s+order|order\s+form)\b",
    )
});
/// An agreement with no fixed end.
static EX_PERPETUAL: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:continue|continues|continuing|remain|remains|endure|endures|enduring|be|is)\s+(?:in\s+(?:full\s+)?(?:force|effect)(?:\s+and\s+effect)?\s+|effective\s+|valid\s+|binding\s+)?(?:thereafter\s+)?(?:indefinitely|in\s+perpetuity|for\s+perpetuity|perpetual|perpetually|until\s+(?:it\s+is\s+)?terminated\b|(?:unless\s+and\s+)?until\s+(?:either|one|a|any)\s+(?:party|of\s+the\s+parties)\s+(?:gives|provides|informs|notifies|terminates|elects))|\b(?:end|expire|terminate)s?\s+(?:only\s+)?when\s+terminated\b|\bfor\s+an?\s+(?:unlimited|indefinite)\s+(?:period|term|duration)\b|\bperpetual\s+term\b|\bno\s+fixed\s+term\b",
    )
});
/// The term runs until an event: "shall continue in full force and effect until the expiration
/// of ...", "shall terminate upon the earliest to occur of ...", "commence on the Effective Date
/// and end on the expiration date of ...", "shall remain in effect on a Product-by-Product basis
/// until the expiration of the Royalty Term", "shall continue in effect for so long as X remains
/// a shareholder".
static EX_UNTIL_EVENT: LazyLock<Regex> = LazyLock::new(|| {
    re(&format!(
        r"(?i)\b(?:(?:(?:this\s+agreement|the\s+term|term\s+of\s+this\s+agreement)\s+(?:shall|will)|(?:shall|will|and))\s+(?:expire|terminate|end)\s+(?:upon|on|at)|ending\s+(?:upon|on|at)|(?:continue|continues|remain|remains|extend|extends|be\s+in\s+(?:full\s+)?(?:force|effect)|be\s+(?:valid|effective))\b[^.;]{{0,80}}?\buntil)\s+(?P<ev>{}[^.;]{{5,200}})|\b(?:continue|continues|remain|remains)\b[^.;]{{0,80}}?\bfor\s+(?P<long>(?:so|as)\s+long\s+as\b[^.;]{{5,200}})|\b(?:continue|continues|remain|remains|be|is)\b(?:\s+(?:in\s+(?:full\s+)?(?:force|effect)(?:\s+and\s+effect)?|valid|effective))?\s+(?P<life>{}\s+[^.;]{{3,160}})",
        crate::normalize::EVENT_HEAD,
        crate::normalize::LIFE_OF
    ))
});
static EX_SENT_OK: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\bterm\b|\beffective\s+until\b|\bthis\s+(?:agreement|contract|amendment|lease|licen[cs]e)\b|\bin\s+(?:full\s+)?(?:force|effect)\b|\bexpir|\b(?:contract|agreement|licen[cs]e|initial|promotion|sponsorship|service)\s+(?:period|year)s?\b",
    )
});
/// A sentence that defines the term: `"Term" shall mean`, `"Contract Period" means`.
static EX_TERM_DEFINED: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?i)"(?:initial\s+)?(?:term|contract\s+period|service\s+period|term\s+of\s+(?:this\s+)?agreement)"\s*(?:shall\s+mean|means)\b"#,
    )
});
static EX_SENT_BAD: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?i)surviv|confidential|warrant|after\s+(?:the\s+)?(?:any\s+)?(?:termination|expiration|expiry)|following\s+(?:the\s+)?(?:any\s+)?(?:termination|expiration|expiry)|non-?compet|\bsolicit|during\s+the\s+(?:term|consultation)|\binsurance\b|\brecords\b|\bbooks\b|press\s+release|\b(?:contract|calendar|fiscal|lease)\s+(?:year|quarter)|\bperiod\s+commencing\b|\byear"?\s+means\b"#,
    )
});
static EX_RENEWAL_NEAR: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)\b(?:renew\w*|extension|extended|extend|additional|successive|subsequent|consecutive)\b[^.]{0,40}$")
});
static EX_NOT_RENEWAL: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\bunless\s+(?:sooner\s+|earlier\s+)?(?:terminated|extended|renewed)(?:\s+or\s+(?:terminated|extended|renewed))?\s+(?:as\s+provided|pursuant|in\s+accordance)[^,]{0,60}|\bhereby\s+extended\b",
    )
});
static EX_ANCHOR: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^\s*(?:thereafter\s+)?(?:after|from|following|commencing\s+(?:on|from|with)|beginning\s+(?:on|from|with)|starting\s+(?:on|from)|as\s+of|of)\s+(?:and\s+including\s+)?(?:the\s+)?(?:date\s+(?:hereof|first\s+(?:above\s+)?written(?:\s+above)?|of\s+(?:this|the)\s+(?:agreement|contract)|of\s+execution(?:\s+of\s+this\s+agreement)?)|(?:[a-z][\w-]*\s+){0,3}date|execution\s+(?:date|of\s+this\s+agreement|hereof)|{DATE})",
    )
});
static EX_ANCHOR_MORE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?i)^\s+(?:of|on\s+which|that|when|upon\s+which|first\s+(?:above\s+)?written(?:\s+above)?|hereof)\b[^,.;()"]{0,80}"#,
    )
});
static EX_ANCHOR_STOP: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)\s+(?:unless|and\s+(?:shall|will|may|thereafter)|provided|subject|except|or\s+until|until|with)\b")
});
static EX_SENT_START: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:commenc\w*|begin\w*|start\w*|effective|take\s+effect|come\s+into\s+(?:force|effect))\s+(?:on\s+|as\s+of\s+|from\s+|upon\s+|with\s+)?(?P<a>(?:the\s+)?(?:effective\s+date|commencement\s+date|date\s+(?:hereof|of\s+this\s+agreement|first\s+(?:above\s+)?written(?:\s+above)?)|{DATE}))",
    )
});
static EFFECTIVE_DATE_WORDS: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\beffective\s+date\b"));

/// A term length as an answer: the duration plus what it runs from when the text says so.
fn duration_with_anchor(w: &Work, dur: regex::Match<'_>, sent: &Range<usize>) -> String {
    let d = dur.as_str().trim().to_string();
    let after = w.slice(dur.end(), dur.end() + 120);
    if let Some(a) = EX_ANCHOR.find(after) {
        let mut anchor = a.as_str().trim().to_string();
        // "from the date" + "of execution of this Agreement by both parties".
        if anchor.to_lowercase().ends_with("date") {
            if let Some(more) = EX_ANCHOR_MORE.find(&after[a.end()..]) {
                let mut more = more.as_str();
                if let Some(stop) = EX_ANCHOR_STOP.find(more) {
                    more = &more[..stop.start()];
                }
                anchor.push(' ');
                anchor.push_str(more.trim());
            }
        }
        return format!("{d} {}", anchor.trim());
    }
    let text = w.slice(sent.start, sent.end);
    if let Some(c) = EX_SENT_START.captures(text) {
        if let Some(a) = c.name("a") {
            return format!("{d} from {}", a.as_str().trim());
        }
    }
    if EFFECTIVE_DATE_WORDS.is_match(text) {
        return format!("{d} from the Effective Date");
    }
    d
}

/// When the (initial) term ends: a date, a term length ("five (5) years from the Effective
/// Date"), an anniversary, or "perpetual".
fn expiration_date(w: &Work) -> Option<(Found, Option<String>)> {
    // (position, raw, evidence, the bare duration when the answer is a term length)
    type Best = Option<(usize, String, Range<usize>, Option<String>)>;
    let mut best: Best = None;
    fn offer(best: &mut Best, pos: usize, raw: String, ev: Range<usize>) {
        offer_term(best, pos, raw, ev, None)
    }
    fn offer_term(best: &mut Best, pos: usize, raw: String, ev: Range<usize>, dur: Option<String>) {
        if best.as_ref().is_none_or(|b| pos < b.0) {
            *best = Some((pos, raw, ev, dur));
        }
    }
    // A sentence that defines the term ("\"Contract Period\" shall mean that period of time
    // commencing on ...") is about it, whatever else it says.
    let judge = |t: &str| EX_TERM_DEFINED.is_match(t) || (EX_SENT_OK.is_match(t) && !EX_SENT_BAD.is_match(t));
    let sentence_ok = |sent: &Range<usize>| judge(w.slice(sent.start, sent.end));
    // The same, judged near the match `m`: a long "sentence" (a definitions list without full
    // stops) says nothing about a date far from the words that would disqualify it. `hole` is
    // left out: the length itself ("ten (10) Contract Years") is not a clause about contract years.
    let near_ok_but = |sent: &Range<usize>, m: &regex::Match<'_>, hole: Range<usize>| {
        let (a, b) = (sent.start.max(m.start().saturating_sub(250)), sent.end.min(m.end() + 150));
        let (h0, h1) = (hole.start.clamp(a, b), hole.end.clamp(a, b));
        if h0 >= h1 {
            return judge(w.slice(a, b));
        }
        judge(&format!("{} {}", w.slice(a, h0), w.slice(h1, b)))
    };
    let near_ok = |sent: &Range<usize>, m: &regex::Match<'_>| near_ok_but(sent, m, m.start()..m.start());
    // A renewal word just before the date that does not make it a renewal's end: "unless earlier
    // terminated or extended as provided below, shall end as of <date>", "is hereby extended to
    // <date>" (an amendment moving the end).
    let renewal_near = |before: &str| EX_RENEWAL_NEAR.is_match(&EX_NOT_RENEWAL.replace_all(before, " "));

    if let Some(c) = EX_DEFINED.captures(&w.s) {
        if let (Some(all), Some(d)) = (c.get(0), c.get(1)) {
            offer(&mut best, all.start(), tidy_date(d.as_str()), w.sentence(all.start(), all.end()));
        }
    }
    // The first end date the text states: where the term's sentence gives both a length and the
    // date it ends ("for a term of three (3) years expiring May 31, 2001"), the date.
    let mut end_date: Option<(usize, String, Range<usize>)> = None;
    for c in EX_DATE.captures_iter(&w.s) {
        let (Some(all), Some(d)) = (c.get(0), c.get(1)) else { continue };
        let sent = w.sentence(all.start(), all.end());
        if near_ok(&sent, &all) && !renewal_near(w.slice(sent.start, all.start())) {
            let raw = tidy_date(d.as_str());
            offer(&mut best, all.start(), raw.clone(), sent.clone());
            end_date = Some((all.start(), raw, sent));
            break;
        }
    }
    for rx in [&*EX_CONTINUE, &*EX_TERM_IS, &*EX_FOR_TERM, &*EX_END_AFTER] {
        for c in rx.captures_iter(&w.s) {
            let (Some(all), Some(d)) = (c.get(0), c.get(1)) else { continue };
            let unit = d.as_str().to_lowercase();
            if unit.contains("day") || unit.contains("week") {
                continue;
            }
            // "have been delayed for a period of 3 months", "ceased making movements under this
            // Agreement for a period of six months": a period of something else
            if EX_FOR_A_PERIOD.is_match(all.as_str())
                && EX_OTHER_PERIOD.is_match(w.slice(all.start().saturating_sub(40), all.start()))
            {
                continue;
            }
            let sent = w.sentence(all.start(), all.end());
            if !near_ok_but(&sent, &all, d.range()) || renewal_near(w.slice(sent.start, d.start())) {
                continue;
            }
            let raw = duration_with_anchor(w, d, &sent);
            offer_term(&mut best, all.start(), raw, sent, Some(d.as_str().trim().to_string()));
            break;
        }
    }
    for c in EX_ANNIVERSARY.captures_iter(&w.s) {
        let (Some(all), Some(d)) = (c.get(0), c.get(1)) else { continue };
        let sent = w.sentence(all.start(), all.end());
        if sentence_ok(&sent) {
            offer(&mut best, all.start(), tidy_date(d.as_str().trim()), sent);
            break;
        }
    }
    if best.is_none() {
        for c in EX_WITHHELD.captures_iter(&w.s) {
            let (Some(all), Some(mark)) = (c.get(0), c.name("mark")) else { continue };
            let sent = w.sentence(all.start(), all.end());
            if near_ok_but(&sent, &all, mark.range())
                && !renewal_near(w.slice(sent.start, mark.start()))
                && !EX_FORM_TERM.is_match(w.slice(sent.start, all.end()))
            {
                let raw = duration_with_anchor(w, mark, &sent);
                offer(&mut best, all.start(), raw, sent);
                break;
            }
        }
    }
    if best.is_none() {
        for m in EX_PERPETUAL.find_iter(&w.s) {
            // the clause up to the words, not the whole sentence: "continue until terminated
            // (the "Term"). Each calendar year ..." is still the term
            let sent = w.sentence(m.start(), m.end());
            if !EX_SENT_BAD.is_match(w.slice(sent.start.max(m.start().saturating_sub(200)), m.end())) {
                offer(&mut best, m.start(), "perpetual".to_string(), sent);
                break;
            }
        }
    }
    if best.is_none() {
        // No date, length or "perpetual": the event the term runs until, as text ("until the
        // expiration of the last Purchase Schedule"), where the sentence is about the term.
        for c in EX_UNTIL_EVENT.captures_iter(&w.s) {
            let Some(all) = c.get(0) else { continue };
            let (ev, lead) = match (c.name("ev"), c.name("long"), c.name("life")) {
                (Some(ev), ..) => (ev, "until"),
                (None, Some(ev), _) => (ev, "for"),
                (None, None, Some(ev)) => (ev, ""),
                _ => continue,
            };
            let sent = w.sentence(all.start(), all.end());
            // the event is not judged as the sentence's topic: "until the expiration of the
            // Warranty Period" is no warranty clause, "during the term of the LSA" no clause that
            // holds during the term
            let judged = near_ok_but(&sent, &all, ev.range());
            if judged && !renewal_near(w.slice(sent.start, all.start())) && !crate::normalize::is_own_end(ev.as_str()) {
                let text = ev.as_str().trim_end_matches([',', ' ']);
                let clipped: String = text.chars().take(160).collect();
                offer(&mut best, all.start(), format!("{lead} {clipped}").trim_start().to_string(), sent);
                break;
            }
        }
    }
    if let (Some(b), Some((pos, raw, ev))) = (&best, end_date) {
        if b.3.is_some() && b.2.contains(&pos) {
            best = Some((pos, raw, ev, None));
        }
    }
    best.map(|(_, raw, ev, dur)| (w.found(raw, ev), dur))
}

// ---------------------------------------------------------------------------------------------
// Renewal term and the notice that stops it.

struct Renewal {
    raw: String,
    /// Working byte range of the renewal sentence.
    evidence: Range<usize>,
    /// Whether it renews by itself (not at a party's option or by the parties' agreement).
    automatic: bool,
}

/// "automatically renew for successive one (1) year periods", "renewed for additional periods of
/// five (5) years", "renewal term of one year".
static RN_DURATION: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?P<verb>renew\w*|extend(?:s|ed)?|extension|continu\w*)\b(?P<gap>[^.;]{0,80}?)\b(?:for|of|by|on)\s+(?:an?\s+|each\s+|another\s+|one\s*(?:\(\s*1\s*\)\s*)?(?:more\s+)?)?(?P<raw>(?P<mods>(?:(?:successive|additional|consecutive|subsequent|further|like|automatic|identical|similar|renewal|extension)[\s,]+)*)(?:(?:terms?|periods?)\s+of\s+)?(?:an?\s+)?{DUR}(?:[\s-]+(?:renewal\s+|extension\s+)?(?:terms?|periods?|increments?|intervals?|basis))?)",
    )
});
/// "extend for an additional month", "extended by one further year": one of the unit, the
/// number left out (the normalisation reads "an"/"one" as 1).
static RN_BARE_UNIT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?P<verb>renew\w*|extend(?:s|ed)?|extension)\b(?P<gap>[^.;]{0,80}?)\b(?:for|by)\s+(?P<raw>(?:an?|one)\s+(?P<mods>(?:(?:additional|further|successive|subsequent|consecutive)\s+)+)(?:year|month)\b)",
    )
});
/// A mark that stands for what a filing redacted ("[***]", "****", "[…***…]") or a form left
/// blank ("______").
const WITHHELD: &str = r"(?:\[[^\]\n]{0,9}\*[^\]\n]{0,9}\]|\*(?:\s?\*){2,}|_{3,})";
/// "automatically renewed for additional periods of ****", "extended for consecutive ***
/// periods": a renewal whose length the copy withholds.
static RN_WITHHELD: LazyLock<Regex> = LazyLock::new(|| {
    re(&format!(
        r"(?i)\b(?P<verb>renew\w*|extend(?:s|ed)?)\b(?P<gap>[^.;]{{0,80}}?)\b(?:for|by)\s+(?:an?\s+|each\s+)?(?P<raw>(?P<mods>(?:(?:successive|additional|consecutive|subsequent|further|renewal)\s+)*)(?:(?:terms?|periods?)\s+of\s+)?{WITHHELD}(?:\s+(?:years?|months?))?(?:[\s-]+(?:renewal\s+)?(?:terms?|periods?))?)"
    ))
});
/// A notice length the copy withholds: "at least [***] prior to the end of the then-current Term".
static NOTICE_WITHHELD: LazyLock<Regex> = LazyLock::new(|| re(WITHHELD));
/// "on a year to year basis", "annual renewals", "renew annually".
static RN_YEARLY: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:renew\w*|extend\w*|continu\w*)\b[^.;]{0,60}?\b(?:from\s+year\s+to\s+year|on\s+a\s+year[\s-]+to[\s-]+year\s+basis|year[\s-]+to[\s-]+year|annually|on\s+an\s+annual\s+basis|each\s+year|every\s+year|yearly|(?:(?:successive|additional|subsequent|consecutive|further)\s+|one\s+or\s+more\s+)?annual\s+(?:periods?|terms?|renewals?))\b|\bannual(?:ly)?\s+(?:automatic\s+)?renewals?\b|\bautomatic(?:ally)?\s+(?:annual|yearly)\s+renewals?\b",
    )
});
/// "continue in effect for a period of one year from the date of its execution and from year to
/// year thereafter".
static RN_YEAR_TO_YEAR_THEREAFTER: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)\b(?:continu\w*|remain\w*)\b[^.;]{0,160}?\band\s+(?:from\s+)?year\s+to\s+year\s+thereafter\b")
});
/// "renew from month to month", "renews monthly", "extend automatically for monthly periods",
/// "renewed on a monthly basis" (not "if eDiets elects to extend the Agreement the monthly fee
/// ...": "monthly" only right after the verb, or as a basis).
static RN_MONTHLY: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:renew\w*|extend\w*|continu\w*|thereafter[^.;]{0,30}\beffective)\b[^.;]{0,60}?\b(?:from\s+month\s+to\s+month|on\s+a\s+month[\s-]+to[\s-]+month\s+basis|month[\s-]+to[\s-]+month|on\s+a\s+monthly\s+basis)\b|\b(?:renew\w*|extend\w*|continu\w*)\s+(?:automatically\s+)?(?:for\s+(?:successive\s+|additional\s+|consecutive\s+)?)?monthly\b",
    )
});
/// Renewals without end: "renew for an indefinite period", "continue in full force and effect
/// thereafter until terminated by either Party".
static RN_PERPETUAL: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\bautomatic(?:ally)?\s+renew\w*\s+for\s+an?\s+(?:unlimited|indefinite)\s+(?:period|term)|\brenew\w*\s+(?:automatically\s+)?(?:for\s+an?\s+)?(?:indefinite|unlimited)\s+(?:period|term|number\s+of)|\b(?:continue|remain)s?\s+(?:in\s+(?:full\s+)?(?:force|effect)(?:\s+and\s+effect)?\s+)?(?:thereafter|indefinitely\s+(?:after\s+that|thereafter))\s+until\s+(?:terminated|either\s+party|one\s+party)|\bthereafter,?\s+(?:this\s+agreement\s+)?(?:shall|will)\s+(?:automatically\s+)?continue\s+(?:in\s+(?:full\s+)?(?:force|effect)(?:\s+and\s+effect)?\s+)?until\s+(?:terminated|either\s+party|one\s+party)|\band\s+(?:(?:shall|will)\s+continue\s+)?indefinitely\s+(?:after\s+that|thereafter)\s+until\s+(?:terminated|either\s+party|one\s+party)",
    )
});
static RN_THEREAFTER: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\bthereafter\b|\bafter\s+that\b"));
static RN_FIRST_TERM: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\b(?:initial|years?|months?|term|period)\b|{DATE}"));
/// Renewals as long as the initial term.
static RN_SAME: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\brenew\w*\b[^.;]{0,80}?\b(?:for\s+)?(?:successive\s+|additional\s+)?(?:terms?|periods?)\s+(?:of\s+)?(?:the\s+same\s+(?:duration|length)|equal\s+(?:in\s+(?:duration|length)\s+)?to\s+the\s+initial\s+term)|\brenew\w*\b[^.;]{0,40}?\bfor\s+(?:a\s+)?(?:like|similar|same)\s+(?:term|period)",
    )
});
/// "for a period of one year following the expiration": a tail period, not a renewal.
static RN_AFTER_END: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^\s*(?:[\w,]+\s+){0,2}?(?:after|following|from)\s+(?:the\s+)?(?:any\s+)?(?:expiration|termination|expiry|end\s+of\s+the\s+term)",
    )
});
static RN_GAP_BAD: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)\b(?:notice|unless|prior|terminat\w*|written|days?|notify|payment|price|fees?)\b|,\s*and\b")
});
static RN_AUTO: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\bautomatic|\bthereafter\b|\bunless\b|\b(?:shall|will)\s+(?:be\s+)?(?:renew|extend)|\brenews\b|\bnon-?renewal\b",
    )
});
/// A renewal only if the parties agree to it then ("may be extended by successive periods of
/// three (3) years by mutual agreement", "extended by mutual agreement between the parties"):
/// no renewal term. CUAD's Renewal Term is an automatic extension or one a party makes alone;
/// a sentence that also says "automatically" still gives one.
static RN_BY_AGREEMENT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:may|can)\s+be\s+(?:renewed|extended)\b[^.;]{0,100}\b(?:mutual\w*|by\s+(?:written\s+)?agreement)\b|\bmutual\w*[^.;]{0,60}\b(?:may|can)\s+be\s+(?:renewed|extended)\b|\b(?:renewed|extended)\s+by\s+(?:the\s+)?mutual\b",
    )
});
/// "automatically" in so many words (narrower than [`RN_AUTO`], which takes "unless" too).
static RN_AUTOMATIC: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\bautomatic"));
static RN_TOPIC: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)\bterm\b|\bagreement\b|\bcontract\b|\blease\b|\bsubscription\b"));

/// The length of each renewal, with "successive"/"additional" when the text says so.
fn renewal_term(w: &Work, initial_term: Option<&str>) -> Option<Renewal> {
    // (is automatic, position, raw, sentence)
    let mut cands: Vec<(bool, usize, String, Range<usize>)> = Vec::new();
    let found = RN_DURATION.captures_iter(&w.s).chain(RN_BARE_UNIT.captures_iter(&w.s));
    for c in found.chain(RN_WITHHELD.captures_iter(&w.s)) {
        let (Some(all), Some(raw)) = (c.get(0), c.name("raw")) else { continue };
        let gap = c.name("gap").map_or("", |g| g.as_str());
        if RN_GAP_BAD.is_match(gap) {
            continue;
        }
        let verb = c.name("verb").map_or("", |v| v.as_str()).to_lowercase();
        let mods = c.name("mods").map_or("", |v| v.as_str().trim());
        // "continue for a period of five years" is the initial term; "continue ... for an
        // additional period of three years" is a renewal.
        if verb.starts_with("contin") && mods.is_empty() {
            continue;
        }
        if RN_AFTER_END.is_match(w.slice(all.end(), all.end() + 80)) {
            continue;
        }
        let sent = w.sentence(all.start(), all.end());
        let t = w.slice(sent.start, sent.end);
        if !RN_TOPIC.is_match(t) || RN_BY_AGREEMENT.is_match(t) && !RN_AUTOMATIC.is_match(t) {
            continue;
        }
        let mut raw = raw.as_str().trim().trim_end_matches([',', ' ']).to_string();
        // "renewed automatically on a five (5) year basis": successive five-year renewals.
        if let Some(stem) = raw.strip_suffix("basis").map(str::trim_end) {
            raw = if mods.is_empty() { format!("successive {stem}") } else { stem.to_string() };
        }
        cands.push((RN_AUTO.is_match(t), all.start(), raw, sent));
        if cands.len() >= 20 {
            break;
        }
    }
    if let (Some(m), Some(d)) = (RN_SAME.find(&w.s), initial_term) {
        let sent = w.sentence(m.start(), m.end());
        cands.push((true, m.start(), format!("successive {d}"), sent));
    }
    for (rx, raw) in [
        (&*RN_YEARLY, "successive 1 year"),
        (&*RN_YEAR_TO_YEAR_THEREAFTER, "successive 1 year"),
        (&*RN_MONTHLY, "successive 1 month"),
        (&*RN_PERPETUAL, "perpetual"),
    ] {
        if let Some(m) = rx.find(&w.s) {
            let sent = w.sentence(m.start(), m.end());
            // "continue thereafter until terminated" renews only after a first term the sentence
            // states ("until the end of the fifteenth Contract Year, and shall continue ...")
            // or in the sentence before, where this one starts "Thereafter, this Agreement shall
            // automatically continue ..."
            let before = if m.start() <= sent.start + 2 && m.as_str().to_lowercase().starts_with("thereafter") {
                sentence_bounds(&w.s, sent.start.saturating_sub(2), sent.start.saturating_sub(2), 600).start
            } else {
                sent.start
            };
            let after_a_term = raw != "perpetual"
                || RN_FIRST_TERM.is_match(w.slice(before, m.start()))
                || !RN_THEREAFTER.is_match(m.as_str());
            if after_a_term && RN_TOPIC.is_match(w.slice(sent.start, sent.end)) {
                cands.push((true, m.start(), raw.to_string(), sent));
            }
        }
    }
    // Automatic renewals first, then the earliest.
    cands.sort_by_key(|c| (!c.0, c.1));
    cands.into_iter().next().map(|(automatic, _, raw, evidence)| Renewal { raw, evidence, automatic })
}

static NOTICE_AFTER: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:'s|s'|')?\s*(?:(?:prior|advance|advanced|written|previous|of|non-renewal|registered|calendar|or\s+more)\s+)*(?:notice|notification|prior\s+to|before|in\s+advance|preceding|prior\b)",
    )
});
static NOTICE_BEFORE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(?:at\s+least|not\s+less\s+than|no\s+less\s+than|no\s+later\s+than|not\s+later\s+than|minimum\s+of|no\s+fewer\s+than|not\s+fewer\s+than|by\s+giving|upon|with|giving|within)\s*$",
    )
});
static NOTICE_CONTEXT: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)\bnotice|\bnotif|\bterminat|\bnot\s+to\s+renew|\bnon-?renewal|\bcancel|\bunless\b"));
/// Notices about insurance policies, payments or cure periods are not about renewal.
static NOTICE_OFF_TOPIC: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)\binsur|\bpolic(?:y|ies)\b|\bcure[sd]?\b|\bpayments?\b|\binvoice|\bmaterial\s+breach"));
/// A renewal sentence that points back at a notice the one before it sets.
static NOTICE_BACK: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\bsuch\s+(?:notice|notification|election)\b"));
/// A sentence about stopping a renewal, wherever it is.
static NON_RENEWAL: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\bnon-?renewal\b|\bnot\s+(?:to\s+)?(?:renew|extend)\b|\bintent(?:ion)?\s+not\s+to\s+(?:renew|extend)|\belect(?:s|ion)?\s+not\s+to\s+(?:renew|extend)|\bprevent\s+(?:the\s+)?(?:automatic\s+)?renewal|\bunless\b[^.]{0,200}\brenew|\b(?:terminat\w*|cancel\w*)\b[^.]{0,120}?\b(?:end|expiration|expiry)\s+of\s+(?:the\s+|its\s+|any\s+|each\s+|such\s+)?(?:then[\s-]+(?:current|applicable)\s+|initial\s+|relevant\s+|applicable\s+)?(?:renewal\s+)?term|\buntil\s+(?:terminated|(?:either|one|a|any)\s+party\s+(?:gives|provides|terminates|notifies|informs))",
    )
});

/// The first notice length ("ninety (90) days" before the end of a term) in `range`; `strict`
/// skips text about insurance, payments or cures (for sentences found only by their wording).
fn notice_in(w: &Work, range: Range<usize>, strict: bool) -> Option<(String, usize)> {
    let text = w.slice(range.start, range.end);
    if !NOTICE_CONTEXT.is_match(text) || (strict && NOTICE_OFF_TOPIC.is_match(text)) {
        return None;
    }
    let base = ceil_cb(&w.s, range.start);
    for m in DUR_RE.find_iter(text) {
        let after = slice(text, m.end(), m.end() + 80);
        let before = slice(text, m.start().saturating_sub(40), m.start());
        if NOTICE_AFTER.is_match(after) || NOTICE_BEFORE.is_match(before) {
            // The renewal length itself ("renew for successive one year periods") is not a notice.
            let tail = after.trim_start().to_lowercase();
            if tail.starts_with("period") || tail.starts_with("term") || tail.starts_with("renewal") {
                continue;
            }
            return Some((m.as_str().trim().to_string(), base + m.start()));
        }
    }
    // a length the filing redacted or the form left blank ("at least [***] prior to the end"),
    // in a renewal's own sentences only: redacted notices to terminate for convenience or for
    // breach are many, and are not about renewal
    if strict {
        return None;
    }
    NOTICE_WITHHELD.find_iter(text).find_map(|m| {
        let after = slice(text, m.end(), m.end() + 80);
        let before = slice(text, m.start().saturating_sub(40), m.start());
        (NOTICE_AFTER.is_match(after) || NOTICE_BEFORE.is_match(before))
            .then(|| (m.as_str().trim().to_string(), base + m.start()))
    })
}

/// How long before a term ends a party must give notice to stop the renewal: within the renewal
/// sentence or the one after, else in a sentence about non-renewal.
fn notice_period(w: &Work, renewal: Option<&Renewal>) -> Option<Found> {
    // a renewal at a party's option: the notice near it exercises the option, it does not stop a
    // renewal ("shall have the option to renew ... by providing prior written notice within
    // Ninety (90) days of the end")
    if let Some(r) = renewal.filter(|r| r.automatic) {
        let next = sentence_bounds(&w.s, r.evidence.end + 1, r.evidence.end + 1, 600);
        // "In the event that either party does not give such notice, the term ... shall be
        // automatically renewed": the notice is in the sentence before
        let start = if NOTICE_BACK.is_match(w.slice(r.evidence.start, r.evidence.end)) && r.evidence.start > 2 {
            sentence_bounds(&w.s, r.evidence.start - 2, r.evidence.start - 2, 600).start.min(r.evidence.start)
        } else {
            r.evidence.start
        };
        let region = start..next.end.max(r.evidence.end);
        if let Some((raw, _)) = notice_in(w, region.clone(), false) {
            return Some(w.found(raw, region));
        }
    }
    for (n, m) in NON_RENEWAL.find_iter(&w.s).enumerate() {
        if n >= 50 {
            break;
        }
        let sent = w.sentence(m.start(), m.end());
        if let Some((raw, _)) = notice_in(w, sent.clone(), true) {
            return Some(w.found(raw, sent));
        }
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Governing law.

/// "the laws of", "the laws in force in", "legislation of" (then the jurisdiction).
static GL_LAWS: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:laws?|legislation)(?:\s+and\s+(?:judicial\s+)?decisions)?(?:\s*,[^,;.]{3,80},)?\s+(?:of|in\s+force\s+in|in\s+force\s+of|in|applicable\s+in|prevailing\s+in|of\s+and\s+in)\s+|\blaws\s+(?:the\s+)?state\s+of\s+",
    )
});
static GL_CONTEXT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)govern|constru|interpret|\bsubject\s+to\b|\benforced\b|\bapplicable\s+law\b|\bcontrolled\s+by\b|\bshall\s+apply\b|\bapplies\b|\bdetermined\s+in\s+accordance\s+with\b|\benter\s+into\s+(?:a\s+)?(?:general\s+)?joint\s+venture\b",
    )
});
static GL_STRONG: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\bgovern(?:ed|ing|s)?\b|\bconstrued\b|\bcontrolled\s+by\b|\b(?:laws?|legislation)\s+of\s+[^.;]{3,60}\b(?:shall\s+apply|applies)\b",
    )
});
static GL_BAD_BEFORE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(?:\b(?:organi[sz]ed|incorporated|existing|formed|registered|chartered|established)\s+(?:and\s+existing\s+)?(?:under|pursuant\s+to|in\s+accordance\s+with)\s+(?:the\s+)?|conflicts?\s+(?:of\s+)?|choice\s+of\s+|principles?\s+of\s+|rules?\s+of\s+|provisions?\s+of\s+|securities\s+|tax\s+|bankruptcy\s+|privacy\s+|export\s+|other\s+|applicable\s+)$",
    )
});
static US_ONLY: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)^(?:the\s+)?united\s+states(?:\s+of\s+america)?$"));
static AND_STATE: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)^\s*(?:,\s*)?and\s+(?:of\s+)?(?:the\s+laws\s+of\s+)?"));
static LAWS_OF_STATE: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)\blaws?\s+of\s+the\s+(?:state|commonwealth)\s+of\s+"));
static STATE_WORD: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\b(?:state|commonwealth)\s+of\b"));
/// "made in the State of California and shall be governed by ... the laws thereof", "entered
/// into in the State of New Jersey, and shall be construed ... in accordance with the laws of
/// that State".
static GL_THEREOF: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\bin\s+(?P<j>the\s+(?:state|commonwealth|province)\s+of\s+[^.;]{2,40}?)\s*,?\s+and\s+(?:shall|will|is\s+to)\s+be\s+(?:governed|construed|interpreted)\b[^.;]{0,120}?\blaws?\s+(?:thereof|of\s+(?:that|said|such|the\s+said)\s+(?:state|commonwealth|province))\b",
    )
});
/// "governed by New York law", "governed by English law".
static GL_ADJ: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i:\b(?:governed\s+(?:by|under)|(?:construed|interpreted)\s+(?:in\s+accordance\s+with|under))\s+(?:and\s+construed\s+in\s+accordance\s+with\s+)?(?:the\s+)?(?:internal\s+|substantive\s+|domestic\s+)?)(?P<j>(?:[A-Z][A-Za-z.]+\s+){1,3})(?i:laws?)\b",
    )
});
const GL_STOP: &[&str] = &[
    "without",
    "excluding",
    "exclusive",
    "except",
    "applicable",
    "notwithstanding",
    "regardless",
    "irrespective",
    "that",
    "which",
    "including",
    "for",
    "to",
    "with",
    "on",
    "provided",
    "shall",
    "governing",
    "its",
    "as",
    "in",
    "but",
    "other",
    "than",
    "giving",
    "regard",
    "pertaining",
    "respecting",
    "relating",
    "apply",
    "or",
    "by",
    "are",
    "is",
    "will",
    "from",
    "if",
    "any",
    "all",
    "such",
    "where",
    "when",
    "then",
    "hereto",
    "thereof",
    "hereof",
    "herein",
    "this",
    "these",
    "those",
    "agreement",
    "contract",
    "both",
    "each",
    "without",
    "save",
    "subject",
    "not",
    "excepting",
    "exclusively",
    "whose",
    "who",
    "at",
    "federal",
    "govern",
    "governs",
    "governed",
    "construed",
    "interpreted",
    "enforced",
    "and/or",
    "nor",
    "so",
    "would",
    "may",
];
const GL_WEAK: &[&str] =
    &["the", "state", "commonwealth", "province", "republic", "of", "kingdom", "people's", "federal"];

/// The jurisdiction named at the start of `rest` ("the State of New York, without regard ..."
/// gives "the State of New York").
fn jurisdiction(rest: &str) -> Option<String> {
    let cut = rest.find([',', ';', ':', '(', '[', ')', '"']).unwrap_or(rest.len());
    // "Victoria, Australia": a place named with its country, where the name alone is no
    // jurisdiction the normaliser knows and the two together are
    let country = rest[cut..].strip_prefix(',').and_then(|r| IN_COUNTRY.find(r)).map(|m| m.as_str().trim());
    let mut rest = &rest[..cut];
    // A period ends it unless it belongs to an abbreviation ("U.S.A.").
    if let Some(p) = rest.find(". ") {
        rest = &rest[..p + 1];
    }
    let tokens: Vec<&str> = rest.split_whitespace().take(12).collect();
    let mut out: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let tok = tokens[i];
        let bare = tok.trim_end_matches('.');
        let lower = bare.to_lowercase();
        let first_upper = bare.chars().next().is_some_and(|c| c.is_uppercase());
        if lower == "and" || lower == "&" {
            // "England and Wales", but not "New York and the United States" / "AND APPLICABLE".
            let next = tokens.get(i + 1).map(|t| t.trim_end_matches('.'));
            let ok = next.is_some_and(|n| {
                let nl = n.to_lowercase();
                n.chars().next().is_some_and(|c| c.is_uppercase())
                    && !GL_STOP.contains(&nl.as_str())
                    && !GL_WEAK.contains(&nl.as_str())
            });
            if !ok {
                break;
            }
            out.push(tok);
            i += 1;
            continue;
        }
        if i == 0 && lower == "the" {
            out.push(tok);
            i += 1;
            continue;
        }
        // "Federal" names a country in "the Federal Republic of Germany".
        let federal_republic = lower == "federal"
            && tokens.get(i + 1).is_some_and(|n| n.trim_end_matches('.').eq_ignore_ascii_case("republic"));
        if GL_STOP.contains(&lower.as_str()) && !federal_republic {
            break;
        }
        let allowed_lower = matches!(
            lower.as_str(),
            "of" | "de" | "du" | "la" | "del" | "da" | "the" | "state" | "commonwealth" | "province" | "republic"
        );
        if !first_upper && !allowed_lower {
            break;
        }
        out.push(tok);
        i += 1;
    }
    // No trailing glue words.
    while let Some(last) = out.last() {
        let l = last.trim_end_matches('.').to_lowercase();
        if matches!(l.as_str(), "of" | "the" | "and" | "&" | "de" | "du" | "la" | "del" | "da") {
            out.pop();
        } else {
            break;
        }
    }
    let meaningful = out.iter().any(|t| {
        let l = t.trim_end_matches('.').to_lowercase();
        !GL_WEAK.contains(&l.as_str()) && l.chars().any(|c| c.is_alphabetic())
    });
    if !meaningful {
        return None;
    }
    let mut s = out.join(" ");
    if let Some(c) = country {
        let known = |t: &str| matches!(normalize(Kind::Jurisdiction, t), Value::Jurisdiction { .. });
        let with_country = format!("{s}, {c}");
        if !known(&s) && known(&with_country) {
            return Some(with_country);
        }
    }
    // Keep a final period only for an abbreviation like "U.S.A.".
    if s.ends_with('.') && !s.trim_end_matches('.').contains('.') {
        s.pop();
    }
    Some(s)
}

/// The words after a comma that may name a place's country ("Australia", "the United Kingdom").
static IN_COUNTRY: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*(?:the\s+)?[A-Z][A-Za-z.]+(?:\s+[A-Z][A-Za-z.]+){0,2}"));

/// Which jurisdiction's law governs: "governed by ... the laws of (the State of) X".
/// The jurisdiction's place taken by a redaction mark: "the laws of the [***]", "the internal laws
/// of the ***".
static GL_WITHHELD: LazyLock<Regex> =
    LazyLock::new(|| re(&format!(r"(?i)^\s*(?:the\s+)?(?:state\s+of\s+)?{WITHHELD}")));

fn governing_law(w: &Work) -> Option<Found> {
    // (strong, position, raw, sentence)
    let mut best: Option<(bool, usize, String, Range<usize>)> = None;
    for (n, m) in GL_LAWS.find_iter(&w.s).enumerate() {
        if n >= 400 {
            break;
        }
        let near = w.slice(m.start().saturating_sub(60), m.start());
        if GL_BAD_BEFORE.is_match(near) {
            continue;
        }
        let sent = w.sentence(m.start(), m.end());
        let text = w.slice(sent.start.max(m.start().saturating_sub(250)), sent.end.min(m.end() + 250));
        if !GL_CONTEXT.is_match(text) {
            continue;
        }
        let rest = w.slice(m.end(), m.end() + 200);
        let Some(mut j) = jurisdiction(rest) else {
            // a governing-law clause whose jurisdiction the filing redacted
            if let Some(mark) = GL_WITHHELD.find(rest).filter(|_| GL_STRONG.is_match(text)) {
                best = Some((true, m.start(), mark.as_str().trim().to_string(), sent));
                break;
            }
            continue;
        };
        // "the laws of the United States and the State of Florida": the state.
        if US_ONLY.is_match(&j) {
            if let Some(and) = rest.get(j.len()..).and_then(|after| AND_STATE.find(after).map(|a| &after[a.end()..])) {
                if let Some(state) = jurisdiction(and).filter(|s| STATE_WORD.is_match(s)) {
                    j = state;
                }
            }
        }
        // "the laws of the United States and, to the extent not inconsistent therewith, by the
        // laws of the Commonwealth of Kentucky": the state, when the same sentence names one.
        if US_ONLY.is_match(&j) {
            let after = w.slice(m.end(), sent.end.min(m.end() + 200));
            if let Some(state) = LAWS_OF_STATE.find(after).and_then(|x| jurisdiction(&after[x.end()..])) {
                j = state;
            }
        }
        let strong = GL_STRONG.is_match(text);
        if strong {
            best = Some((true, m.start(), j, sent));
            break;
        }
        if best.is_none() {
            best = Some((false, m.start(), j, sent));
        }
    }
    if !best.as_ref().is_some_and(|b| b.0) {
        if let Some(c) = GL_THEREOF.captures(&w.s) {
            if let (Some(all), Some(j)) = (c.get(0), c.name("j").and_then(|j| jurisdiction(j.as_str()))) {
                if best.as_ref().is_none_or(|b| all.start() < b.1) {
                    best = Some((true, all.start(), j, w.sentence(all.start(), all.end())));
                }
            }
        }
    }
    if !best.as_ref().is_some_and(|b| b.0) {
        if let Some(c) = GL_ADJ.captures(&w.s) {
            if let (Some(all), Some(j)) = (c.get(0), c.name("j")) {
                let raw = j.as_str().trim().to_string();
                let first = raw.split_whitespace().next().unwrap_or("").to_lowercase();
                let meaningful = raw.split_whitespace().any(|t| {
                    let l = t.to_lowercase();
                    !GL_WEAK.contains(&l.as_str()) && !GL_STOP.contains(&l.as_str())
                });
                if meaningful && !GL_STOP.contains(&first.as_str()) && best.as_ref().is_none_or(|b| all.start() < b.1) {
                    best = Some((true, all.start(), raw, w.sentence(all.start(), all.end())));
                }
            }
        }
    }
    best.map(|(_, _, raw, sent)| w.found(raw, sent))
}

// ---------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    fn get(text: &str, key: &str) -> Option<String> {
        extract(text).get(key).map(|f| f.raw.clone())
    }

    fn evidence(text: &str, key: &str) -> String {
        let f = extract(text).remove(key).expect("field found");
        text.chars().skip(f.evidence.start).take(f.evidence.len()).collect()
    }

    #[test]
    fn all_patterns_compile() {
        let all: Vec<&Regex> = vec![
            &*DATE_RE,
            &*DUR_RE,
            &*TITLE_KEYWORD,
            &*TITLE_SKIP,
            &*TITLE_LEAD,
            &*TITLE_HEADER_ONLY,
            &*TITLE_RUN_ON,
            &*TITLE_PREAMBLE,
            &*PARTY_START,
            &*PARTY_CONTEXT,
            &*PARTY_STOP,
            &*DEFINED_TERM,
            &*QUOTED,
            &*NAME_LEAD,
            &*NAME_CUT,
            &*NAME_TAIL_CUT,
            &*GENERIC_ROLE,
            &*AND_SPLIT,
            &*DESCRIPTION_START,
            &*AND_NAME,
            &*COMMA_NAME,
            &*BETWEEN_ANY,
            &*SPLIT_ORDINAL,
            &*AD_TRIGGER,
            &*ED_EVENT_DEFINED,
            &*ED_EVENT_LABELLED,
            &*ED_EVENT_TERM,
            &*ED_EVENT_REVERSED,
            &*EVENT_CLAUSE_END,
            &*AD_PREFIX,
            &*AD_BAD_PREFIX,
            &*AD_OTHER_AGREEMENT,
            &*AD_DATED_ANY,
            &*AD_LABEL_BAD,
            &*ED_DEFINED,
            &*ED_EFFECTIVE,
            &*ED_COMMENCE,
            &*TERM_OR_AGREEMENT,
            &*ED_SAME_AS_AGREEMENT,
            &*ED_OTHER_PERIOD,
            &*EX_DEFINED,
            &*EX_DATE,
            &*EX_CONTINUE,
            &*EX_TERM_IS,
            &*EX_FOR_TERM,
            &*EX_END_AFTER,
            &*EX_ANNIVERSARY,
            &*EX_WITHHELD,
            &*RN_WITHHELD,
            &*NOTICE_WITHHELD,
            &*GL_WITHHELD,
            &*EX_FORM_TERM,
            &*EX_PERPETUAL,
            &*EX_SENT_OK,
            &*EX_SENT_BAD,
            &*EX_RENEWAL_NEAR,
            &*EX_ANCHOR,
            &*EX_ANCHOR_MORE,
            &*EX_ANCHOR_STOP,
            &*EX_SENT_START,
            &*EFFECTIVE_DATE_WORDS,
            &*RN_DURATION,
            &*RN_YEARLY,
            &*RN_MONTHLY,
            &*RN_YEAR_TO_YEAR_THEREAFTER,
            &*RN_THEREAFTER,
            &*RN_FIRST_TERM,
            &*RN_PERPETUAL,
            &*RN_SAME,
            &*RN_AFTER_END,
            &*RN_GAP_BAD,
            &*RN_AUTO,
            &*RN_TOPIC,
            &*NOTICE_AFTER,
            &*NOTICE_BEFORE,
            &*NOTICE_CONTEXT,
            &*NOTICE_OFF_TOPIC,
            &*NON_RENEWAL,
            &*GL_LAWS,
            &*GL_CONTEXT,
            &*GL_STRONG,
            &*GL_BAD_BEFORE,
            &*GL_ADJ,
            &*GL_THEREOF,
            &*ED_ON_SIGNATURE,
            &*EX_NOT_RENEWAL,
            &*LAWS_OF_STATE,
            &*PARTY_NAME_TAIL,
            &*PARTY_NOT_A_NAME,
            &*PROSE_SENTENCE_END,
            &*AD_OTHER_DOCUMENT,
            &*SIG_DATE_LABEL,
            &*SIG_MARK,
            &*US_ONLY,
            &*AND_STATE,
            &*STATE_WORD,
        ];
        assert!(all.iter().all(|r| !r.as_str().is_empty()));
    }

    #[test]
    fn date_forms() {
        for d in [
            "April 1, 2007",
            "1st day of April, 2007",
            "1 April 2007",
            "04/01/2007",
            "2007-04-01",
            "Sept. 30, 1999",
            "31st March, 1998",
            "2nd day of January 2020",
            "November 1st, 2017",
        ] {
            let m = DATE_RE.find(d).map(|m| m.as_str());
            assert_eq!(m, Some(d), "{d}");
        }
        assert!(DATE_RE.find("Section 10.1 and 2007 results").is_none());
    }

    #[test]
    fn duration_forms() {
        for d in
            ["ninety (90) days", "(6) months", "one-year", "12 calendar months", "thirty-six (36) months", "5 years"]
        {
            assert_eq!(DUR_RE.find(d).map(|m| m.as_str()), Some(d), "{d}");
        }
    }

    // --- document name

    #[test]
    fn title_upper_case_after_exhibit_and_confidential_lines() {
        let text = "EXHIBIT 10.1\nCONFIDENTIAL TREATMENT REQUESTED\n\n  MASTER SERVICES AGREEMENT.\n\nThis Master Services Agreement is made ...";
        assert_eq!(get(text, "document_name").as_deref(), Some("MASTER SERVICES AGREEMENT"));
        assert_eq!(evidence(text, "document_name"), "MASTER SERVICES AGREEMENT.");
    }

    #[test]
    fn title_not_from_a_legend_that_ends_mid_sentence() {
        let text = "THE COMPANY HAS REQUESTED CONFIDENTIAL TREATMENT WITH RESPECT TO CERTAIN PORTIONS OF THIS\n\
                    AGREEMENT ACCORDINGLY,\nCERTAIN PORTIONS HAVE BEEN REDACTED\nExhibit 10.1\nSPONSORSHIP AGREEMENT\n\
                    This agreement (\"Agreement\") is entered into as of the 31st day of March, 1998.";
        assert_eq!(get(text, "document_name").as_deref(), Some("SPONSORSHIP AGREEMENT"));
        // a title line that goes on in the next one is a title
        let text =
            "SCHEDULE TO Software License,\nCustomization and Maintenance Agreement\nSupplier Name: Cardlytics, Inc.";
        assert_eq!(
            get(text, "document_name").as_deref(),
            Some("Software License, Customization and Maintenance Agreement")
        );
    }

    #[test]
    fn title_title_case_and_split_lines() {
        let text = "Exhibit 10.4\nSupply Agreement\nThis Supply Agreement is entered into ...";
        assert_eq!(get(text, "document_name").as_deref(), Some("Supply Agreement"));
        let text = "Page 1 of 12\nSTRATEGIC ALLIANCE\nAGREEMENT\nThis agreement is made ...";
        assert_eq!(get(text, "document_name").as_deref(), Some("STRATEGIC ALLIANCE AGREEMENT"));
        let text = "Exhibit 99.1 Trademark License Agreement\nblah";
        assert_eq!(get(text, "document_name").as_deref(), Some("Trademark License Agreement"));
    }

    #[test]
    fn title_without_the_company_or_a_notice_before_it() {
        let t = "EXHIBIT 10.3\nNETZEE, INC. MAINTENANCE AGREEMENT\nThis Agreement provides for Continued Service.";
        assert_eq!(get(t, "document_name").as_deref(), Some("MAINTENANCE AGREEMENT"));
        let t = "CERTAIN INFORMATION HAS BEEN FILED WITH THE SECURITIES AND EXCHANGE COMMISSION.\nEXCHANGE COMMISSION. SPONSORSHIP AGREEMENT\nThis Sponsorship Agreement is made ...";
        assert_eq!(get(t, "document_name").as_deref(), Some("SPONSORSHIP AGREEMENT"));
        // an amendment names the agreement it amends, company and all
        let t = "AMENDMENT NO. 1 TO ACME CORPORATION SUPPLY AGREEMENT\nThis Amendment is made ...";
        assert_eq!(get(t, "document_name").as_deref(), Some("AMENDMENT NO. 1 TO ACME CORPORATION SUPPLY AGREEMENT"));
        // "AMENDMENT NO. 3" keeps its number
        let t = "AMENDMENT NO. 3 TO THE NONEXCLUSIVE\nVALUE ADDED DISTRIBUTOR AGREEMENT\nThis Amendment ...";
        assert_eq!(
            get(t, "document_name").as_deref(),
            Some("AMENDMENT NO. 3 TO THE NONEXCLUSIVE VALUE ADDED DISTRIBUTOR AGREEMENT")
        );
    }

    #[test]
    fn title_without_the_parties_names() {
        // two parties' names, and a legal name, go with the words that join them
        let t = "E-CENTIVES - EXCITE@HOME CO-BRANDING AGREEMENT\nThis agreement (\"Agreement\") is entered into by and between the At Home Corporation (\"Excite@Home\" or \"Excite\"), located at 450 Broadway, and e-centives, Inc., (\"Application Provider\" or \"e-centives\"), a Delaware corporation.";
        assert_eq!(get(t, "document_name").as_deref(), Some("CO-BRANDING AGREEMENT"));
        let t = "AMENDMENT NO. 3 TO STREMICK\u{2019}S HERITAGE FOODS, LLC and PREMIER NUTRITION CORPORATION MANUFACTURING AGREEMENT\nThis Amendment No. 3 (the \u{201c}Third Amendment\u{201d}), entered into by and between Stremicks Heritage Foods, LLC (\u{201c}Heritage\u{201d}) Premier Nutrition Corporation (\u{201c}Premier\u{201d}) is effective as of July 3, 2019.";
        assert_eq!(get(t, "document_name").as_deref(), Some("AMENDMENT NO. 3 MANUFACTURING AGREEMENT"));
        let t = "Collaboration Agreement, BII/ XENCOR\nThis Collaboration Agreement (\u{201c}Agreement\u{201d}) is made by and among Xencor, Inc. 111 W. Lemon Ave. (hereinafter called \u{201c}XENCOR\u{201d}), and Boehringer Ingelheim International GmbH (hereinafter called \u{201c}BII\u{201d}).";
        assert_eq!(get(t, "document_name").as_deref(), Some("Collaboration Agreement"));
        // a line that is only the parties and a kind of document gives way to the next title line
        let t = "PACIFICAP ENTERTAINMENT Agreement with THE HENRY FILM AND ENTERTAINMENT CORPORATION\nCONTENT LICENSE AGREEMENT\nThis Content License Agreement is between The Henry Film and Entertainment Corporation (\"Henry\") and Pacificap Entertainment Inc. (\"Pacificap\").";
        assert_eq!(get(t, "document_name").as_deref(), Some("CONTENT LICENSE AGREEMENT"));
        // one party by a short name stays ("JACKSONVILLE JAGUARS SPONSORSHIP AGREEMENT")
        let t = "JACKSONVILLE JAGUARS SPONSORSHIP AGREEMENT\nThis Sponsorship Agreement is made by and between Jacksonville Jaguars, LLC (\"Jaguars\") and Acme Corp. (\"Sponsor\").";
        assert_eq!(get(t, "document_name").as_deref(), Some("JACKSONVILLE JAGUARS SPONSORSHIP AGREEMENT"));
        // a role word is no name ("Distributor" of "Distributor Corp.")
        let t = "DISTRIBUTOR AGREEMENT\nThis Agreement is made by and between Distributor Corp. (\"Distributor\") and Acme Inc. (\"Acme\").";
        assert_eq!(get(t, "document_name").as_deref(), Some("DISTRIBUTOR AGREEMENT"));
    }

    #[test]
    fn title_from_preamble_when_no_title_line() {
        let text = "This Distribution Agreement (the \"Agreement\") is made and entered into as of May 1, 2001 by and between Foo Inc. (\"Foo\") and Bar LLC (\"Bar\").";
        assert_eq!(get(text, "document_name").as_deref(), Some("Distribution Agreement"));
        // a heading that only says what kind of document it is gives way to the preamble's name
        let text = format!("AGREEMENT\n{text}");
        assert_eq!(get(&text, "document_name").as_deref(), Some("Distribution Agreement"));
        // and with no name anywhere there is no title (the decoder is asked instead)
        assert_eq!(get("CONTRACT\nThe parties agree as follows.", "document_name"), None);
    }

    // --- parties

    #[test]
    fn parties_by_and_between_with_defined_terms() {
        let text = "LICENSE AGREEMENT\nThis License Agreement (the \u{201c}Agreement\u{201d}) is entered into as of November 2, 2012 by and between BIOCEPT, INC., a California corporation having an address of 5810 Nancy Ridge Drive, Suite 150, San Diego, CA 92121 (\u{201c}Biocept\u{201d}), and LIFE TECHNOLOGIES CORPORATION, a Delaware corporation (\u{201c}Life Technologies\u{201d}).\nWHEREAS, Biocept has developed ...";
        assert_eq!(
            get(text, "parties").as_deref(),
            Some("BIOCEPT, INC. (\"Biocept\"); LIFE TECHNOLOGIES CORPORATION (\"Life Technologies\")")
        );
        let ev = evidence(text, "parties");
        assert!(ev.contains("by and between BIOCEPT") && ev.contains("Life Technologies"), "{ev}");
    }

    #[test]
    fn parties_among_three_with_hereinafter_and_each_party() {
        let text = "JOINT VENTURE AGREEMENT\nThis Agreement is made this 3rd day of March, 2015 among Marv Enterprises, LLC, a Nevada limited liability company (hereinafter referred to as \"Marv\"), Premier Biomedical, Inc. (\"Premier\") and Technology Health, Inc. (the \"THI\" or \"Developer\") (each a \"Party\" and collectively the \"Parties\"). WHEREAS the parties wish ...";
        assert_eq!(
            get(text, "parties").as_deref(),
            Some("Marv Enterprises, LLC (\"Marv\"); Premier Biomedical, Inc. (\"Premier\"); Technology Health, Inc. (\"THI\", \"Developer\")")
        );
    }

    #[test]
    fn parties_drop_sentence_pieces_and_assigns() {
        let t = "This Agreement is made by and between ScanSource, Inc. (\"Distributor\") and Cisco Systems, Inc. (\"Cisco\"), is entered into as of the date last written below (\"Effective Date\").";
        assert_eq!(
            get(t, "parties").as_deref(),
            Some("ScanSource, Inc. (\"Distributor\"); Cisco Systems, Inc. (\"Cisco\")")
        );
        let t = "This Agreement is entered into between Birch First Global Investments Inc. (\"Company\") and Mount Knowledge Holdings Inc. and/or assigns (\"Consultant\").";
        assert_eq!(
            get(t, "parties").as_deref(),
            Some("Birch First Global Investments Inc. (\"Company\"); Mount Knowledge Holdings Inc. (\"Consultant\")")
        );
    }

    #[test]
    fn parties_defined_without_quotes_in_a_numbered_list() {
        let t = "THIS AGREEMENT is made on 1 October 2019 BETWEEN: (1) WPP 2005 LIMITED (registered number 01003653) whose registered office is at Sea Containers, 19 Upper Ground, London SE1 9GL (the Company) (2) JOHN ROGERS (the Executive). IT IS AGREED as follows:";
        assert_eq!(get(t, "parties").as_deref(), Some("WPP 2005 LIMITED (\"Company\"); JOHN ROGERS (\"Executive\")"));
    }

    #[test]
    fn parties_that_are_pieces_of_a_sentence_are_dropped() {
        let list = |names: &[&str]| names.iter().map(|n| (n.to_string(), Vec::new())).collect::<Vec<_>>();
        let got = tidy_parties(list(&[
            "GAINSCO, INC.",
            "Racing organized and operated",
            "amended by the parties on",
            "Conditions, Schedules, and all other documents attached hereto",
            "to residential subscribers of Rogers' digital cable television service on",
            "on behalf of Nationwide Mutual Funds or its surviving entity",
            "certain other services relating to the processing of online inquiries",
            "each of the persons set forth on the signature page hereto",
            "LLC",
        ]));
        assert_eq!(got, list(&["GAINSCO, INC."]));
        // an address after the corporate suffix goes: a room, a street and number, a named house
        let got = tidy_parties(list(&[
            "Dolphin Industries Limited Room 1302 Golden Gate Commercial Bldg 136 Austin Road",
            "Sicap Ltd, Bernstrasse 34",
            "EuroTel Bratislava a.s., Stefanikova 17, PO Box 54",
            "Consolidated Artists Inc., Sommerville House, Phillips Street, St. Helier, Jersey",
            "Boehringer Ingelheim International GmbH Binger Straße 173 55216 Ingelheim Germany",
            "Tigrent Learning UK Limited of Boston House",
        ]));
        assert_eq!(
            got,
            list(&[
                "Dolphin Industries Limited",
                "Sicap Ltd",
                "EuroTel Bratislava a.s.",
                "Consolidated Artists Inc.",
                "Boehringer Ingelheim International GmbH",
                "Tigrent Learning UK Limited"
            ])
        );
        // a general partner that represents the party is not part of its name; a document
        // defined beside the parties is not one
        let t = "THIS AGREEMENT made as of the 30th day of June 1999 BETWEEN: MEDIALINX INTERACTIVE, L.P., represented herein by its general partner MediaLinx Interactive Inc. a corporation (\"MLX\") - and - HEALTHCENTRAL.COM INC., a Delaware corporation (\"HCI\").";
        assert_eq!(
            get(t, "parties").as_deref(),
            Some("MEDIALINX INTERACTIVE, L.P. (\"MLX\"); HEALTHCENTRAL.COM INC. (\"HCI\")")
        );
        let t = "This Agreement is entered into by and between XACCT Technologies, Inc., a Delaware corporation (\"XACCT\") for the Support Services under the software license agreement (\"License Agreement\").";
        assert_eq!(get(t, "parties").as_deref(), Some("XACCT Technologies, Inc. (\"XACCT\")"));
    }

    #[test]
    fn parties_lettered_headings() {
        let t = "Road Transportation Agreement Party A (Shipper): ZTO Express Co., Ltd. Address: Building 1, Shanghai Party B (Carrier): Tonglu Tongze Logistics Ltd. Address: 12 Floor, HSBC Tower Due to the need for logistics business, Party A and Party B enter into this Agreement.";
        assert_eq!(
            get(t, "parties").as_deref(),
            Some("ZTO Express Co., Ltd. (\"Party A\"); Tonglu Tongze Logistics Ltd. (\"Party B\")")
        );
        // a parenthesis that is part of the name stays; a translation goes
        let t = "AGREEMENT Party A: China Online Housing (Hong Kong) Co., Ltd. Address: 8/F Party B: ShenZhen JingWei Communication Co., Ltd.(深圳经纬通信技术有限公司) Registration Address: Tian An";
        assert_eq!(
            get(t, "parties").as_deref(),
            Some("China Online Housing (Hong Kong) Co., Ltd. (\"Party A\"); ShenZhen JingWei Communication Co., Ltd. (\"Party B\")")
        );
    }

    #[test]
    fn parties_whose_quotes_ocr_garbled() {
        let t = "This AGREEMENT (the \u{201c}Agreement\u{2019}) is entered into and effective September 17, 2008 (the \u{201c}Effective Date\u{201d}), by and between World Book, Inc. (\u{201c}World Book\u{2019}), a Delaware corporation with offices at 233 North Michigan Avenue, Chicago, IL 60601, and HSW International, Inc. (\u{201c}HSWI\u{2019}), a Delaware corporation. WHEREAS, World Book owns certain articles.";
        assert_eq!(
            get(t, "parties").as_deref(),
            Some("World Book, Inc. (\"World Book\"); HSW International, Inc. (\"HSWI\")")
        );
        let t = "by and between Bizzingo, Inc., a Nevada corporation with offices at 63 Main Street, Flemington, NJ 08822 (\u{201c}Bizzingo\u{2019}\u{201d}\u{2019}) and Joseph Theismann, an individual whose address is 21495 Ridgetop Circle, Sterling Virginia 20166 (\u{201c}\u{201c}Theismann\u{201d}) (collectively the \u{201c}Parties\u{201d}).";
        assert_eq!(
            get(t, "parties").as_deref(),
            Some("Bizzingo, Inc. (\"Bizzingo\"); Joseph Theismann (\"Theismann\")")
        );
        let w = Work::new("(\u{201c}\u{201c}Theismann\u{201d}) ('Licensee')");
        assert_eq!(w.s, "(\"Theismann\") (\"Licensee\")");
        assert_eq!(w.orig_range(1, 11), 1..12, "the map back to the original follows");
    }

    /// The rules' party list of `text`, as found.
    fn parties_raw_of(text: &str) -> Option<String> {
        extract(text).remove("parties").map(|f| f.raw)
    }

    #[test]
    fn parties_of_a_joint_filing_agreement_from_its_signature_blocks() {
        let t = "Exhibit 99.1\nJOINT FILING AGREEMENT\nThe undersigned hereby agree that the statement on Schedule 13G is filed on behalf of each of the undersigned.\nDATED: April 8, 2020 SCULPTOR CAPITAL LP\n\nBy: /s/ Thomas Sipp\nThomas Sipp\nChief Financial Officer\nSCULPTOR MANAGEMENT, INC. SCULPTOR MANAGEMENT, INC.\nBy: /s/ Thomas Sipp By: /s/ Jane Roe\nChief Financial Officer\nFor D-Beta One GP, LLC\nBy:/s/ Troy J. Rillo, Esq. Date: 4/8/2020\nTroy J. Rillo, Esq.\nDANIEL KRETINSKY\n/s/ Daniel Kretinsky\nTrust\nBy: /s/ Thomas Sipp\n";
        let found = extract(t);
        let p = found.get("parties").expect("parties from the signature blocks");
        assert_eq!(p.raw, "SCULPTOR CAPITAL LP; SCULPTOR MANAGEMENT, INC.; D-Beta One GP, LLC; DANIEL KRETINSKY");
        let ev: String = t.chars().skip(p.evidence.start).take(p.evidence.len()).collect();
        assert!(ev.starts_with("DATED: April 8, 2020 SCULPTOR") && ev.ends_with("DANIEL KRETINSKY"), "{ev:?}");
        // a preamble that names the parties wins over the signature blocks
        let t = "This Agreement is made by and between Acme Inc. (\"Acme\") and Beta LLC (\"Beta\").\nIN WITNESS WHEREOF\nGAMMA CORP.\nBy: /s/ X\nDELTA LTD\nBy: /s/ Y\n";
        assert_eq!(parties_raw_of(t).as_deref(), Some("Acme Inc. (\"Acme\"); Beta LLC (\"Beta\")"));
        // two columns of different names on one line
        let t = "The undersigned agree to the joint filing.\nUBS ONCOLOGY IMPACT FUND L.P. ONCOLOGY IMPACT FUND (CAYMAN) MANAGEMENT L.P.\nBy: Oncology Impact Fund (Cayman) Management L.P, By: MPM Oncology Impact Management LP,\n";
        assert_eq!(
            parties_raw_of(t).as_deref(),
            Some("UBS ONCOLOGY IMPACT FUND L.P.; ONCOLOGY IMPACT FUND (CAYMAN) MANAGEMENT L.P.")
        );
        // one signing entity is no party list
        assert_eq!(parties_raw_of("The undersigned agree.\nGAMMA CORP.\nBy: /s/ X\n"), None);
    }

    #[test]
    fn parties_defined_at_the_top_without_a_between() {
        let t = "Exhibit 10.7\nCONSULTING AGREEMENT\nAduro Biotech, Inc., with a place of business at 740 Heinz Avenue, Berkeley, CA 94710 (\u{201c}Aduro\u{201d}) and IREYA B.V having an address at Staalwijkstraat 16, Leiden, the Netherlands, (\u{201c}Consultant\u{201d}) agree to all terms and conditions of this Consulting Agreement (\u{201c}Agreement\u{201d}) dated June 1, 2020.\n1. Services.";
        assert_eq!(parties_raw_of(t).as_deref(), Some("Aduro Biotech, Inc. (\"Aduro\"); IREYA B.V (\"Consultant\")"));
        let t = "SOFTWARE HOSTING AGREEMENT\nThis Software Hosting Agreement (the \"Agreement\") is entered into and effective as of the later of the two signature dates below (the \"Effective Date\") INKTOMI CORPORATION (\"Inktomi\"), a California corporation, 1900 South Norfolk Street, San Mateo, California 94403, and MICROSOFT CORPORATION (\"Microsoft\"), a Washington corporation. RECITALS";
        assert_eq!(
            parties_raw_of(t).as_deref(),
            Some("INKTOMI CORPORATION (\"Inktomi\"); MICROSOFT CORPORATION (\"Microsoft\")")
        );
    }

    #[test]
    fn parties_defined_by_hereinafter_without_between() {
        let t = "TRANSPORTATION CONTRACT Astana January 31, 2000 PREAMBLE JSC NOC KazakhOil, hereinafter referred to as the \"Company\", in the person of Executive Marketing Director Ms. A. M. Rakhimbekov, acting on the basis of the Power of Attorney (1) 1-13 dated January 3, 2000, on the one side and JSC Karakudukmunay, hereinafter referred to as the \"Principal\" in the person of General Director Mr. N. D. Klinchev, on the other side, have entered into this Transportation Contract.";
        assert_eq!(
            get(t, "parties").as_deref(),
            Some("JSC NOC KazakhOil (\"Company\"); JSC Karakudukmunay (\"Principal\")")
        );
        assert!(evidence(t, "parties").starts_with("JSC NOC KazakhOil, hereinafter"), "{}", evidence(t, "parties"));
        let t = "Outsourcing Contract The Covenanter: The HUANG JIA Country CLUB and Recreation Inc. (hereinafter referred to as Party A) and the Covenanter: Chang Chen- Bin Architects Office (hereinafter referred to as Party B) hereby agree to establish this contract.";
        assert_eq!(
            get(t, "parties").as_deref(),
            Some("The HUANG JIA Country CLUB and Recreation Inc. (\"Party A\"); Chang Chen- Bin Architects Office (\"Party B\")")
        );
        // one party so defined is no list
        assert_eq!(get("Support will be charged per hour. MEDICAL MANAGER, MIDWEST, INC., hereinafter referred to as \"MMMW\", agrees to provide service.", "parties"), None);
    }

    #[test]
    fn parties_capacities_duplicates_and_tails() {
        // "as servicer" is the capacity of the party before; a name given twice is one party once
        // the list is normalised
        let t = "SALE AGREEMENT among VERIZON ABS LLC (\"Depositor\"), Cellco Partnership d/b/a Verizon Wireless (\"Cellco\"), as servicer (\"Servicer\"), and VERIZON ABS LLC (\"Seller\").";
        let raw = get(t, "parties").expect("parties found");
        assert_eq!(
            raw,
            "VERIZON ABS LLC (\"Depositor\"); Cellco Partnership d/b/a Verizon Wireless (\"Cellco\", \"Servicer\"); VERIZON ABS LLC (\"Seller\")"
        );
        let parties = crate::normalize::parse_parties(&raw);
        let named: Vec<(&str, Vec<&str>)> =
            parties.iter().map(|p| (p.name.as_str(), p.roles.iter().map(String::as_str).collect())).collect();
        assert_eq!(
            named,
            [
                ("VERIZON ABS LLC", vec!["Depositor", "Seller"]),
                ("Cellco Partnership d/b/a Verizon Wireless", vec!["Cellco", "Servicer"])
            ]
        );
        // an address run on after the corporate suffix, "on the one hand", a heading's date
        let t = "LICENSE AGREEMENT made by and between Xencor, Inc. 111 W. Lemon Ave. Monrovia, CA 91016 USA (\"XENCOR\"), on the one hand, and on the other hand, Boehringer Ingelheim International GmbH (\"BII\").";
        assert_eq!(
            get(t, "parties").as_deref(),
            Some("Xencor, Inc. (\"XENCOR\"); Boehringer Ingelheim International GmbH (\"BII\")")
        );
        // a recital's sentence after the parties is not a party
        let t = "This Agreement is made between CNET, Inc. (\"CNET\") and Cyberian Outpost, Inc. (\"Company\"). Pursuant to this Agreement, CNET will provide various links (\"Links\").";
        assert_eq!(get(t, "parties").as_deref(), Some("CNET, Inc. (\"CNET\"); Cyberian Outpost, Inc. (\"Company\")"));
    }

    #[test]
    fn parties_across_a_full_stop_and_in_single_quotes() {
        // "Israel." ends the sentence before the first party's defined term
        let t = "This Agreement is effective as of 1.4.2011 by and between: INVASIX LTD., with a principal place of business at Tavor Building, Yokneam 20692, Israel. Hereinafter referred to as \"Customer\" And FLEXTRONICS ISRAEL LTD. with a principal place of business at Migdal Haemek, Israel. Hereinafter referred to as \"Contractor.\" Whereas Customer designs products;";
        assert_eq!(
            get(t, "parties").as_deref(),
            Some("INVASIX LTD. (\"Customer\"); FLEXTRONICS ISRAEL LTD. (\"Contractor\")")
        );
        let t = "This Joint Venture Agreement is made BETWEEN IMPCO Technologies Inc., a company incorporated in Delaware (hereinafter referred to as \u{2018}IMPCO\u{2019}, which term includes its successors) AND MINDA INDUSTRIES LIMITED, a company incorporated in India (hereinafter referred to as \u{2018}MIL\u{2019}).";
        assert_eq!(
            get(t, "parties").as_deref(),
            Some("IMPCO Technologies Inc. (\"IMPCO\"); MINDA INDUSTRIES LIMITED (\"MIL\")")
        );
    }

    #[test]
    fn parties_without_defined_terms() {
        let text = "CONTENT LICENSE AGREEMENT\nThis agreement is made between Watchit Media and Oceanic Time Warner Cable. The parties agree as follows.";
        assert_eq!(get(text, "parties").as_deref(), Some("Watchit Media; Oceanic Time Warner Cable"));
    }

    // --- agreement and effective dates

    #[test]
    fn agreement_date_dated_as_of_and_effective_definition() {
        let text = "This Agreement is dated as of May 5, 1998 (the \"Effective Date\") between A Corp. (\"A\") and B Corp. (\"B\").";
        assert_eq!(get(text, "agreement_date").as_deref(), Some("May 5, 1998"));
        assert_eq!(get(text, "effective_date").as_deref(), Some("May 5, 1998"));
    }

    #[test]
    fn effective_date_defined_with_its_hour_or_for_this_contract() {
        let text = "\"EFFECTIVE DATE\" means 12:01 a.m. Eastern Standard Time on March 3, 2003.";
        assert_eq!(get(text, "effective_date").as_deref(), Some("March 3, 2003"));
        let text = "The commencement date for this contract will be 16th June 2004.";
        assert_eq!(get(text, "effective_date").as_deref(), Some("16th June 2004"));
    }

    #[test]
    fn effective_date_when_the_term_starts_with_the_agreement() {
        let text = "This Agreement is made this 20th day of March 2002 between A Inc. (\"A\") and B LLC (\"B\"). The term of this Agreement shall be three years, commencing on the date of this Agreement.";
        assert_eq!(get(text, "effective_date").as_deref(), Some("20th day of March 2002"));
        let text = "This Agreement is dated February 4, 2005 between A Inc. (\"A\") and B LLC (\"B\"). This Agreement shall become effective as of the day and year first above written.";
        assert_eq!(get(text, "effective_date").as_deref(), Some("February 4, 2005"));
        // a period that begins on the date hereof is not the agreement's
        let text = "This Agreement is dated June 18, 2020 between A Inc. (\"A\") and B LLC (\"B\"). During the period commencing on the date hereof and ending on the 2021 meeting, B shall vote its shares.";
        assert_eq!(get(text, "effective_date"), None);
    }

    #[test]
    fn dates_whose_month_ocr_split() {
        // a scanned page read by OCR: the rules read the date and point at the original text
        let text = "MASTER SERVICES AGREEMENT\n\nThis Agreement is made on J anuary 15, 2026 between\nAcme Corp. (\"Acme\") and Beta LLC (\"Beta\").";
        assert_eq!(get(text, "agreement_date").as_deref(), Some("January 15, 2026"));
        assert!(evidence(text, "agreement_date").contains("made on J anuary 15, 2026"));
        let text = "This Consulting Agreement (\"Agreement\") is entered into this Ist day of September 2016 (\"Effective Date\") by and between A Inc. (\"A\") and B LLC (\"B\").";
        assert_eq!(get(text, "agreement_date").as_deref(), Some("1st day of September 2016"));
        assert!(
            evidence(text, "agreement_date").contains("this Ist day of September 2016"),
            "the evidence is the original"
        );
        let text = "This Lease is dated the 3rd day of Sep tember,  2019 and is effective as of 1 Octo ber 2019.";
        assert_eq!(get(text, "agreement_date").as_deref(), Some("3rd day of September, 2019"));
        assert_eq!(get(text, "effective_date").as_deref(), Some("1 October 2019"));
        // joined only before a day or a year; the map back to the original follows
        let text = "the mar ch 5 and a pril fool, Jun e";
        let w = Work::new(text);
        assert_eq!(w.s, "the march 5 and a pril fool, Jun e");
        assert_eq!(w.orig_range(w.s.find('5').unwrap(), w.s.len()), 11..text.chars().count());
        assert_eq!(w.orig_range(0, w.s.find('5').unwrap()), 0..11);
    }

    #[test]
    fn agreement_date_day_of_form() {
        let text = "THIS CONSULTING AGREEMENT is made and entered into this 2nd day of January 2020, by and between X Ltd. (\"X\") and Y plc (\"Y\").";
        assert_eq!(get(text, "agreement_date").as_deref(), Some("2nd day of January 2020"));
        let ev = evidence(text, "agreement_date");
        assert!(ev.starts_with("THIS CONSULTING AGREEMENT"), "{ev}");
    }

    #[test]
    fn agreement_date_from_signature_lines_is_the_last_signature() {
        let text = "SUPPLY TERMS\nThe parties agree as follows.\nACME Inc. By: /s/ A Name: A Date: 1/19/07\nBETA LLC By: /s/ B Name: B Date: January 22, 2007\nSource: ACME INC, 10-K, 8/22/2019";
        assert_eq!(get(text, "agreement_date").as_deref(), Some("January 22, 2007"));
        let text = "AMENDMENT\nWHEREAS, the parties have previously entered into the Agreement dated January 22, 2007, and\nWHEREAS, they wish to amend it.\nBy: X Date: August 4, 2010";
        assert_eq!(get(text, "agreement_date").as_deref(), Some("August 4, 2010"));
    }

    #[test]
    fn expiration_until_an_event() {
        let cases = [
            ("This Agreement shall become effective on the Effective Date and, unless earlier terminated pursuant to this ARTICLE 13, shall remain in effect on a Product-by-Product and country-by-country basis until the expiration of the Royalty Term applicable to such Product and country (the \"Term\").", "until the expiration of the Royalty Term applicable"),
            ("This Agreement shall become effective as of the Effective Date and shall continue to be in full force and effect for so long as Photronics and DNP, or any of their Affiliates, each remains a Shareholder of the Company.", "for so long as Photronics and DNP"),
            ("Party A and Party B agree that the term of cooperation under this Agreement shall commence from the execution date hereof and end on the expiration date of the operation term of Party B (\"Term of Cooperation\").", "until the expiration date of the operation term of Party B"),
            ("This Agreement will be effective on the Effective Date and ending on the expiration and/or termination of all Service Option Attachments, unless the Agreement is terminated earlier.", "until the expiration and/or termination of all Service Option Attachments"),
            // "be in effect ... until", and the events contracts name without a usual head word
            ("Unless earlier terminated in accordance with Section 4.2 or 4.3, this Agreement will be in effect from the Effective Date until completion of the Research Program.", "until completion of the Research Program"),
            ("This term of this Agreement shall commence on the EFFECTIVE DATE and shall continue, in each country, until the date of expiration of the last to expire patent.", "until the date of expiration of the last to expire patent"),
            ("The term of this Agreement shall begin as of the Effective Date and continue until Acceptance of all Deliverables for Milestones #1 and #2.", "until Acceptance of all Deliverables"),
            ("The term of this Agreement shall commence with the first race of the 1998 season and shall continue until the final race of the year-2000 season.", "until the final race"),
            // the life of another agreement or thing
            ("This Agreement shall commence on the Effective Date and, shall continue for the duration of the Lease, unless terminated earlier pursuant to Section 3.2 or 3.3.", "for the duration of the Lease"),
            ("This Agreement comes into force as of the Effective Date and shall remain valid during the term of the LSA.", "during the term of the LSA"),
            ("The Term of this Agreement will commence on the Effective Date and shall continue for the time periods set forth in Schedules 1 and 2 unless sooner terminated.", "for the time periods set forth in Schedules 1 and 2"),
            // the event is not judged as a clause: a "Warranty Period" is no warranty clause
            ("This Agreement shall become effective as of the Effective Date and, unless otherwise terminated in accordance with Section 4, will continue until the expiration of the Warranty Period as defined in subsection 9(a).", "until the expiration of the Warranty Period"),
        ];
        for (text, want) in cases {
            let got = get(text, "expiration_date").unwrap_or_default();
            assert!(got.starts_with(want), "{text}\n got {got:?}");
        }
        for text in [
            // the agreement's own end says nothing
            "This Agreement shall continue in full force and effect until the expiration date of this Agreement, in its then current form.",
            "The confidentiality obligations shall remain in effect for the duration of this Agreement.",
            "This Agreement shall remain in full force and effect during the term of this Agreement and any renewal.",
            // a party's right to end it is not its term
            "Either party may terminate upon the occurrence of an Event of Default under this Agreement.",
        ] {
            assert_eq!(get(text, "expiration_date"), None, "{text}");
        }
    }

    #[test]
    fn expiration_forms_concluding_ending_have_a_term_and_perpetual() {
        let text = "The term of this Agreement (the \"Term\") shall commence on the Effective Date and conclude on October 31, 2010, unless renewed by agreement.";
        assert_eq!(get(text, "expiration_date").as_deref(), Some("October 31, 2010"));
        let text = "The initial term of this Agreement shall be for a period beginning on the Effective Date and ending ten (10) years thereafter unless this Agreement is terminated earlier.";
        assert_eq!(get(text, "expiration_date").as_deref(), Some("ten (10) years from the Effective Date"));
        let text = "This Agreement shall have a term of four (4) years from the effective date first set forth above.";
        assert_eq!(get(text, "expiration_date").as_deref(), Some("four (4) years from the effective date"));
        let text = "This Agreement shall commence on the Effective Date and shall remain in full force and effect until one (1) year subsequent to the Effective Date.";
        assert_eq!(get(text, "expiration_date").as_deref(), Some("one (1) year from the Effective Date"));
        let text = "The initial term of this Agreement commences on the Effective Date and will continue in effect until five (5) year(s) from such date.";
        assert_eq!(get(text, "expiration_date").as_deref(), Some("five (5) year(s) from such date"));
        for text in [
            "This Agreement will become effective as of the date first written above and will continue in effect thereafter until terminated pursuant to Paragraph 4.2 below.",
            "\"Term\" means the period of time commencing on the Effective Date and continuing thereafter indefinitely until this Agreement is terminated.",
            "The licence shall become effective upon execution of this AGREEMENT and shall endure indefinitely unless terminated under clause 6.",
            "Your employment under this agreement shall commence on 26 September 2019 and shall continue unless and until either party gives notice to the other.",
        ] {
            assert_eq!(get(text, "expiration_date").as_deref(), Some("perpetual"), "{text}");
        }
    }

    #[test]
    fn effective_date_on_the_last_signature_and_on_the_agreements_date() {
        let head = "This Agreement is made as of March 3, 2003 between A Inc. (\"A\") and B LLC (\"B\"). ";
        for tail in [
            "\"Effective Date\" means the date of last signature on this Agreement.",
            "\"Effective Date\" is the date of the most recent final signature on this Agreement.",
            "This Agreement shall enter into effect on the date it is signed by both parties as shown below.",
            "This Agreement shall be effective on the later of the dates that it is executed by A and B.",
            "The term of this Agreement (the \"Term\") will begin on the date hereof (the \"Commencement Date\").",
            "This agreement commences upon execution of this document.",
            "Commencement Date means the date of this Agreement.",
            "The \"Term\" shall begin on the date hereof and shall expire December 31, 2023.",
        ] {
            assert_eq!(get(&format!("{head}{tail}"), "effective_date").as_deref(), Some("March 3, 2003"), "{tail}");
        }
        // a period that is not the agreement's term still does not date it
        let text = format!("{head}During the period commencing on the date hereof, B shall vote its shares.");
        assert_eq!(get(&text, "effective_date"), None);
    }

    #[test]
    fn a_form_of_line_above_the_title_belongs_to_it() {
        let text = "Exhibit 2.7\nFORM OF\nTRADEMARK LICENSE AGREEMENT\nTHIS TRADEMARK LICENSE AGREEMENT (this \"Agreement\") is made between A Inc. (\"A\") and B Corp. (\"B\").";
        assert_eq!(get(text, "document_name").as_deref(), Some("FORM OF TRADEMARK LICENSE AGREEMENT"));
        let text = "Exhibit 10.4\nFORM OF TRANSFER AND SERVICING AGREEMENT\namong\nX TRUST";
        assert_eq!(get(text, "document_name").as_deref(), Some("FORM OF TRANSFER AND SERVICING AGREEMENT"));
    }

    #[test]
    fn a_date_whose_blank_the_text_lost() {
        let text = "BUSINESS DEVELOPMENT AGREEMENT THIS BUSINESS DEVELOPMENT AGREEMENT (the \"Agreement\") is effective as of , 2020 (the \"Effective Date\"), by and between A, INC. (\"A\") and B, LLC (\"B\").";
        assert_eq!(get(text, "agreement_date").as_deref(), Some("effective as of , 2020"));
        assert_eq!(get(text, "effective_date").as_deref(), Some("effective as of , 2020"));
        let year = crate::normalize::normalize(crate::Kind::Date, "effective as of , 2020");
        assert_eq!(year, crate::normalize::Value::PartialDate { year: 2020, month: None });
        let text = "Strategic Alliance Agreement AGREEMENT made as of  , 2013, between A Corporation (\"A\"), and B Corp. (\"B\").";
        assert_eq!(get(text, "agreement_date").as_deref(), Some("made as of , 2013"));
        // a year after a comma that no blank explains is no date
        let text = "This Agreement is made between A and B, effective upon signature. Revised in Austin, 2013.";
        assert_eq!(get(text, "agreement_date"), None);
        // another agreement's date is not this one's
        let text = "This Amendment amends the Supply Agreement dated as of , 2013 between A and B.";
        assert_eq!(get(text, "agreement_date"), None);
    }

    #[test]
    fn agreement_date_left_blank_in_a_template() {
        let text = "This TRADEMARK LICENSE AGREEMENT (this \"Agreement\") is made and effective as of [ ] day of [ ], 2020 (\"Effective Date\"), by and between A LLC and B Inc.";
        assert_eq!(get(text, "agreement_date").as_deref(), Some("[ ] day of [ ], 2020"));
        let text = "THIS AGREEMENT is effective as of the [·] day of [·], 2019 between A and B.";
        assert_eq!(get(text, "agreement_date").as_deref(), Some("[·] day of [·], 2019"));
    }

    #[test]
    fn a_date_left_without_its_year() {
        let unfilled = |raw: &str| crate::normalize::normalize(crate::Kind::Date, raw);
        let blank = crate::normalize::Value::UnfilledDate { month: None, day: None };
        let text = "THIS NON-COMPETITION AGREEMENT (\"Agreement\") is made this _____ day of _________, 20___, by and between ______ (the \"Franchisee\") and ______ (the \"Member\").";
        assert_eq!(get(text, "agreement_date").as_deref(), Some("_____ day of _________, 20___"));
        let text = "SERVICING AGREEMENT Agreement, made as of this day of , 20 between Alpha Fund LLC (\"Alpha\") and Beta Insurance Company.";
        assert_eq!(get(text, "agreement_date").map(|r| unfilled(&r)), Some(blank.clone()));
        for (text, raw) in [
            ("This Distributor Agreement (the 'Agreement') dated [*] is between Lucid Inc. and [*] ('Distributor').", "[*]"),
            ("This Service Agreement (this \"Agreement\") is entered into as of [Date] in Beijing, China, by and between: Party A.", "[Date]"),
            ("THIS DISTRIBUTORSHIP AGREEMENT (the \"Agreement\") is entered into and made effective as of ____________ (the \"Effective Date\"), by and between A AG and B.", "____________"),
        ] {
            assert_eq!(get(text, "agreement_date").as_deref(), Some(raw), "{text}");
        }
        assert_eq!(get("THIS DISTRIBUTORSHIP AGREEMENT is made effective as of ____________ (the \"Effective Date\") by A and B.", "effective_date").as_deref(), Some("____________"));
        // a day and a month with no year after them, as the preamble writes them
        let text = "CONSULTING AGREEMENT THIS AGREEMENT made this 30th day of April (the \"Effective Date\") between Slinger Bag Inc. (the \"Company\") and A. Person (the \"Consultant\").";
        assert_eq!(get(text, "agreement_date").as_deref(), Some("30th day of April"));
        assert_eq!(get(text, "effective_date").as_deref(), Some("30th day of April"));
        assert_eq!(
            unfilled("30th day of April"),
            crate::normalize::Value::UnfilledDate { month: Some(4), day: Some(30) }
        );
        // at the end, where the parties were to sign
        let text = "AFFILIATE OFFICE AGREEMENT THIS AGREEMENT is entered into by and between A, INC. and B, Inc. EXECUTED this ________ day of ______________________, in the year ____________. By: ______";
        assert_eq!(get(text, "agreement_date").map(|r| unfilled(&r)), Some(blank));
        // a blank filled in without a space
        let text = "THIS EXCLUSIVE DISTRIBUTOR AGREEMENT (the \"Agreement\") shall be effective as of _Dec. 8, 2005 (hereinafter \"Effective Date\"), by and between A, Inc. and B Ltd.";
        assert_eq!(get(text, "agreement_date").as_deref(), Some("Dec. 8, 2005"));
        assert_eq!(get(text, "effective_date").as_deref(), Some("Dec. 8, 2005"));
        // a written date first in the preamble wins; a blank party name is no date; another
        // document's blank is not this one's
        let text = "This Agreement is dated as of March 3, 2003 between A Inc. and ____________ (the \"Distributor\"), made this ____ day of ______, 20__.";
        assert_eq!(get(text, "agreement_date").as_deref(), Some("March 3, 2003"));
        let text = "This Agreement is made by and between A Corp. and ____________ (the \"Distributor\"), a corporation organized under the laws of ______ (\"State\").";
        assert_eq!(get(text, "agreement_date"), None);
        let text = "This Amendment amends the Supply Agreement dated as of ________ (the \"Supply Agreement\") between A and B.";
        assert_eq!(get(text, "agreement_date"), None);
    }

    #[test]
    fn agreement_date_entered_into_on_and_date_line() {
        let text = "This Agreement is made on 1 April 2007 between Alpha GmbH and Beta S.A.";
        assert_eq!(get(text, "agreement_date").as_deref(), Some("1 April 2007"));
        let text = "PURCHASE ORDER TERMS\nSupplier: Alpha\nDate: 04/01/2007\nThe supplier shall deliver.";
        assert_eq!(get(text, "agreement_date").as_deref(), Some("04/01/2007"));
    }

    #[test]
    fn agreement_date_from_a_signature_blocks_date_labels() {
        let t = "Terms of the sponsorship follow. IN WITNESS WHEREOF, the Parties execute this Agreement. /s/ Geno Auriemma 5/17/12 GENO AURIEMMA Date BERKSHIRE BANK By: /s/ Sean A. Gray 5/14/12 Sean A. Gray Date";
        assert_eq!(get(t, "agreement_date").as_deref(), Some("5/17/12"));
        // An approval date elsewhere is not a signature date.
        let t = "The plan was approved. Final Approval Date: 5/1/2013. Nothing was signed.";
        assert_eq!(get(t, "agreement_date"), None);
    }

    #[test]
    fn agreement_date_from_the_heading_and_odd_forms() {
        let t = "AGENCY AGREEMENT May 21, 2015 Tribute Pharmaceuticals Canada Inc. Dear Mr. Harris: The undersigned agree as follows.";
        assert_eq!(get(t, "agreement_date").as_deref(), Some("May 21, 2015"));
        let t = "This ENDORSEMENT AGREEMENT (the \"Agreement\") is made this 1st day of --- November, 2003 by and between A and B.";
        assert_eq!(get(t, "agreement_date").as_deref(), Some("1st day of --- November, 2003"));
        let t = "THIS MANUFACTURING AGREEMENT (the \"Agreement\") is made this first day of July, 2017 between A LLC and B Corp.";
        assert_eq!(get(t, "agreement_date").as_deref(), Some("first day of July, 2017"));
    }

    #[test]
    fn a_date_glued_to_the_word_before_it() {
        let t = "DISTRIBUTOR AGREEMENT THIS DISTRIBUTOR AGREEMENT (this \"Agreement\") is made and effective as of1 August 2019, by and between, A LLC (\"Company\") and B Inc. (\"Distributor\").";
        assert_eq!(get(t, "agreement_date").as_deref(), Some("1 August 2019"));
    }

    #[test]
    fn a_letter_agreement_is_dated_by_its_date_line() {
        let body = " Ladies and Gentlemen: The Company will offer its common stock to depositors of the Association as of March 31, 1995 (\"Eligible Account Holders\").";
        for (line, date) in [
            ("REMARKETING AGREEMENT February 15, 2011 Barclays Capital Inc. 745 Seventh Avenue New York, NY 10019", "February 15, 2011"),
            ("AGENCY AGREEMENT ____________, 1996 Capital Resources, Inc. 1701 K Street, N.W. Washington, D.C. 20006", "____________, 1996"),
            ("AGENCY AGREEMENT November ___, 2006 SANDLER O'NEILL & PARTNERS, L.P. 919 Third Avenue New York", "November ___, 2006"),
            ("EL BANCO FINANCIAL CORPORATION AGENCY AGREEMENT , 2006", "2006"),
        ] {
            assert_eq!(get(&format!("{line}{body}"), "agreement_date").as_deref(), Some(date), "{line}");
        }
        let year = crate::normalize::normalize(crate::Kind::Date, "2006");
        assert_eq!(year, crate::normalize::Value::PartialDate { year: 2006, month: None });
    }

    #[test]
    fn agreement_date_skips_another_documents_date() {
        let t = "This Agreement is between A and B. 6.1 The parties agree that this section is long enough to leave the heading behind, because the heading of a contract is only its first few hundred characters, and a date in a clause of the body is not read as the date of the heading at all. 6.2 The parties agree that all terms of that certain Microsoft Corporation Non-Disclosure Agreement between them dated March 18, 1997, shall govern.";
        assert_eq!(get(t, "agreement_date"), None);
        let t = "This Agreement is between A and B. 6.1 The parties agree that this section is long enough to leave the heading behind, because the heading of a contract is only its first few hundred characters. 6.2 This Agreement shall be governed by the laws of the Netherlands, excluding the United Nations Convention on Contracts for the International Sale of Goods dated 11 April 1980 (CISG).";
        assert_eq!(get(t, "agreement_date"), None);
    }

    #[test]
    fn agreement_date_skips_the_amended_agreements_date() {
        let text = "FIRST AMENDMENT\nThis First Amendment to the Supply Agreement dated April 1, 2017 between Cerus Corporation and Fenwal, Inc. is made as of June 22, 2018.";
        assert_eq!(get(text, "agreement_date").as_deref(), Some("June 22, 2018"));
        let text = "WHEREAS, the parties have previously entered into the Agreement dated January 22, 2007. This Amendment is dated August 4, 2010.";
        assert_eq!(get(text, "agreement_date").as_deref(), Some("August 4, 2010"));
    }

    #[test]
    fn agreement_date_skips_the_dates_of_agreements_and_notes_a_recital_names() {
        // a recital's agreement ("entered into a … Agreement dated") and a promissory note are
        // other documents; the signature line dates this one
        let text = "ENDORSEMENT AGREEMENT WHEREAS, A Inc. and the Trust entered into a Split Dollar Agreement, dated as of December 5, 1995 (the \"Split Dollar Agreement\"); and WHEREAS, the loans are represented by a Demand Note, dated December 5, 1995, between A Inc. and the Trust. IN WITNESS WHEREOF, the parties hereto have executed this Agreement as of this 4th day of April, 2003.";
        assert_eq!(get(text, "agreement_date").as_deref(), Some("4th day of April, 2003"));
        let text = "WHEREAS, A and B have entered into an Option Agreement dated June 28, 2011 relating to the product. This Collaboration Agreement is dated February 10, 2012.";
        assert_eq!(get(text, "agreement_date").as_deref(), Some("February 10, 2012"));
    }

    #[test]
    fn effective_date_defined_by_an_event() {
        let head = "DISTRIBUTION AGREEMENT between A Inc. (\"A\") and B LLC (\"B\"). ";
        for (tail, event) in [
            (
                "\u{201c}Effective Date\u{201d} means the Closing Date as set forth in the Share Purchase Agreement.",
                "the Closing Date as set forth in the Share Purchase Agreement",
            ),
            (
                "Effective Date shall be the date of the last signature on the last page of this Agreement.",
                "the date of the last signature on the last page of this Agreement",
            ),
            (
                "The term of this Agreement (\"Term\") will begin on the date this Agreement is signed by the last signatory (\"Effective Date\") and remain in effect for two years.",
                "the date this Agreement is signed by the last signatory",
            ),
            (
                "The term of this Agreement will commence on the date that the Affiliate Registration Form is approved by A and will end when terminated by either party.",
                "the date that the Affiliate Registration Form is approved by A",
            ),
            ("This Agreement shall become effective on the date of its execution and shall remain in force for three years.", "the date of its execution"),
        ] {
            let text = format!("{head}{tail}");
            assert_eq!(get(&text, "effective_date").as_deref(), Some(event), "{tail}");
            assert!(evidence(&text, "effective_date").contains(event), "{tail}");
            // an event dates no making: the agreement date stays unknown
            assert_eq!(get(&text, "agreement_date"), None, "{tail}");
        }
        // a written date wins, and the agreement's own date is no event
        let text = format!("{head}\"Effective Date\" means the date of the last signature, March 3, 2003.");
        assert_eq!(get(&text, "effective_date").as_deref(), Some("March 3, 2003"));
        let text = format!("{head}\"Effective Date\" means the date first above written.");
        assert_eq!(get(&text, "effective_date"), None);
    }

    #[test]
    fn effective_date_separate_from_agreement_date() {
        let text = "This Agreement is made on March 1, 2018 between A Inc. and B Inc. 1. Term. This Agreement shall commence on March 15, 2018 and will expire on March 14, 2020 unless terminated earlier.";
        assert_eq!(get(text, "agreement_date").as_deref(), Some("March 1, 2018"));
        assert_eq!(get(text, "effective_date").as_deref(), Some("March 15, 2018"));
        assert_eq!(get(text, "expiration_date").as_deref(), Some("March 14, 2020"));
    }

    #[test]
    fn effective_date_not_of_an_ending_or_a_fiscal_year() {
        let t = "This Agreement is made on March 1, 2018 between A Inc. and B Inc. Acme may terminate this Agreement, effective as of December 31, 2023, on notice. The Term shall commence effective as of April 2, 2018.";
        assert_eq!(get(t, "effective_date").as_deref(), Some("April 2, 2018"));
        let t = "This Agreement is made on March 1, 2018 between A Inc. and B Inc. This Agreement, unless sooner terminated, shall be effective as of April 2, 2018.";
        assert_eq!(get(t, "effective_date").as_deref(), Some("April 2, 2018"));
        let t = "This Agreement is made on March 1, 1999 between A Inc. and B Inc. Royalties are due on the first day of each fiscal quarter during the term hereof, commencing with the Licensee's fiscal year which begins on April 1, 1999.";
        assert_ne!(get(t, "effective_date").as_deref(), Some("April 1, 1999"));
    }

    #[test]
    fn effective_date_with_a_stray_year_and_a_plural_label() {
        let t = "This Agreement is entered into as of 12-23-2019 , 2019 (the \"Effective Date\"). WHEREAS the parties agree.";
        assert_eq!(get(t, "effective_date").as_deref(), Some("12-23-2019"));
        let t = "Content and License Agreement Effective Dates: September 1, 2006, August 31, 2007. Watchit agrees to provide content.";
        assert_eq!(get(t, "effective_date").as_deref(), Some("September 1, 2006"));
    }

    #[test]
    fn effective_date_on_signature_as_from_and_upon() {
        let t = "B. Term This Agreement is effective as of the last date signed below (\"Effective Date\"). The initial term is one year. IN WITNESS WHEREOF the parties sign. Signature /s/ Andrew Zhang Date 13/07/05 Signature /s/ Corinne Fallacaro Date 13/07/05";
        assert_eq!(get(t, "effective_date").as_deref(), Some("13/07/05"));
        // the latest date of the signature block, whatever words tie the start to it
        let block = " IN WITNESS WHEREOF the parties sign. BY: /s/ Jane Roe BY: /s/ John Doe Date: August 07, 2018 Date: August 08, 2018 Name: Jane Roe";
        for term in [
            "6.1 The term of this Agreement (\"Term\") will begin on the date this Agreement is signed by the last signatory (\"Effective Date\") and remain in effect for two years.",
            "(c) This Agreement shall be effective on the date of signed acceptance (\"Effective Date\") by MMMW.",
            "This Services Agreement is entered into as of the date noted below (the \"Effective Date\") between A, Inc. (\"Company\") and B, Inc. (\"Customer\").",
            "IN WITNESS WHEREOF, each party hereto has caused this agreement to be executed and effective as of the date set forth below.",
            "This Agreement is made and entered into as of the latest date referenced on the signature page below (the \"Effective Date\"), by and between A, LLC (\"Owner\") and B, Inc.",
            "INTENDING TO BE LEGALLY BOUND, the parties have signed this Agreement effective as of the latest date set forth below.",
        ] {
            assert_eq!(get(&format!("{term}{block}"), "effective_date").as_deref(), Some("August 08, 2018"), "{term}");
        }
        // a date set forth below that is not the agreement's start: no effective date from it
        let t = format!("The Customer shall pay the fees on the date set forth below.{block}");
        assert_eq!(get(&t, "effective_date"), None);
        let t = "13.1. The present Agreement is effective as from 1 January 2009. It is established by calendar year.";
        assert_eq!(get(t, "effective_date").as_deref(), Some("1 January 2009"));
        let t = "The term of this Agreement for the Hosted Site shall commence upon April 1, 1999 and shall continue for one year.";
        assert_eq!(get(t, "effective_date").as_deref(), Some("April 1, 1999"));
    }

    #[test]
    fn effective_date_means_and_colon_forms() {
        let text = "1.5 \"Effective Date\" means January 1, 2019. 1.6 \"Territory\" means the world.";
        assert_eq!(get(text, "effective_date").as_deref(), Some("January 1, 2019"));
        let text = "Effective Date: 2019-01-01\nCustomer: Foo";
        assert_eq!(get(text, "effective_date").as_deref(), Some("2019-01-01"));
        let text = "This Amendment shall be effective as of July 1, 2010. All other terms remain.";
        assert_eq!(get(text, "effective_date").as_deref(), Some("July 1, 2010"));
    }

    #[test]
    fn effective_date_refers_to_agreement_date() {
        let text = "This Agreement is made on June 8, 2010 between A Inc. and B Inc. \"Effective Date\" means the date first above written.";
        assert_eq!(get(text, "effective_date").as_deref(), Some("June 8, 2010"));
        let ev = evidence(text, "effective_date");
        assert!(ev.contains("means the date first above written"), "{ev}");
    }

    // --- expiration

    #[test]
    fn expiration_duration_from_effective_date() {
        let text = "2. Term. The term of this Agreement shall be five (5) years from the Effective Date, unless earlier terminated.";
        assert_eq!(get(text, "expiration_date").as_deref(), Some("five (5) years from the Effective Date"));
        let text = "The initial term of this Agreement shall commence on the Effective Date, and shall continue thereafter for a period of twelve (12) months (the \"Initial Term\").";
        assert_eq!(get(text, "expiration_date").as_deref(), Some("twelve (12) months from the Effective Date"));
    }

    #[test]
    fn expiration_lengths_and_events_as_contracts_write_them() {
        let text = "Unless terminated in accordance with Section 10.2, the term of this Agreement shall commence on the Effective Date and shall continue in effect for a FIVE (5) year period.";
        assert_eq!(get(text, "expiration_date").as_deref(), Some("FIVE (5) year from the Effective Date"));
        let text = "The initial term of this Agreement commences as of the Effective Date and, unless terminated earlier, shall continue until five (5) years following the Effective Date (the \"Initial Term\").";
        assert_eq!(get(text, "expiration_date").as_deref(), Some("five (5) years following the Effective Date"));
        let text = "The term of this Agreement commences on the Effective Date and shall continue in effect until the later of (a) the fourth (4th) anniversary of the Effective Date, or (b) the completion of the Research.";
        assert_eq!(get(text, "expiration_date").as_deref(), Some("the fourth (4th) anniversary of the Effective Date"));
        // no date or length: the event the term runs until, as text
        let text = "The term of this Agreement shall commence upon the Effective Date and shall continue in full force and effect until the expiration of Sanofi's payment obligations under Article VIII.";
        assert_eq!(
            get(text, "expiration_date").as_deref(),
            Some("until the expiration of Sanofi's payment obligations under Article VIII")
        );
    }

    #[test]
    fn expiration_in_term_definitions_labels_and_numbered_sections() {
        let cases = [
            // a definition of the term holds whatever else its sentence says ("period commencing")
            ("\"Contract Period\" shall mean that period of time commencing on January 1, 2000 and concluding December 31, 2003, unless terminated sooner as provided herein.", "December 31, 2003"),
            ("\"Service Period\" means April 1, 2019 through to March 30, 2020.", "March 30, 2020"),
            // a month's name with a full stop before its day ends no sentence
            ("\"Service Period\" means April. 1st 2019 through to March 30, 2020.", "March 30, 2020"),
            ("The term of this Agreement will begin on December 15, 1997 and will end the later of (i) December 15, 1999 or (ii) Excite's delivery of all of the guaranteed Click-throughs.", "December 15, 1999"),
            ("The Joint Venture shall commence on the 1st of March, 2003, and shall be effective until February 28, 2004 unless extended by written agreement of the Joint Venturers.", "February 28, 2004"),
            // lengths as contracts write them
            ("Subject to the provisions for termination hereinafter provided, the term of this Agreement shall commence on the date hereof (the \"Effective Date\") and shall continue for a minimum period of 12 months.", "12 months from the date hereof"),
            ("Hydron agrees that this Agreement shall continue for the entire four (4) year term unless earlier terminated.", "four (4) year"),
            ("The initial term of the contracted agreement is 5 years from the commencement date.", "5 years from the commencement date"),
            ("Term: twelve (12) months from the date of the Agreement which term shall automatically renew.", "twelve (12) months from the date of the Agreement"),
            // the length itself is no clause about contract years
            ("This Agreement shall commence on the \"Effective Date\" and shall continue for ten (10) Contract Years, unless terminated in accordance with the provisions of Section 6.", "ten (10) Contract Years from the Effective Date"),
            // a numbered section after a colon starts its own sentence: the recitals' "warranties"
            // before it say nothing about the term
            ("In reliance upon the representations, warranties, covenants and agreements contained herein, the Parties agree under the following terms and conditions: 1. Term The term of this Agreement shall be one (1) year unless terminated earlier in accordance with the terms of this Agreement (the \"Term\").", "one (1) year"),
        ];
        for (text, want) in cases {
            assert_eq!(get(text, "expiration_date").as_deref(), Some(want), "{text}");
        }
        // a period of something else than the term
        for text in [
            "If performance of the obligations by any Party under this Contract have been delayed for a period of 3 months, the other Party shall be entitled to terminate this Contract.",
            "Transporter may require a settlement at any time after Shipper has ceased making movements under this Agreement for a period of six months.",
        ] {
            assert_eq!(get(text, "expiration_date"), None, "{text}");
        }
    }

    #[test]
    fn expiration_until_date_and_anniversary_and_perpetual() {
        let text = "The duration of this Venture (the \"Term\") will begin on March 1, 2020 and continue in full force and effect until February 28, 2025 or as otherwise provided.";
        assert_eq!(get(text, "expiration_date").as_deref(), Some("February 28, 2025"));
        let text = "This Agreement becomes effective on the Effective Date and shall continue until the five (5) year anniversary of the Effective Date (the \"Initial Term\").";
        assert_eq!(
            get(text, "expiration_date").as_deref(),
            Some("the five (5) year anniversary of the Effective Date")
        );
        let text = "The term of this Agreement shall commence on the Effective Date and shall continue until terminated as hereinafter provided.";
        assert_eq!(get(text, "expiration_date").as_deref(), Some("perpetual"));
    }

    #[test]
    fn expiration_date_after_unless_extended_and_hereby_extended() {
        let t = "The Term shall commence on the date of this Agreement and, unless earlier terminated or extended as provided below, shall end as of December 31, 2000.";
        assert_eq!(get(t, "expiration_date").as_deref(), Some("December 31, 2000"));
        let t = "The Term of the Agreement is hereby extended to January 20, 2012 unless sooner terminated as provided for in the Agreement.";
        assert_eq!(get(t, "expiration_date").as_deref(), Some("January 20, 2012"));
        // A renewal's end is still not the expiration.
        let t = "This Agreement shall automatically renew for one year until December 31, 2012.";
        assert_eq!(get(t, "expiration_date"), None);
    }

    #[test]
    fn expiration_date_stated_beside_the_terms_length_wins() {
        let t = "Except as otherwise provided herein, this Agreement shall commence effective June 1, 1998, and shall continue for a term of three (3) years expiring May 31, 2001 (the \"Term\").";
        assert_eq!(get(t, "expiration_date").as_deref(), Some("May 31, 2001"));
    }

    #[test]
    fn expiration_withheld_by_the_filing_or_left_blank() {
        let cases = [
            ("The term of this Agreement (\"Term\") will begin on the date this Agreement is signed by the last signatory (\"Effective Date\") and remain in effect for [***]; provided, however, that the terms of this Agreement shall remain applicable to any SOW.", "[***] from the Effective Date"),
            ("The Agreement shall commence on the Effective Date and remain in full force and effect for an initial term of **** from the Supply Commencement Date of the Product (\"Initial Term\").", "**** from the Supply Commencement Date of the Product"),
            ("This Agreement shall commence on the Effective Date and, unless earlier terminated, shall continue in full force and effect for a period of [***] years thereafter.", "[***] years from the Effective Date"),
            ("This Agreement shall commence on the Effective Date and shall be valid until the [* * *] (the \"Initial Term\").", "[* * *] from the Effective Date"),
            ("The term of this Agreement shall extend from the date of execution hereof through and until _______, unless extended by written agreement of the parties.", "_______"),
        ];
        for (text, want) in cases {
            assert_eq!(get(text, "expiration_date").as_deref(), Some(want), "{text}");
            // an end the copy leaves out: a blank date, not "none"
            assert_eq!(normalize(crate::Kind::EndDate, want), Value::UnfilledDate { month: None, day: None }, "{want}");
        }
        // the blank term of a form attached to the agreement is not the agreement's
        let text = "EXHIBIT A. The term of this Statement of Work will begin on ___________ and shall terminate on ____________.";
        assert_eq!(get(text, "expiration_date"), None);
    }

    #[test]
    fn expiration_sooner_of_a_length_and_lengths_counted_from_a_day() {
        let cases = [
            ("The initial term of this Agreement shall be the sooner of six (6) months from the Effective Date, or replacement of this Agreement with a subsequent agreement between the Parties.", "six (6) months from the Effective Date"),
            ("The term of this Agreement shall commence on January 10th, 2019 and shall expire on the day that is twenty-four (24) months from that date (the \"Term of Engagement\").", "twenty-four (24) months from that date"),
            ("This Agreement shall continue in effect from the Effective Date for a one (1) year period, unless earlier terminated as set forth below.", "one (1) year from the Effective Date"),
        ];
        for (text, want) in cases {
            assert_eq!(get(text, "expiration_date").as_deref(), Some(want), "{text}");
        }
    }

    #[test]
    fn expiration_ignores_survival_periods() {
        let text = "The confidentiality obligations shall continue for a period of five (5) years after termination of this Agreement.";
        assert_eq!(get(text, "expiration_date"), None);
    }

    // --- renewal and notice

    #[test]
    fn renewal_successive_with_notice() {
        let text = "This Agreement shall be automatically renewed for successive one year periods unless either party gives written notice of termination to the other party at least thirty (30) days prior to the date of expiration.";
        assert_eq!(get(text, "renewal_term").as_deref(), Some("successive one year periods"));
        assert_eq!(get(text, "notice_period_to_terminate_renewal").as_deref(), Some("thirty (30) days"));
        assert_eq!(evidence(text, "renewal_term"), text);
    }

    #[test]
    fn renewal_and_notice_withheld_by_the_filing() {
        let text = "Following the Initial Term, the Agreement shall automatically be renewed for additional periods of **** (each, a \"Renewal Term\"), unless a Party provides written notification of non-renewal to the other Party at least **** of the Initial Term or a Renewal Term.";
        assert_eq!(get(text, "renewal_term").as_deref(), Some("additional periods of ****"));
        assert_eq!(get(text, "notice_period_to_terminate_renewal").as_deref(), Some("****"));
        let text = "Unless this Agreement is terminated pursuant to Section 25, this Agreement will automatically renew for additional successive [***] terms (each a \"Renewal Term\") unless and until either Party provides written notice of non-renewal to the other Party at least [***] prior to the end of the then-current Term.";
        assert_eq!(get(text, "renewal_term").as_deref(), Some("additional successive [***] terms"));
        assert_eq!(get(text, "notice_period_to_terminate_renewal").as_deref(), Some("[***]"));
        for (key, raw) in
            [("renewal_term", "additional successive [***] terms"), ("notice_period_to_terminate_renewal", "[***]")]
        {
            let field = crate::FIELDS.iter().find(|f| f.key == key).expect("field");
            assert_eq!(crate::answer::interpret(field, Some(raw)), crate::answer::Outcome::Answered(Value::Withheld));
        }
        // a stated length is still read first
        let text = "This Agreement shall automatically renew for successive one (1) year periods unless either party gives ninety (90) days prior written notice.";
        assert_eq!(get(text, "renewal_term").as_deref(), Some("successive one (1) year periods"));
        assert_eq!(get(text, "notice_period_to_terminate_renewal").as_deref(), Some("ninety (90) days"));
    }

    #[test]
    fn renewal_without_end_after_a_first_term() {
        let text = "This agreement begins on the Commencement Date and, subject to clause 11.2, shall continue for an initial term of one (1) years (Initial Term) and indefinitely after that until terminated by either party giving at least twelve (12) months' prior written notice.";
        assert_eq!(get(text, "renewal_term").as_deref(), Some("perpetual"));
        // "Thereafter" opening its sentence: the first term is in the sentence before
        let text = "The initial term of this Agreement shall be three (3) years from the Effective Date. Thereafter, this Agreement shall automatically continue in effect until either party gives the other at least six (6) months prior written notice of termination.";
        assert_eq!(get(text, "renewal_term").as_deref(), Some("perpetual"));
        // but an agreement that runs from its date until terminated has no renewal
        let text = "This Agreement will become effective as of the date first written above and will continue in effect thereafter until terminated pursuant to Paragraph 4.2 below.";
        assert_eq!(get(text, "renewal_term"), None);
        let text = "This Agreement is made as of the date first written above. Thereafter, this Agreement shall continue until terminated by either party.";
        assert_eq!(get(text, "renewal_term"), None);
    }

    #[test]
    fn renewal_monthly_only_as_the_renewals_length() {
        let text = "This Agreement will extend automatically for monthly periods unless either party notifies the other party in writing at least thirty (30) days before the expiration of the then current term.";
        assert_eq!(get(text, "renewal_term").as_deref(), Some("successive 1 month"));
        // a monthly fee in a sentence about extending is no monthly renewal: the renewal is the
        // next sentence's, and so is its notice
        let text = "If eDiets elects to extend the Agreement the monthly fee due and payable will be recalculated. This agreement shall automatically renew for additional successive terms of twelve (12) months each at the end of the Initial Term (\"Renewal Terms\"), unless either party notifies the other in writing at least sixty (60) days prior to the end of the Initial Term.";
        assert_eq!(get(text, "renewal_term").as_deref(), Some("additional successive terms of twelve (12) months"));
        assert_eq!(get(text, "notice_period_to_terminate_renewal").as_deref(), Some("sixty (60) days"));
    }

    #[test]
    fn renewal_of_one_unit_without_its_number() {
        for (text, want) in [
            ("Without notification the contract will automatically extend for an additional month of service.", "an additional month"),
            ("If the Publishers exercise their right to renew, the term of the Services shall be extended by one further year.", "one further year"),
        ] {
            assert_eq!(get(text, "renewal_term").as_deref(), Some(want), "{text}");
            let (years, months) = if want.ends_with("month") { (0, 1) } else { (1, 0) };
            let value = crate::normalize::normalize(crate::Kind::Duration, want);
            let expected = crate::normalize::Duration { years, months, ..Default::default() };
            assert_eq!(value, crate::normalize::Value::Duration { duration: expected }, "{want}");
        }
        // the number written: read as before
        let text = "This Agreement shall automatically extend for an additional two (2) years.";
        assert_eq!(get(text, "renewal_term").as_deref(), Some("additional two (2) years"));
    }

    #[test]
    fn renewal_additional_periods_and_notice_in_next_sentence() {
        let text = "Following the Initial Term, this Agreement shall automatically be extended for additional periods of two (2) years each. Either party may prevent such extension by written notice given not less than ninety (90) days before the end of the then-current term. Section 9. Other.";
        assert_eq!(get(text, "renewal_term").as_deref(), Some("additional periods of two (2) years"));
        assert_eq!(get(text, "notice_period_to_terminate_renewal").as_deref(), Some("ninety (90) days"));
    }

    #[test]
    fn renewal_successive_terms_of_and_months_notice() {
        let text = "Thereafter, the agreement shall automatically renew for successive five (5)-year terms, unless either Party gives written notice to the other Party of intent not to renew at least six (6) months prior to the expiration of the then-current Term.";
        assert_eq!(get(text, "renewal_term").as_deref(), Some("successive five (5)-year terms"));
        assert_eq!(get(text, "notice_period_to_terminate_renewal").as_deref(), Some("six (6) months"));
    }

    #[test]
    fn a_notice_that_exercises_an_option_to_renew_does_not_stop_a_renewal() {
        let text = "Distributor shall have the option to renew this Agreement for an additional Three (3) year period by providing prior written notice to Company within Ninety (90) days of the end of the initial period.";
        assert_eq!(get(text, "renewal_term").as_deref(), Some("additional Three (3) year period"));
        assert_eq!(get(text, "notice_period_to_terminate_renewal"), None);
    }

    #[test]
    fn a_renewal_the_parties_must_agree_on_then_is_none() {
        for text in [
            "By mutual agreement of the Parties, the Initial Term may be extended by successive periods of three (3) years.",
            "After the Initial Term, the term of the Agreement may be extended by a further period of five (5) years by mutual written agreement by the parties.",
            "The Agreement shall commence on the Effective Date and, unless terminated earlier or extended by mutual agreement between the parties, shall continue in effect for thirty six (36) months following the Effective Date.",
        ] {
            assert_eq!(get(text, "renewal_term"), None, "{text}");
        }
        // one that also renews by itself still does
        let text = "This Agreement may be renewed automatically for successive one (1) year periods, or by mutual agreement for longer ones.";
        assert_eq!(get(text, "renewal_term").as_deref(), Some("successive one (1) year periods"));
    }

    #[test]
    fn renewal_for_another_term_and_the_notice_the_sentence_before_sets() {
        let text = "This Agreement shall be renewed automatically for another five (5) years upon the expiration unless the Parties confirm, in writing, the termination of this Agreement.";
        assert_eq!(get(text, "renewal_term").as_deref(), Some("five (5) years"));
        let text = "After the Initial Term, this Agreement will be automatically renewed for successive additional 3~year periods (\"Extension Terms\").";
        assert_eq!(get(text, "renewal_term").as_deref(), Some("successive additional 3~year periods"));
        assert_eq!(crate::normalize::parse_duration("3~year").map(|d| d.to_iso()).as_deref(), Some("P3Y"));
        // "such notice" points back at the sentence that sets it
        let text = "A party wishing to renew this Agreement shall give the other party notice thereof no less than thirty (30) days before the expiration of the term then in effect. In the event that either party does not give such notice, the term of this Agreement shall be automatically renewed for another one (1) year.";
        assert_eq!(get(text, "renewal_term").as_deref(), Some("one (1) year"));
        assert_eq!(get(text, "notice_period_to_terminate_renewal").as_deref(), Some("thirty (30) days"));
    }

    #[test]
    fn renewal_without_end_after_a_first_term_and_year_to_year_thereafter() {
        let text = "This Agreement shall commence on the Effective Date and continue in full force and effect until the end of the fifteenth (15th) Contract Year, and shall continue in full force and effect thereafter until terminated by either Party by providing thirty (30) days notice.";
        assert_eq!(get(text, "renewal_term").as_deref(), Some("perpetual"));
        // no first term: the agreement simply runs until terminated, which is not a renewal
        let text = "This Agreement will become effective as of the date first written above and will continue in effect thereafter until terminated pursuant to Paragraph 4.2 below.";
        assert_eq!(get(text, "renewal_term"), None);
        let text = "This Agreement shall continue in effect for a period of one year from the date of its execution and from year to year thereafter provided such continuance is approved by the trustees.";
        assert_eq!(get(text, "renewal_term").as_deref(), Some("successive 1 year"));
    }

    #[test]
    fn renewal_year_to_year() {
        let text = "This Agreement will automatically renew at the end of the Initial Term on a year to year basis, unless either party notifies the other at least 30 days prior to the end of the then current term.";
        assert_eq!(get(text, "renewal_term").as_deref(), Some("successive 1 year"));
        assert_eq!(get(text, "notice_period_to_terminate_renewal").as_deref(), Some("30 days"));
    }

    #[test]
    fn renewal_initial_term_and_renewal_in_one_sentence() {
        let text = "This Agreement shall be for an initial term of five (5) years, and unless earlier terminated in accordance with this Agreement, shall automatically renew for an additional term of five (5) years thereafter.";
        assert_eq!(get(text, "renewal_term").as_deref(), Some("additional term of five (5) years"));
        assert_eq!(get(text, "expiration_date").as_deref(), Some("five (5) years"));
    }

    // --- governing law

    #[test]
    fn governing_law_state_of() {
        let text = "12. Governing Law. This Agreement shall be governed by and construed in accordance with the laws of the State of New York, without regard to its conflict of laws principles.";
        assert_eq!(get(text, "governing_law").as_deref(), Some("the State of New York"));
        let ev = evidence(text, "governing_law");
        assert!(ev.starts_with("This Agreement shall be governed"), "{ev}");
        let text = "THIS AGREEMENT SHALL BE GOVERNED IN ALL RESPECTS BY THE LAWS OF THE STATE OF DELAWARE WITHOUT GIVING EFFECT TO THE CHOICE OF LAW PRINCIPLES OF SUCH STATE.";
        assert_eq!(get(text, "governing_law").as_deref(), Some("THE STATE OF DELAWARE"));
    }

    #[test]
    fn effective_date_defined_the_other_way_round() {
        let text = "2.1.2 Execution of the TT Agreement. 2.2 The date upon which MediWound shall have acknowledged in writing to CBC that the Conditions Precedent have all been met shall be the \u{201c}Effective Date\u{201d}. Where the Conditions Precedent have not been met by January 31, 2001, for any reason whatsoever, then this Agreement shall terminate.";
        assert_eq!(
            get(text, "effective_date").as_deref(),
            Some("The date upon which MediWound shall have acknowledged in writing to CBC that the Conditions Precedent have all been met")
        );
    }

    #[test]
    fn governing_law_withheld_by_the_filing() {
        let text = "This Agreement shall be governed by and construed in accordance with the substantive Laws of the [* * *], excluding any rules of conflicts of laws that would apply the substantive laws of any other jurisdiction.";
        assert_eq!(get(text, "governing_law").as_deref(), Some("the [* * *]"));
        let text = "In all other respects, the rights and obligations of the Parties under this Agreement shall be governed by and construed in accordance with the laws of the ***.";
        assert_eq!(get(text, "governing_law").as_deref(), Some("the ***"));
        let field = crate::FIELDS.iter().find(|f| f.key == "governing_law").expect("field");
        assert_eq!(crate::answer::interpret(field, Some("the ***")), crate::answer::Outcome::Answered(Value::Withheld));
        // CUAD writes such an answer as the mark
        assert_eq!(normalize(Kind::Jurisdiction, "[* * *]"), Value::Withheld);
        // a stated jurisdiction is read as before
        let text = "This Agreement shall be governed by the laws of the State of New York.";
        assert_eq!(get(text, "governing_law").as_deref(), Some("the State of New York"));
    }

    #[test]
    fn governing_law_other_phrasings() {
        let text = "The laws of California shall govern the construction and enforceability of the Agreement.";
        assert_eq!(get(text, "governing_law").as_deref(), Some("California"));
        let text = "This Agreement shall be governed by, and construed and enforced in accordance with, the laws in force in the Province of Ontario (excluding any conflict of laws rule).";
        assert_eq!(get(text, "governing_law").as_deref(), Some("the Province of Ontario"));
        let text = "This Agreement is subject to the laws of England and Wales.";
        assert_eq!(get(text, "governing_law").as_deref(), Some("England and Wales"));
        let text = "This Agreement shall be governed by English law.";
        assert_eq!(get(text, "governing_law").as_deref(), Some("English"));
        let text = "22.1 Effective legislation of the Republic of Kazakhstan shall apply to any relations of the Parties arising out of this Contract.";
        assert_eq!(get(text, "governing_law").as_deref(), Some("the Republic of Kazakhstan"));
    }

    #[test]
    fn governing_law_parenthetical_thereof_and_apply_forms() {
        let t = "9. This Agreement shall be governed by the internal laws, and not by the laws regarding conflicts of laws, of the State of North Carolina.";
        assert_eq!(get(t, "governing_law").as_deref(), Some("the State of North Carolina"));
        let t = "This Agreement has been made in the State of California and shall be governed by and construed in accordance with the laws thereof without regard to principles of conflicts of laws.";
        assert_eq!(get(t, "governing_law").as_deref(), Some("the State of California"));
        let t = "This Agreement shall be deemed to have been entered into in the State of New Jersey, and shall be construed and interpreted in accordance with the laws of that State applicable to agreements made there.";
        assert_eq!(get(t, "governing_law").as_deref(), Some("the State of New Jersey"));
        let t = "This AGREEMENT is controlled by the laws of the State of Texas, and venue shall be in Pecos County.";
        assert_eq!(get(t, "governing_law").as_deref(), Some("the State of Texas"));
        let t = "This Agreement shall be governed by the internal laws State of New York.";
        assert_eq!(get(t, "governing_law").as_deref(), Some("New York"));
        let t = "1) The laws of the Federal Republic of Germany shall apply to the Agreement and any legal relations thereof.";
        assert_eq!(get(t, "governing_law").as_deref(), Some("the Federal Republic of Germany"));
        let t = "8.6 Applicable Law. This Agreement is deemed made and entered into in the State of California and shall be construed, enforced and performed in accordance with the laws of the State of California, without reference, to choice of law.";
        assert_eq!(get(t, "governing_law").as_deref(), Some("the State of California"));
    }

    #[test]
    fn governing_law_construed_under_english_law_determined_and_us_then_state() {
        let t = "The parties hereby agree that this Agreement shall be construed in accordance with English law.";
        assert_eq!(get(t, "governing_law").as_deref(), Some("English"));
        // a state named with its country, as its name alone is ambiguous
        let t = "This Agreement is governed by the laws of Victoria, Australia and the parties submit to the jurisdiction of the courts of Victoria, Australia.";
        assert_eq!(get(t, "governing_law").as_deref(), Some("Victoria, Australia"));
        let v = crate::normalize::normalize(crate::Kind::Jurisdiction, "Victoria, Australia");
        assert!(matches!(&v, crate::normalize::Value::Jurisdiction { code, .. } if code == "AU-VIC"), "{v:?}");
        // a name known alone keeps no country after it
        let t = "This Agreement shall be governed by the laws of the State of New York, United States of America.";
        assert_eq!(get(t, "governing_law").as_deref(), Some("the State of New York"));
        let t = "Any controversy between the parties arising under this Agreement shall be determined in accordance with the laws of the State of Michigan.";
        assert_eq!(get(t, "governing_law").as_deref(), Some("the State of Michigan"));
        let t = "This Agreement and its interpretation shall be governed by the laws of the United States and, to the extent not inconsistent therewith, by the laws of the Commonwealth of Kentucky without regard to conflicts of law.";
        assert_eq!(get(t, "governing_law").as_deref(), Some("Kentucky"));
    }

    #[test]
    fn governing_law_of_a_joint_venture() {
        let t = "By this Agreement the Participants enter into a general Joint Venture (the \"Joint Venture\") in accordance with the laws of The State of Florida.";
        assert_eq!(get(t, "governing_law").as_deref(), Some("The State of Florida"));
    }

    #[test]
    fn governing_law_skips_incorporation_clauses() {
        let text = "Foo Inc., a corporation organized under the laws of the State of Delaware, agrees to sell widgets. Nothing here is governed by anything.";
        assert_eq!(get(text, "governing_law"), None);
    }

    #[test]
    fn governing_law_prefers_the_state_over_the_united_states() {
        let text = "Governing Law. This Agreement shall be governed in all respects by the laws of the United States and the State of Florida, except for conflict of laws provisions.";
        assert_eq!(get(text, "governing_law").as_deref(), Some("the State of Florida"));
        let text = "This Agreement shall be governed and construed in accordance with the laws of the state of Texas without giving effect to the conflict of law rules thereof.";
        assert_eq!(get(text, "governing_law").as_deref(), Some("the state of Texas"));
        let text = "THIS AGREEMENT SHALL BE GOVERNED BY THE LAWS OF NEW YORK AND APPLICABLE FEDERAL LAW.";
        assert_eq!(get(text, "governing_law").as_deref(), Some("NEW YORK"));
    }

    #[test]
    fn split_superscript_ordinals_are_rejoined() {
        let text = "MARKETING AFFILIATE AGREEMENT\nThis Agreement is made this 1s t day of October 2008, (the \u{201c}Effective Date\u{201d}), by and between Equidata, Inc. (\u{201c}Company\u{201d}) and Steel Vault Corp. (\u{201c}Affiliate\u{201d}).";
        assert_eq!(get(text, "agreement_date").as_deref(), Some("1st day of October 2008"));
        assert_eq!(get(text, "effective_date").as_deref(), Some("1st day of October 2008"));
        assert_eq!(
            get(text, "parties").as_deref(),
            Some("Equidata, Inc. (\"Company\"); Steel Vault Corp. (\"Affiliate\")")
        );
    }

    #[test]
    fn parties_after_a_description_of_the_previous_party() {
        let text = "This Agreement, dated this 19th day of January, 2001, is by and between About.com, Inc. (\"About\"), a Delaware corporation, located at 1440 Broadway, New York, NY 10018 and ebix.com, Inc. (\"ebix\"), a Delaware corporation. WHEREAS ...";
        assert_eq!(get(text, "parties").as_deref(), Some("About.com, Inc. (\"About\"); ebix.com, Inc. (\"ebix\")"));
        let text = "This Agreement is entered into by Quaker Chemical Corporation (\"Buyer\"), a Pennsylvania corporation, Gulf Houghton Lubricants Ltd., a company incorporated in the Cayman Islands (\"Gulf Houghton\"). Recitals follow.";
        assert_eq!(
            get(text, "parties").as_deref(),
            Some("Quaker Chemical Corporation (\"Buyer\"); Gulf Houghton Lubricants Ltd. (\"Gulf Houghton\")")
        );
        // a name in lower case, known by its corporate suffix
        let text = "This agreement is entered into as of the 16th day of February, 2000, by and between the At Home Corporation (\"Excite@Home\" or \"Excite\"), located at 450 Broadway, Redwood City, California 94063, and e-centives, Inc., (\"Application Provider\" or \"e-centives\"), a Delaware corporation. RECITALS";
        assert_eq!(
            get(text, "parties").as_deref(),
            Some("the At Home Corporation (\"Excite@Home\", \"Excite\"); e-centives, Inc. (\"Application Provider\", \"e-centives\")")
        );
    }

    #[test]
    fn title_joined_over_glue_lines() {
        let text = "AMENDMENT AND TERMINATION\n\nOF\n\nJOINT VENTURE AGREEMENT\n\nThis Amendment is made ...";
        assert_eq!(get(text, "document_name").as_deref(), Some("AMENDMENT AND TERMINATION OF JOINT VENTURE AGREEMENT"));
        let text = "AMENDMENT NO. 2\nMANUFACTURING AGREEMENT\nThis Amendment No. 2 is made ...";
        assert_eq!(get(text, "document_name").as_deref(), Some("AMENDMENT NO. 2 MANUFACTURING AGREEMENT"));
        let text = "[COMPANY LOGO] CO-BRANDING AGREEMENT\nThis Agreement ...";
        assert_eq!(get(text, "document_name").as_deref(), Some("CO-BRANDING AGREEMENT"));
    }

    #[test]
    fn renewal_continue_for_additional_period_and_same_duration() {
        let text = "This Agreement shall automatically continue following the Initial Term, for an additional period of three (3) years, unless a party provides written notice of termination at least sixty (60) days prior to the expiration of the Initial Term.";
        assert_eq!(get(text, "renewal_term").as_deref(), Some("additional period of three (3) years"));
        assert_eq!(get(text, "notice_period_to_terminate_renewal").as_deref(), Some("sixty (60) days"));
        let text = "The initial term of this Agreement shall be three (3) years from the Effective Date. Upon the expiry of the Initial Term this Agreement shall automatically renew for successive terms of the same duration, unless either party gives notice not less than ninety (90) days prior to the date of expiration.";
        assert_eq!(get(text, "renewal_term").as_deref(), Some("successive three (3) years"));
        assert_eq!(get(text, "notice_period_to_terminate_renewal").as_deref(), Some("ninety (90) days"));
        let text = "Thereafter, this Agreement shall be renewed automatically on a five (5) year basis, unless one party notifies the other at least 90 days prior to the expiration of the then current term.";
        assert_eq!(get(text, "renewal_term").as_deref(), Some("successive five (5) year"));
    }

    #[test]
    fn renewal_ignores_tail_periods_and_notice_ignores_insurance() {
        let text = "During the Term and any renewal terms of the Agreement, and for a period of one (1) year following the expiration thereof, Customer shall not solicit employees.";
        assert_eq!(get(text, "renewal_term"), None);
        let text = "All such insurance policies shall require at least thirty (30) days' prior notice to Purchaser of cancellation, nonrenewal or material change.";
        assert_eq!(get(text, "notice_period_to_terminate_renewal"), None);
    }

    #[test]
    fn expiration_perpetual_phrasings_and_end_after() {
        let text = "This Agreement shall become effective on the Effective Date and shall continue in effect until either Party informs the other Party with thirty (30) days prior written notice of termination.";
        assert_eq!(get(text, "expiration_date").as_deref(), Some("perpetual"));
        let text = "This Agreement is entered into for an unlimited period of time.";
        assert_eq!(get(text, "expiration_date").as_deref(), Some("perpetual"));
        let text =
            "The Term of this Agreement shall begin on the Effective Date and shall end fifteen months therefrom.";
        assert_eq!(get(text, "expiration_date").as_deref(), Some("fifteen months from the Effective Date"));
        let text = "The Term shall commence on the date of this Agreement and, unless earlier terminated, shall end as of December 31, 2000.";
        assert_eq!(get(text, "expiration_date").as_deref(), Some("December 31, 2000"));
    }

    // --- nothing found, and never a panic

    #[test]
    fn no_match_gives_empty_map() {
        let text = "The quick brown fox jumps over the lazy dog. It was a sunny day and nobody signed anything.";
        assert!(extract(text).is_empty());
        assert!(extract("").is_empty());
        assert!(extract("   \n\t  ").is_empty());
    }

    #[test]
    fn non_ascii_and_odd_input_do_not_panic() {
        let texts = [
            "Ü".repeat(10_000),
            "ÄGREEMENT «between» Zürich AG („Zürich“) and Société Générale S.A. (« SG »). 日本語のテキスト。"
                .to_string(),
            "This Agreement shall be governed by the laws of Ελλάδα. Ünless either party…".to_string(),
            "\u{0}\u{1}\u{feff}\u{200b} between\u{a0}\u{a0}and (\"\") (\"".to_string(),
            "between".to_string(),
            "(\"x\")".repeat(500),
            ". . . ! ? ".repeat(1000),
            "laws of ".repeat(1000),
            "renew for ".repeat(1000),
            "🙂 AGREEMENT 🙂\n".repeat(300),
        ];
        for t in &texts {
            let out = extract(t);
            let n = t.chars().count();
            for f in out.values() {
                assert!(f.evidence.start <= f.evidence.end && f.evidence.end <= n);
            }
        }
    }

    #[test]
    fn very_long_text_is_handled() {
        let clause = "The Supplier shall deliver the Products to the Customer in accordance with the purchase orders issued from time to time. ";
        let mut text = String::from("SUPPLY AGREEMENT\nThis Supply Agreement is made as of April 1, 2007 by and between Foo Inc. (\"Foo\") and Bär GmbH (\"Bär\").\n");
        for _ in 0..20_000 {
            text.push_str(clause);
        }
        text.push_str("This Agreement shall be governed by the laws of the State of Texas.");
        let out = extract(&text);
        assert_eq!(out.get("agreement_date").map(|f| f.raw.as_str()), Some("April 1, 2007"));
        // "made as of" alone does not make the date an effective date.
        assert_eq!(out.get("effective_date"), None);
        assert_eq!(out.get("parties").map(|f| f.raw.as_str()), Some("Foo Inc. (\"Foo\"); Bär GmbH (\"Bär\")"));
        let gl = out.get("governing_law").expect("governing law");
        assert_eq!(gl.raw, "the State of Texas");
        let ev: String = text.chars().skip(gl.evidence.start).take(gl.evidence.len()).collect();
        assert_eq!(ev, "This Agreement shall be governed by the laws of the State of Texas.");
    }

    #[test]
    fn evidence_maps_back_through_collapsed_whitespace() {
        let text =
            "Recitals   follow.\n\nThis   Agreement shall\n   be governed by the laws of\nthe State of   New York.";
        let f = extract(text).remove("governing_law").expect("found");
        assert_eq!(f.raw, "the State of New York");
        let ev: String = text.chars().skip(f.evidence.start).take(f.evidence.len()).collect();
        assert_eq!(ev, "This   Agreement shall\n   be governed by the laws of\nthe State of   New York.");
    }
}
