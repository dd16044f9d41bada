//! Contract fields: the answers users filter on (title, parties, dates, renewal, notice period,
//! governing law), what each one asks the decoder, how a raw answer is normalised into a typed
//! value, a rule-based baseline, and the evaluation against CUAD's answers.
//!
//! Pure: no I/O beyond reading a labels file. The extraction stage (Postgres, the decoder)
//! lives in the binary; this crate says *what* to ask and *how to read the answer*.

pub mod answer;
pub mod eval;
pub mod normalize;
pub mod prompt;
pub mod rules;

use serde::{Deserialize, Serialize};

/// How a field's answer is typed once normalised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Free text kept as written (the agreement's title).
    Text,
    /// The parties, each with the roles the contract defines for it.
    Parties,
    /// A calendar date.
    Date,
    /// A date, or "perpetual" / "until terminated", or a term relative to another date.
    EndDate,
    /// A length of time ("successive 1 year" → P1Y), or "perpetual".
    Duration,
    /// A jurisdiction (state, province, country).
    Jurisdiction,
}

/// One answer field, with CUAD's category name (the gold column and the clause-scorer category
/// whose top segments are its evidence).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Stable key, used in SQL (`document_fields.field`) and as the wide view's column name.
    pub key: &'static str,
    /// CUAD's category.
    pub cuad: &'static str,
    pub kind: Kind,
    /// What the decoder is asked.
    pub question: &'static str,
    /// Whose answer is stored: see [`answer::choose`]. Per field, the policy that was most
    /// accurate on 29 CUAD training contracts run through the whole pipeline and the decoder
    /// (`make eval-fields` on every 15th training contract; docs/fields.md, "Which reader
    /// answers").
    pub policy: Policy,
}

/// Where a field's stored answer comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The decoder, from the document's evidence.
    Model,
    /// The rule-based baseline (`rules`), from the whole text.
    Rules,
}

/// Which source answers a field first; the other answers where the first has no answer (or,
/// for the model, no valid one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub first: Source,
    pub fill: bool,
}

impl Policy {
    /// Whether this policy ever stores the model's answer; if not, the model need not be asked.
    pub fn uses_model(self) -> bool {
        self.first == Source::Model || self.fill
    }
}

/// The model answers; where it finds nothing, nothing is stored.
pub const MODEL: Policy = Policy { first: Source::Model, fill: false };
/// The model answers; where it finds nothing, the rules may.
pub const MODEL_THEN_RULES: Policy = Policy { first: Source::Model, fill: true };
/// The rules answer where their pattern matches; where they find nothing, nothing is stored
/// (their silence is the answer more often than the model's guess is right).
pub const RULES: Policy = Policy { first: Source::Rules, fill: false };
/// The rules answer where their pattern matches (they are precise there); the model elsewhere.
pub const RULES_THEN_MODEL: Policy = Policy { first: Source::Rules, fill: true };

/// The answer fields, in the order the wide view lists them.
pub const FIELDS: &[Field] = &[
    Field {
        key: "document_name",
        cuad: "Document Name",
        kind: Kind::Text,
        question: "What is the title of this agreement, as written at its top?",
        policy: RULES_THEN_MODEL,
    },
    Field {
        key: "parties",
        cuad: "Parties",
        kind: Kind::Parties,
        question: "Who are the parties that sign this agreement? Give each party's legal name and the short name or role the agreement defines for it.",
        policy: MODEL_THEN_RULES,
    },
    Field {
        key: "agreement_date",
        cuad: "Agreement Date",
        kind: Kind::Date,
        question: "On what date was this agreement made, entered into or dated? Copy the date as written.",
        policy: RULES,
    },
    Field {
        key: "effective_date",
        cuad: "Effective Date",
        kind: Kind::Date,
        question: "On what date does this agreement become effective (the \"Effective Date\" or commencement date)? Copy the date as written.",
        policy: RULES,
    },
    Field {
        key: "expiration_date",
        cuad: "Expiration Date",
        kind: Kind::EndDate,
        question: "When does the initial term of this agreement end? Give the end date as written, or the length of the term and when it starts, as written.",
        policy: RULES_THEN_MODEL,
    },
    Field {
        key: "renewal_term",
        cuad: "Renewal Term",
        kind: Kind::Duration,
        question: "Does this agreement renew or extend automatically when its term ends? If it does, how long is each renewal term, as written? If it does not renew automatically, answer null.",
        policy: RULES,
    },
    Field {
        key: "notice_period_to_terminate_renewal",
        cuad: "Notice Period To Terminate Renewal",
        kind: Kind::Duration,
        question: "If this agreement renews automatically, how much notice must a party give before the end of the term to stop the renewal, as written? If the excerpts do not say, answer null.",
        policy: RULES,
    },
    Field {
        key: "governing_law",
        cuad: "Governing Law",
        kind: Kind::Jurisdiction,
        question: "Under the laws of which state or country is this agreement governed and construed?",
        policy: RULES,
    },
];

/// The field with this key or CUAD category name.
pub fn field(name: &str) -> Option<&'static Field> {
    FIELDS.iter().find(|f| f.key == name || f.cuad.eq_ignore_ascii_case(name))
}
