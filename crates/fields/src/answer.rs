//! From a raw answer to a stored one: normalise it for its field's kind, check that it is
//! the type the field needs (a date field that got "see Section 4" is not an answer), and
//! resolve the expiration date from the effective date where the text gives a term.

use std::collections::BTreeMap;

use crate::normalize::{
    normalize, resolve_end, resolve_end_partial, resolve_end_unfilled, tidy_party_list, Party, Value,
};
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
        (
            Kind::Date,
            Value::Date { .. } | Value::PartialDate { .. } | Value::UnfilledDate { .. } | Value::OnEvent { .. },
        ) => true,
        (
            Kind::EndDate,
            Value::Date { .. }
            | Value::PartialDate { .. }
            | Value::UnfilledDate { .. }
            | Value::Perpetual
            | Value::UntilTerminated
            | Value::UntilEvent { .. }
            | Value::Relative { .. },
        ) => true,
        (Kind::Duration, Value::Duration { .. } | Value::Withheld | Value::Perpetual | Value::UntilTerminated) => true,
        (Kind::Jurisdiction, Value::Jurisdiction { .. } | Value::Withheld) => true,
        _ => false,
    };
    if fits {
        Outcome::Answered(value)
    } else {
        let wanted = match field.kind {
            Kind::Text => "a title",
            Kind::Parties => "a list of parties",
            Kind::Date => "a date, or the event that dates it",
            Kind::EndDate => "a date, a term or \"perpetual\"",
            Kind::Duration => "a length of time",
            Kind::Jurisdiction => "a known jurisdiction",
        };
        Outcome::Invalid(format!("{raw:?} is not {wanted}"))
    }
}

/// The expiration date resolved from a term ("five years from the Effective Date"), counted
/// from the effective date, else the agreement date; where neither is a whole date, from the
/// first that gives a year ("________, 2020": [`resolve_end_partial`]); where neither gives a
/// year, from the first that gives a day or month without one ("this 30th day of April":
/// [`resolve_end_unfilled`]). Checked against a whole start: a contract does not expire the day
/// it starts, so a date on the start (the small model's answer where the text gives no end: the
/// date it read at the top) is not an expiration date.
/// Of the 206 training contracts whose CUAD answers give both dates, none expires on its start
/// (two before it, an amendment and one whose CUAD date precedes its effective date: a date
/// before the start is kept).
pub fn resolve_expiration(expiration: Outcome, effective: Option<&Outcome>, agreement: Option<&Outcome>) -> Outcome {
    let answered = |o: Option<&Outcome>| match o {
        Some(Outcome::Answered(v)) => Some(v.clone()),
        _ => None,
    };
    let (effective, agreement) = (answered(effective), answered(agreement));
    let first = |pick: fn(&Value) -> bool| [&effective, &agreement].into_iter().flatten().find(|v| pick(v)).cloned();
    let start = first(|v| matches!(v, Value::Date { .. }))
        .or_else(|| first(|v| matches!(v, Value::PartialDate { .. })))
        .or_else(|| first(|v| matches!(v, Value::UnfilledDate { .. })));
    let Outcome::Answered(v) = expiration else { return expiration };
    match start {
        Some(Value::Date { date: start }) => match resolve_end(v, Some(start)) {
            Value::Date { date } if date == start => {
                Outcome::Invalid(format!("expires {date}, the day the agreement starts: not an expiration date"))
            }
            v => Outcome::Answered(v),
        },
        Some(Value::PartialDate { year, month }) => Outcome::Answered(resolve_end_partial(v, year, month)),
        Some(Value::UnfilledDate { month, day }) => Outcome::Answered(resolve_end_unfilled(v, month, day)),
        _ => Outcome::Answered(v),
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

/// The model's parties held to the names the contract writes, by the rules' parties of the
/// same text: a small model sometimes gives a party by the short name the agreement defines
/// for it ("SAP AFRICA" for `SYSTEMS APPLICATIONS PRODUCTS (AFRICA) (PTY) LIMITED ("SAP
/// AFRICA")`), or miscopies a name ("KENTH TURPIN" for "KENNETH TURPIN"). A model party whose
/// name is one of the roles the rules found for a party, and is not itself a party's name,
/// takes that party's name; one whose name differs from a rules' party's by a few letters only
/// (edit distance at most a sixth of the longer name) takes the name of the closest such party:
/// the preamble's spelling, even where the text also writes the other somewhere ("UTK
/// Corporation" in a later clause, "UTEK Corporation" in the preamble), unless the model gives
/// that name itself for another party ("Beijing Tuniu ..." beside "Nanjing Tuniu ..."); one
/// that is the last words of a rules' name takes that name ("KazakhOil" for "JSC NOC
/// KazakhOil"). A rules' name is taken only where it looks like one (two words of letters at
/// least, little punctuation, at most one plain word in lower case): the rules also misread a
/// signature line ("You: , -----") or a piece of a sentence ("Agent named on the signature page
/// hereof") as a party. The model's list, its order and its roles are kept otherwise;
/// parties that end up with the same name are one, as in every party list.
pub fn ground_parties(model: &[Party], rules: &[Party]) -> Vec<Party> {
    let key = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase().replace('\u{2019}', "'");
    let names: Vec<String> = rules.iter().map(|p| key(&p.name)).collect();
    let looks_like_a_name = |s: &str| {
        let words = s.split(|c: char| !c.is_alphabetic()).filter(|w| w.chars().count() >= 2).count();
        let marks = s.chars().filter(|c| !c.is_alphanumeric() && !c.is_whitespace()).count();
        // and holds few plain words in lower case: not "agents named therein", "Agent named on
        // the signature page hereof" (but "theglobe.com, inc.")
        let plain_lower = s
            .split_whitespace()
            .map(|w| w.trim_end_matches([',', ';']))
            .filter(|w| {
                w.chars().all(char::is_lowercase) && !matches!(*w, "and" | "of" | "the" | "de" | "du" | "dba" | "for")
            })
            .count();
        words >= 2 && marks * 4 <= s.chars().count() && plain_lower <= 1
    };
    // the model's own names: a rules' name that the model gives as written is that party, and
    // no other model party's spelling of it ("Beijing Tuniu ..." is not "Nanjing Tuniu ...")
    let given: Vec<String> = model.iter().map(|p| key(&p.name)).collect();
    let mut out: Vec<Party> = Vec::with_capacity(model.len());
    for p in model {
        let name = key(&p.name);
        let mut grounded = p.clone();
        if !name.is_empty() && !names.contains(&name) {
            let by_role =
                rules.iter().find(|r| looks_like_a_name(&r.name) && r.roles.iter().any(|role| key(role) == name));
            let near = || {
                rules
                    .iter()
                    .zip(&names)
                    .filter(|(r, n)| looks_like_a_name(&r.name) && !given.contains(n))
                    .map(|(r, n)| (r, edit_distance(&name, n), n.chars().count().max(name.chars().count())))
                    .filter(|&(_, d, len)| d > 0 && d * 6 <= len)
                    .min_by_key(|&(_, d, _)| d)
                    .map(|(r, ..)| r)
            };
            // the last words of a rules' name, its qualifiers left out ("KazakhOil" for "JSC NOC
            // KazakhOil"); not its first words ("TELKOM" may be any of its group's companies)
            let tail = || {
                rules
                    .iter()
                    .zip(&names)
                    .find(|(r, n)| looks_like_a_name(&r.name) && !given.contains(n) && n.ends_with(&format!(" {name}")))
            };
            // a spelling of a rules' name ("UTK Corporation" beside the preamble's "UTEK
            // Corporation") is that party, even where the text writes it so somewhere
            let found = by_role.or_else(near).or_else(|| tail().map(|(r, _)| r));
            if let Some(r) = found {
                grounded.name = r.name.clone();
                if !grounded.roles.iter().any(|x| key(x) == name) {
                    grounded.roles.push(p.name.clone());
                }
            }
        }
        out.push(grounded);
    }
    tidy_party_list(out)
}

/// Levenshtein distance in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != cb)).min(row[j] + 1).min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
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

    fn party(name: &str, roles: &[&str]) -> Party {
        Party { name: name.into(), roles: roles.iter().map(|r| r.to_string()).collect() }
    }

    #[test]
    fn model_parties_are_held_to_the_names_the_contract_writes() {
        let rules = [
            party("SYSTEMS APPLICATIONS PRODUCTS (AFRICA) (PTY) LIMITED", &["SAP AFRICA"]),
            party("TELKOM SOUTH AFRICA LIMITED", &["TELKOM"]),
            party("KENNETH TURPIN", &["Turpin"]),
        ];
        // a defined short name becomes the party's name, and stays as a role
        let got =
            ground_parties(&[party("SAP AFRICA", &["company"]), party("Telkom South Africa Limited", &[])], &rules);
        assert_eq!(got[0], party("SYSTEMS APPLICATIONS PRODUCTS (AFRICA) (PTY) LIMITED", &["company", "SAP AFRICA"]));
        assert_eq!(got[1], party("Telkom South Africa Limited", &[]), "a name the rules also give is kept as written");
        // a miscopied name takes the near rules' name
        let got = ground_parties(&[party("KENTH TURPIN", &["Turpin"])], &rules);
        assert_eq!(got, [party("KENNETH TURPIN", &["Turpin", "KENTH TURPIN"])]);
        // the preamble's spelling wins over one the text also writes elsewhere
        let got = ground_parties(&[party("UTK Corporation", &["Contractor"])], &[party("UTEK Corporation", &["UTK"])]);
        assert_eq!(got, [party("UTEK Corporation", &["Contractor", "UTK Corporation"])]);
        // a name that is more than a spelling away is kept: a shorter name, one far from any
        let shorter = ground_parties(&[party("TELKOM", &[])], &[party("TELKOM SOUTH AFRICA LIMITED", &[])]);
        assert_eq!(shorter, [party("TELKOM", &[])]);
        let far = ground_parties(&[party("Acme Widgets Corporation", &[])], &rules);
        assert_eq!(far, [party("Acme Widgets Corporation", &[])]);
        // two model parties that are one
        let got = ground_parties(
            &[party("SAP AFRICA", &[]), party("SYSTEMS APPLICATIONS PRODUCTS (AFRICA) (PTY) LIMITED", &["Licensor"])],
            &rules,
        );
        assert_eq!(got, [party("SYSTEMS APPLICATIONS PRODUCTS (AFRICA) (PTY) LIMITED", &["SAP AFRICA", "Licensor"])]);
        assert_eq!(edit_distance("kenth turpin", "kenneth turpin"), 2);
        // a rules' "party" that is a misread signature line is not a name to take
        let junk = [party("You: , ------------------------------------", &["You"])];
        assert_eq!(ground_parties(&[party("You", &["Franchisee"])], &junk), [party("You", &["Franchisee"])]);
        // two model parties whose names are a few letters apart stay two
        let tuniu = [
            party("Nanjing Tuniu Technology Co., Ltd.", &["Party A"]),
            party("Beijing Tuniu Technology Co., Ltd.", &["Party B"]),
        ];
        assert_eq!(ground_parties(&tuniu, &tuniu[..1]), tuniu);
        // a name's last words, its qualifiers left out, are that party
        let got = ground_parties(&[party("KazakhOil", &["Company"])], &[party("JSC NOC KazakhOil", &["Company"])]);
        assert_eq!(got, [party("JSC NOC KazakhOil", &["Company", "KazakhOil"])]);
        // a rules' "name" that is a piece of a sentence is not taken
        let agent = [party("Agent named on the signature page hereof", &["Agent"])];
        assert_eq!(ground_parties(&[party("Agent", &["Agent"])], &agent), [party("Agent", &["Agent"])]);
        let got = ground_parties(&[party("globe.com, Inc.", &[])], &[party("theglobe.com, inc.", &["theglobe"])]);
        assert_eq!(got[0].name, "theglobe.com, inc.", "a name in lower case is still a name");
        for name in [
            "NETGEAR, Inc.",
            "Solutions Media, Inc., dba SpinRecords.com",
            "SYSTEMS APPLICATIONS PRODUCTS (AFRICA) (PTY) LIMITED",
        ] {
            let got = ground_parties(&[party("X Y", &[])], &[party(name, &["X Y"])]);
            assert_eq!(got[0].name, name, "{name} reads as a name");
        }
    }

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
        // a template's start left blank but for its year: the end is as precise as the start
        let exp = interpret(field("expiration_date").unwrap(), Some("two years from the date hereof"));
        let agr = interpret(field("agreement_date").unwrap(), Some("as of ____________, 2020"));
        let got = resolve_expiration(exp.clone(), None, Some(&agr));
        assert_eq!(got, Outcome::Answered(Value::PartialDate { year: 2022, month: None }));
        // a whole date wins over a partial one, whichever field holds it
        let got = resolve_expiration(exp.clone(), Some(&agr), Some(&eff));
        assert_eq!(got, Outcome::Answered(Value::Date { date: NaiveDate::from_ymd_opt(2009, 4, 1).unwrap() }));
        // a start without its year: the end keeps the day and month a whole number of years on
        let blank = interpret(field("effective_date").unwrap(), Some("30th day of April"));
        let got = resolve_expiration(exp.clone(), Some(&blank), None);
        assert_eq!(got, Outcome::Answered(Value::UnfilledDate { month: Some(4), day: Some(30) }));
        let got = resolve_expiration(exp, Some(&blank), Some(&agr));
        assert_eq!(got, Outcome::Answered(Value::PartialDate { year: 2022, month: None }));
        let six = interpret(field("expiration_date").unwrap(), Some("six months after the Effective Date"));
        let got = resolve_expiration(six, Some(&blank), None);
        assert_eq!(got, Outcome::Answered(Value::UnfilledDate { month: Some(10), day: Some(30) }));
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
