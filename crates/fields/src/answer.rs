//! From a raw answer to a stored one: normalise it for its field's kind, check that it is
//! the type the field needs (a date field that got "see Section 4" is not an answer), and
//! resolve the expiration date from the effective date where the text gives a term.

use crate::normalize::{normalize, resolve_end, Value};
use crate::{Field, Kind};

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
/// from the effective date, else the agreement date.
pub fn resolve_expiration(expiration: Outcome, effective: Option<&Outcome>, agreement: Option<&Outcome>) -> Outcome {
    let date_of = |o: Option<&Outcome>| match o {
        Some(Outcome::Answered(Value::Date { date })) => Some(*date),
        _ => None,
    };
    match expiration {
        Outcome::Answered(v) => Outcome::Answered(resolve_end(v, date_of(effective).or(date_of(agreement)))),
        other => other,
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
}
