//! From a raw answer to a stored one: normalise it for its field's kind, check that it is
//! the type the field needs (a date field that got "see Section 4" is not an answer), and
//! resolve the expiration date from the effective date where the text gives a term.

use std::collections::BTreeMap;

use crate::normalize::{normalize, resolve_end, Value};
use crate::rules::{self, Found};
use crate::{Field, Kind, Policy, Source, FIELDS};

/// What became of one field's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A value of the field's type.
    Answered(Value),
    /// The contract does not say.
    None,
    /// An answer came back, but not of the field's type: why.
    Invalid(String),
}

/// Normalise and check a raw answer (`None`: the model said null).
pub fn interpret(field: &Field, raw: Option<&str>) -> Outcome {
    let Some(raw) = raw.map(str::trim).filter(|r| !r.is_empty()) else { return Outcome::None };
    let value = normalize(field.kind, raw);
    if value.is_none() {
        return Outcome::None;
    }
    let fits = match (field.kind, &value) {
        (Kind::Text, Value::Text { .. }) => true,
        (Kind::Parties, Value::Parties { parties }) => {
            parties.iter().any(|p| !p.name.is_empty() || !p.roles.is_empty())
        }
        (Kind::Date, Value::Date { .. } | Value::PartialDate { .. }) => true,
        (
            Kind::EndDate,
            Value::Date { .. }
            | Value::PartialDate { .. }
            | Value::Perpetual
            | Value::UntilTerminated
            | Value::Relative { .. },
        ) => true,
        (Kind::Duration, Value::Duration { .. } | Value::Perpetual | Value::UntilTerminated) => true,
        (Kind::Jurisdiction, Value::Jurisdiction { .. }) => true,
        _ => false,
    };
    if fits {
        Outcome::Answered(value)
    } else {
        let wanted = match field.kind {
            Kind::Text => "a title",
            Kind::Parties => "a list of parties",
            Kind::Date => "a date",
            Kind::EndDate => "a date, a term or \"perpetual\"",
            Kind::Duration => "a length of time",
            Kind::Jurisdiction => "a known jurisdiction",
        };
        Outcome::Invalid(format!("{raw:?} is not {wanted}"))
    }
}

/// The expiration date resolved from a term ("five years from the Effective Date"), counted
/// from the effective date, else the agreement date; and checked against that start: a
/// contract does not expire the day it starts, so a date on the start (the small model's
/// answer where the text gives no end: the date it read at the top) is not an expiration date.
/// Of the 206 training contracts whose CUAD answers give both dates, none expires on its start
/// (two before it, an amendment and one whose CUAD date precedes its effective date: a date
/// before the start is kept).
pub fn resolve_expiration(expiration: Outcome, effective: Option<&Outcome>, agreement: Option<&Outcome>) -> Outcome {
    let date_of = |o: Option<&Outcome>| match o {
        Some(Outcome::Answered(Value::Date { date })) => Some(*date),
        _ => None,
    };
    let start = date_of(effective).or(date_of(agreement));
    match expiration {
        Outcome::Answered(v) => match (resolve_end(v, start), start) {
            (Value::Date { date }, Some(start)) if date == start => {
                Outcome::Invalid(format!("expires {date}, the day the agreement starts: not an expiration date"))
            }
            (v, _) => Outcome::Answered(v),
        },
        other => other,
    }
}

/// What the rules found for every field of `text`, interpreted for its field like a model
/// answer (a term not yet resolved into a date).
pub fn rules_found(text: &str) -> BTreeMap<&'static str, (Outcome, Option<Found>)> {
    let mut found = rules::extract(text);
    FIELDS
        .iter()
        .map(|f| {
            let hit = found.remove(f.key);
            (f.key, (interpret(f, hit.as_ref().map(|h| h.raw.as_str())), hit))
        })
        .collect()
}

/// The rule-based baseline's answer to every field of `text`: [`rules_found`], the expiration
/// resolved from the rules' own effective (else agreement) date.
pub fn rules_answers(text: &str) -> BTreeMap<&'static str, (Outcome, Option<Found>)> {
    let mut out = rules_found(text);
    let effective = out.get("effective_date").map(|x| x.0.clone());
    let agreement = out.get("agreement_date").map(|x| x.0.clone());
    if let Some(exp) = out.get_mut("expiration_date") {
        exp.0 = resolve_expiration(exp.0.clone(), effective.as_ref(), agreement.as_ref());
    }
    out
}

/// Whose answer to store under `policy`, given what the model and the rules made of a field.
/// An answer counts when it is a value of the field's type; the second source is taken only
/// where the first has none and the second has one.
/// A policy without fill always takes its first source. Where neither has an answer under a
/// policy with fill, the model's row (which says why an answer was not valid).
pub fn choose(policy: Policy, model: &Outcome, rules: &Outcome) -> Source {
    let answered = |o: &Outcome| matches!(o, Outcome::Answered(_));
    let (first, second, other) = match policy.first {
        Source::Model => (model, rules, Source::Rules),
        Source::Rules => (rules, model, Source::Model),
    };
    match (answered(first), answered(second)) {
        (true, _) => policy.first,
        _ if !policy.fill => policy.first,
        (false, true) => other,
        (false, false) => Source::Model,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field;
    use chrono::NaiveDate;

    #[test]
    fn answers_must_fit_their_field() {
        let date = field("agreement_date").unwrap();
        assert!(matches!(interpret(date, Some("April 1, 2007")), Outcome::Answered(Value::Date { .. })));
        assert!(matches!(interpret(date, Some("see Section 4")), Outcome::Invalid(_)));
        assert_eq!(interpret(date, None), Outcome::None);
        assert_eq!(interpret(date, Some("  ")), Outcome::None);
        let law = field("governing_law").unwrap();
        assert!(matches!(interpret(law, Some("the State of Delaware")), Outcome::Answered(Value::Jurisdiction { .. })));
        assert!(matches!(interpret(law, Some("the laws of Atlantis")), Outcome::Invalid(_)));
        let renewal = field("renewal_term").unwrap();
        assert!(matches!(
            interpret(renewal, Some("successive one-year periods")),
            Outcome::Answered(Value::Duration { .. })
        ));
    }

    #[test]
    fn expiration_resolves_from_the_effective_date() {
        let exp = interpret(field("expiration_date").unwrap(), Some("fifteen (15) years from the Effective Date"));
        let eff = interpret(field("effective_date").unwrap(), Some("April 1, 2007"));
        let got = resolve_expiration(exp, Some(&eff), None);
        assert_eq!(got, Outcome::Answered(Value::Date { date: NaiveDate::from_ymd_opt(2022, 4, 1).unwrap() }));
    }

    #[test]
    fn an_expiration_on_the_start_date_is_not_one() {
        let exp = |a: &str| interpret(field("expiration_date").unwrap(), Some(a));
        let eff = interpret(field("effective_date").unwrap(), Some("May 3, 2006"));
        let agr = interpret(field("agreement_date").unwrap(), Some("May 1, 2006"));
        let got = resolve_expiration(exp("May 3, 2006"), Some(&eff), Some(&agr));
        assert!(matches!(&got, Outcome::Invalid(why) if why.contains("2006-05-03")), "{got:?}");
        // the start is the effective date where there is one, else the agreement date
        let got = resolve_expiration(exp("May 1, 2006"), Some(&eff), Some(&agr));
        assert!(matches!(got, Outcome::Answered(Value::Date { .. })), "{got:?}");
        assert!(matches!(resolve_expiration(exp("May 1, 2006"), None, Some(&agr)), Outcome::Invalid(_)));
        // an amendment's term can end before it is signed; a term of none is not checked
        assert!(matches!(resolve_expiration(exp("April 30, 2006"), Some(&eff), None), Outcome::Answered(_)));
        assert!(matches!(resolve_expiration(exp("perpetual"), Some(&eff), None), Outcome::Answered(Value::Perpetual)));
        assert!(matches!(resolve_expiration(exp("May 3, 2006"), None, None), Outcome::Answered(_)));
    }

    /// The fields worker checks the expiration against the dates stored before it, in
    /// [`FIELDS`]' order.
    #[test]
    fn the_start_dates_come_before_the_expiration() {
        let at = |k: &str| FIELDS.iter().position(|f| f.key == k).unwrap();
        assert!(at("agreement_date") < at("expiration_date"));
        assert!(at("effective_date") < at("expiration_date"));
    }

    #[test]
    fn rules_answers_are_typed_and_resolved() {
        let text = "LICENSE AGREEMENT\n\nThis License Agreement is made as of April 1, 2007 between Acme Inc. \
                    and Beta LLC. The term of this Agreement is five (5) years from the date hereof. \
                    This Agreement shall be governed by the laws of the State of Delaware.";
        let got = rules_answers(text);
        assert_eq!(got.len(), FIELDS.len());
        let law = &got["governing_law"].0;
        assert!(matches!(law, Outcome::Answered(Value::Jurisdiction { .. })), "{law:?}");
        assert!(got["governing_law"].1.is_some());
        assert!(matches!(got["agreement_date"].0, Outcome::Answered(Value::Date { .. })));
    }

    #[test]
    fn the_policy_picks_the_first_answer_and_fills_gaps() {
        use crate::{MODEL, MODEL_THEN_RULES, RULES, RULES_THEN_MODEL};
        let yes = Outcome::Answered(Value::Perpetual);
        let bad = Outcome::Invalid("x".into());
        assert_eq!(choose(MODEL, &Outcome::None, &yes), Source::Model);
        assert_eq!(choose(MODEL_THEN_RULES, &Outcome::None, &yes), Source::Rules);
        assert_eq!(choose(MODEL_THEN_RULES, &bad, &yes), Source::Rules);
        assert_eq!(choose(MODEL_THEN_RULES, &yes, &yes), Source::Model);
        assert_eq!(choose(MODEL_THEN_RULES, &Outcome::None, &Outcome::None), Source::Model);
        assert_eq!(choose(RULES_THEN_MODEL, &yes, &yes), Source::Rules);
        assert_eq!(choose(RULES_THEN_MODEL, &yes, &Outcome::None), Source::Model);
        // neither answers: the model's row, with its reason
        assert_eq!(choose(RULES_THEN_MODEL, &bad, &Outcome::None), Source::Model);
        // rules only: their silence is the answer, whatever the model says
        assert_eq!(choose(RULES, &yes, &yes), Source::Rules);
        assert_eq!(choose(RULES, &yes, &Outcome::None), Source::Rules);
        assert_eq!(choose(RULES, &bad, &Outcome::None), Source::Rules);
        assert!(!RULES.uses_model());
        assert!(MODEL.uses_model() && MODEL_THEN_RULES.uses_model() && RULES_THEN_MODEL.uses_model());
    }
}
