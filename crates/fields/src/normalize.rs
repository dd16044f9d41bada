//! Normalisation of raw answers into typed [`Value`]s, and the equality the evaluation uses.
//!
//! A field's answer arrives as text: CUAD's gold annotation (US `M/D/YY` dates, parties as
//! `NAME; ("Role")` lists) or what the decoder copied out of the contract ("the 1st day of April,
//! 2007", "successive one-year periods", "the laws of the State of New York"). This module reads
//! that text into one canonical form per [`crate::Kind`] — ISO 8601 dates and durations,
//! ISO 3166 jurisdiction codes, party names with their defined roles — so that users can compare
//! answers in SQL ([`Value::canonical`]) and the evaluation can score them ([`same_answer`]).
//!
//! Everything here is pure and total: no input makes it panic; text that cannot be read becomes
//! [`Value::Text`] (or [`Value::None`] when it says there is no answer).

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use chrono::{Datelike, Days, Months, NaiveDate};
use regex::{Captures, Regex};
use serde::{Deserialize, Serialize};

use crate::Kind;

/// A normalised answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Value {
    /// The contract does not say (or the answer could not be read).
    None,
    /// A calendar date; serialises as ISO 8601 (`"2007-04-06"`).
    Date {
        /// The day.
        date: NaiveDate,
    },
    /// A date with unknown day (and maybe month), e.g. CUAD's "[]/[]/2009".
    PartialDate {
        /// The year.
        year: i32,
        /// The month (1–12), when known.
        month: Option<u32>,
    },
    /// A date the contract leaves blank or gives without its year, as templates do: "this ____
    /// day of ______, 20__", "dated as of [●]", "made this 30th day of April (the "Effective
    /// Date")"; CUAD's `[]/[]/20[]`, `04/30/[]`; or one the filing redacted ("[***]", "****").
    UnfilledDate {
        /// The month (1–12), when written.
        month: Option<u32>,
        /// The day of the month, when written.
        day: Option<u32>,
    },
    /// A length of time (a renewal term, a notice period).
    Duration {
        /// The length.
        duration: Duration,
    },
    /// An answer the contract states but this copy does not give: a renewal or notice length or
    /// a governing law redacted from the filing ("renewed for additional periods of ****",
    /// "successive [***] terms", "the laws of the [***]") or left blank. (A date so withheld is
    /// an [`Value::UnfilledDate`].)
    Withheld,
    /// The agreement runs forever ("perpetual", "in perpetuity", "indefinitely").
    Perpetual,
    /// The agreement runs until a party terminates it.
    UntilTerminated,
    /// The agreement runs until an event that has no date of its own: "until the expiration of
    /// the last Royalty Term", "for so long as X remains a shareholder", "upon the expiration of
    /// all Service Option Attachments".
    UntilEvent {
        /// The event as written, from its first word ("the expiration of ...").
        event: String,
    },
    /// A date the contract defines by an event rather than writes: "the date of the last
    /// signature", "the Closing Date as set forth in the Share Purchase Agreement", "the date
    /// that the Initial Closing occurs" (an effective date that depends on something to come).
    OnEvent {
        /// The event as written, from its first word ("the date of the last signature").
        event: String,
    },
    /// A term relative to another date that could not be resolved ("five years from the
    /// Effective Date" with no effective date known).
    Relative {
        /// The length of the term.
        duration: Duration,
        /// What it counts from, as written ("Effective Date"), or "start" when the text names
        /// nothing.
        from: String,
    },
    /// A governing-law jurisdiction.
    Jurisdiction {
        /// Canonical name ("New York", "England and Wales").
        name: String,
        /// ISO 3166-1 alpha-2 for countries ("CN"), ISO 3166-2 for subdivisions ("US-NY").
        code: String,
    },
    /// The parties to the agreement.
    Parties {
        /// In the order the answer names them.
        parties: Vec<Party>,
    },
    /// Text kept as written (whitespace collapsed).
    Text {
        /// The text.
        text: String,
    },
}

/// A length of time in calendar units, kept as written ("12 months" stays `P12M`; see
/// [`Duration::same_length`] for comparing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Duration {
    /// Calendar years.
    pub years: u32,
    /// Calendar months.
    pub months: u32,
    /// Weeks.
    pub weeks: u32,
    /// Days.
    pub days: u32,
}

/// One party to an agreement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Party {
    /// The legal name as written, whitespace collapsed, without a leading article (may be empty
    /// when the answer only gives roles).
    pub name: String,
    /// The short names or roles the agreement defines for it ("Licensee", "IGER").
    pub roles: Vec<String>,
}

impl Duration {
    /// ISO 8601 form: `"P1Y"`, `"P90D"`, `"P1Y6M"`, `"P2W"`; zero is `"P0D"`. Units that are
    /// zero are left out; weeks and days may appear together (`"P1W3D"`).
    pub fn to_iso(&self) -> String {
        let mut s = String::from("P");
        for (n, unit) in [(self.years, 'Y'), (self.months, 'M'), (self.weeks, 'W'), (self.days, 'D')] {
            if n > 0 {
                s.push_str(&n.to_string());
                s.push(unit);
            }
        }
        if s.len() == 1 {
            s.push_str("0D");
        }
        s
    }

    /// Equal lengths: months compared as `years * 12 + months`, days as `weeks * 7 + days`
    /// (so `P12M` equals `P1Y` and `P2W` equals `P14D`, but `P1M` never equals `P30D`).
    pub fn same_length(&self, other: &Duration) -> bool {
        self.total_months() == other.total_months() && self.total_days() == other.total_days()
    }

    /// The date this long after `d`: calendar years and months first (chrono's
    /// `checked_add_months`, which clamps to the month's last day), then weeks and days.
    /// `None` on overflow.
    pub fn add_to(&self, d: NaiveDate) -> Option<NaiveDate> {
        let months = u32::try_from(self.total_months()).ok()?;
        d.checked_add_months(Months::new(months))?.checked_add_days(Days::new(self.total_days()))
    }

    fn total_months(&self) -> u64 {
        u64::from(self.years) * 12 + u64::from(self.months)
    }

    fn total_days(&self) -> u64 {
        u64::from(self.weeks) * 7 + u64::from(self.days)
    }
}

impl Value {
    /// The variant's name as stored in SQL: "none", "date", "partial_date", "unfilled_date",
    /// "duration", "withheld", "perpetual", "until_terminated", "until_event",
    /// "on_event", "relative", "jurisdiction", "parties", "text".
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::None => "none",
            Value::Date { .. } => "date",
            Value::PartialDate { .. } => "partial_date",
            Value::UnfilledDate { .. } => "unfilled_date",
            Value::Duration { .. } => "duration",
            Value::Withheld => "withheld",
            Value::Perpetual => "perpetual",
            Value::UntilTerminated => "until_terminated",
            Value::UntilEvent { .. } => "until_event",
            Value::OnEvent { .. } => "on_event",
            Value::Relative { .. } => "relative",
            Value::Jurisdiction { .. } => "jurisdiction",
            Value::Parties { .. } => "parties",
            Value::Text { .. } => "text",
        }
    }

    /// The canonical text users read and SQL compares: ISO date (`"2007-04-06"`), partial date
    /// (`"2009"`, `"2014-06"`), unfilled date (ISO 8601's forms without a year: `"--04-30"`,
    /// `"--04"`, `"---30"`; `"blank"` when nothing of it is written), ISO duration (`"P1Y"`; `"blank"` for one withheld),
    /// `"perpetual"`, `"until_terminated"`, `"until <event>"`, `"on <event>"`, relative term (`"P5Y from Effective Date"`), jurisdiction code (`"US-DE"`), party names
    /// joined by `"; "` (a party without a name shows its first role), the text. `None` → `""`.
    pub fn canonical(&self) -> String {
        match self {
            Value::None => String::new(),
            Value::Date { date } => date.format("%Y-%m-%d").to_string(),
            Value::PartialDate { year, month: Some(m) } => format!("{year:04}-{m:02}"),
            Value::PartialDate { year, month: None } => format!("{year:04}"),
            Value::UnfilledDate { month: Some(m), day: Some(d) } => format!("--{m:02}-{d:02}"),
            Value::UnfilledDate { month: Some(m), day: None } => format!("--{m:02}"),
            Value::UnfilledDate { month: None, day: Some(d) } => format!("---{d:02}"),
            Value::UnfilledDate { month: None, day: None } => "blank".to_string(),
            Value::Duration { duration } => duration.to_iso(),
            Value::Withheld => "blank".to_string(),
            Value::Perpetual => "perpetual".to_string(),
            Value::UntilTerminated => "until_terminated".to_string(),
            Value::UntilEvent { event } if SO_LONG_AS.is_match(event) => format!("for {event}"),
            Value::UntilEvent { event } if LIFE.is_match(event) => event.clone(),
            Value::UntilEvent { event } => format!("until {event}"),
            Value::OnEvent { event } => format!("on {event}"),
            Value::Relative { duration, from } => format!("{} from {}", duration.to_iso(), from),
            Value::Jurisdiction { code, .. } => code.clone(),
            Value::Parties { parties } => parties
                .iter()
                .map(|p| if p.name.is_empty() { p.roles.first().map_or("", String::as_str) } else { p.name.as_str() })
                .filter(|n| !n.is_empty())
                .collect::<Vec<_>>()
                .join("; "),
            Value::Text { text } => text.clone(),
        }
    }

    /// Whether this is [`Value::None`].
    pub fn is_none(&self) -> bool {
        matches!(self, Value::None)
    }
}

// ---------------------------------------------------------------------------------------------
// Text helpers
// ---------------------------------------------------------------------------------------------

/// Curly quotes and primes to straight ones, dashes to `-`; whitespace kept.
fn straighten(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{2033}' | '\u{00AB}' | '\u{00BB}' => '"',
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' | '\u{2032}' => '\'',
            '\u{2010}' | '\u{2011}' | '\u{2012}' | '\u{2013}' | '\u{2014}' | '\u{2212}' => '-',
            c => c,
        })
        .collect()
}

/// Whitespace runs (newlines included) to one space, trimmed.
fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// [`straighten`] then [`collapse`], month names that OCR split joined again, and the ones
/// it read as letters in a day's ordinal put back ([`ocr_ordinal_ones`]).
fn clean(s: &str) -> String {
    let mut t = collapse(&straighten(s));
    for b in ocr_ordinal_ones(&t) {
        t.replace_range(b..b + 1, "1");
    }
    let drop = split_month_spaces(&t);
    t.char_indices().filter(|(b, _)| !drop.contains(b)).map(|(_, c)| c).collect()
}

/// A day's ordinal with a 1 that OCR read as a letter (`Ist`, `lst`, `2Ist`, `Ilth`), before
/// "day" or a month, or after a month: "this Ist day of September 2016", "December Ist, 2015".
static OCR_ORDINAL: LazyLock<Regex> = LazyLock::new(|| {
    regex(&format!(
        r"(?i)(?:\b(?:{MONTH})\.?\s+)?\b(?P<day>(?-i:[0-3Il]?[0-9Il](?:st|nd|rd|th)))\b(?P<after>\s+day\b|,?\s+(?:of\s+)?(?:{MONTH})\b)?"
    ))
});

/// Byte offsets in `s` of the letters `I` and `l` that stand for a 1 in a day's ordinal
/// ([`OCR_ORDINAL`]); each is one byte, as is the `1` that replaces it.
pub(crate) fn ocr_ordinal_ones(s: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for c in OCR_ORDINAL.captures_iter(s) {
        let (Some(all), Some(day)) = (c.get(0), c.name("day")) else { continue };
        let in_context = c.name("after").is_some() || all.start() < day.start();
        let digits = &day.as_str()[..day.as_str().len() - 2];
        if !in_context || !digits.contains(['I', 'l']) {
            continue;
        }
        // the day the letters stand for: each I or l a 1
        let n: u32 = digits.chars().fold(0, |n, ch| n * 10 + ch.to_digit(10).unwrap_or(1));
        let suffix = &day.as_str()[digits.len()..];
        let expected = match n % 10 {
            1 if n != 11 => "st",
            2 if n != 12 => "nd",
            3 if n != 13 => "rd",
            _ => "th",
        };
        if (1..=31).contains(&n) && suffix == expected {
            out.extend(digits.char_indices().filter(|(_, ch)| matches!(ch, 'I' | 'l')).map(|(i, _)| day.start() + i));
        }
    }
    out
}

/// A month's name that OCR split in two ("J anuary 15, 2026", "15 Sep tember 2020") before a
/// day or a year: every split of the names of four letters or more, so that ordinary words
/// never match.
static SPLIT_MONTH: LazyLock<Regex> = LazyLock::new(|| {
    const NAMES: [&str; 11] = [
        "january",
        "february",
        "march",
        "april",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ];
    let splits: Vec<String> =
        NAMES.iter().flat_map(|n| (1..n.len()).map(move |k| format!("{} {}", &n[..k], &n[k..]))).collect();
    regex(&format!(r"(?i)\b(?:{})\b[\s,.]*\d", splits.join("|")))
});

/// Byte offsets of the spaces in `s` that split a month's name ([`SPLIT_MONTH`]), in order.
pub(crate) fn split_month_spaces(s: &str) -> Vec<usize> {
    SPLIT_MONTH.find_iter(s).filter_map(|m| m.as_str().find(' ').map(|i| m.start() + i)).collect()
}

/// `"April 6, 2007"` → `April 6, 2007` when the quotes wrap the whole text.
fn strip_wrapping_quotes(s: &str) -> String {
    let t = s.trim();
    for q in ['"', '\'', '`'] {
        if t.len() >= 2 && t.starts_with(q) && t.ends_with(q) {
            let inner = &t[1..t.len() - 1];
            if !inner.contains(q) {
                return inner.trim().to_string();
            }
        }
    }
    t.to_string()
}

/// Answers that say there is no answer.
fn is_noneish(s: &str, kind: Kind) -> bool {
    // a filing's redaction mark on its own ("****", "* * *") is an answer withheld, not none
    // (the asterisks trimmed below are a small model's bold: "**None**")
    if s.chars().filter(|&c| c == '*').count() >= 3 && s.chars().all(|c| c == '*' || c.is_whitespace()) {
        return false;
    }
    let lower = s.to_lowercase();
    let t = lower.trim_matches(|c: char| c.is_whitespace() || matches!(c, '.' | '"' | '\'' | '`' | '*' | '!'));
    const NONE: &[&str] = &[
        "",
        "none",
        "n/a",
        "na",
        "n.a",
        "nil",
        "null",
        "no",
        "-",
        "[]",
        "not specified",
        "not stated",
        "not applicable",
        "not found",
        "not mentioned",
        "not provided",
        "not available",
        "none specified",
        "none stated",
        "unknown",
    ];
    const NO_RENEWAL: &[&str] = &[
        "no renewal",
        "no renewal term",
        "no automatic renewal",
        "no auto-renewal",
        "none (no renewal)",
        "not renewable",
        "non-renewable",
        "does not renew",
    ];
    NONE.contains(&t) || (kind == Kind::Duration && NO_RENEWAL.contains(&t))
}

fn regex(pattern: &str) -> Regex {
    // Only ever called on the constant patterns below; a bad one is a bug caught by every test.
    Regex::new(pattern).expect("normalize: invalid built-in regex")
}

// ---------------------------------------------------------------------------------------------
// Numbers written in words
// ---------------------------------------------------------------------------------------------

const CARDINALS: &[(&str, u64)] = &[
    ("zero", 0),
    ("one", 1),
    ("two", 2),
    ("three", 3),
    ("four", 4),
    ("five", 5),
    ("six", 6),
    ("seven", 7),
    ("eight", 8),
    ("nine", 9),
    ("ten", 10),
    ("eleven", 11),
    ("twelve", 12),
    ("thirteen", 13),
    ("fourteen", 14),
    ("fifteen", 15),
    ("sixteen", 16),
    ("seventeen", 17),
    ("eighteen", 18),
    ("nineteen", 19),
    ("twenty", 20),
    ("thirty", 30),
    ("forty", 40),
    ("fourty", 40),
    ("fifty", 50),
    ("sixty", 60),
    ("seventy", 70),
    ("eighty", 80),
    ("ninety", 90),
];

const ORDINALS: &[(&str, u64)] = &[
    ("first", 1),
    ("second", 2),
    ("third", 3),
    ("fourth", 4),
    ("fifth", 5),
    ("sixth", 6),
    ("seventh", 7),
    ("eighth", 8),
    ("ninth", 9),
    ("tenth", 10),
    ("eleventh", 11),
    ("twelfth", 12),
    ("thirteenth", 13),
    ("fourteenth", 14),
    ("fifteenth", 15),
    ("sixteenth", 16),
    ("seventeenth", 17),
    ("eighteenth", 18),
    ("nineteenth", 19),
    ("twentieth", 20),
    ("thirtieth", 30),
    ("fortieth", 40),
    ("fiftieth", 50),
    ("sixtieth", 60),
    ("seventieth", 70),
    ("eightieth", 80),
    ("ninetieth", 90),
];

/// Cardinal number words, longer words first so that alternation prefers them.
const NUM_WORD: &str = "seventeen|thirteen|fourteen|fifteen|sixteen|eighteen|nineteen|eleven|twelve|twenty|thirty|\
    forty|fourty|fifty|sixty|seventy|eighty|ninety|hundred|thousand|zero|one|two|three|four|five|six|seven|eight|\
    nine|ten";

/// Ordinal words from "first" to "ninety-ninth".
const ORD_WORD: &str = "(?:(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)[\\s-]?)?\
    (?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth)|tenth|eleventh|twelfth|thirteenth|fourteenth|\
    fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth|thirtieth|fortieth|fiftieth|sixtieth|\
    seventieth|eightieth|ninetieth";

fn words(s: &str) -> impl Iterator<Item = String> + '_ {
    s.split(|c: char| c.is_whitespace() || c == '-').filter(|w| !w.is_empty()).map(str::to_ascii_lowercase)
}

/// "one hundred eighty" → 180, "forty-five" → 45, "a" → 1.
fn cardinal_value(s: &str) -> Option<u64> {
    let (mut total, mut current, mut any) = (0u64, 0u64, false);
    for w in words(s) {
        match w.as_str() {
            "and" => continue,
            "a" | "an" => current = current.checked_add(1)?,
            "hundred" => current = current.max(1).checked_mul(100)?,
            "thousand" => {
                total = total.checked_add(current.max(1).checked_mul(1000)?)?;
                current = 0;
            }
            w => current = current.checked_add(CARDINALS.iter().find(|(k, _)| *k == w)?.1)?,
        }
        any = true;
    }
    if any {
        total.checked_add(current)
    } else {
        None
    }
}

/// "twenty-fifth" → 25, "1st" → 1.
fn ordinal_value(s: &str) -> Option<u64> {
    let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
    if !digits.is_empty() {
        return digits.parse().ok();
    }
    let mut total = 0u64;
    let mut any = false;
    for w in words(s) {
        let v = ORDINALS.iter().chain(CARDINALS.iter()).find(|(k, _)| *k == w)?.1;
        total = total.checked_add(v)?;
        any = true;
    }
    any.then_some(total)
}

// ---------------------------------------------------------------------------------------------
// Dates
// ---------------------------------------------------------------------------------------------

const MONTH: &str = "jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|\
    sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?";

/// `4/6/07`, `12-13-1999` (month first unless the first number is over 12).
static NUM_MDY: LazyLock<Regex> =
    LazyLock::new(|| regex(r"\b(?P<a>\d{1,2})[/-](?P<b>\d{1,2})[/-](?P<y>\d{4}|\d{2})\b"));
/// `2007-04-06`, `2007/04/06`, `2007-04-06T00:00`.
static NUM_YMD: LazyLock<Regex> =
    LazyLock::new(|| regex(r"\b(?P<y>\d{4})[-/.](?P<m>\d{1,2})[-/.](?P<d>\d{1,2})(?:\b|T)"));
/// `31.01.2025` (European order).
static NUM_DMY_DOT: LazyLock<Regex> = LazyLock::new(|| regex(r"\b(?P<d>\d{1,2})\.(?P<m>\d{1,2})\.(?P<y>\d{4})\b"));
/// `20.3.98` (European order, two-digit year): only as a whole answer; inside a sentence it
/// reads as a section number as often ("Section 12.3.14").
static NUM_DMY_DOT_SHORT: LazyLock<Regex> =
    LazyLock::new(|| regex(r"^(?P<d>\d{1,2})\.(?P<m>\d{1,2})\.(?P<y>\d{2})\.?$"));
/// `April 6, 2007`, `Sept. 30 2019`, `October 15th, 2009`.
static TEXT_MDY: LazyLock<Regex> = LazyLock::new(|| {
    regex(&format!(
        r"(?i)\b(?P<m>{MONTH})\b\.?\s+(?:the\s+)?(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\b(?:\s*,\s*|\s+)(?P<y>\d{{4}})\b"
    ))
});
/// `6 April 2007`, `1st day of April, 2007`, `twenty-fifth day of June, 2014`.
static TEXT_DMY: LazyLock<Regex> = LazyLock::new(|| {
    regex(&format!(
        r"(?i)\b(?P<d>\d{{1,2}}(?:st|nd|rd|th)?|(?:{ORD_WORD}))\s+(?:day\s+)?(?:of\s+)?(?P<m>{MONTH})\b\.?(?:\s*,\s*|\s+)(?P<y>\d{{4}})\b"
    ))
});
/// `[]/[]/2009`, `5/[]/2009`, `__/__/2009`.
static PARTIAL_BRACKETS: LazyLock<Regex> =
    LazyLock::new(|| regex(r"(?:\b(?P<m>\d{1,2})|\[\s*\]|_+)\s*/\s*(?:\[\s*\]|_+)\s*/\s*(?P<y>\d{4}|\d{2})\b"));
/// `June 2014`, `June, 2014`, `June ___, 2014`.
static PARTIAL_MONTH_YEAR: LazyLock<Regex> = LazyLock::new(|| {
    regex(&format!(r"(?i)\b(?P<m>{MONTH})\b\.?\s*(?:(?:\[[^\]\d\n]{{0,5}}\]|_+)\s*)?(?:,\s*)?(?P<y>\d{{4}})\b"))
});
/// `_________, 2009`, `[], 2009`, and `as of , 2009` where the text lost the blank.
static PARTIAL_BLANK_YEAR: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)(?:(?:_{2,}|\[[^\]\d\n]{0,5}\])[\s_,\[\]]*|(?:(?:_{2,}|\[[^\]\d\n]{0,5}\]|\bthis)\s*)?\bday\s+of\s*(?:_{2,}|\[[^\]\d\n]{0,5}\])?\s*,?\s*|\b(?:as\s+of|on|dated)\s*,\s*)(?P<y>\d{4})\b",
    )
});
/// A bare year: `2009`, `the year 2009`.
static PARTIAL_YEAR_ONLY: LazyLock<Regex> =
    LazyLock::new(|| regex(r"(?i)^\s*(?:the\s+)?(?:year\s+)?(?P<y>\d{4})\s*\.?\s*$"));

/// CUAD's dates whose year is left blank: `[]/[]/20[]`, `04/30/[]`, `[]/[]/[][]`, `09/14/200[]`.
static UNFILLED_BRACKETS: LazyLock<Regex> = LazyLock::new(|| {
    regex(r"(?:\b(?P<m>\d{1,2})|\[\s*\])\s*/\s*(?:(?P<d>\d{1,2})\b|\[\s*\])\s*/\s*\d{0,3}\[[\s\[\]]*\]")
});
/// A year written in full: with it, a date is a date or a partial date, not an unfilled one.
static FULL_YEAR: LazyLock<Regex> = LazyLock::new(|| regex(r"\b(?:1[89]|20)\d{2}\b"));
/// A blank to fill in (`____`, `[●]`, `[*]`, `[Date]`), what a filing redacted (`[***]`,
/// `****`), or a year cut to its century after a comma where the text lost the blank ("this day
/// of , 20").
static BLANK_MARK: LazyLock<Regex> =
    LazyLock::new(|| regex(r"(?i)_{2,}|\[[^\]\d\n]{0,5}\]|\*(?:\s?\*){2,}|\b(?:19|20)\s*_|,\s*(?:19|20)\s*\.?\s*$"));
/// The day and month of a date without its year: `30th day of April`, `first day of
/// December`, `April 30`, `day of June`, `June ___`.
static DAY_MONTH: LazyLock<Regex> = LazyLock::new(|| {
    regex(&format!(
        r"(?i)(?:\b(?P<d>\d{{1,2}}(?:st|nd|rd|th)?|(?:{ORD_WORD}))\s+)?\bday\s+of\s+(?P<m>{MONTH})\b|\b(?P<m2>{MONTH})\b\.?\s*(?:(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?\b|_|\[)"
    ))
});

/// A date left blank or without its year ([`Value::UnfilledDate`]): the month and day that are
/// written. CUAD's bracket form always counts; text counts when it writes no full year and
/// either holds a blank or gives both a day and a month.
fn find_unfilled_date(s: &str) -> Option<(Option<u32>, Option<u32>)> {
    if let Some(found) = unfilled_brackets(s) {
        return Some(found);
    }
    if FULL_YEAR.is_match(s) {
        return None;
    }
    let (mut month, mut day) = (None, None);
    if let Some(c) = DAY_MONTH.captures(s) {
        month = cap(&c, "m").or_else(|| cap(&c, "m2")).and_then(month_of);
        day = cap(&c, "d")
            .or_else(|| cap(&c, "d2"))
            .and_then(ordinal_value)
            .and_then(|d| u32::try_from(d).ok())
            .filter(|d| (1..=31).contains(d));
    }
    (BLANK_MARK.is_match(s) || (month.is_some() && day.is_some())).then_some((month, day))
}

/// CUAD's bracket form of a date without its year ([`UNFILLED_BRACKETS`]): month and day.
fn unfilled_brackets(s: &str) -> Option<(Option<u32>, Option<u32>)> {
    let c = UNFILLED_BRACKETS.captures(s)?;
    Some((num(&c, "m").filter(|m| (1..=12).contains(m)), num(&c, "d").filter(|d| (1..=31).contains(d))))
}

/// Two-digit years: 00–49 → 20xx, 50–99 → 19xx.
fn year_of(s: &str) -> Option<i32> {
    let v: i32 = s.parse().ok()?;
    match s.len() {
        2 => Some(if v < 50 { 2000 + v } else { 1900 + v }),
        4 => Some(v),
        _ => None,
    }
}

fn month_of(s: &str) -> Option<u32> {
    let key = s.get(..3)?.to_ascii_lowercase();
    let m = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
        .iter()
        .position(|k| *k == key)?;
    u32::try_from(m + 1).ok()
}

fn cap<'t>(c: &Captures<'t>, name: &str) -> Option<&'t str> {
    c.name(name).map(|m| m.as_str())
}

fn num(c: &Captures, name: &str) -> Option<u32> {
    cap(c, name)?.parse().ok()
}

/// The first full date in `s` (by position): byte span and value. Invalid candidates
/// (`2/30/07`) are skipped.
fn find_date(s: &str) -> Option<(usize, usize, NaiveDate)> {
    let lead = s.len() - s.trim_start().len();
    if let Some(c) = NUM_DMY_DOT_SHORT.captures(s.trim()) {
        let (y, m, d) = (year_of(cap(&c, "y")?)?, num(&c, "m")?, num(&c, "d")?);
        return NaiveDate::from_ymd_opt(y, m, d).map(|date| (lead, lead + s.trim().len(), date));
    }
    type Reader = fn(&Captures) -> Option<NaiveDate>;
    let readers: [(&Regex, Reader); 5] = [
        (&NUM_MDY, |c| {
            let (a, b, y) = (num(c, "a")?, num(c, "b")?, year_of(cap(c, "y")?)?);
            let (m, d) = if a > 12 { (b, a) } else { (a, b) };
            NaiveDate::from_ymd_opt(y, m, d)
        }),
        (&NUM_YMD, |c| NaiveDate::from_ymd_opt(cap(c, "y")?.parse().ok()?, num(c, "m")?, num(c, "d")?)),
        (&NUM_DMY_DOT, |c| NaiveDate::from_ymd_opt(cap(c, "y")?.parse().ok()?, num(c, "m")?, num(c, "d")?)),
        (&TEXT_MDY, |c| NaiveDate::from_ymd_opt(cap(c, "y")?.parse().ok()?, month_of(cap(c, "m")?)?, num(c, "d")?)),
        (&TEXT_DMY, |c| {
            let d = u32::try_from(ordinal_value(cap(c, "d")?)?).ok()?;
            NaiveDate::from_ymd_opt(cap(c, "y")?.parse().ok()?, month_of(cap(c, "m")?)?, d)
        }),
    ];
    let mut best: Option<(usize, usize, NaiveDate)> = None;
    for (re, read) in readers {
        for c in re.captures_iter(s) {
            let Some(m) = c.get(0) else { continue };
            if best.is_some_and(|(start, _, _)| start <= m.start()) {
                break;
            }
            if let Some(date) = read(&c) {
                best = Some((m.start(), m.end(), date));
                break;
            }
        }
    }
    best
}

/// The first date with an unknown day in `s`: (year, month).
fn find_partial_date(s: &str) -> Option<(i32, Option<u32>)> {
    let valid = |y: i32, m: Option<u32>| NaiveDate::from_ymd_opt(y, m.unwrap_or(1), 1).map(|_| (y, m));
    let mut best: Option<(usize, (i32, Option<u32>))> = None;
    let mut consider = |start: usize, found: Option<(i32, Option<u32>)>| {
        if let Some(found) = found {
            if best.is_none_or(|(b, _)| start < b) {
                best = Some((start, found));
            }
        }
    };
    for c in PARTIAL_BRACKETS.captures_iter(s) {
        let month = match cap(&c, "m") {
            Some(m) => m.parse().ok().filter(|m| (1..=12).contains(m)),
            None => None,
        };
        if cap(&c, "m").is_some() && month.is_none() {
            continue;
        }
        let found = cap(&c, "y").and_then(year_of).and_then(|y| valid(y, month));
        consider(c.get(0).map_or(0, |m| m.start()), found);
    }
    for c in PARTIAL_MONTH_YEAR.captures_iter(s) {
        let year = cap(&c, "y").and_then(|y| y.parse().ok());
        let month = cap(&c, "m").and_then(month_of);
        let found = year.zip(month).and_then(|(y, m)| valid(y, Some(m)));
        consider(c.get(0).map_or(0, |m| m.start()), found);
    }
    for re in [&*PARTIAL_BLANK_YEAR, &*PARTIAL_YEAR_ONLY] {
        for c in re.captures_iter(s) {
            let found = cap(&c, "y").and_then(|y| y.parse().ok()).and_then(|y| valid(y, None));
            consider(c.get(0).map_or(0, |m| m.start()), found);
        }
    }
    best.map(|(_, found)| found)
}

/// The first full calendar date written in `s`, in any of the forms contracts and CUAD use:
/// `4/6/07` (US order; D/M/Y when the first number is over 12; two-digit years 00–49 → 20xx),
/// `2007-04-06`, `31.01.2025` (and `20.3.98` as the whole text), `April 6, 2007`,
/// `Sept. 30, 2019`, `6th April, 2007`, `the 1st day of April, 2007`, `twenty-fifth day of June,
/// 2014`. Dates with an unknown day (`[]/[]/2009`, `June 2014`) and impossible dates (`2/30/07`)
/// give `None`.
pub fn parse_date(s: &str) -> Option<NaiveDate> {
    find_date(&clean(s)).map(|(_, _, d)| d)
}

// ---------------------------------------------------------------------------------------------
// Durations
// ---------------------------------------------------------------------------------------------

/// `90 days`, `ninety (90) days`, `one-year`, `a year`, `thirty (30) calendar days`,
/// `one (1) additional year`, `1.5 years`.
static DURATION: LazyLock<Regex> = LazyLock::new(|| {
    regex(&format!(
        r"(?i)(?P<num>\b\d{{1,3}}(?:,\d{{3}})+\b|\b\d+(?:\.\d+)?|\(\s*\d+(?:\.\d+)?\s*\)|\b(?:{NUM_WORD})\b(?:[\s-]+(?:and[\s-]+)?(?:{NUM_WORD})\b)*|\ban?\b)(?:\s*\(\s*(?P<paren>\d+(?:\.\d+)?)\s*\)|\s*\(\s*I\s*\))?[\s~-]*(?:(?:additional|successive|consecutive|further|subsequent|calendar|contract|business|working|full|complete|renewal|extension|more)[\s-]+)*(?P<unit>years?|yrs?|months?|mos?|weeks?|wks?|days?)\b"
    ))
});

/// A number as written: digits (`1.5`, `2,000`, `(90)`) or words (`one hundred eighty`).
/// Returns whole part and fraction.
fn number_value(s: &str) -> Option<(u32, f64)> {
    let t = s.trim().trim_start_matches('(').trim_end_matches(')').trim();
    if t.starts_with(|c: char| c.is_ascii_digit()) {
        let digits: String = t.chars().filter(|c| *c != ',').collect();
        let v: f64 = digits.parse().ok()?;
        if !v.is_finite() || !(0.0..=1_000_000.0).contains(&v) {
            return None;
        }
        let whole = v.trunc();
        // In range by the check above.
        Some((whole as u32, v - whole))
    } else {
        let v = cardinal_value(t)?;
        Some((u32::try_from(v).ok().filter(|v| *v <= 1_000_000)?, 0.0))
    }
}

fn duration_of(c: &Captures) -> Option<Duration> {
    let (whole, frac) = match cap(c, "paren") {
        Some(p) => number_value(p)?,
        None => number_value(cap(c, "num")?)?,
    };
    let unit = cap(c, "unit")?.to_ascii_lowercase();
    // `frac` is in [0, 1); rounded parts are small.
    let part = |per: f64| (frac * per).round() as u32;
    let mut d = Duration::default();
    if unit.starts_with('y') {
        d.years = whole;
        d.months = part(12.0);
    } else if unit.starts_with("mo") {
        d.months = whole;
        d.days = part(30.0);
    } else if unit.starts_with('w') {
        d.weeks = whole;
        d.days = part(7.0);
    } else {
        d.days = whole + part(1.0);
    }
    Some(d)
}

/// Every readable duration in `s`, in order: (start, end, value).
fn duration_hits(s: &str) -> Vec<(usize, usize, Duration)> {
    DURATION
        .captures_iter(s)
        .filter_map(|c| {
            let m = c.get(0)?;
            Some((m.start(), m.end(), duration_of(&c)?))
        })
        .collect()
}

/// The first length of time written in `s`: `successive 1 year` → `P1Y`, `ninety (90) days` →
/// `P90D` (digits in parentheses win over the words), `twelve (12) months` → `P12M`,
/// `one-year periods` → `P1Y`, `2 weeks` → `P2W`, `1.5 years` → `P1Y6M`, `a year` → `P1Y`.
pub fn parse_duration(s: &str) -> Option<Duration> {
    duration_hits(&clean(s)).first().map(|(_, _, d)| *d)
}

static PERPETUAL: LazyLock<Regex> = LazyLock::new(|| regex(r"(?i)\b(?:perpetu(?:al|ally|ity)|indefinite(?:ly)?)\b"));
static UNTIL_TERMINATED: LazyLock<Regex> =
    LazyLock::new(|| regex(r"(?i)\buntil\s+(?:[\w'-]+\s+){0,4}?terminat(?:ed|es|ion)\b"));
/// The words an event a term runs until starts with ("the expiration of …", "the earlier of
/// …", "the date on which …"), for the rules that find such a term and for reading an answer.
pub(crate) const EVENT_HEAD: &str = r"(?:the\s+)?(?:later|earlier|latest|earliest|expiration|expiry|completion|termination|end|last|final|date\s+on\s+which|date\s+that|date\s+of\s+(?:the\s+)?(?:expiration|expiry|termination|completion)|first|occurrence|cessation|acceptance)\b";
/// The life of something else the term lasts for: "for the duration of the Lease", "during the
/// term of the LSA".
pub(crate) const LIFE_OF: &str = r"(?:for|during)\s+the\s+(?:(?:total\s+|full\s+|entire\s+)?(?:duration|term|life)\s+of|(?:time\s+)?periods?\s+(?:set\s+forth|specified|stated)\s+in)\b";
static SO_LONG_AS: LazyLock<Regex> = LazyLock::new(|| regex(r"(?i)^(?:so|as)\s+long\s+as\b"));
static LIFE: LazyLock<Regex> = LazyLock::new(|| regex(&format!(r"(?i)^{LIFE_OF}")));
/// A whole answer that names the event the term runs until: "until the expiration of the
/// Royalty Term", "upon the completion of the Services", "for so long as X remains a
/// shareholder", "the date on which no Shares are outstanding".
static UNTIL_EVENT: LazyLock<Regex> = LazyLock::new(|| {
    regex(&format!(
        r"(?i)^\s*(?:(?:until|till|upon|on|at|through)\s+|(?:expires?|ends?|terminates?)\s+(?:upon|on|at|with)\s+)?(?P<event>{EVENT_HEAD}.{{5,}}|(?:for\s+)?(?:so|as)\s+long\s+as\b.{{5,}}|{LIFE_OF}.{{3,}})$"
    ))
});
/// The words a date defined by an event starts with ("the date of the last signature", "the
/// Closing Date", "the later of …"), for the rules that find such an effective date and for
/// reading an answer.
pub(crate) const DATE_EVENT_HEAD: &str = r"(?:the\s+)?(?:(?:first\s+|last\s+)?(?:date|day)\s+(?:on\s+which|upon\s+which|that|when|of|after|following|this)|later|earlier|latest|earliest|closing|completion|consummation|execution|signing|signature|receipt|satisfaction|fulfil+ment|occurrence|approval|acceptance|installation|launch)\b";
/// A whole answer that is a date defined by an event: "the date of the last signature",
/// "upon the completion of the execution by both Parties", "the Closing Date".
static ON_EVENT: LazyLock<Regex> = LazyLock::new(|| {
    regex(&format!(r"(?i)^\s*(?:(?:on|upon|as\s+of|from|effective)\s+)?(?P<event>{DATE_EVENT_HEAD}.{{5,}})$"))
});
/// A date that is the agreement's own ("the date first above written", "the date hereof", "the
/// date of this Agreement"): not an event; the agreement date answers it.
static OWN_DATE: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)\b(?:above|hereof|herein|first\s+(?:written|set\s+forth))\b|^(?:the\s+)?date\s+of\s+(?:this|the)\s+(?:agreement|contract|amendment)\W*$",
    )
});

/// An "event" that is the agreement's own end ("until the expiration date of this Agreement",
/// "upon the termination of the Term", "the last day of the Initial Term"): it says nothing
/// about when that is.
static OWN_END: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)^(?:(?:for|during)\s+)?(?:the\s+)?(?:(?:expiration|expiry|termination|end)(?:\s+date)?|last\s+day|(?:total\s+|full\s+|entire\s+)?(?:duration|term|life))\s+of\s+(?:this|the)\s+(?:agreement|contract|(?:initial\s+)?term)\b",
    )
});

/// Whether `event` (from its first word) is the agreement's own end rather than an event.
pub(crate) fn is_own_end(event: &str) -> bool {
    OWN_END.is_match(event.trim())
}

/// What a relative term counts from: `from the Effective Date`, `after ...`, `commencing on ...`.
static ANCHOR: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)^\s*(?:from(?:\s+and\s+after)?|after|following|of|(?:commencing|beginning|starting)(?:\s+(?:on|with|from))?)\b",
    )
});
/// `the fifth anniversary of`, `the 5th (5th) anniversary of`.
static ANNIVERSARY: LazyLock<Regex> = LazyLock::new(|| {
    regex(&format!(
        r"(?i)\b(?:the\s+)?(?P<n>(?:{ORD_WORD})|\d{{1,3}}(?:st|nd|rd|th))(?:\s*\(\s*\d{{1,3}}(?:st|nd|rd|th)?\s*\))?\s+anniversary\s+(?:of|after|following|from)\b"
    ))
});
/// Where the name of the anchor stops.
static ANCHOR_END: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r#"(?i)[.;,:()\[\]]|\b(?:unless|provided|subject|and|or|except|whichever|if|but|until|in\s+which|as\s+defined)\b"#,
    )
});
/// Answers that say "no" to a Duration question in a sentence.
static NEGATIVE: LazyLock<Regex> =
    LazyLock::new(|| regex(r"(?i)^(?:no|none|not|non|never|(?:it\s+|the\s+agreement\s+)?(?:does|will|shall)\s+not)\b"));

/// The anchor of a relative term, from the text after "from"/"after"/"of": its name ("Effective
/// Date", or "start" when empty) and, when the anchor is itself a written date, that date.
fn read_anchor(rest: &str) -> (String, Option<NaiveDate>) {
    let date = find_date(rest).filter(|(start, _, _)| {
        let before = rest.get(..*start).unwrap_or("");
        before.split_whitespace().count() <= 3 && !before.contains([';', '.'])
    });
    let unquoted: String = rest.chars().filter(|c| *c != '"').collect();
    let end = ANCHOR_END.find(&unquoted).map_or(unquoted.len(), |m| m.start());
    let name = strip_article(unquoted.get(..end).unwrap_or("").trim()).trim().to_string();
    let name = if name.is_empty() { "start".to_string() } else { name };
    (name, date.map(|(_, _, d)| d))
}

/// The first relative term with a named anchor in `s`: (start, duration, anchor name, anchor date).
fn find_relative(s: &str) -> Option<(usize, Duration, String, Option<NaiveDate>)> {
    let by_duration = duration_hits(s).into_iter().find_map(|(start, end, d)| {
        let rest = s.get(end..)?;
        let m = ANCHOR.find(rest)?;
        let (name, date) = read_anchor(rest.get(m.end()..)?);
        Some((start, d, name, date))
    });
    let by_anniversary = ANNIVERSARY.captures_iter(s).find_map(|c| {
        let m = c.get(0)?;
        let years = u32::try_from(ordinal_value(cap(&c, "n")?)?).ok()?;
        let (name, date) = read_anchor(s.get(m.end()..)?);
        Some((m.start(), Duration { years, ..Duration::default() }, name, date))
    });
    match (by_duration, by_anniversary) {
        (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
        (a, b) => a.or(b),
    }
}

// ---------------------------------------------------------------------------------------------
// Jurisdictions
// ---------------------------------------------------------------------------------------------

/// (canonical name, code, aliases). Empty aliases: the name itself. An alias starting with `=`
/// matches case-sensitively ("US", not the pronoun "us"). A code with `-` is a subdivision of
/// the country before the dash. Puerto Rico is filed as the US subdivision `US-PR`.
const PLACES: &[(&str, &str, &[&str])] = &[
    // United States
    ("Alabama", "US-AL", &[]),
    ("Alaska", "US-AK", &[]),
    ("Arizona", "US-AZ", &[]),
    ("Arkansas", "US-AR", &[]),
    ("California", "US-CA", &[]),
    ("Colorado", "US-CO", &[]),
    ("Connecticut", "US-CT", &[]),
    ("Delaware", "US-DE", &[]),
    ("Florida", "US-FL", &[]),
    ("Georgia", "US-GA", &[]),
    ("Hawaii", "US-HI", &["Hawaii", "Hawai'i"]),
    ("Idaho", "US-ID", &[]),
    ("Illinois", "US-IL", &[]),
    ("Indiana", "US-IN", &[]),
    ("Iowa", "US-IA", &[]),
    ("Kansas", "US-KS", &[]),
    ("Kentucky", "US-KY", &[]),
    ("Louisiana", "US-LA", &[]),
    ("Maine", "US-ME", &[]),
    ("Maryland", "US-MD", &[]),
    ("Massachusetts", "US-MA", &[]),
    ("Michigan", "US-MI", &[]),
    ("Minnesota", "US-MN", &[]),
    ("Mississippi", "US-MS", &[]),
    ("Missouri", "US-MO", &[]),
    ("Montana", "US-MT", &[]),
    ("Nebraska", "US-NE", &[]),
    ("Nevada", "US-NV", &[]),
    ("New Hampshire", "US-NH", &[]),
    ("New Jersey", "US-NJ", &["New Jersey", "Jersey City"]),
    ("New Mexico", "US-NM", &[]),
    ("New York", "US-NY", &[]),
    ("North Carolina", "US-NC", &[]),
    ("North Dakota", "US-ND", &[]),
    ("Ohio", "US-OH", &[]),
    ("Oklahoma", "US-OK", &[]),
    ("Oregon", "US-OR", &[]),
    ("Pennsylvania", "US-PA", &[]),
    ("Rhode Island", "US-RI", &[]),
    ("South Carolina", "US-SC", &[]),
    ("South Dakota", "US-SD", &[]),
    ("Tennessee", "US-TN", &[]),
    ("Texas", "US-TX", &[]),
    ("Utah", "US-UT", &[]),
    ("Vermont", "US-VT", &[]),
    ("Virginia", "US-VA", &[]),
    ("Washington", "US-WA", &[]),
    ("West Virginia", "US-WV", &[]),
    ("Wisconsin", "US-WI", &[]),
    ("Wyoming", "US-WY", &[]),
    (
        "District of Columbia",
        "US-DC",
        &["District of Columbia", "Washington, D.C.", "Washington D.C.", "Washington, DC", "Washington DC", "D.C."],
    ),
    ("Puerto Rico", "US-PR", &[]),
    ("United States", "US", &["United States of America", "United States", "U.S.A.", "U.S.A", "USA", "U.S.", "=US"]),
    // Canada
    ("Alberta", "CA-AB", &[]),
    ("British Columbia", "CA-BC", &[]),
    ("Manitoba", "CA-MB", &[]),
    ("New Brunswick", "CA-NB", &[]),
    ("Newfoundland and Labrador", "CA-NL", &["Newfoundland and Labrador", "Newfoundland"]),
    ("Nova Scotia", "CA-NS", &[]),
    ("Ontario", "CA-ON", &[]),
    ("Prince Edward Island", "CA-PE", &[]),
    ("Quebec", "CA-QC", &["Quebec", "Québec"]),
    ("Saskatchewan", "CA-SK", &[]),
    ("Northwest Territories", "CA-NT", &[]),
    ("Nunavut", "CA-NU", &[]),
    ("Yukon", "CA-YT", &[]),
    ("Canada", "CA", &[]),
    // United Kingdom
    (
        "England and Wales",
        "GB-EAW",
        &["England and Wales", "England & Wales", "England", "Wales", "English", "English law", "English laws"],
    ),
    ("Scotland", "GB-SCT", &["Scotland", "Scots law", "Scottish law"]),
    ("Northern Ireland", "GB-NIR", &[]),
    (
        "United Kingdom",
        "GB",
        &[
            "United Kingdom of Great Britain and Northern Ireland",
            "United Kingdom",
            "Great Britain",
            "Britain",
            "U.K.",
            "UK",
        ],
    ),
    // Australia
    ("New South Wales", "AU-NSW", &[]),
    ("Victoria", "AU-VIC", &["State of Victoria", "Victoria, Australia"]),
    ("Queensland", "AU-QLD", &[]),
    ("Western Australia", "AU-WA", &[]),
    ("South Australia", "AU-SA", &[]),
    ("Tasmania", "AU-TAS", &[]),
    ("Australian Capital Territory", "AU-ACT", &[]),
    ("Northern Territory", "AU-NT", &[]),
    ("Australia", "AU", &["Commonwealth of Australia", "Australia"]),
    // Other countries and territories
    (
        "China",
        "CN",
        &[
            "People's Republic of China",
            "Peoples Republic of China",
            "Peoples' Republic of China",
            "P.R.C.",
            "PRC",
            "P.R. China",
            "PR China",
            "Mainland China",
            "China",
        ],
    ),
    ("Taiwan", "TW", &["Taiwan", "Republic of China", "R.O.C."]),
    ("Hong Kong", "HK", &["Hong Kong", "Hongkong"]),
    ("Macau", "MO", &["Macau", "Macao"]),
    ("Japan", "JP", &[]),
    ("South Korea", "KR", &["Republic of Korea", "South Korea", "Korea"]),
    ("North Korea", "KP", &["Democratic People's Republic of Korea", "North Korea"]),
    ("Singapore", "SG", &[]),
    ("India", "IN", &[]),
    ("Israel", "IL", &["State of Israel", "Israel"]),
    ("Switzerland", "CH", &["Switzerland", "Swiss law"]),
    ("Germany", "DE", &["Federal Republic of Germany", "Germany", "German law"]),
    ("France", "FR", &["France", "French law"]),
    ("Netherlands", "NL", &["Netherlands", "Holland"]),
    ("Belgium", "BE", &[]),
    ("Luxembourg", "LU", &[]),
    ("Ireland", "IE", &["Republic of Ireland", "Ireland"]),
    ("Sweden", "SE", &[]),
    ("Norway", "NO", &[]),
    ("Denmark", "DK", &[]),
    ("Finland", "FI", &[]),
    ("Iceland", "IS", &[]),
    ("Italy", "IT", &[]),
    ("Spain", "ES", &[]),
    ("Portugal", "PT", &[]),
    ("Austria", "AT", &[]),
    ("Greece", "GR", &[]),
    ("Poland", "PL", &[]),
    ("Czech Republic", "CZ", &["Czech Republic", "Czechia"]),
    ("Hungary", "HU", &[]),
    ("Russia", "RU", &["Russian Federation", "Russia"]),
    ("Turkey", "TR", &["Turkey", "Türkiye"]),
    ("Cyprus", "CY", &[]),
    ("Malta", "MT", &[]),
    ("Liechtenstein", "LI", &[]),
    ("Monaco", "MC", &[]),
    ("United Arab Emirates", "AE", &["United Arab Emirates", "U.A.E.", "UAE"]),
    ("Saudi Arabia", "SA", &[]),
    ("South Africa", "ZA", &[]),
    ("New Zealand", "NZ", &[]),
    ("Philippines", "PH", &[]),
    ("Malaysia", "MY", &[]),
    ("Thailand", "TH", &[]),
    ("Indonesia", "ID", &[]),
    ("Vietnam", "VN", &["Vietnam", "Viet Nam"]),
    ("Mexico", "MX", &["United Mexican States", "Mexico"]),
    ("Brazil", "BR", &["Brazil", "Brasil"]),
    ("Argentina", "AR", &[]),
    ("Chile", "CL", &[]),
    ("Colombia", "CO", &[]),
    ("Peru", "PE", &[]),
    ("Panama", "PA", &[]),
    ("Cayman Islands", "KY", &["Cayman Islands", "Cayman"]),
    ("Bermuda", "BM", &[]),
    ("British Virgin Islands", "VG", &["British Virgin Islands", "Virgin Islands (British)", "BVI"]),
    ("Bahamas", "BS", &[]),
    ("Barbados", "BB", &[]),
    ("Isle of Man", "IM", &[]),
    ("Jersey", "JE", &[]),
    ("Guernsey", "GG", &[]),
    ("Gibraltar", "GI", &[]),
    ("Georgia (country)", "GE", &["Republic of Georgia"]),
    ("Papua New Guinea", "PG", &[]),
    ("Kazakhstan", "KZ", &["Republic of Kazakhstan", "Kazakhstan"]),
    ("Ukraine", "UA", &[]),
    ("Romania", "RO", &[]),
    ("Bulgaria", "BG", &[]),
    ("Croatia", "HR", &[]),
    ("Slovakia", "SK", &["Slovak Republic", "Slovakia"]),
    ("Slovenia", "SI", &[]),
    ("Estonia", "EE", &[]),
    ("Latvia", "LV", &[]),
    ("Lithuania", "LT", &[]),
    ("Serbia", "RS", &[]),
    ("Egypt", "EG", &["Arab Republic of Egypt", "Egypt"]),
    ("Morocco", "MA", &[]),
    ("Nigeria", "NG", &[]),
    ("Kenya", "KE", &[]),
    ("Ghana", "GH", &[]),
    ("Mauritius", "MU", &[]),
    ("Qatar", "QA", &[]),
    ("Kuwait", "KW", &[]),
    ("Bahrain", "BH", &[]),
    ("Oman", "OM", &[]),
    ("Lebanon", "LB", &[]),
    ("Pakistan", "PK", &[]),
    ("Bangladesh", "BD", &[]),
    ("Sri Lanka", "LK", &[]),
    ("Mongolia", "MN", &[]),
    ("Cambodia", "KH", &[]),
    ("Costa Rica", "CR", &[]),
    ("Uruguay", "UY", &[]),
    ("Venezuela", "VE", &[]),
    ("Ecuador", "EC", &[]),
    ("Dominican Republic", "DO", &[]),
];

/// One place named in a text: byte span and index into [`PLACES`].
#[derive(Clone, Copy)]
struct PlaceHit {
    start: usize,
    end: usize,
    place: usize,
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Every alias occurrence in `s`, on word boundaries (a boundary is only required next to an
/// alias's alphanumeric ends: "D.C." may be followed by anything).
fn place_hits(s: &str) -> Vec<PlaceHit> {
    let lower = s.to_ascii_lowercase();
    let bytes = s.as_bytes();
    let mut hits = Vec::new();
    for (place, (name, _, aliases)) in PLACES.iter().enumerate() {
        let own = [*name];
        let aliases: &[&str] = if aliases.is_empty() { &own } else { aliases };
        for alias in aliases {
            let (hay, needle) = match alias.strip_prefix('=') {
                Some(exact) => (s, exact.to_string()),
                None => (lower.as_str(), alias.to_lowercase()),
            };
            let (Some(first), Some(last)) = (needle.bytes().next(), needle.bytes().last()) else { continue };
            for (start, _) in hay.match_indices(needle.as_str()) {
                let end = start + needle.len();
                let left_ok =
                    !is_word_byte(first) || start == 0 || !bytes.get(start - 1).is_some_and(|b| is_word_byte(*b));
                let right_ok = !is_word_byte(last) || !bytes.get(end).is_some_and(|b| is_word_byte(*b));
                if left_ok && right_ok {
                    hits.push(PlaceHit { start, end, place });
                }
            }
        }
    }
    // A name inside a longer one is not a match of its own: "Mexico" in "New Mexico",
    // "Virginia" in "West Virginia", "Washington" in "Washington, D.C.".
    let all = hits.clone();
    hits.retain(|h| !all.iter().any(|o| o.start <= h.start && o.end >= h.end && (o.end - o.start) > (h.end - h.start)));
    hits.sort_by_key(|h| (h.start, std::cmp::Reverse(h.end)));
    hits
}

/// The governing jurisdiction named in `s`: (canonical name, code). The first named place wins,
/// except that a subdivision named anywhere beats its own country ("United States; Delaware" →
/// Delaware). Matching is case-insensitive on word boundaries and prefers the longer name
/// ("New Mexico" over "Mexico", "Washington, D.C." over "Washington"); "Georgia" is the US state
/// unless written "Republic of Georgia"; Puerto Rico is `US-PR`; England and Wales are one
/// jurisdiction, `GB-EAW`.
pub fn parse_jurisdiction(s: &str) -> Option<(String, String)> {
    let text = clean(s);
    let hits = place_hits(&text);
    let first = hits.first()?;
    let (name, code, _) = PLACES.get(first.place)?;
    let chosen = if code.contains('-') {
        first.place
    } else {
        let prefix = format!("{code}-");
        hits.iter()
            .find(|h| PLACES.get(h.place).is_some_and(|p| p.1.starts_with(&prefix)))
            .map_or(first.place, |h| h.place)
    };
    let (name, code) = PLACES.get(chosen).map_or((*name, *code), |p| (p.0, p.1));
    let name = name.strip_suffix(" (country)").unwrap_or(name);
    Some((name.to_string(), code.to_string()))
}

// ---------------------------------------------------------------------------------------------
// Parties
// ---------------------------------------------------------------------------------------------

/// Trailing words that mark a name as a legal entity (compared lower-cased, dots removed).
const CORP_SUFFIXES: &[&str] = &[
    "inc",
    "incorporated",
    "llc",
    "ltd",
    "limited",
    "corp",
    "corporation",
    "co",
    "company",
    "plc",
    "sa",
    "ag",
    "gmbh",
    "lp",
    "llp",
    "lllp",
    "pllc",
    "pc",
    "nv",
    "bv",
    "pty",
    "pte",
    "sarl",
    "sas",
    "spa",
    "srl",
    "ab",
    "asa",
    "oy",
    "kk",
    "bhd",
    "na",
    "trust",
    "association",
];

/// Words that carry no name in a party item ("collectively", "hereinafter", "or the").
const CONNECTIVES: &[&str] = &[
    "and",
    "or",
    "the",
    "a",
    "an",
    "each",
    "collectively",
    "together",
    "individually",
    "jointly",
    "hereinafter",
    "hereafter",
    "referred",
    "to",
    "as",
    "also",
    "known",
    "called",
    "its",
    "their",
    "respectively",
];

/// Tokens F1 ignores.
const F1_STOPWORDS: &[&str] = &[
    "inc",
    "llc",
    "ltd",
    "corp",
    "corporation",
    "co",
    "company",
    "limited",
    "plc",
    "sa",
    "ag",
    "gmbh",
    "lp",
    "llp",
    "the",
    "and",
    "of",
];

static QUOTED: LazyLock<Regex> = LazyLock::new(|| regex(r#""([^"]*)""#));
static BULLET: LazyLock<Regex> = LazyLock::new(|| regex(r"^\s*(?:[-*•·]|\d{1,2}[.)])\s+"));

fn strip_article(s: &str) -> &str {
    for article in ["the ", "a ", "an "] {
        if let Some(head) = s.get(..article.len()) {
            if head.eq_ignore_ascii_case(article) {
                return s.get(article.len()..).unwrap_or("").trim_start();
            }
        }
    }
    s
}

fn alnum_lower(word: &str) -> String {
    word.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect()
}

fn clean_role(s: &str) -> String {
    let t = collapse(s);
    let t = t.trim_matches(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | ':' | '.' | '…' | '"'));
    strip_article(t).to_string()
}

/// A descriptor after a party's name: ", a Delaware corporation", ", an Illinois limited
/// liability company", ", a company organised under the laws of …" — not part of the name.
static DESCRIPTOR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i),\s+(?:a|an)\s+[^,;]*?\b(?:corporation|company|partnership|association|bank|trust|body corporate|entity|organi[sz]ation|subsidiary|limited|llc|ltd|gmbh|s\.a\.|plc)\b.*$")
        .expect("the descriptor pattern compiles")
});

/// An address run into a name: "COMWARE TECHNICAL SERVICES OF 17922 SKY PARK CIRCLE, SUITE E",
/// "Acme Inc., 100 Main Street".
static ADDRESS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:,\s*|\s+)(?:of|at|located\s+at)\s+\d{1,6}[a-z]?\s+\S.*$|,\s*\d{1,6}\s+(?:[nsew]\.?\s+)?(?:[a-z]+\s+){1,3}(?:street|st|avenue|ave|road|rd|drive|dr|boulevard|blvd|parkway|pkwy|way|lane|ln|circle|court|ct|place|pl|suite|floor)\b.*$")
        .expect("the address pattern compiles")
});

/// An address after a corporate suffix, with a number somewhere in it: "Tigrent Learning UK
/// Limited of Boston House, 69 - 75 Boston Manor Road".
static SUFFIX_ADDRESS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:limited|ltd|inc|llc|plc|corporation|corp|gmbh)\.?(?P<address>\s+of\s+\S[^\d]*\d.*)$")
        .expect("the suffix address pattern compiles")
});

/// The number or letter of an item in a list of parties, left before a name ("; (2) Beijing
/// Tuniu Technology Co., Ltd.", "; and b) BOSCH INTERNATIONAL, LLC").
static ENUMERATOR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:[,;:]\s*)*(?:and\s+)?(?:\(\s*(?:\d{1,2}|[a-h]|[ivx]{1,4})\s*\)|[a-h]\)|\d{1,2}[.)])\s+")
        .expect("the enumerator pattern compiles")
});

fn clean_name(s: &str) -> String {
    // an empty pair of parentheses is what is left of a defined name taken out
    let mut t = collapse(&s.replace("()", " "));
    if let Some(m) = ENUMERATOR.find(&t) {
        t = t[m.end()..].to_string();
    }
    for cut in [&DESCRIPTOR, &ADDRESS] {
        if let Some(m) = cut.find(&t) {
            if m.start() > 0 {
                t.truncate(m.start());
            }
        }
    }
    if let Some(m) = SUFFIX_ADDRESS.captures(&t).and_then(|c| c.name("address")) {
        t.truncate(m.start());
    }
    loop {
        let trimmed = t.trim_end_matches(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | ':' | '(' | '"'));
        let (head, last) = match trimmed.rsplit_once(' ') {
            Some((head, last)) => (head, last),
            None => ("", trimmed),
        };
        if !last.is_empty() && CONNECTIVES.contains(&alnum_lower(last).as_str()) && !head.is_empty() {
            t = head.to_string();
        } else {
            t = trimmed.to_string();
            break;
        }
    }
    let t = t.trim_start_matches(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | ':' | ')' | '"'));
    strip_article(t).to_string()
}

/// Whether quotes and parentheses balance well enough to be used for structure.
fn structure_flags(s: &str) -> (bool, bool) {
    let quotes = s.matches('"').count().is_multiple_of(2);
    let parens = s.matches('(').count() == s.matches(')').count();
    (quotes, parens)
}

/// Byte offsets of the characters outside quotes and parentheses.
fn top_level_offsets(s: &str) -> Vec<usize> {
    let (use_quotes, use_parens) = structure_flags(s);
    let (mut depth, mut in_quote) = (0usize, false);
    let mut out = Vec::new();
    for (i, c) in s.char_indices() {
        match c {
            '"' if use_quotes => in_quote = !in_quote,
            '(' if use_parens && !in_quote => depth += 1,
            ')' if use_parens && !in_quote => depth = depth.saturating_sub(1),
            _ if depth == 0 && !in_quote => out.push(i),
            _ => {}
        }
    }
    out
}

/// `s` cut at every top-level `sep`.
fn split_top(s: &str, sep: char) -> Vec<&str> {
    let mut out = Vec::new();
    let mut last = 0;
    for i in top_level_offsets(s) {
        if s[i..].starts_with(sep) && i >= last {
            out.push(s.get(last..i).unwrap_or(""));
            last = i + sep.len_utf8();
        }
    }
    out.push(s.get(last..).unwrap_or(""));
    out
}

/// A segment that reads as one party: it ends in a corporate suffix or a parenthesised role.
fn looks_like_party(seg: &str) -> bool {
    let t = seg.trim().trim_end_matches([',', ';']).trim_end();
    if t.ends_with(')') {
        return true;
    }
    t.split_whitespace().last().is_some_and(|w| CORP_SUFFIXES.contains(&alnum_lower(w).as_str()))
}

/// `Corio Inc. (CORIO) and Changepoint, Inc. (CHANGEPOINT)` → two items; `Johnson and
/// Johnson` and `INSTITUTE OF GRASSLAND AND ENVIRONMENTAL RESEARCH` stay whole. Also cuts at
/// a top-level `, ` right after a parenthesised role when a party follows.
fn split_and(item: &str) -> Vec<&str> {
    let bytes = item.as_bytes();
    let cuts: Vec<(usize, usize)> = top_level_offsets(item)
        .into_iter()
        .filter_map(|i| {
            if item.get(i..i + 5).is_some_and(|t| t.eq_ignore_ascii_case(" and ")) {
                Some((i, i + 5))
            } else if item.get(i..i + 2) == Some(", ") && i > 0 && bytes.get(i - 1) == Some(&b')') {
                Some((i, i + 2))
            } else {
                None
            }
        })
        .collect();
    let mut out = Vec::new();
    let mut start = 0;
    for (ci, &(a, b)) in cuts.iter().enumerate() {
        if a < start {
            continue;
        }
        let Some(left) = item.get(start..a) else { continue };
        if !looks_like_party(left) {
            continue;
        }
        let right_ok = (ci..cuts.len()).any(|j| {
            let end = cuts.get(j + 1).map_or(item.len(), |c| c.0);
            item.get(b..end).is_some_and(looks_like_party)
        });
        if right_ok {
            out.push(left);
            start = b;
        }
    }
    out.push(item.get(start..).unwrap_or(""));
    out
}

fn push_roles(roles: &mut Vec<String>, new: impl IntoIterator<Item = String>) {
    for r in new {
        if !r.is_empty() && !roles.contains(&r) {
            roles.push(r);
        }
    }
}

/// Read one item ("Hydraspin USA, Inc. ("Subsidiary", ...)", "("Water Now")") into `parties`.
fn add_item(parties: &mut Vec<Party>, item: &str) {
    let item = item.trim().trim_matches(|c: char| c.is_whitespace() || matches!(c, ',' | ';'));
    if item.is_empty() {
        return;
    }
    let (use_quotes, use_parens) = structure_flags(item);
    let mut name = String::new();
    let mut roles: Vec<String> = Vec::new();
    let (mut depth, mut in_quote) = (0usize, false);
    let mut group = String::new();
    let mut quote = String::new();
    let mut inline: Vec<(usize, usize, String)> = Vec::new();
    for c in item.chars() {
        if depth > 0 {
            match c {
                '(' if !in_quote => depth += 1,
                ')' if !in_quote => depth -= 1,
                '"' => in_quote = !in_quote,
                _ => {}
            }
            if depth == 0 {
                let inner = std::mem::take(&mut group);
                let quoted: Vec<String> =
                    QUOTED.captures_iter(&inner).filter_map(|c| c.get(1)).map(|m| clean_role(m.as_str())).collect();
                if !quoted.is_empty() {
                    push_roles(&mut roles, quoted);
                } else {
                    // Unquoted: a role ("(CORIO)") when nothing but connectives follows it,
                    // part of the name otherwise ("Leasing (Shanghai) Co., Ltd."); decided below.
                    let t = collapse(&inner);
                    let lower = t.to_ascii_lowercase();
                    let descriptor = lower.starts_with("a ") || lower.starts_with("an ");
                    let role =
                        if !descriptor && t.split_whitespace().count() <= 4 { clean_role(&t) } else { String::new() };
                    let start = name.len();
                    name.push('(');
                    name.push_str(&t);
                    name.push(')');
                    inline.push((start, name.len(), role));
                }
                in_quote = false;
            } else {
                group.push(c);
            }
        } else if in_quote {
            if c == '"' {
                in_quote = false;
                push_roles(&mut roles, [clean_role(&std::mem::take(&mut quote))]);
            } else {
                quote.push(c);
            }
        } else {
            match c {
                '(' if use_parens => depth = 1,
                '"' if use_quotes => in_quote = true,
                _ => name.push(c),
            }
        }
    }
    // An unclosed quote or group keeps its text as name text.
    name.push_str(&quote);
    name.push_str(&group);
    let mut inline_roles = Vec::new();
    for (start, end, role) in inline.into_iter().rev() {
        let trailing = name.get(end..).unwrap_or("").split_whitespace().all(|w| {
            let w = alnum_lower(w);
            w.is_empty() || CONNECTIVES.contains(&w.as_str())
        });
        if trailing && name.get(start..end).is_some() {
            name.replace_range(start..end, " ");
            inline_roles.push(role);
        }
    }
    inline_roles.reverse();
    push_roles(&mut roles, inline_roles);
    let role_only = name.split_whitespace().all(|w| {
        let w = alnum_lower(w);
        w.is_empty() || CONNECTIVES.contains(&w.as_str())
    });
    let name = if role_only { String::new() } else { clean_name(&name) };
    if name.is_empty() {
        if roles.is_empty() {
            return;
        }
        match parties.last_mut() {
            Some(last) => push_roles(&mut last.roles, roles),
            None => parties.push(Party { name, roles }),
        }
    } else {
        parties.push(Party { name, roles });
    }
}

/// One line of a party answer: `;`-separated items, each maybe several parties joined by "and".
fn add_line(parties: &mut Vec<Party>, line: &str) {
    let line = collapse(line);
    let line = BULLET.replace(&line, "");
    for item in split_top(&line, ';') {
        for piece in split_and(item) {
            add_item(parties, piece);
        }
    }
}

fn json_strings(v: &serde_json::Value) -> Vec<String> {
    match v {
        serde_json::Value::String(s) => vec![s.clone()],
        serde_json::Value::Array(items) => items.iter().filter_map(|i| i.as_str().map(str::to_string)).collect(),
        _ => Vec::new(),
    }
}

fn add_json(parties: &mut Vec<Party>, v: &serde_json::Value, depth: usize) {
    if depth > 4 {
        return;
    }
    match v {
        serde_json::Value::String(s) => {
            for line in straighten(s).lines() {
                add_line(parties, line);
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|i| add_json(parties, i, depth + 1)),
        serde_json::Value::Object(map) => {
            let name = ["name", "party", "party_name", "legal_name", "full_name"]
                .iter()
                .find_map(|k| map.get(*k).and_then(|v| v.as_str()))
                .map(|n| clean_name(&straighten(n)))
                .unwrap_or_default();
            let mut roles = Vec::new();
            for key in ["roles", "role", "short_name", "alias", "aliases", "defined_term", "defined_as"] {
                if let Some(v) = map.get(key) {
                    push_roles(&mut roles, json_strings(v).iter().map(|r| clean_role(&straighten(r))));
                }
            }
            if !name.is_empty() || !roles.is_empty() {
                parties.push(Party { name, roles });
            } else if let Some(inner) = map.get("parties") {
                add_json(parties, inner, depth + 1);
            }
        }
        _ => {}
    }
}

/// The parties named in a CUAD gold answer or a model's answer.
///
/// Gold form: items split on `;` outside quotes and parentheses; an item that holds only
/// quoted names (`("Water Now")`) adds them as roles of the party before it (or becomes a party
/// with an empty name); quoted names in an item's parentheses are its roles
/// (`CERES, INC. ("CERES")`). Model form: a JSON list (of strings or `{name, roles}` objects),
/// newline-separated lines, or `A Inc. (A) and B, Inc. (B)` (cut at "and" only when both
/// sides end in a corporate suffix or a parenthesised role). Quotes may be straight or curly;
/// whitespace is collapsed; names lose trailing commas and a leading "the"/"a".
pub fn parse_parties(s: &str) -> Vec<Party> {
    tidy_party_list(parse_party_items(s))
}

/// Words that join the names of a collective reference ("CytoDyn and Vyera shall collectively
/// be referred to as ...").
const COLLECTIVE_GLUE: &[&str] = &[
    "and",
    "or",
    "the",
    "a",
    "each",
    "both",
    "together",
    "collectively",
    "individually",
    "shall",
    "be",
    "are",
    "is",
    "referred",
    "to",
    "as",
    "herein",
    "hereinafter",
    "sometimes",
    "with",
    "party",
    "parties",
];

/// One party per name. A name written twice (CUAD marks every mention; a cover page and the
/// preamble) is one party, its roles merged. An item that only names parties already listed,
/// joined by "and" ("Miltenyi and Bellicum", "Party A and Party B": how a contract defines the
/// parties together), is not another party. Text from a quote on ("Sorrent, Inc \"parties\" and
/// each individually ...", debris of a defined term) is not part of a name.
pub(crate) fn tidy_party_list(parties: Vec<Party>) -> Vec<Party> {
    let mut out: Vec<Party> = Vec::new();
    for mut p in parties {
        if let Some(i) = p.name.find('"').filter(|&i| i > 0) {
            p.name = clean_name(&p.name[..i]);
        }
        let folded = text_words(&p.name).join(" ");
        if let Some(same) = out.iter_mut().find(|q| !folded.is_empty() && text_words(&q.name).join(" ") == folded) {
            let roles = std::mem::take(&mut p.roles);
            push_roles(&mut same.roles, roles);
            continue;
        }
        let own: Vec<String> = text_words(&p.name);
        let known: HashSet<String> = out
            .iter()
            .flat_map(|q| text_words(&q.name).into_iter().chain(q.roles.iter().flat_map(|r| text_words(r))))
            .collect();
        let joined = own.iter().any(|w| w == "and");
        let letter_party = |w: &[String]| w.len() == 2 && w[0] == "party" && w[1].len() == 1;
        let collective = joined
            && out.len() >= 2
            && own.split(|w| w == "and" || w == "or").all(|side| {
                let named: Vec<&String> = side.iter().filter(|w| !COLLECTIVE_GLUE.contains(&w.as_str())).collect();
                letter_party(side) || (!named.is_empty() && named.iter().all(|w| known.contains(*w)))
            });
        if !collective {
            out.push(p);
        }
    }
    out
}

fn parse_party_items(s: &str) -> Vec<Party> {
    let text = straighten(s);
    let trimmed = text.trim();
    let mut parties = Vec::new();
    if trimmed.starts_with('[') || trimmed.starts_with('{') {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(trimmed) {
            add_json(&mut parties, &v, 0);
            if !parties.is_empty() {
                return parties;
            }
        } else if let Some(inner) = trimmed.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            // A list in Python's quoting: ['A Inc.', 'B LLC'].
            if inner.trim_start().starts_with('\'') {
                for part in inner.split("',") {
                    add_line(&mut parties, part.trim().trim_matches('\''));
                }
                if !parties.is_empty() {
                    return parties;
                }
            }
        }
    }
    for line in trimmed.lines() {
        add_line(&mut parties, line);
    }
    parties
}

fn token_counts<'a>(texts: impl IntoIterator<Item = &'a str>, stop: &[&str]) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for text in texts {
        let lower = text.to_lowercase();
        for tok in lower.split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty() && !stop.contains(t)) {
            *counts.entry(tok.to_string()).or_insert(0) += 1;
        }
    }
    counts
}

fn f1(a: &HashMap<String, usize>, b: &HashMap<String, usize>) -> f64 {
    let na: usize = a.values().sum();
    let nb: usize = b.values().sum();
    if na == 0 && nb == 0 {
        return 1.0;
    }
    if na == 0 || nb == 0 {
        return 0.0;
    }
    let overlap: usize = a.iter().map(|(t, n)| (*n).min(b.get(t).copied().unwrap_or(0))).sum();
    2.0 * overlap as f64 / (na + nb) as f64
}

/// Token F1 between two party lists: lower-cased alphanumeric word tokens of all names, as
/// multisets, ignoring corporate suffixes and "the"/"and"/"of". Both empty → 1.0.
pub fn parties_f1(a: &[Party], b: &[Party]) -> f64 {
    let ta = token_counts(a.iter().map(|p| p.name.as_str()), F1_STOPWORDS);
    let tb = token_counts(b.iter().map(|p| p.name.as_str()), F1_STOPWORDS);
    f1(&ta, &tb)
}

// ---------------------------------------------------------------------------------------------
// Normalise, resolve, compare
// ---------------------------------------------------------------------------------------------

fn first_at(re: &Regex, s: &str) -> Option<usize> {
    re.find(s).map(|m| m.start())
}

fn normalize_date(text: String) -> Value {
    // before the whole dates: `09/14/20[]` is not 2020-09-14
    if let Some((month, day)) = unfilled_brackets(&text) {
        Value::UnfilledDate { month, day }
    } else if let Some((_, _, date)) = find_date(&text) {
        Value::Date { date }
    } else if let Some((year, month)) = find_partial_date(&text) {
        Value::PartialDate { year, month }
    } else if let Some((month, day)) = find_unfilled_date(&text) {
        Value::UnfilledDate { month, day }
    } else if let Some(event) = date_event(&text) {
        Value::OnEvent { event }
    } else {
        Value::Text { text }
    }
}

/// Whether `text` reads as a date defined by an event (and not the agreement's own date).
pub(crate) fn is_date_event(text: &str) -> bool {
    date_event(text).is_some()
}

/// The event of an answer that is a date defined by one ("upon the date of the last
/// signature." → "the date of the last signature"); not the agreement's own date.
fn date_event(text: &str) -> Option<String> {
    let event = ON_EVENT.captures(text)?.name("event")?.as_str().trim().trim_end_matches(['.', ',', ';', ' ']);
    (!OWN_DATE.is_match(event)).then(|| event.to_string())
}

fn unfilled_or_text(text: String) -> Value {
    match find_unfilled_date(&text) {
        Some((month, day)) => Value::UnfilledDate { month, day },
        None => Value::Text { text },
    }
}

/// Whichever of perpetual / until-terminated / a duration is written first; else a blank or
/// redaction mark where the length should be ("additional periods of ****").
fn normalize_duration(text: String) -> Value {
    let mut candidates: Vec<(usize, Value)> = Vec::new();
    if let Some(&(start, _, duration)) = duration_hits(&text).first() {
        candidates.push((start, Value::Duration { duration }));
    }
    if let Some(start) = first_at(&PERPETUAL, &text) {
        candidates.push((start, Value::Perpetual));
    }
    if let Some(start) = first_at(&UNTIL_TERMINATED, &text) {
        candidates.push((start, Value::UntilTerminated));
    }
    match candidates.into_iter().min_by_key(|(start, _)| *start) {
        Some((_, v)) => v,
        None if NEGATIVE.is_match(&text) => Value::None,
        None if BLANK_MARK.is_match(&text) => Value::Withheld,
        None => Value::Text { text },
    }
}

/// Whichever of a relative term with a named anchor, a date, perpetual or until-terminated is
/// written first; then a bare duration (relative to "start"); then a partial date; then an
/// answer that is the event the term runs until.
fn normalize_end_date(text: String) -> Value {
    if let Some((month, day)) = unfilled_brackets(&text) {
        return Value::UnfilledDate { month, day };
    }
    let mut candidates: Vec<(usize, Value)> = Vec::new();
    if let Some((start, duration, from, date)) = find_relative(&text) {
        let v = match date.and_then(|d| duration.add_to(d)) {
            Some(date) => Value::Date { date },
            None => Value::Relative { duration, from },
        };
        candidates.push((start, v));
    }
    if let Some((start, _, date)) = find_date(&text) {
        candidates.push((start, Value::Date { date }));
    }
    if let Some(start) = first_at(&PERPETUAL, &text) {
        candidates.push((start, Value::Perpetual));
    }
    if let Some(start) = first_at(&UNTIL_TERMINATED, &text) {
        candidates.push((start, Value::UntilTerminated));
    }
    if let Some((_, v)) = candidates.into_iter().min_by_key(|(start, _)| *start) {
        return v;
    }
    if let Some(&(_, _, duration)) = duration_hits(&text).first() {
        return Value::Relative { duration, from: "start".to_string() };
    }
    if let Some((year, month)) = find_partial_date(&text) {
        return Value::PartialDate { year, month };
    }
    match UNTIL_EVENT.captures(&text).and_then(|c| c.name("event")).filter(|e| !is_own_end(e.as_str())) {
        Some(event) => {
            let event = event.as_str().trim().trim_end_matches(['.', ',', ';', ' ']);
            // "for so long as" is kept as "so long as"; "for the duration of" as written
            let event = event.strip_prefix("for ").filter(|e| SO_LONG_AS.is_match(e)).unwrap_or(event);
            Value::UntilEvent { event: event.to_string() }
        }
        None => unfilled_or_text(text),
    }
}

/// Normalise a raw answer for a field of this kind.
///
/// Empty answers and "none", "n/a", "not specified", "not stated", "null", "no" (and, for
/// durations, "no renewal" and unreadable answers that start with a negation: "does not
/// renew automatically") give [`Value::None`].
///
/// - [`Kind::Text`] → the text, whitespace collapsed.
/// - [`Kind::Parties`] → [`parse_parties`].
/// - [`Kind::Date`] → a date, else a partial date, else an unfilled date (a template's blank,
///   a day and month without a year), else the event that dates it, where that is the whole
///   answer and not the agreement's own date ("the date of the last signature" →
///   [`Value::OnEvent`]; "the date first above written" stays text), else text.
/// - [`Kind::EndDate`] → the first written of a date, "perpetual", "until terminated" or a term
///   from a named anchor ("five years from the Effective Date", "the fifth anniversary of the
///   Effective Date" → [`Value::Relative`]; resolved to a date when the anchor is a written
///   date); else a bare duration (relative to "start"); else a partial date; else the event
///   the term runs until, where that is the whole answer ("until the expiration of the Royalty
///   Term" → [`Value::UntilEvent`]); else an unfilled date; else text.
/// - [`Kind::Duration`] → the first written of "perpetual"/"indefinitely", "until terminated"
///   or a duration; else, where a blank or redaction mark stands for the length ("successive
///   [***] terms"), [`Value::Withheld`]; else text.
/// - [`Kind::Jurisdiction`] → [`parse_jurisdiction`], else [`Value::Withheld`] where a blank
///   or redaction mark stands for it ("the [***]"), else text.
pub fn normalize(kind: Kind, raw: &str) -> Value {
    let text = strip_wrapping_quotes(&clean(raw));
    if is_noneish(&text, kind) {
        return Value::None;
    }
    match kind {
        Kind::Text => Value::Text { text },
        Kind::Parties => {
            let parties = parse_parties(raw);
            if parties.is_empty() {
                Value::Text { text }
            } else {
                Value::Parties { parties }
            }
        }
        Kind::Date => normalize_date(text),
        Kind::EndDate => normalize_end_date(text),
        Kind::Duration => normalize_duration(text),
        Kind::Jurisdiction => match parse_jurisdiction(&text) {
            Some((name, code)) => Value::Jurisdiction { name, code },
            // "the [***]": a governing law the filing redacted
            None if BLANK_MARK.is_match(&text) => Value::Withheld,
            None => Value::Text { text },
        },
    }
}

/// Resolve an end date from a start the contract leaves partly blank ("as of ________, 2020",
/// "April __, 2005"): a [`Value::Relative`] or [`Value::Duration`] gives a
/// [`Value::PartialDate`] as precise as its start, the way CUAD answers such contracts
/// (`[]/[]/2020` + two years → `[]/[]/2022`; `04/[]/2005` + 18 months → `10/[]/2006`). Days
/// and weeks count in whole months of 30 days; where only the year is known, whole years of
/// the term are added (six months from `[]/[]/2004` stays in 2004, the year the start gives).
/// Other values (and overflow) come back unchanged.
pub fn resolve_end_partial(value: Value, year: i32, month: Option<u32>) -> Value {
    let (Value::Relative { duration, .. } | Value::Duration { duration }) = &value else {
        return value;
    };
    let months = duration.total_months() + duration.total_days() / 30;
    let Ok(months) = i64::try_from(months) else { return value };
    let resolved = match month {
        Some(m) if (1..=12).contains(&m) => {
            let index = i64::from(year) * 12 + i64::from(m) - 1 + months;
            i32::try_from(index.div_euclid(12))
                .ok()
                .map(|year| Value::PartialDate { year, month: Some(index.rem_euclid(12) as u32 + 1) })
        }
        _ => i32::try_from(i64::from(year) + months / 12).ok().map(|year| Value::PartialDate { year, month: None }),
    };
    resolved.unwrap_or(value)
}

/// Resolve an end date from a start the template leaves without its year ("this 30th day of
/// April", "this ____ day of ______, 20__"): a [`Value::Relative`] or [`Value::Duration`] gives
/// the [`Value::UnfilledDate`] that much later, as CUAD answers such contracts (`04/30/[]` +
/// three years → `04/30/[]`): the month moves by the term's months where it is known, the day
/// stays where the term has no days or weeks. Other values come back unchanged.
pub fn resolve_end_unfilled(value: Value, month: Option<u32>, day: Option<u32>) -> Value {
    let (Value::Relative { duration, .. } | Value::Duration { duration }) = &value else {
        return value;
    };
    let shift = duration.total_months() % 12;
    let month = month.filter(|m| (1..=12).contains(m)).map(|m| {
        // in range: (m - 1 + shift) % 12 < 12
        ((u64::from(m) - 1 + shift) % 12) as u32 + 1
    });
    let day = day.filter(|_| duration.total_days() == 0);
    Value::UnfilledDate { month, day }
}

/// Resolve an end date: a [`Value::Relative`] or [`Value::Duration`] plus a known effective /
/// start date gives the [`Value::Date`] that much later. Other values (and overflow) come back
/// unchanged.
pub fn resolve_end(value: Value, start: Option<NaiveDate>) -> Value {
    let (Some(start), Value::Relative { duration, .. } | Value::Duration { duration }) = (start, &value) else {
        return value;
    };
    match duration.add_to(start) {
        Some(date) => Value::Date { date },
        None => value,
    }
}

/// Lower-cased words, apostrophes dropped, other punctuation as spaces.
fn text_words(s: &str) -> Vec<String> {
    // "Construction & Maintenance Agreement" is "Construction and Maintenance Agreement"
    let lower = s.to_lowercase().replace('&', " and ");
    let no_apostrophes: String = lower.chars().filter(|c| !matches!(c, '\'' | '\u{2019}')).collect();
    no_apostrophes.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_string).collect()
}

fn same_text(a: &str, b: &str) -> bool {
    let (wa, wb) = (text_words(a), text_words(b));
    if wa == wb {
        return true;
    }
    if wa.is_empty() || wb.is_empty() {
        return false;
    }
    let (ja, jb) = (format!(" {} ", wa.join(" ")), format!(" {} ", wb.join(" ")));
    if !ja.contains(&jb) && !jb.contains(&ja) {
        return false;
    }
    let ta = token_counts(wa.iter().map(String::as_str), &[]);
    let tb = token_counts(wb.iter().map(String::as_str), &[]);
    f1(&ta, &tb) >= 0.8
}

fn date_matches_partial(date: &NaiveDate, year: i32, month: Option<u32>) -> bool {
    date.year() == year && month.is_none_or(|m| m == date.month())
}

/// The evaluation's equality.
///
/// Dates: same day. Partial dates: same year, and same month when both have one; a full date
/// matches a partial one when the year (and the partial's month) agree. Unfilled dates: the
/// same month and day written (or both left blank). Durations:
/// [`Duration::same_length`]; relative terms: same-length durations (anchors ignored).
/// Perpetual and until-terminated equal themselves. Jurisdictions: same code. Parties:
/// [`parties_f1`] ≥ 0.8. Text: equal ignoring case, whitespace and punctuation, or one contains
/// the other with token F1 ≥ 0.8. [`Value::None`] equals only itself; different types never
/// match.
pub fn same_answer(a: &Value, b: &Value) -> bool {
    use Value as V;
    match (a, b) {
        (V::None, V::None)
        | (V::Perpetual, V::Perpetual)
        | (V::UntilTerminated, V::UntilTerminated)
        | (V::Withheld, V::Withheld) => true,
        (V::UntilEvent { event: x }, V::UntilEvent { event: y })
        | (V::OnEvent { event: x }, V::OnEvent { event: y }) => same_text(x, y),
        (V::Date { date: x }, V::Date { date: y }) => x == y,
        (V::PartialDate { year: ya, month: ma }, V::PartialDate { year: yb, month: mb }) => {
            ya == yb && (ma.is_none() || mb.is_none() || ma == mb)
        }
        (V::Date { date }, V::PartialDate { year, month }) | (V::PartialDate { year, month }, V::Date { date }) => {
            date_matches_partial(date, *year, *month)
        }
        (V::UnfilledDate { month: ma, day: da }, V::UnfilledDate { month: mb, day: db }) => ma == mb && da == db,
        (V::Duration { duration: x }, V::Duration { duration: y }) => x.same_length(y),
        (V::Relative { duration: x, .. }, V::Relative { duration: y, .. }) => x.same_length(y),
        (V::Jurisdiction { code: x, .. }, V::Jurisdiction { code: y, .. }) => x.eq_ignore_ascii_case(y),
        (V::Parties { parties: x }, V::Parties { parties: y }) => parties_f1(x, y) >= 0.8,
        (V::Text { text: x }, V::Text { text: y }) => same_text(x, y),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ymd(y: i32, m: u32, d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, d).expect("valid test date")
    }

    fn dur(years: u32, months: u32, weeks: u32, days: u32) -> Duration {
        Duration { years, months, weeks, days }
    }

    fn party(name: &str, roles: &[&str]) -> Party {
        Party { name: name.to_string(), roles: roles.iter().map(|r| r.to_string()).collect() }
    }

    fn jur(s: &str) -> Option<(String, String)> {
        parse_jurisdiction(s)
    }

    fn code(s: &str) -> Option<String> {
        parse_jurisdiction(s).map(|(_, c)| c)
    }

    // ---- dates ----

    #[test]
    fn dates_numeric() {
        assert_eq!(parse_date("J anuary 15, 2026"), Some(ymd(2026, 1, 15)));
        assert_eq!(parse_date("the 1st day of Sep tember, 2019"), Some(ymd(2019, 9, 1)));
        // a 1 that OCR read as a letter in a day's ordinal
        assert_eq!(parse_date("this Ist day of September 2016"), Some(ymd(2016, 9, 1)));
        assert_eq!(parse_date("December Ist, 2015"), Some(ymd(2015, 12, 1)));
        assert_eq!(parse_date("the 2Ist of March, 2001"), Some(ymd(2001, 3, 21)));
        assert_eq!(parse_date("the Ilth day of May, 2001"), Some(ymd(2001, 5, 11)));
        assert!(
            ocr_ordinal_ones("a list of May 2001, the Ist item, Ilst day").is_empty(),
            "not a day, or a wrong suffix"
        );
        assert_eq!(parse_date("4/6/07"), Some(ymd(2007, 4, 6)));
        assert_eq!(parse_date("4/1/07"), Some(ymd(2007, 4, 1)));
        assert_eq!(parse_date("12/13/99"), Some(ymd(1999, 12, 13)));
        assert_eq!(parse_date("1/1/49"), Some(ymd(2049, 1, 1)));
        assert_eq!(parse_date("1/1/50"), Some(ymd(1950, 1, 1)));
        assert_eq!(parse_date("1/1/00"), Some(ymd(2000, 1, 1)));
        assert_eq!(parse_date("31/01/2025"), Some(ymd(2025, 1, 31)));
        assert_eq!(parse_date("2007-04-06"), Some(ymd(2007, 4, 6)));
        assert_eq!(parse_date("2007-04-06T00:00:00Z"), Some(ymd(2007, 4, 6)));
        assert_eq!(parse_date("31.01.2025"), Some(ymd(2025, 1, 31)));
        assert_eq!(parse_date("04/06/2007"), Some(ymd(2007, 4, 6)));
        // a two-digit year after dots: a date only where it is the whole answer
        assert_eq!(parse_date("20.3.98"), Some(ymd(1998, 3, 20)));
        assert_eq!(parse_date(" 30.4.98. "), Some(ymd(1998, 4, 30)));
        assert_eq!(parse_date("as set out in Section 12.3.14"), None);
        assert_eq!(parse_date("31.2.98"), None);
        assert!(matches!(normalize(Kind::EndDate, "30.4.98"), Value::Date { date } if date == ymd(1998, 4, 30)));
    }

    #[test]
    fn dates_written() {
        let d = ymd(2007, 4, 6);
        for s in
            ["April 6, 2007", "April 6 2007", "6 April 2007", "6th April, 2007", "April 6th, 2007", "APRIL 6, 2007"]
        {
            assert_eq!(parse_date(s), Some(d), "{s}");
        }
        let first = ymd(2007, 4, 1);
        for s in [
            "1st day of April, 2007",
            "the 1st day of April, 2007 (",
            "first day of April, 2007",
            "the First Day of April 2007",
        ] {
            assert_eq!(parse_date(s), Some(first), "{s}");
        }
        assert_eq!(parse_date("this 15th day of October 2009"), Some(ymd(2009, 10, 15)));
        assert_eq!(parse_date("October 15th, 2009"), Some(ymd(2009, 10, 15)));
        assert_eq!(parse_date("Sept. 30, 2019"), Some(ymd(2019, 9, 30)));
        assert_eq!(parse_date("Dec 2, 2026"), Some(ymd(2026, 12, 2)));
        assert_eq!(parse_date("as of March 27, 2020"), Some(ymd(2020, 3, 27)));
        assert_eq!(parse_date("twenty-fifth day of June, 2014"), Some(ymd(2014, 6, 25)));
        assert_eq!(parse_date("thirty-first day of December, 2010"), Some(ymd(2010, 12, 31)));
        assert_eq!(parse_date("the twenty first day of May 2001"), Some(ymd(2001, 5, 21)));
        assert_eq!(parse_date("March 1,2010"), Some(ymd(2010, 3, 1)));
    }

    #[test]
    fn dates_in_sentences_and_first_wins() {
        assert_eq!(
            parse_date("This Agreement is made as of May 5, 1998 by and between Acme Corp. and Beta LLC"),
            Some(ymd(1998, 5, 5))
        );
        assert_eq!(parse_date("dated January 2, 2001, amended 3/4/2005"), Some(ymd(2001, 1, 2)));
        assert_eq!(parse_date("amended 3/4/2005, dated January 2, 2001"), Some(ymd(2005, 3, 4)));
        assert_eq!(parse_date("“April 6, 2007”"), Some(ymd(2007, 4, 6)));
        // An invalid first date is skipped in favour of a later valid one.
        assert_eq!(parse_date("2/30/07 or 3/1/07"), Some(ymd(2007, 3, 1)));
    }

    #[test]
    fn dates_rejected() {
        assert_eq!(parse_date("2/30/07"), None);
        assert_eq!(parse_date("13/13/2007"), None);
        assert_eq!(parse_date("[]/[]/2009"), None);
        assert_eq!(parse_date("June 2014"), None);
        assert_eq!(parse_date("June, 2014"), None);
        assert_eq!(parse_date("February 30, 2014"), None);
        assert_eq!(parse_date("version 1.2.3"), None);
        assert_eq!(parse_date("the Licensee may 30 days"), None);
        assert_eq!(parse_date(""), None);
        assert_eq!(parse_date("4/6/200"), None);
    }

    #[test]
    fn unfilled_dates() {
        let u = |month, day| Value::UnfilledDate { month, day };
        // CUAD's forms: the year left blank, whatever else is written
        assert_eq!(normalize(Kind::Date, "[]/[]/20[]"), u(None, None));
        assert_eq!(normalize(Kind::Date, "[]/[]/19[]"), u(None, None));
        assert_eq!(normalize(Kind::Date, "[]/[]/[][]"), u(None, None));
        assert_eq!(normalize(Kind::Date, "[]/[]/[]"), u(None, None));
        assert_eq!(normalize(Kind::Date, "04/30/[]"), u(Some(4), Some(30)));
        assert_eq!(normalize(Kind::Date, "09/14/200[]"), u(Some(9), Some(14)));
        // as contracts write them
        assert_eq!(normalize(Kind::Date, "this _____ day of _________, 20___"), u(None, None));
        assert_eq!(normalize(Kind::Date, "this day of ___________________, 19__"), u(None, None));
        assert_eq!(normalize(Kind::Date, "this day of , 20"), u(None, None));
        assert_eq!(normalize(Kind::Date, "[●]"), u(None, None));
        assert_eq!(normalize(Kind::Date, "[Date]"), u(None, None));
        assert_eq!(normalize(Kind::Date, "____________"), u(None, None));
        assert_eq!(normalize(Kind::Date, "30th day of April"), u(Some(4), Some(30)));
        assert_eq!(normalize(Kind::Date, "the 1st day of December,"), u(Some(12), Some(1)));
        assert_eq!(normalize(Kind::Date, "14 day of SEPTEMBER, 200_"), u(Some(9), Some(14)));
        assert_eq!(normalize(Kind::Date, "the first day of June, 20__"), u(Some(6), Some(1)));
        assert_eq!(normalize(Kind::EndDate, "4/30/[][]"), u(Some(4), Some(30)));
        assert_eq!(normalize(Kind::EndDate, "09/14/20[]"), u(Some(9), Some(14)));
        assert_eq!(normalize(Kind::Date, "09/14/20[]"), u(Some(9), Some(14)));
        // not unfilled: a year is known, or nothing says a date was left out
        assert_eq!(normalize(Kind::Date, "[]/[]/2020"), Value::PartialDate { year: 2020, month: None });
        assert_eq!(normalize(Kind::Date, "5/[]/09"), Value::PartialDate { year: 2009, month: Some(5) });
        assert_eq!(normalize(Kind::Date, "as of ______, 2020"), Value::PartialDate { year: 2020, month: None });
        assert_eq!(normalize(Kind::Date, "April"), Value::Text { text: "April".into() });
        assert_eq!(normalize(Kind::Date, "upon signature"), Value::Text { text: "upon signature".into() });
        // equality and the stored forms
        assert!(same_answer(&u(Some(4), Some(30)), &normalize(Kind::Date, "made this 30th day of April (the")));
        assert!(!same_answer(&u(Some(4), Some(30)), &u(None, None)));
        assert!(!same_answer(&u(None, None), &Value::None));
        assert_eq!(u(Some(4), Some(30)).canonical(), "--04-30");
        assert_eq!(u(Some(4), None).canonical(), "--04");
        assert_eq!(u(None, Some(30)).canonical(), "---30");
        assert_eq!(u(None, None).canonical(), "blank");
        assert_eq!(u(None, None).type_name(), "unfilled_date");
    }

    #[test]
    fn normalize_date_kind() {
        assert_eq!(normalize(Kind::Date, "4/6/07"), Value::Date { date: ymd(2007, 4, 6) });
        assert_eq!(normalize(Kind::Date, "[]/[]/2009"), Value::PartialDate { year: 2009, month: None });
        assert_eq!(normalize(Kind::Date, "5/[]/2009"), Value::PartialDate { year: 2009, month: Some(5) });
        assert_eq!(normalize(Kind::Date, "June, 2014"), Value::PartialDate { year: 2014, month: Some(6) });
        assert_eq!(normalize(Kind::Date, "June 2014"), Value::PartialDate { year: 2014, month: Some(6) });
        assert_eq!(normalize(Kind::Date, "as of ____________, 2009"), Value::PartialDate { year: 2009, month: None });
        assert_eq!(normalize(Kind::Date, "June __, 2014"), Value::PartialDate { year: 2014, month: Some(6) });
        assert_eq!(normalize(Kind::Date, "2009"), Value::PartialDate { year: 2009, month: None });
        assert_eq!(normalize(Kind::Date, "[·] day of [·], 2019"), Value::PartialDate { year: 2019, month: None });
        assert_eq!(normalize(Kind::Date, "[ ] day of [ ], 2020"), Value::PartialDate { year: 2020, month: None });
        assert_eq!(normalize(Kind::Date, "this day of , 2015"), Value::PartialDate { year: 2015, month: None });
        assert_eq!(normalize(Kind::Date, "March [•], 2016"), Value::PartialDate { year: 2016, month: Some(3) });
        assert_eq!(
            normalize(Kind::Date, "the date of signature"),
            Value::OnEvent { event: "the date of signature".into() }
        );
        assert_eq!(normalize(Kind::Date, "see Section 4"), Value::Text { text: "see Section 4".into() });
        assert_eq!(normalize(Kind::Date, "  "), Value::None);
        assert_eq!(normalize(Kind::Date, "N/A"), Value::None);
        assert_eq!(normalize(Kind::Date, "\"April 6, 2007\""), Value::Date { date: ymd(2007, 4, 6) });
    }

    // ---- durations ----

    #[test]
    fn durations() {
        let cases: &[(&str, Duration)] = &[
            ("successive 1 year", dur(1, 0, 0, 0)),
            ("90 days", dur(0, 0, 0, 90)),
            ("ninety (90) days", dur(0, 0, 0, 90)),
            ("twelve (12) months", dur(0, 12, 0, 0)),
            ("five years", dur(5, 0, 0, 0)),
            ("one-year", dur(1, 0, 0, 0)),
            ("one year periods", dur(1, 0, 0, 0)),
            ("successive 12 months; successive 6 months;", dur(0, 12, 0, 0)),
            ("2 weeks", dur(0, 0, 2, 0)),
            ("six (6) months", dur(0, 6, 0, 0)),
            ("thirty (30) calendar days", dur(0, 0, 0, 30)),
            ("ten (10) Contract Years", dur(10, 0, 0, 0)),
            // a "1" read as a capital I
            ("one (I) year", dur(1, 0, 0, 0)),
            ("one (1) additional year", dur(1, 0, 0, 0)),
            ("1.5 years", dur(1, 6, 0, 0)),
            ("a year", dur(1, 0, 0, 0)),
            ("an additional year", dur(1, 0, 0, 0)),
            ("10 years", dur(10, 0, 0, 0)),
            ("forty-five days", dur(0, 0, 0, 45)),
            ("forty five (45) days", dur(0, 0, 0, 45)),
            ("one hundred eighty days", dur(0, 0, 0, 180)),
            ("one hundred and twenty (120) days", dur(0, 0, 0, 120)),
            ("sixty days", dur(0, 0, 0, 60)),
            ("twenty years", dur(20, 0, 0, 0)),
            ("fifty days", dur(0, 0, 0, 50)),
            ("hundred days", dur(0, 0, 0, 100)),
            ("seventeen months", dur(0, 17, 0, 0)),
            ("(90) days", dur(0, 0, 0, 90)),
            ("12-month", dur(0, 12, 0, 0)),
            ("2,000 days", dur(0, 0, 0, 2000)),
            ("three (3) business days", dur(0, 0, 0, 3)),
            ("Two Successive Five-Year Periods", dur(5, 0, 0, 0)),
            ("twelve(12)months", dur(0, 12, 0, 0)),
            ("ninety (90) days' notice", dur(0, 0, 0, 90)),
            ("within a period of thirty (30) days", dur(0, 0, 0, 30)),
        ];
        for (s, want) in cases {
            assert_eq!(parse_duration(s), Some(*want), "{s}");
        }
        assert_eq!(parse_duration("one or more years"), None);
        assert_eq!(parse_duration("yearly"), None);
        assert_eq!(parse_duration(""), None);
        assert_eq!(parse_duration("99999999999999999999 days"), None);
        assert_eq!(
            parse_duration(
                "hundred hundred hundred hundred hundred hundred hundred hundred hundred hundred hundred days"
            ),
            None
        );
    }

    #[test]
    fn duration_iso_and_length() {
        assert_eq!(dur(1, 0, 0, 0).to_iso(), "P1Y");
        assert_eq!(dur(0, 0, 0, 90).to_iso(), "P90D");
        assert_eq!(dur(1, 6, 0, 0).to_iso(), "P1Y6M");
        assert_eq!(dur(0, 0, 2, 0).to_iso(), "P2W");
        assert_eq!(dur(0, 0, 1, 3).to_iso(), "P1W3D");
        assert_eq!(Duration::default().to_iso(), "P0D");
        assert!(dur(0, 12, 0, 0).same_length(&dur(1, 0, 0, 0)));
        assert!(dur(0, 0, 2, 0).same_length(&dur(0, 0, 0, 14)));
        assert!(dur(1, 6, 0, 0).same_length(&dur(0, 18, 0, 0)));
        assert!(!dur(0, 1, 0, 0).same_length(&dur(0, 0, 0, 30)));
        assert!(!dur(1, 0, 0, 0).same_length(&dur(0, 0, 0, 365)));
        assert!(dur(u32::MAX, u32::MAX, u32::MAX, u32::MAX).same_length(&dur(u32::MAX, u32::MAX, u32::MAX, u32::MAX)));
    }

    #[test]
    fn duration_add_to() {
        assert_eq!(dur(1, 0, 0, 0).add_to(ymd(2007, 4, 6)), Some(ymd(2008, 4, 6)));
        assert_eq!(dur(0, 1, 0, 0).add_to(ymd(2007, 1, 31)), Some(ymd(2007, 2, 28)));
        assert_eq!(dur(0, 0, 0, 90).add_to(ymd(2007, 1, 1)), Some(ymd(2007, 4, 1)));
        assert_eq!(dur(1, 6, 1, 1).add_to(ymd(2000, 1, 1)), Some(ymd(2001, 7, 9)));
        assert_eq!(dur(u32::MAX, 0, 0, 0).add_to(ymd(2000, 1, 1)), None);
        assert_eq!(dur(0, 0, 0, u32::MAX).add_to(ymd(2000, 1, 1)), None);
    }

    #[test]
    fn normalize_duration_kind() {
        assert_eq!(normalize(Kind::Duration, "successive 1 year"), Value::Duration { duration: dur(1, 0, 0, 0) });
        assert_eq!(normalize(Kind::Duration, "perpetual"), Value::Perpetual);
        assert_eq!(normalize(Kind::Duration, "indefinitely"), Value::Perpetual);
        assert_eq!(normalize(Kind::Duration, "in perpetuity"), Value::Perpetual);
        assert_eq!(normalize(Kind::Duration, "until terminated"), Value::UntilTerminated);
        assert_eq!(normalize(Kind::Duration, "Until terminated by either party"), Value::UntilTerminated);
        assert_eq!(normalize(Kind::Duration, "until either party terminates"), Value::UntilTerminated);
        assert_eq!(
            normalize(Kind::Duration, "successive one-year terms until terminated"),
            Value::Duration { duration: dur(1, 0, 0, 0) }
        );
        // a length the filing redacted or the form left blank: stated, not given
        for raw in [
            "additional periods of ****",
            "successive [***] terms",
            "[* * *]",
            "****",
            "successive []",
            "______ months",
        ] {
            assert_eq!(normalize(Kind::Duration, raw), Value::Withheld, "{raw}");
        }
        assert_eq!(Value::Withheld.canonical(), "blank");
        assert_eq!(normalize(Kind::Duration, "no renewal"), Value::None);
        assert_eq!(normalize(Kind::Duration, "No."), Value::None);
        assert_eq!(normalize(Kind::Duration, "does not renew automatically"), Value::None);
        assert_eq!(normalize(Kind::Duration, "not specified"), Value::None);
        assert_eq!(normalize(Kind::Duration, "null"), Value::None);
        assert_eq!(
            normalize(Kind::Duration, "same as initial term"),
            Value::Text { text: "same as initial term".into() }
        );
    }

    // ---- end dates ----

    #[test]
    fn end_dates_that_are_events() {
        let event = |e: &str| Value::UntilEvent { event: e.to_string() };
        assert_eq!(
            normalize(Kind::EndDate, "until the expiration of the Royalty Term"),
            event("the expiration of the Royalty Term")
        );
        assert_eq!(
            normalize(Kind::EndDate, "Upon the completion of the Project."),
            event("the completion of the Project")
        );
        assert_eq!(
            normalize(Kind::EndDate, "for so long as DNP remains a Shareholder"),
            event("so long as DNP remains a Shareholder")
        );
        assert_eq!(
            event("so long as DNP remains a Shareholder").canonical(),
            "for so long as DNP remains a Shareholder"
        );
        assert_eq!(event("the expiration of the Royalty Term").canonical(), "until the expiration of the Royalty Term");
        // the life of another agreement, as written; this agreement's own is no event
        assert_eq!(normalize(Kind::EndDate, "for the duration of the Lease"), event("for the duration of the Lease"));
        assert_eq!(event("during the term of the LSA").canonical(), "during the term of the LSA");
        assert!(!matches!(normalize(Kind::EndDate, "for the term of this Agreement"), Value::UntilEvent { .. }));
        assert_eq!(event("x").type_name(), "until_event");
        // a date, a term or a year inside the event is what the answer gives
        assert_eq!(
            normalize(
                Kind::EndDate,
                "until the earlier of (i) the first anniversary of June 1, 2019 and (ii) the sale"
            ),
            Value::Date { date: ymd(2020, 6, 1) }
        );
        assert_eq!(
            normalize(Kind::EndDate, "until the end of December 2015"),
            Value::PartialDate { year: 2015, month: Some(12) }
        );
        // a sentence that is not an event stays text, and so does the agreement's own end
        assert!(matches!(normalize(Kind::EndDate, "as agreed by the parties"), Value::Text { .. }));
        assert!(matches!(normalize(Kind::EndDate, "upon the termination of this Agreement"), Value::Text { .. }));
        assert!(matches!(normalize(Kind::EndDate, "the last day of the Initial Term"), Value::Text { .. }));
        assert!(same_answer(&event("the Expiration of the Term."), &event("the expiration of the term")));
    }

    #[test]
    fn dates_defined_by_an_event() {
        let event = |e: &str| Value::OnEvent { event: e.to_string() };
        assert_eq!(
            normalize(Kind::Date, "the date of the last signature on the last page of this Agreement."),
            event("the date of the last signature on the last page of this Agreement")
        );
        assert_eq!(normalize(Kind::Date, "upon the Closing Date"), event("the Closing Date"));
        assert_eq!(
            normalize(Kind::Date, "the later of the dates beneath the signatures"),
            event("the later of the dates beneath the signatures")
        );
        assert_eq!(event("the Closing Date").canonical(), "on the Closing Date");
        assert_eq!(event("x").type_name(), "on_event");
        // a date inside the event is the answer; a blank is a template's date
        assert_eq!(
            normalize(Kind::Date, "the Closing Date, i.e. December 10, 1993"),
            Value::Date { date: ymd(1993, 12, 10) }
        );
        assert_eq!(
            normalize(Kind::Date, "the ____ day of ______, 20__"),
            Value::UnfilledDate { month: None, day: None }
        );
        // the agreement's own date is no event
        for own in ["the date first above written", "the date hereof", "the date of this Agreement"] {
            assert!(matches!(normalize(Kind::Date, own), Value::Text { .. }), "{own}");
        }
        assert!(same_answer(&event("The Closing Date."), &event("the closing date")));
        assert!(!same_answer(&event("the Closing Date"), &Value::Date { date: ymd(1993, 12, 10) }));
    }

    #[test]
    fn normalize_end_date_kind() {
        let rel = |years, from: &str| Value::Relative { duration: dur(years, 0, 0, 0), from: from.to_string() };
        assert_eq!(normalize(Kind::EndDate, "December 31, 2012"), Value::Date { date: ymd(2012, 12, 31) });
        assert_eq!(normalize(Kind::EndDate, "perpetual"), Value::Perpetual);
        assert_eq!(normalize(Kind::EndDate, "in perpetuity"), Value::Perpetual);
        assert_eq!(normalize(Kind::EndDate, "until terminated"), Value::UntilTerminated);
        assert_eq!(normalize(Kind::EndDate, "until terminated by either party"), Value::UntilTerminated);
        assert_eq!(normalize(Kind::EndDate, "five years from the Effective Date"), rel(5, "Effective Date"));
        assert_eq!(normalize(Kind::EndDate, "15 years after the Effective Date"), rel(15, "Effective Date"));
        assert_eq!(normalize(Kind::EndDate, "the fifth anniversary of the Effective Date"), rel(5, "Effective Date"));
        assert_eq!(normalize(Kind::EndDate, "the 3rd anniversary of the Launch Date."), rel(3, "Launch Date"));
        assert_eq!(
            normalize(Kind::EndDate, "five (5) years from the \"Effective Date\", unless terminated earlier"),
            rel(5, "Effective Date")
        );
        assert_eq!(normalize(Kind::EndDate, "one year"), rel(1, "start"));
        assert_eq!(normalize(Kind::EndDate, "a term of 3 years"), rel(3, "start"));
        assert_eq!(normalize(Kind::EndDate, "two years from"), rel(2, "start"));
        // An anchor that is itself a date is resolved.
        assert_eq!(normalize(Kind::EndDate, "five years after June 1, 2010"), Value::Date { date: ymd(2015, 6, 1) });
        // A date beats a bare duration written before it.
        assert_eq!(
            normalize(Kind::EndDate, "for a term of 3 years, ending December 31, 2012"),
            Value::Date { date: ymd(2012, 12, 31) }
        );
        assert_eq!(normalize(Kind::EndDate, "December 2012"), Value::PartialDate { year: 2012, month: Some(12) });
        assert_eq!(
            normalize(Kind::EndDate, "expiry of the lease"),
            Value::UntilEvent { event: "expiry of the lease".into() }
        );
        assert_eq!(normalize(Kind::EndDate, "not stated"), Value::None);
    }

    #[test]
    fn resolve_end_dates() {
        let start = Some(ymd(2010, 6, 1));
        let rel = Value::Relative { duration: dur(5, 0, 0, 0), from: "Effective Date".into() };
        assert_eq!(resolve_end(rel.clone(), start), Value::Date { date: ymd(2015, 6, 1) });
        assert_eq!(resolve_end(rel.clone(), None), rel);
        let d = Value::Duration { duration: dur(0, 0, 0, 30) };
        assert_eq!(resolve_end(d, start), Value::Date { date: ymd(2010, 7, 1) });
        assert_eq!(resolve_end(Value::Perpetual, start), Value::Perpetual);
        let date = Value::Date { date: ymd(2001, 1, 1) };
        assert_eq!(resolve_end(date.clone(), start), date);
        let huge = Value::Relative { duration: dur(u32::MAX, 0, 0, 0), from: "start".into() };
        assert_eq!(resolve_end(huge.clone(), start), huge);
    }

    #[test]
    fn resolve_end_dates_from_a_partial_start() {
        let partial = |year, month| Value::PartialDate { year, month };
        let rel = |y, m, d| Value::Relative { duration: dur(y, m, 0, d), from: "the date hereof".into() };
        assert_eq!(resolve_end_partial(rel(2, 0, 0), 2020, None), partial(2022, None));
        assert_eq!(resolve_end_partial(rel(0, 18, 0), 2005, Some(4)), partial(2006, Some(10)));
        assert_eq!(resolve_end_partial(rel(1, 0, 0), 2019, Some(12)), partial(2020, Some(12)));
        assert_eq!(resolve_end_partial(rel(0, 2, 0), 2019, Some(12)), partial(2020, Some(2)));
        // a year alone: whole years of the term only
        assert_eq!(resolve_end_partial(rel(0, 6, 0), 2004, None), partial(2004, None));
        assert_eq!(resolve_end_partial(rel(0, 0, 90), 2019, Some(1)), partial(2019, Some(4)));
        let d = Value::Duration { duration: dur(5, 0, 0, 0) };
        assert_eq!(resolve_end_partial(d, 2010, None), partial(2015, None));
        assert_eq!(resolve_end_partial(Value::Perpetual, 2010, None), Value::Perpetual);
        let huge = Value::Relative { duration: dur(u32::MAX, 0, 0, 0), from: "start".into() };
        assert_eq!(resolve_end_partial(huge.clone(), 2010, Some(1)), huge);
    }

    // ---- jurisdictions ----

    #[test]
    fn jurisdictions_us() {
        let de = Some(("Delaware".to_string(), "US-DE".to_string()));
        assert_eq!(jur("State of Delaware"), de);
        assert_eq!(jur("Delaware law"), de);
        assert_eq!(jur("Delaware"), de);
        let ny = Some(("New York".to_string(), "US-NY".to_string()));
        assert_eq!(jur("the laws of the State of New York, United States of America"), ny);
        assert_eq!(jur("New York"), ny);
        assert_eq!(jur("NEW YORK"), ny);
        assert_eq!(jur("the United States of America and the State of New York"), ny);
        assert_eq!(code("United States"), Some("US".into()));
        assert_eq!(code("the federal laws of the US"), Some("US".into()));
        assert_eq!(code("the laws agreed by us"), None);
        assert_eq!(code("New Mexico"), Some("US-NM".into()));
        assert_eq!(code("Mexico"), Some("MX".into()));
        assert_eq!(code("West Virginia"), Some("US-WV".into()));
        assert_eq!(code("Commonwealth of Virginia"), Some("US-VA".into()));
        assert_eq!(code("State of Washington"), Some("US-WA".into()));
        assert_eq!(code("Washington, D.C."), Some("US-DC".into()));
        assert_eq!(code("Washington DC"), Some("US-DC".into()));
        assert_eq!(code("the District of Columbia"), Some("US-DC".into()));
        assert_eq!(code("Georgia"), Some("US-GA".into()));
        assert_eq!(code("the Republic of Georgia"), Some("GE".into()));
        assert_eq!(code("New Jersey"), Some("US-NJ".into()));
        assert_eq!(code("Jersey"), Some("JE".into()));
        assert_eq!(code("Arkansas"), Some("US-AR".into()));
        assert_eq!(code("Kansas"), Some("US-KS".into()));
        assert_eq!(code("Indiana"), Some("US-IN".into()));
        assert_eq!(code("India"), Some("IN".into()));
        assert_eq!(code("Puerto Rico"), Some("US-PR".into()));
        assert_eq!(code("Commonwealth of Massachusetts"), Some("US-MA".into()));
        assert_eq!(code("North Carolina"), Some("US-NC".into()));
        assert_eq!(code("South Dakota"), Some("US-SD".into()));
    }

    #[test]
    fn jurisdictions_all_states_and_dc() {
        let us: Vec<_> = PLACES.iter().filter(|p| p.1.starts_with("US-") && p.1 != "US-PR").collect();
        assert_eq!(us.len(), 51);
        for (name, code, _) in us {
            assert_eq!(jur(&format!("the laws of the State of {name}")), Some((name.to_string(), code.to_string())));
        }
    }

    #[test]
    fn jurisdictions_canada_uk_other() {
        let bc = Some(("British Columbia".to_string(), "CA-BC".to_string()));
        assert_eq!(jur("British Columbia"), bc);
        assert_eq!(jur("British Columbia, Canada"), bc);
        assert_eq!(jur("Canada; the Province of British Columbia"), bc);
        assert_eq!(code("Province of Ontario"), Some("CA-ON".into()));
        assert_eq!(code("Alberta"), Some("CA-AB".into()));
        assert_eq!(code("Quebec"), Some("CA-QC".into()));
        assert_eq!(code("Canada"), Some("CA".into()));
        let eaw = Some(("England and Wales".to_string(), "GB-EAW".to_string()));
        assert_eq!(jur("England"), eaw);
        assert_eq!(jur("England and Wales"), eaw);
        assert_eq!(jur("England; Wales"), eaw);
        assert_eq!(jur("the laws of England"), eaw);
        assert_eq!(code("Scotland"), Some("GB-SCT".into()));
        assert_eq!(code("Northern Ireland"), Some("GB-NIR".into()));
        assert_eq!(code("Ireland"), Some("IE".into()));
        assert_eq!(code("United Kingdom"), Some("GB".into()));
        let cn = Some(("China".to_string(), "CN".to_string()));
        assert_eq!(jur("People's Republic of China"), cn);
        assert_eq!(jur("People’s Republic of China"), cn);
        assert_eq!(jur("PRC"), cn);
        assert_eq!(jur("China"), cn);
        assert_eq!(jur("People's Republic of China; United Nations Convention on Contracts for the International Sale of Goods"), cn);
        assert_eq!(code("Taiwan"), Some("TW".into()));
        assert_eq!(code("Republic of China"), Some("TW".into()));
        let pairs = [
            ("Hong Kong", "HK"),
            ("Switzerland", "CH"),
            ("Germany", "DE"),
            ("France", "FR"),
            ("the Netherlands", "NL"),
            ("Israel", "IL"),
            ("Japan", "JP"),
            ("Singapore", "SG"),
            ("Brazil", "BR"),
            ("Australia", "AU"),
            ("New South Wales, Australia", "AU-NSW"),
            ("Sweden", "SE"),
            ("Norway", "NO"),
            ("Denmark", "DK"),
            ("Finland", "FI"),
            ("Italy", "IT"),
            ("Spain", "ES"),
            ("Belgium", "BE"),
            ("Luxembourg", "LU"),
            ("Austria", "AT"),
            ("Republic of Korea", "KR"),
            ("Korea", "KR"),
            ("Cayman Islands", "KY"),
            ("Bermuda", "BM"),
            ("British Virgin Islands", "VG"),
        ];
        for (s, c) in pairs {
            assert_eq!(code(s), Some(c.to_string()), "{s}");
        }
        assert_eq!(code("Victoria, British Columbia"), Some("CA-BC".into()));
        assert_eq!(code("Victoria, Australia"), Some("AU-VIC".into()));
        assert_eq!(code("the laws of Papua New Guinea"), Some("PG".into()));
        assert_eq!(code("the Republic of Kazakhstan"), Some("KZ".into()));
        assert_eq!(code("the law of the land"), None);
        assert_eq!(code(""), None);
    }

    #[test]
    fn normalize_jurisdiction_kind() {
        assert_eq!(
            normalize(Kind::Jurisdiction, "the laws of the State of Delaware"),
            Value::Jurisdiction { name: "Delaware".into(), code: "US-DE".into() }
        );
        assert_eq!(normalize(Kind::Jurisdiction, "Atlantis"), Value::Text { text: "Atlantis".into() });
        assert_eq!(normalize(Kind::Jurisdiction, "none"), Value::None);
    }

    // ---- parties ----

    #[test]
    fn parties_cuad_gold() {
        let got = parse_parties(
            "WATER NOW, INC.; (\"Water Now\"); Hydraspin USA, Inc. (\"Subsidiary\", collectively with Water Now…)",
        );
        assert_eq!(got, vec![party("WATER NOW, INC.", &["Water Now"]), party("Hydraspin USA, Inc.", &["Subsidiary"])]);
        let got =
            parse_parties("INSTITUTE OF GRASSLAND AND  ENVIRONMENTAL RESEARCH (\"IGER\"); CERES, INC. (\"CERES\")");
        assert_eq!(
            got,
            vec![
                party("INSTITUTE OF GRASSLAND AND ENVIRONMENTAL RESEARCH", &["IGER"]),
                party("CERES, INC.", &["CERES"])
            ]
        );
        let got =
            parse_parties("Goosehead Insurance Agency, LLC (“we,” “us,” or “our\"); (“you” or the “Franchisee\")");
        assert_eq!(got, vec![party("Goosehead Insurance Agency, LLC", &["we", "us", "our", "you", "Franchisee"])]);
    }

    #[test]
    fn parties_roles_without_a_name() {
        assert_eq!(
            parse_parties("(\"Licensee\"); Acme Corp."),
            vec![party("", &["Licensee"]), party("Acme Corp.", &[])]
        );
        assert_eq!(parse_parties("Acme Corp.; \"Acme\""), vec![party("Acme Corp.", &["Acme"])]);
    }

    #[test]
    fn parties_model_forms() {
        let want = vec![party("Corio Inc.", &["CORIO"]), party("Changepoint, Inc.", &["CHANGEPOINT"])];
        assert_eq!(parse_parties("Corio Inc. (CORIO) and Changepoint, Inc. (CHANGEPOINT)"), want);
        assert_eq!(parse_parties("Corio Inc. (CORIO)\nChangepoint, Inc. (CHANGEPOINT)\n"), want);
        assert_eq!(parse_parties("- Corio Inc. (CORIO)\n- Changepoint, Inc. (CHANGEPOINT)"), want);
        assert_eq!(parse_parties(r#"["Corio Inc. (CORIO)", "Changepoint, Inc. (CHANGEPOINT)"]"#), want);
        assert_eq!(
            parse_parties(
                r#"[{"name": "Corio Inc.", "roles": ["CORIO"]}, {"name": "Changepoint, Inc.", "role": "CHANGEPOINT"}]"#
            ),
            want
        );
        assert_eq!(parse_parties("['Corio Inc. (CORIO)', 'Changepoint, Inc. (CHANGEPOINT)']"), want);
        assert_eq!(parse_parties("Corio Inc. (CORIO), Changepoint, Inc. (CHANGEPOINT)"), want);
        assert_eq!(parse_parties("Johnson and Johnson"), vec![party("Johnson and Johnson", &[])]);
        assert_eq!(
            parse_parties("Smith and Sons, Inc. and Acme Corp."),
            vec![party("Smith and Sons, Inc.", &[]), party("Acme Corp.", &[])]
        );
        assert_eq!(
            parse_parties("The Coca-Cola Company, (the \"Company\")"),
            vec![party("Coca-Cola Company", &["Company"])]
        );
        assert_eq!(
            parse_parties("Acme Corp., a Delaware corporation (\"Acme\")"),
            vec![party("Acme Corp.", &["Acme"])]
        );
        assert_eq!(parse_parties("Beta LLC (a Nevada limited liability company)"), vec![party("Beta LLC", &[])]);
        assert_eq!(
            parse_parties(
                "CHINA COMMERCIAL CREDIT, INC.; (\"CCCR\"); Wah Kwong Finance Leasing (Shanghai) Co., Ltd. (\"WKFL\")"
            ),
            vec![
                party("CHINA COMMERCIAL CREDIT, INC.", &["CCCR"]),
                party("Wah Kwong Finance Leasing (Shanghai) Co., Ltd.", &["WKFL"])
            ]
        );
        assert_eq!(
            parse_parties("Bank of America, N.A. and Wells Fargo Bank, National Association"),
            vec![party("Bank of America, N.A.", &[]), party("Wells Fargo Bank, National Association", &[])]
        );
        assert_eq!(parse_parties("Acme Corp. (Acme) (a Delaware corporation)"), vec![party("Acme Corp.", &["Acme"])]);
        assert_eq!(parse_parties("Acme Corp., hereinafter \"Acme\""), vec![party("Acme Corp.", &["Acme"])]);
        assert_eq!(parse_parties(""), Vec::<Party>::new());
        assert_eq!(parse_parties(" ; ;\n "), Vec::<Party>::new());
    }

    #[test]
    fn parties_unbalanced() {
        assert_eq!(
            parse_parties("Foo Inc. (\"Foo\"; Bar LLC"),
            vec![party("Foo Inc.", &["Foo"]), party("Bar LLC", &[])]
        );
        assert_eq!(parse_parties("Foo Inc. (Foo; Bar LLC"), vec![party("Foo Inc. (Foo", &[]), party("Bar LLC", &[])]);
    }

    #[test]
    fn normalize_parties_kind() {
        assert_eq!(
            normalize(Kind::Parties, "CERES, INC. (\"CERES\")"),
            Value::Parties { parties: vec![party("CERES, INC.", &["CERES"])] }
        );
        assert_eq!(normalize(Kind::Parties, "n/a"), Value::None);
    }

    #[test]
    fn party_lists_without_repeats_collectives_or_quote_debris() {
        let names = |s: &str| parse_parties(s).into_iter().map(|p| p.name).collect::<Vec<_>>();
        // CUAD marks every mention: a name given twice is one party
        assert_eq!(
            names("Marathon Petroleum Company LP; Marathon Pipe Line LLC; Marathon Petroleum Company LP; Marathon Pipe Line LLC"),
            ["Marathon Petroleum Company LP", "Marathon Pipe Line LLC"]
        );
        // how the contract names the parties together is not another party
        assert_eq!(
            names("MacroGenics, Inc.; Green Cross Corp.; MacroGenics and Green Cross"),
            ["MacroGenics, Inc.", "Green Cross Corp."]
        );
        assert_eq!(
            names("Didi Chuxing Technology Co., Ltd.; Hunan Ruixi Financial Leasing Co., Ltd; Party A and Party B"),
            ["Didi Chuxing Technology Co., Ltd.", "Hunan Ruixi Financial Leasing Co., Ltd"]
        );
        assert_eq!(
            names("WestRock Company (\"Parent\"); Ingevity Corporation (\"SpinCo\"); SpinCo and Parent shall collectively be referred to as the Parties"),
            ["WestRock Company", "Ingevity Corporation"]
        );
        // ...but parties whose names are not all known are kept
        assert_eq!(names("Alpha Inc.; Beta LLC; Gamma and Delta"), ["Alpha Inc.", "Beta LLC", "Gamma and Delta"]);
        // a defined term's quote debris is not part of the name
        assert_eq!(
            names("Twentieth Century Fox Licensing; Sorrent, Inc \"parties\" and each individually as a \"party)"),
            ["Twentieth Century Fox Licensing", "Sorrent, Inc"]
        );
    }

    #[test]
    fn f1_of_parties() {
        let a = vec![party("WATER NOW, INC.", &[]), party("Hydraspin USA, Inc.", &[])];
        let b = vec![party("Water Now Inc", &[]), party("Hydraspin USA", &[])];
        assert!((parties_f1(&a, &b) - 1.0).abs() < 1e-9);
        assert!((parties_f1(&[], &[]) - 1.0).abs() < 1e-9);
        assert_eq!(parties_f1(&a, &[]), 0.0);
        let c = vec![party("Water Now", &[])];
        // tokens a: water now hydraspin usa (4); c: water now (2) → 2*2/6.
        assert!((parties_f1(&a, &c) - 4.0 / 6.0).abs() < 1e-9);
        assert!(
            (parties_f1(&[party("The Bank of America Corporation", &[])], &[party("Bank America", &[])]) - 1.0).abs()
                < 1e-9
        );
    }

    // ---- values ----

    #[test]
    fn type_names_and_canonical() {
        let cases: Vec<(Value, &str, &str)> = vec![
            (Value::None, "none", ""),
            (Value::Date { date: ymd(2007, 4, 6) }, "date", "2007-04-06"),
            (Value::PartialDate { year: 2009, month: None }, "partial_date", "2009"),
            (Value::PartialDate { year: 2014, month: Some(6) }, "partial_date", "2014-06"),
            (Value::Duration { duration: dur(1, 0, 0, 0) }, "duration", "P1Y"),
            (Value::Perpetual, "perpetual", "perpetual"),
            (Value::UntilTerminated, "until_terminated", "until_terminated"),
            (Value::UntilEvent { event: "the last Royalty Term".into() }, "until_event", "until the last Royalty Term"),
            (Value::OnEvent { event: "the Closing Date".into() }, "on_event", "on the Closing Date"),
            (
                Value::Relative { duration: dur(5, 0, 0, 0), from: "Effective Date".into() },
                "relative",
                "P5Y from Effective Date",
            ),
            (Value::Jurisdiction { name: "Delaware".into(), code: "US-DE".into() }, "jurisdiction", "US-DE"),
            (
                Value::Parties { parties: vec![party("A Inc.", &[]), party("", &["you"]), party("B LLC", &["B"])] },
                "parties",
                "A Inc.; you; B LLC",
            ),
            (Value::Text { text: "MASTER AGREEMENT".into() }, "text", "MASTER AGREEMENT"),
        ];
        for (v, ty, canon) in cases {
            assert_eq!(v.type_name(), ty);
            assert_eq!(v.canonical(), canon);
            assert_eq!(v.is_none(), ty == "none");
        }
    }

    #[test]
    fn serde_shape() {
        let v = Value::Date { date: ymd(2007, 4, 6) };
        let json = serde_json::to_value(&v).expect("serialise");
        assert_eq!(json, serde_json::json!({"type": "date", "date": "2007-04-06"}));
        assert_eq!(serde_json::to_value(Value::None).expect("serialise"), serde_json::json!({"type": "none"}));
        let p = Value::PartialDate { year: 2009, month: None };
        assert_eq!(
            serde_json::to_value(&p).expect("serialise"),
            serde_json::json!({"type": "partial_date", "year": 2009, "month": null})
        );
        for v in [
            v,
            p,
            Value::Duration { duration: dur(1, 6, 0, 0) },
            Value::UntilTerminated,
            Value::Relative { duration: dur(5, 0, 0, 0), from: "Effective Date".into() },
            Value::Parties { parties: vec![party("A Inc.", &["A"])] },
            Value::Jurisdiction { name: "China".into(), code: "CN".into() },
            Value::Text { text: "x".into() },
        ] {
            let s = serde_json::to_string(&v).expect("serialise");
            let back: Value = serde_json::from_str(&s).expect("deserialise");
            assert_eq!(back, v);
        }
    }

    #[test]
    fn same_answer_rules() {
        let date = |y, m, d| Value::Date { date: ymd(y, m, d) };
        let partial = |year, month| Value::PartialDate { year, month };
        assert!(same_answer(&date(2007, 4, 6), &date(2007, 4, 6)));
        assert!(!same_answer(&date(2007, 4, 6), &date(2007, 4, 7)));
        assert!(same_answer(&partial(2009, None), &partial(2009, Some(3))));
        assert!(same_answer(&partial(2009, Some(3)), &partial(2009, Some(3))));
        assert!(!same_answer(&partial(2009, Some(3)), &partial(2009, Some(4))));
        assert!(!same_answer(&partial(2009, None), &partial(2010, None)));
        assert!(same_answer(&date(2009, 3, 5), &partial(2009, None)));
        assert!(same_answer(&partial(2009, Some(3)), &date(2009, 3, 5)));
        assert!(!same_answer(&partial(2009, Some(4)), &date(2009, 3, 5)));
        let d = |y, m, w, dd| Value::Duration { duration: dur(y, m, w, dd) };
        assert!(same_answer(&d(0, 12, 0, 0), &d(1, 0, 0, 0)));
        assert!(!same_answer(&d(0, 0, 0, 30), &d(0, 1, 0, 0)));
        assert!(same_answer(&Value::Perpetual, &Value::Perpetual));
        assert!(same_answer(&Value::UntilTerminated, &Value::UntilTerminated));
        assert!(!same_answer(&Value::Perpetual, &Value::UntilTerminated));
        assert!(same_answer(&Value::None, &Value::None));
        assert!(!same_answer(&Value::None, &Value::Text { text: String::new() }));
        assert!(!same_answer(&Value::None, &Value::Perpetual));
        let t = |s: &str| Value::Text { text: s.into() };
        assert!(same_answer(&t("CONSTRUCTION & MAINTENANCE AGREEMENT"), &t("Construction and Maintenance Agreement")));
        assert!(!same_answer(&t("CONSTRUCTION & MAINTENANCE AGREEMENT"), &t("Construction Agreement")));
        let rel = |y, from: &str| Value::Relative { duration: dur(y, 0, 0, 0), from: from.into() };
        assert!(same_answer(&rel(5, "Effective Date"), &rel(5, "start")));
        assert!(!same_answer(&rel(5, "Effective Date"), &rel(4, "Effective Date")));
        assert!(!same_answer(&rel(1, "start"), &d(1, 0, 0, 0)));
        let j = |c: &str| Value::Jurisdiction { name: String::new(), code: c.into() };
        assert!(same_answer(&j("US-DE"), &j("US-DE")));
        assert!(!same_answer(&j("US-DE"), &j("US")));
        let p = |names: &[&str]| Value::Parties { parties: names.iter().map(|n| party(n, &[])).collect() };
        assert!(same_answer(&p(&["Corio Inc.", "Changepoint, Inc."]), &p(&["CORIO, INC.", "Changepoint"])));
        assert!(!same_answer(&p(&["Corio Inc.", "Changepoint, Inc."]), &p(&["Corio Inc."])));
        let t = |s: &str| Value::Text { text: s.into() };
        assert!(same_answer(&t("Master Services Agreement."), &t("  MASTER   SERVICES AGREEMENT ")));
        assert!(same_answer(&t("Co-Branding Agreement"), &t("co branding agreement")));
        assert!(same_answer(
            &t("EXCLUSIVE DISTRIBUTION AND SUPPLY AGREEMENT"),
            &t("Exclusive Distribution and Supply Agreement (Amended)")
        ));
        assert!(same_answer(
            &t("SOFTWARE LICENSE AND SERVICES AGREEMENT"),
            &t("SOFTWARE LICENSE AND SERVICES AGREEMENT NO 1")
        ));
        assert!(!same_answer(&t("LICENSE AGREEMENT"), &t("SOFTWARE LICENSE AGREEMENT AND TERMS OF USE")));
        assert!(!same_answer(&t("Supply Agreement"), &t("Distribution Agreement")));
        assert!(!same_answer(&t("2007-04-06"), &date(2007, 4, 6)));
    }

    #[test]
    fn normalize_text_kind() {
        assert_eq!(
            normalize(Kind::Text, "  MASTER\n SERVICES  AGREEMENT "),
            Value::Text { text: "MASTER SERVICES AGREEMENT".into() }
        );
        for none in ["", "none", "None.", "N/A", "n/a", "not specified", "Not stated", "null", "NO"] {
            assert_eq!(normalize(Kind::Text, none), Value::None, "{none:?}");
        }
    }

    /// Odd inputs must never panic, for any kind.
    #[test]
    fn odd_inputs_do_not_panic() {
        let kinds = [Kind::Text, Kind::Parties, Kind::Date, Kind::EndDate, Kind::Duration, Kind::Jurisdiction];
        let mut inputs: Vec<String> = [
            "",
            " ",
            "\0",
            "(",
            ")",
            "\"",
            "(\"",
            "\")",
            ";;;",
            "((((",
            "))))",
            "\"\"\"",
            "( ( \" ) \" ;",
            "[",
            "]",
            "[]",
            "{",
            "[{\"name\": 5}]",
            "[[[[[[[[[[\"a\"]]]]]]]]]]",
            "İİİ Inc. and ßß Corp.",
            "é/é/é",
            "99/99/99",
            "0/0/0000",
            "00/00/00",
            "9999-99-99",
            "12/31/9999",
            "1/1/0000",
            "the 0th day of April, 2007",
            "thirty-ninth day of May, 2001",
            "ninety-ninth anniversary of",
            "the 999th anniversary of the Effective Date",
            "999999999999 years after 1/1/2000",
            "4294967295 years from 1/1/2000",
            "4294967295 months",
            "1e308 days",
            "0.99999 years",
            "a",
            "an and",
            "and and and",
            " and ",
            "(a) and (b)",
            ") and (",
            "日本国の法律",
            "Москва",
            "🙂🙂 Inc. (🙂) and 🙂 LLC (🙂)",
            "D.C.",
            "U.S.",
            "until",
            "until terminated terminated",
            "from from from",
            "____",
            "[]/[]/[]",
            "__/__/__",
            "June ___",
            "\u{FEFF}\u{200B}\u{00A0}",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        inputs.push("(".repeat(1000));
        inputs.push("\"".repeat(1001));
        inputs.push("one ".repeat(500) + "days");
        inputs.push("and ".repeat(300));
        inputs.push("x".repeat(10_000));
        // Every char boundary cut of a rich example.
        let rich = "Goosehead Insurance Agency, LLC (“we,” “us,” or “our\"); (“you” or the “Franchisee\") — five (5) years from the 1st day of April, 2007, New York";
        for (i, _) in rich.char_indices() {
            inputs.push(rich[..i].to_string());
            inputs.push(rich[i..].to_string());
        }
        for s in &inputs {
            for kind in kinds {
                let v = normalize(kind, s);
                let _ = v.canonical();
                let _ = v.type_name();
                let _ = same_answer(&v, &v);
                let _ = resolve_end(v, Some(ymd(2000, 1, 1)));
            }
            let _ = parse_date(s);
            let _ = parse_duration(s);
            let _ = parse_jurisdiction(s);
            let parties = parse_parties(s);
            let f = parties_f1(&parties, &parties);
            assert!((0.0..=1.0).contains(&f));
        }
    }

    #[test]
    fn descriptors_are_not_part_of_names() {
        let p = parse_parties(
            "Excite, Inc., a Delaware corporation (\"Excite\"); CyberShop, an Illinois limited liability company",
        );
        let names: Vec<&str> = p.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(names, ["Excite, Inc.", "CyberShop"], "{p:?}");
        assert_eq!(parse_parties("Bank of America, N.A.")[0].name, "Bank of America, N.A.");
    }

    #[test]
    fn addresses_are_not_part_of_names() {
        let p = parse_parties(
            "COMWARE TECHNICAL SERVICES OF 17922 SKY PARK CIRCLE, SUITE E, IRVINE, CALIFORNIA; INTERNATIONAL TEST SYSTEMS, INC. OF 4703 SHAVANO OAK, SUITE 102, SAN ANTONIO, TEXAS 78249",
        );
        let names: Vec<&str> = p.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(names, ["COMWARE TECHNICAL SERVICES", "INTERNATIONAL TEST SYSTEMS, INC."], "{p:?}");
        assert_eq!(parse_parties("Acme Inc., 100 Main Street, Springfield")[0].name, "Acme Inc.");
        // numbers that are part of a name stay
        for name in ["695014 B.C. Ltd.", "Wells Fargo Mortgage Backed Securities 2006-6 Trust", "Bank of 1st Street"] {
            assert_eq!(parse_parties(name)[0].name, name);
        }
        // an address after the corporate suffix, with its number later on
        let p = parse_parties(
            "Tigrent Learning UK Limited of Boston House, 69 - 75 Boston Manor Road, Brentford; Celebrity Speakers",
        );
        assert_eq!(p[0].name, "Tigrent Learning UK Limited", "{p:?}");
        assert_eq!(
            parse_parties("Fujitsu Limited of Japan")[0].name,
            "Fujitsu Limited of Japan",
            "no number: no address"
        );
    }

    #[test]
    fn list_numbers_are_not_part_of_names() {
        let p = parse_parties(
            "Nanjing Tuniu Technology Co., Ltd.; (2) Beijing Tuniu Technology Co., Ltd.; and b) BOSCH INTERNATIONAL, LLC ()",
        );
        let names: Vec<&str> = p.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(
            names,
            ["Nanjing Tuniu Technology Co., Ltd.", "Beijing Tuniu Technology Co., Ltd.", "BOSCH INTERNATIONAL, LLC"],
            "{p:?}"
        );
        assert_eq!(parse_parties("3M Company")[0].name, "3M Company");
    }
}
