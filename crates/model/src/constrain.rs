//! Constrained decoding to a JSON schema: at every step only tokens that keep the output a
//! prefix of a document the schema accepts may be sampled, and once the document is complete
//! only a stop token may follow — so an answer always parses and has the schema's shape.
//!
//! The schema subset ([`Schema::from_json`]): `object` with `properties` (all of them
//! generated, in the order of `required`, then the rest by name), `array` of `items`, `string` (optionally an `enum` of strings), `integer`,
//! `number`, `boolean`, `null`, and `type` lists or `anyOf` of those whose values start with
//! different characters (`["string", "null"]`, `["integer", "null"]`). Outside strings the
//! only whitespace is one optional space after `:` and `,` (as `json.dumps` writes it, and as
//! models write JSON: forbidding it pushes a model off its own answer); strings are printable,
//! with JSON's escapes.
//!
//! [`JsonState`] is a pushdown automaton over characters; a token is allowed when the
//! automaton accepts all of its characters ([`TokenTexts`] holds each token's text).

use std::sync::Arc;

use serde_json::Value;

/// A node of the schema.
#[derive(Debug, Clone, PartialEq)]
pub enum Schema {
    String,
    /// A string that is one of these.
    Enum(Vec<String>),
    Integer,
    Number,
    Boolean,
    Null,
    Array(Box<Schema>),
    /// Properties, all required, in order.
    Object(Vec<(String, Schema)>),
    /// One of these; their values start with different characters.
    AnyOf(Vec<Schema>),
}

impl Schema {
    pub fn from_json(v: &Value) -> Result<Self, String> {
        if let Some(alts) = v.get("anyOf").and_then(Value::as_array) {
            let alts = alts.iter().map(Schema::from_json).collect::<Result<Vec<_>, _>>()?;
            return Schema::any_of(alts);
        }
        if let Some(e) = v.get("enum").and_then(Value::as_array) {
            let options = e
                .iter()
                .map(|x| x.as_str().map(str::to_string).ok_or("enum: only strings are supported".to_string()))
                .collect::<Result<Vec<_>, _>>()?;
            if options.is_empty() {
                return Err("enum: no options".into());
            }
            return Ok(Schema::Enum(options));
        }
        match v.get("type") {
            Some(Value::Array(types)) => {
                let alts = types
                    .iter()
                    .map(|t| {
                        let mut one = v.clone();
                        one["type"] = t.clone();
                        Schema::from_json(&one)
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Schema::any_of(alts)
            }
            Some(Value::String(t)) => match t.as_str() {
                "string" => Ok(Schema::String),
                "integer" => Ok(Schema::Integer),
                "number" => Ok(Schema::Number),
                "boolean" => Ok(Schema::Boolean),
                "null" => Ok(Schema::Null),
                "array" => {
                    let items = v.get("items").ok_or("array without items")?;
                    Ok(Schema::Array(Box::new(Schema::from_json(items)?)))
                }
                "object" => {
                    let props = v.get("properties").and_then(Value::as_object).ok_or("object without properties")?;
                    // in the order of `required`, then the rest by name (a parsed JSON object
                    // does not keep its keys' order)
                    let mut order: Vec<&String> = Vec::new();
                    for r in v.get("required").and_then(Value::as_array).into_iter().flatten() {
                        let r = r.as_str().ok_or("required: not a list of names")?;
                        let (k, _) = props.get_key_value(r).ok_or(format!("required {r:?} is not a property"))?;
                        if !order.contains(&k) {
                            order.push(k);
                        }
                    }
                    order.extend(props.keys().filter(|k| !order.contains(k)).collect::<Vec<_>>());
                    let props = order
                        .into_iter()
                        .map(|k| Ok((k.clone(), Schema::from_json(&props[k]).map_err(|e| format!("{k}: {e}"))?)))
                        .collect::<Result<Vec<_>, String>>()?;
                    Ok(Schema::Object(props))
                }
                other => Err(format!("type {other:?} is not supported")),
            },
            _ => Err(format!("schema without a type: {v}")),
        }
    }

    fn any_of(alts: Vec<Schema>) -> Result<Schema, String> {
        let mut seen = String::new();
        for a in &alts {
            for c in a.first_chars().chars() {
                if seen.contains(c) {
                    return Err(format!("anyOf alternatives both start with {c:?}: not supported"));
                }
                seen.push(c);
            }
        }
        Ok(Schema::AnyOf(alts))
    }

    /// The characters a value of this schema can start with.
    fn first_chars(&self) -> &'static str {
        match self {
            Schema::String | Schema::Enum(_) => "\"",
            Schema::Integer | Schema::Number => "-0123456789",
            Schema::Boolean => "tf",
            Schema::Null => "n",
            Schema::Array(_) => "[",
            Schema::Object(_) => "{",
            Schema::AnyOf(_) => "",
        }
    }
}

/// Each token's text, or `None` for tokens that may never appear inside JSON (control tokens,
/// and byte-level tokens that are not whole UTF-8 characters on their own).
pub type TokenTexts = Arc<Vec<Option<String>>>;

/// Where a number is.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Num {
    Sign,     // after '-'
    Zero,     // a leading 0
    Int,      // integer digits
    Dot,      // after '.'
    Frac,     // fraction digits
    Exp,      // after 'e'
    ExpSign,  // after 'e+' / 'e-'
    ExpDigit, // exponent digits
}

impl Num {
    fn complete(self) -> bool {
        matches!(self, Num::Zero | Num::Int | Num::Frac | Num::ExpDigit)
    }
}

#[derive(Debug, Clone)]
enum Frame<'s> {
    /// A value of this schema is next; `true`: one space may come first.
    Value(&'s Schema, bool),
    /// Inside a string; `options` narrows an enum to the values that still match.
    Str {
        options: Option<Vec<&'s str>>,
        text: String,
        escape: u8,
    },
    Num {
        state: Num,
        integer: bool,
    },
    /// The rest of `true`, `false` or `null`.
    Literal(&'static str),
    /// Inside an array: `first` until the first item.
    Array {
        item: &'s Schema,
        first: bool,
    },
    /// Inside an object: the next property, and what comes before it.
    Object {
        props: &'s [(String, Schema)],
        next: usize,
        pending: String,
        space: bool,
    },
}

/// The automaton's state after the text so far.
#[derive(Debug, Clone)]
pub struct JsonState<'s> {
    stack: Vec<Frame<'s>>,
}

impl<'s> JsonState<'s> {
    pub fn new(schema: &'s Schema) -> Self {
        Self { stack: vec![Frame::Value(schema, false)] }
    }

    /// Whether the document is complete (a number at the top level completes at the end).
    pub fn is_complete(&self) -> bool {
        match self.stack.as_slice() {
            [] => true,
            [Frame::Num { state, .. }] => state.complete(),
            _ => false,
        }
    }

    /// Whether a stop token may come now.
    pub fn can_stop(&self) -> bool {
        self.is_complete()
    }

    /// Feed one token's text; false (and the state is then unspecified) if it leaves the language.
    pub fn push_str(&mut self, s: &str) -> bool {
        s.chars().all(|c| self.push(c))
    }

    /// Feed one character. A frame is popped when its value ends; the frame below it (the
    /// array or object holding the value) then takes the next character, and an empty stack is
    /// a complete document.
    pub fn push(&mut self, c: char) -> bool {
        let Some(top) = self.stack.pop() else { return false };
        match top {
            Frame::Value(schema, true) if c == ' ' => {
                self.stack.push(Frame::Value(schema, false));
                true
            }
            Frame::Value(schema, _) => self.start_value(schema, c),
            Frame::Str { mut options, mut text, escape } => {
                if escape == 1 {
                    match c {
                        '"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't' => {}
                        'u' => {
                            self.stack.push(Frame::Str { options, text, escape: 5 });
                            return true;
                        }
                        _ => return false,
                    }
                    if options.is_some() {
                        return false; // enum values are matched without escapes
                    }
                    self.stack.push(Frame::Str { options, text, escape: 0 });
                    return true;
                }
                if escape > 1 {
                    if !c.is_ascii_hexdigit() {
                        return false;
                    }
                    self.stack.push(Frame::Str { options, text, escape: if escape == 2 { 0 } else { escape - 1 } });
                    return true;
                }
                match c {
                    '"' => {
                        if let Some(opts) = &options {
                            if !opts.iter().any(|o| *o == text) {
                                return false;
                            }
                        }
                        true
                    }
                    '\\' => {
                        self.stack.push(Frame::Str { options, text, escape: 1 });
                        true
                    }
                    c if (c as u32) < 0x20 => false,
                    c => {
                        if let Some(opts) = options.as_mut() {
                            text.push(c);
                            opts.retain(|o| o.starts_with(text.as_str()));
                            if opts.is_empty() {
                                return false;
                            }
                        }
                        self.stack.push(Frame::Str { options, text, escape: 0 });
                        true
                    }
                }
            }
            Frame::Num { state, integer } => {
                let next = match (state, c) {
                    (Num::Sign, '0') => Some(Num::Zero),
                    (Num::Sign, '1'..='9') => Some(Num::Int),
                    (Num::Int, '0'..='9') => Some(Num::Int),
                    (Num::Zero | Num::Int, '.') if !integer => Some(Num::Dot),
                    (Num::Zero | Num::Int | Num::Frac, 'e' | 'E') if !integer => Some(Num::Exp),
                    (Num::Dot | Num::Frac, '0'..='9') => Some(Num::Frac),
                    (Num::Exp, '+' | '-') => Some(Num::ExpSign),
                    (Num::Exp | Num::ExpSign | Num::ExpDigit, '0'..='9') => Some(Num::ExpDigit),
                    _ => None,
                };
                match next {
                    Some(state) => {
                        self.stack.push(Frame::Num { state, integer });
                        true
                    }
                    // the number ends here; the character belongs to what follows
                    None if state.complete() => self.push(c),
                    None => false,
                }
            }
            Frame::Literal(rest) => {
                let mut chars = rest.chars();
                if chars.next() != Some(c) {
                    return false;
                }
                let rest = chars.as_str();
                if rest.is_empty() {
                    true
                } else {
                    self.stack.push(Frame::Literal(rest));
                    true
                }
            }
            Frame::Array { item, first } => match c {
                ']' => true,
                ',' if !first => {
                    self.stack.push(Frame::Array { item, first: false });
                    self.stack.push(Frame::Value(item, true));
                    true
                }
                c if first => {
                    self.stack.push(Frame::Array { item, first: false });
                    self.start_value(item, c)
                }
                _ => false,
            },
            Frame::Object { props, next, pending, space } => {
                // `pending` is the fixed text before the next value: `"key":` (with a comma
                // before all but the first) or the closing brace; `space`: right after that comma
                if c == ' ' && space {
                    self.stack.push(Frame::Object { props, next, pending, space: false });
                    return true;
                }
                let mut chars = pending.chars();
                if chars.next() != Some(c) {
                    return false;
                }
                let rest = chars.as_str().to_string();
                if !rest.is_empty() {
                    self.stack.push(Frame::Object { props, next, pending: rest, space: c == ',' });
                    return true;
                }
                if next == props.len() {
                    return true; // that was the closing brace: the object is done
                }
                let after = match next + 1 == props.len() {
                    true => "}".to_string(),
                    false => format!(",{}:", key(&props[next + 1].0)),
                };
                self.stack.push(Frame::Object { props, next: next + 1, pending: after, space: false });
                self.stack.push(Frame::Value(&props[next].1, true));
                true
            }
        }
    }

    fn start_value(&mut self, schema: &'s Schema, c: char) -> bool {
        match schema {
            Schema::AnyOf(alts) => match alts.iter().find(|a| a.first_chars().contains(c)) {
                Some(a) => self.start_value(a, c),
                None => false,
            },
            Schema::String if c == '"' => {
                self.stack.push(Frame::Str { options: None, text: String::new(), escape: 0 });
                true
            }
            Schema::Enum(opts) if c == '"' => {
                self.stack.push(Frame::Str {
                    options: Some(opts.iter().map(String::as_str).collect()),
                    text: String::new(),
                    escape: 0,
                });
                true
            }
            Schema::Integer | Schema::Number if c == '-' || c.is_ascii_digit() => {
                let state = match c {
                    '-' => Num::Sign,
                    '0' => Num::Zero,
                    _ => Num::Int,
                };
                self.stack.push(Frame::Num { state, integer: *schema == Schema::Integer });
                true
            }
            Schema::Boolean if c == 't' => {
                self.stack.push(Frame::Literal("rue"));
                true
            }
            Schema::Boolean if c == 'f' => {
                self.stack.push(Frame::Literal("alse"));
                true
            }
            Schema::Null if c == 'n' => {
                self.stack.push(Frame::Literal("ull"));
                true
            }
            Schema::Array(item) if c == '[' => {
                self.stack.push(Frame::Array { item, first: true });
                true
            }
            Schema::Object(props) if c == '{' => {
                let pending = match props.first() {
                    Some((k, _)) => format!("{}:", key(k)),
                    None => "}".to_string(),
                };
                self.stack.push(Frame::Object { props, next: 0, pending, space: false });
                true
            }
            _ => false,
        }
    }
}

/// A property name as JSON.
fn key(k: &str) -> String {
    serde_json::to_string(k).unwrap_or_else(|_| format!("\"{k}\""))
}

/// A JSON constraint for one sequence: the schema and the tokens' texts.
pub struct Constraint {
    schema: Arc<Schema>,
    texts: TokenTexts,
}

impl std::fmt::Debug for Constraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Constraint").field("schema", &self.schema).field("tokens", &self.texts.len()).finish()
    }
}

impl Constraint {
    pub fn new(schema: Arc<Schema>, texts: TokenTexts) -> Self {
        Self { schema, texts }
    }

    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The text of `token` (empty for tokens that never appear in JSON).
    pub fn text(&self, token: u32) -> &str {
        self.texts.get(token as usize).and_then(|t| t.as_deref()).unwrap_or("")
    }

    /// Mask `logits` (to −∞) where a token would leave the schema's language after `text`
    /// (the output so far); stop tokens stay only where the document is complete. Returns
    /// false if `text` itself is not a valid prefix.
    pub fn mask(&self, text: &str, stop: &[u32], logits: &mut [f32]) -> bool {
        debug_assert!(logits.len() <= self.texts.len() || self.texts.is_empty());
        let mut state = JsonState::new(&self.schema);
        if !state.push_str(text) {
            return false;
        }
        let complete = state.can_stop();
        for (id, l) in logits.iter_mut().enumerate() {
            let allowed = if stop.contains(&(id as u32)) {
                complete
            } else {
                match self.texts.get(id).and_then(Option::as_ref) {
                    Some(t) if !complete && !t.is_empty() => state.clone().push_str(t),
                    _ => false,
                }
            };
            if !allowed {
                *l = f32::NEG_INFINITY;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Schema {
        Schema::from_json(&serde_json::json!({
            "type": "object",
            "properties": {
                "parties": {"type": "array", "items": {"type": "string"}},
                "governing_law": {"type": ["string", "null"]},
                "notice_days": {"type": ["integer", "null"]},
                "auto_renews": {"type": "boolean"},
                "kind": {"enum": ["nda", "msa", "license"]}
            },
            "required": ["parties", "governing_law", "notice_days", "auto_renews", "kind"]
        }))
        .unwrap()
    }

    fn accepts(s: &Schema, text: &str) -> bool {
        let mut st = JsonState::new(s);
        st.push_str(text) && st.is_complete()
    }

    fn prefix(s: &Schema, text: &str) -> bool {
        JsonState::new(s).push_str(text)
    }

    #[test]
    fn accepts_documents_of_the_schema_and_their_prefixes_only() {
        let s = schema();
        let doc = r#"{"parties":["Acme, Inc.","Bob \"B\" Ltd \u00e9"],"governing_law":null,"notice_days":30,"auto_renews":true,"kind":"msa"}"#;
        assert!(accepts(&s, doc));
        for i in 0..doc.len() {
            if doc.is_char_boundary(i) {
                assert!(prefix(&s, &doc[..i]), "prefix {:?}", &doc[..i]);
                assert!(!accepts(&s, &doc[..i]) || i == doc.len(), "incomplete accepted: {:?}", &doc[..i]);
            }
        }
        let parsed: Value = serde_json::from_str(doc).unwrap();
        assert_eq!(parsed["notice_days"], 30);
        for bad in [
            r#"{"governing_law":null"#,                               // properties out of order
            r#"{"parties":[1]"#,                                      // wrong item type
            r#"{"parties":[],"governing_law":"x","notice_days":3.5"#, // not an integer
            r#"{"parties":[],"governing_law":"x","notice_days":-,"#,
            r#"{"parties":[],"governing_law":"x","notice_days":1,"auto_renews":yes"#,
            r#"{"parties":[],"governing_law":"x","notice_days":1,"auto_renews":true,"kind":"lease""#,
            r#"{"parties":[] ,"#, // no whitespace outside strings but after : and ,
            r#"{"parties":  ["#,  // one space at most
            r#"{ "parties":"#,
            "{\"parties\":[\"a\nb\"]", // control character in a string
        ] {
            assert!(!prefix(&s, bad), "accepted {bad:?}");
        }
    }

    #[test]
    fn one_space_after_colons_and_commas() {
        let s = schema();
        let doc = r#"{"parties": ["Acme", "Bob"], "governing_law": "New York", "notice_days": 30, "auto_renews": false, "kind": "nda"}"#;
        assert!(accepts(&s, doc));
        let parsed: Value = serde_json::from_str(doc).unwrap();
        assert_eq!(parsed["governing_law"], "New York");
    }

    #[test]
    fn numbers_end_where_the_next_token_begins() {
        let s = Schema::from_json(&serde_json::json!({"type": "number"})).unwrap();
        assert!(accepts(&s, "-12.5e+3"));
        assert!(accepts(&s, "0"));
        assert!(!prefix(&s, "01"));
        assert!(!accepts(&s, "1."));
        let arr = Schema::from_json(&serde_json::json!({"type": "array", "items": {"type": "integer"}})).unwrap();
        assert!(accepts(&arr, "[1,20,-3]"));
        assert!(accepts(&arr, "[]"));
        assert!(!prefix(&arr, "[1,]"));
    }

    #[test]
    fn ambiguous_unions_are_refused() {
        let e = Schema::from_json(&serde_json::json!({"type": ["integer", "number"]})).unwrap_err();
        assert!(e.contains("both start with"), "{e}");
        assert!(Schema::from_json(&serde_json::json!({"type": "date"})).unwrap_err().contains("not supported"));
    }

    #[test]
    fn the_mask_allows_only_tokens_that_continue_the_document() {
        let s = Arc::new(Schema::from_json(&serde_json::json!({"enum": ["yes", "no"]})).unwrap());
        let texts: Vec<Option<String>> =
            ["\"", "ye", "s\"", "no\"", "maybe", " ", "\"yes\""].iter().map(|t| Some(t.to_string())).collect();
        let stop = 7u32;
        let mut all = texts.clone();
        all.push(None); // the stop token's id
        let c = Constraint::new(s, Arc::new(all));
        let allowed = |text: &str| {
            let mut logits = vec![0f32; 8];
            assert!(c.mask(text, &[stop], &mut logits));
            (0..8).filter(|&i| logits[i].is_finite()).collect::<Vec<_>>()
        };
        assert_eq!(allowed(""), vec![0, 6]);
        assert_eq!(allowed("\""), vec![1, 3]);
        assert_eq!(allowed("\"ye"), vec![2]);
        assert_eq!(allowed("\"yes\""), vec![7]);
    }
}
