//! What the decoder is shown and asked: one context per document (its opening, then the
//! clause scorer's best passages for the fields, in document order), shared as a prefix by
//! every question of the document, and one question per field whose answer is held to a JSON
//! schema. [`PROMPT_VERSION`] is stored with every answer; bump it when the wording changes.

use serde_json::json;

use crate::rules::Found;
use crate::{Field, Kind};

/// Stored with each answer (`document_fields.prompt_version`). v3: the segment naming the
/// parties is shown where it lies past the opening ([`Budget::parties_past_opening`]).
pub const PROMPT_VERSION: &str = "fields-v3";

/// The system message.
pub const SYSTEM: &str = "You read contracts and answer questions about them. Answer only from the contract excerpts given: \
when they do not state the answer, answer null; never guess. Copy names, dates and durations exactly as the contract writes them. \
Reply with JSON only.";

/// A passage of the document offered as evidence.
#[derive(Debug, Clone, PartialEq)]
pub struct Passage {
    /// Clause category it was chosen for (`opening` for the document's start).
    pub category: String,
    /// Segment index in the document (`None` for the opening).
    pub segment: Option<i32>,
    /// Unicode-character range in the document text.
    pub chars: std::ops::Range<usize>,
    pub page: i32,
    /// Its rank for the category (0: best).
    pub rank: usize,
    pub text: String,
}

/// How much of the document the context may hold.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Characters of the document's opening (title, parties, date).
    pub opening_chars: usize,
    /// Characters of each passage, at most.
    pub passage_chars: usize,
    /// Characters of the whole context.
    pub total_chars: usize,
}

impl Default for Budget {
    fn default() -> Self {
        // ~4 characters per token: a context of about 1,500 tokens
        Budget { opening_chars: 1800, passage_chars: 900, total_chars: 6000 }
    }
}

impl Budget {
    /// Where the parties are named, when the opening does not show it all: the last character
    /// of the sentence in which the rules found the parties (`parties`, their evidence), if it
    /// lies past the opening. A contract that begins with a cover page or a table of contents
    /// names its parties pages in; the segment holding this character is then offered to the
    /// context as the parties' best passage. The end, not the start: that sentence's start can
    /// lie back in the table of contents, which has no full stops.
    pub fn parties_past_opening(&self, parties: Option<&Found>) -> Option<usize> {
        let last = parties?.evidence.end.checked_sub(1)?;
        (last >= self.opening_chars).then_some(last)
    }
}

/// The shared context of a document and the passages it holds (document order).
#[derive(Debug, Clone)]
pub struct Context {
    pub text: String,
    pub passages: Vec<Passage>,
}

impl Context {
    /// The passages chosen for `category` (the opening counts for every category).
    pub fn evidence_for(&self, category: &str) -> Vec<&Passage> {
        let mut v: Vec<&Passage> = self.passages.iter().filter(|p| p.category == category).collect();
        v.sort_by_key(|p| p.rank);
        v
    }
}

/// Cut `s` to at most `max` characters, at a word boundary when one is near.
fn clip(s: &str, max: usize) -> String {
    let s = s.trim();
    if s.chars().count() <= max {
        return s.to_string();
    }
    let cut: String = s.chars().take(max).collect();
    match cut.rfind(char::is_whitespace) {
        Some(i) if i > cut.len() * 3 / 4 => format!("{} …", &cut[..i]),
        _ => format!("{cut} …"),
    }
}

/// Collapse runs of blank space (PDF text has many), keeping single line breaks.
fn tidy(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for line in s.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&words.join(" "));
    }
    out
}

/// The context of a document: its opening, then the candidates best rank first (all
/// categories' best passages before any second-best), skipping what is already included,
/// until the budget is spent; shown in document order with their pages.
pub fn build_context(doc_text: &str, candidates: &[Passage], budget: Budget) -> Context {
    let opening_end = doc_text.chars().count().min(budget.opening_chars);
    let opening_text = clip(&tidy(&doc_text.chars().take(opening_end).collect::<String>()), budget.opening_chars);
    let mut chosen: Vec<Passage> = vec![Passage {
        category: "opening".into(),
        segment: None,
        chars: 0..opening_end,
        page: 1,
        rank: 0,
        text: opening_text,
    }];
    let mut used = chosen[0].text.chars().count();
    let mut order: Vec<&Passage> = candidates.iter().collect();
    order.sort_by_key(|p| p.rank);
    let mut by_category: Vec<Passage> = Vec::new();
    for p in order {
        // a passage inside the opening, or one already chosen for another category, is
        // recorded as this category's evidence without being shown twice
        let shown = p.chars.end <= opening_end || chosen.iter().any(|c| c.segment.is_some() && c.segment == p.segment);
        if shown {
            by_category.push(p.clone());
            continue;
        }
        let text = clip(&tidy(&p.text), budget.passage_chars);
        let n = text.chars().count();
        if used + n > budget.total_chars {
            continue;
        }
        used += n;
        chosen.push(Passage { text, ..p.clone() });
    }
    chosen.sort_by_key(|p| p.chars.start);
    let mut text = String::new();
    let mut last_end = 0;
    for p in &chosen {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        if p.segment.is_none() {
            text.push_str("[Beginning of the contract]\n");
        } else {
            let gap = if p.chars.start > last_end { "…\n" } else { "" };
            text.push_str(&format!("{gap}[Page {}]\n", p.page));
        }
        text.push_str(&p.text);
        last_end = last_end.max(p.chars.end);
    }
    // evidence = what was shown, plus what the opening or another passage already covered
    let mut passages = chosen;
    for p in by_category {
        if !passages.iter().any(|c| c.category == p.category && c.segment == p.segment) {
            passages.push(p);
        }
    }
    Context { text, passages }
}

/// The user message's first part, shared by every question of the document.
pub fn context_message(ctx: &Context) -> String {
    format!("Contract excerpts:\n\n{}\n\n", ctx.text)
}

/// The question for `field`; `strict` is the retry after an answer that did not validate.
pub fn question(field: &Field, strict: bool) -> String {
    let form = match (field.kind, strict) {
        (Kind::Parties, _) => "Answer as {\"parties\": [{\"name\": ..., \"role\": ...}]}, or {\"parties\": []} if the excerpts do not name them.",
        (Kind::Date, false) => "Answer as {\"answer\": \"<date as written>\"}, or {\"answer\": null}.",
        (Kind::Date, true) => "Give only one calendar date with its day, month and year, and no other words, as {\"answer\": \"<date>\"}, or {\"answer\": null}.",
        (Kind::EndDate, false) => "Answer as {\"answer\": \"...\"}, or {\"answer\": null}.",
        (Kind::EndDate, true) => "Give only the end date, or the length of the term followed by the date or event it counts from, or \"perpetual\", as {\"answer\": \"...\"}, or {\"answer\": null}.",
        (Kind::Duration, false) => "Answer as {\"answer\": \"...\"}, or {\"answer\": null}.",
        (Kind::Duration, true) => "Give only a length of time (a number and a unit: days, months or years), as {\"answer\": \"...\"}, or {\"answer\": null}.",
        (Kind::Jurisdiction, false) => "Answer as {\"answer\": \"...\"}, or {\"answer\": null}.",
        (Kind::Jurisdiction, true) => "Give only the name of the state, province or country, as {\"answer\": \"...\"}, or {\"answer\": null}.",
        (Kind::Text, _) => "Answer as {\"answer\": \"...\"}, or {\"answer\": null}.",
    };
    format!("Question: {}\n{form}", field.question)
}

/// The JSON schema the answer is held to.
pub fn schema(field: &Field) -> serde_json::Value {
    match field.kind {
        Kind::Parties => json!({
            "type": "object",
            "properties": {"parties": {"type": "array", "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "role": {"type": ["string", "null"]}},
                "required": ["name", "role"]}}},
            "required": ["parties"]
        }),
        _ => json!({
            "type": "object",
            "properties": {"answer": {"type": ["string", "null"]}},
            "required": ["answer"]
        }),
    }
}

/// The raw answer in a generated JSON text: the string (parties in CUAD's form, `Name
/// ("Role"); …`), `None` when the model said null or no parties; an error for text that is not
/// the schema's JSON.
pub fn parse_answer(field: &Field, json_text: &str) -> Result<Option<String>, String> {
    let v: serde_json::Value =
        serde_json::from_str(json_text.trim()).map_err(|e| format!("not JSON ({e}): {json_text:?}"))?;
    match field.kind {
        Kind::Parties => {
            let items = v
                .get("parties")
                .and_then(|p| p.as_array())
                .ok_or_else(|| format!("no \"parties\" list: {json_text:?}"))?;
            let mut out = Vec::new();
            for it in items {
                let name = it.get("name").and_then(|n| n.as_str()).unwrap_or("").trim();
                let role = it.get("role").and_then(|r| r.as_str()).unwrap_or("").trim();
                match (name.is_empty(), role.is_empty()) {
                    (true, true) => {}
                    (false, true) => out.push(name.to_string()),
                    (_, false) => out.push(format!("{name} (\"{role}\")").trim().to_string()),
                }
            }
            Ok(if out.is_empty() { None } else { Some(out.join("; ")) })
        }
        _ => match v.get("answer") {
            Some(serde_json::Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.trim().to_string())),
            Some(serde_json::Value::String(_)) | Some(serde_json::Value::Null) => Ok(None),
            _ => Err(format!("no \"answer\": {json_text:?}")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field;

    fn passage(cat: &str, seg: i32, start: usize, rank: usize, text: &str) -> Passage {
        Passage {
            category: cat.into(),
            segment: Some(seg),
            chars: start..start + text.chars().count(),
            page: 2,
            rank,
            text: text.into(),
        }
    }

    #[test]
    fn context_holds_opening_and_best_passages_in_document_order() {
        let doc = format!("MASTER AGREEMENT\nbetween A Inc. and B LLC{}", " filler".repeat(1000));
        let cands = vec![
            passage("Governing Law", 9, 5000, 0, "This Agreement is governed by the laws of Delaware."),
            passage("Renewal Term", 4, 3000, 0, "It renews for successive one-year terms."),
            passage("Governing Law", 4, 3000, 1, "It renews for successive one-year terms."),
        ];
        let ctx = build_context(&doc, &cands, Budget::default());
        let a = ctx.text.find("MASTER AGREEMENT").unwrap();
        let b = ctx.text.find("renews").unwrap();
        let c = ctx.text.find("Delaware").unwrap();
        assert!(a < b && b < c, "{}", ctx.text);
        // segment 4 shown once, but evidence for both categories
        assert_eq!(ctx.text.matches("renews").count(), 1);
        assert_eq!(ctx.evidence_for("Governing Law").len(), 2);
        assert_eq!(ctx.evidence_for("Renewal Term")[0].segment, Some(4));
    }

    #[test]
    fn parties_named_after_a_table_of_contents_are_past_the_opening() {
        // cuad_347's shape: a title, a table of contents of some 3,000 characters, then the
        // sentence that names the parties
        let toc: String = (1..=90).map(|i| format!("{i}.0 Heading number {i} {}\n", i + 2)).collect();
        let preamble = "FRANCHISE AGREEMENT This Franchise Agreement between Homewood Suites Franchise LLC \
                        (\"Franchisor\") and Stratford Hotel LLC (\"Franchisee\") is dated as of the Effective Date.";
        let doc = format!("FRANCHISE AGREEMENT\nTABLE OF CONTENTS\n{toc}{preamble}\nThe Franchisee shall pay.");
        let found = crate::rules::extract(&doc);
        let hit = found.get("parties");
        let last = Budget::default().parties_past_opening(hit).expect("past the opening");
        let at = doc.chars().count() - "\nThe Franchisee shall pay.".len() - 1;
        assert!(last > at - preamble.len() && last <= at, "{last} not in the preamble ending at {at}");
        // the same sentence at the top: the opening shows it
        let top = format!("{preamble}\n{toc}");
        assert_eq!(Budget::default().parties_past_opening(crate::rules::extract(&top).get("parties")), None);
        assert_eq!(Budget::default().parties_past_opening(None), None);
    }

    #[test]
    fn context_respects_its_budget() {
        let doc = "x ".repeat(5000);
        let cands: Vec<Passage> = (0..40)
            .map(|i| passage("Governing Law", i, 4000 + i as usize * 500, i as usize, &"law ".repeat(200)))
            .collect();
        let budget = Budget { opening_chars: 500, passage_chars: 300, total_chars: 2000 };
        let ctx = build_context(&doc, &cands, budget);
        assert!(ctx.text.chars().count() < 2000 + 40 * 20, "{}", ctx.text.len());
        assert!(ctx.passages.len() < 10);
    }

    #[test]
    fn answers_parse_per_kind() {
        let law = field("governing_law").unwrap();
        assert_eq!(
            parse_answer(law, r#"{"answer": "the State of New York"}"#).unwrap().as_deref(),
            Some("the State of New York")
        );
        assert_eq!(parse_answer(law, r#"{"answer": null}"#).unwrap(), None);
        assert_eq!(parse_answer(law, r#"{"answer": "  "}"#).unwrap(), None);
        assert!(parse_answer(law, r#"{"answer": "x""#).is_err());
        assert!(parse_answer(law, r#"{"other": 1}"#).is_err());
        let parties = field("parties").unwrap();
        let got = parse_answer(
            parties,
            r#"{"parties": [{"name": "Corio Inc.", "role": "CORIO"}, {"name": "Changepoint, Inc.", "role": null}]}"#,
        )
        .unwrap();
        assert_eq!(got.as_deref(), Some(r#"Corio Inc. ("CORIO"); Changepoint, Inc."#));
        assert_eq!(parse_answer(parties, r#"{"parties": []}"#).unwrap(), None);
    }

    #[test]
    fn every_field_has_a_schema_and_a_question() {
        for f in crate::FIELDS {
            assert!(schema(f).is_object());
            assert!(question(f, false).starts_with("Question: "));
            assert!(question(f, true).len() >= question(f, false).len() - 20);
        }
    }
}
