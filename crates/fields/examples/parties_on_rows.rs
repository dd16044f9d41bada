//! The stored parties again, from the model's raw answers already decoded, for working on how
//! the model's parties are held to the rules' (`answer::ground_parties`) without decoding
//! again: `cargo run -p docpipe-fields --example parties_on_rows -- LABELS.tsv FILES.tsv
//! MODEL.tsv`, where FILES.tsv lists `file<TAB>text path` (as for `rules_on_texts`) and
//! MODEL.tsv `file<TAB>the model's raw parties answer` (from `document_fields`: `raw` where
//! `source = 'model'`, else `alternative->>'raw'`). Prints the accuracy of the model alone,
//! the model grounded, the rules alone and the stored policy, then every contract whose
//! stored answer is wrong (and whether the model's own answer was right).

use std::collections::BTreeMap;

use docpipe_fields::answer::{choose, ground_parties, interpret, rules_found, Outcome};
use docpipe_fields::eval::{read_labels, score};
use docpipe_fields::normalize::Value;
use docpipe_fields::{field, Source};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, labels, files, model] = args.as_slice() else {
        eprintln!("usage: parties_on_rows LABELS.tsv FILES.tsv MODEL.tsv");
        std::process::exit(2);
    };
    let labels = read_labels(std::path::Path::new(labels)).unwrap_or_else(|e| panic!("{e}"));
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{p}: {e}"));
    let texts: BTreeMap<String, String> =
        read(files).lines().filter_map(|l| l.split_once('\t')).map(|(f, p)| (f.to_string(), p.to_string())).collect();
    let parties = field("parties").expect("the parties field");
    let mut names = Vec::new();
    let columns = ["model", "grounded", "rules", "stored"];
    let mut predicted: Vec<BTreeMap<(String, String), Value>> = vec![BTreeMap::new(); columns.len()];
    for line in read(model).lines() {
        let Some((file, raw)) = line.split_once('\t') else { continue };
        let Some(path) = texts.get(file) else { continue };
        let text = read(path);
        let by_rules = rules_found(&text).remove("parties").map_or(Outcome::None, |(o, _)| o);
        let by_model = interpret(parties, (!raw.is_empty()).then_some(raw));
        let grounded = match (&by_model, &by_rules) {
            (Outcome::Answered(Value::Parties { parties: m }), Outcome::Answered(Value::Parties { parties: r })) => {
                Outcome::Answered(Value::Parties { parties: ground_parties(m, r) })
            }
            _ => by_model.clone(),
        };
        let stored = match choose(parties.policy, &grounded, &by_rules) {
            Source::Model => grounded.clone(),
            Source::Rules => by_rules.clone(),
        };
        for (column, outcome) in predicted.iter_mut().zip([by_model, grounded, by_rules, stored]) {
            if let Outcome::Answered(v) = outcome {
                column.insert((file.to_string(), parties.key.to_string()), v);
            }
        }
        names.push(file.to_string());
    }
    let reports: Vec<_> = predicted.iter().map(|p| score(&labels, &names, p, &BTreeMap::new())).collect();
    for (column, r) in columns.iter().zip(&reports) {
        let (_, right, total) = r.per_field.iter().find(|x| x.0 == parties.key).copied().unwrap_or_default();
        println!("{column:<10} {:.3} ({right} of {total})", right as f64 / total.max(1) as f64);
    }
    let model_right =
        |file: &str| reports[0].rows.iter().any(|x| x.field == parties.key && x.file == file && x.correct);
    for row in reports[3].rows.iter().filter(|x| x.field == parties.key && !x.correct) {
        let note = if model_right(&row.file) { " (the model alone was right)" } else { "" };
        println!("miss {}{note}\n  gold {}\n  got  {}", row.file, row.gold, row.predicted);
    }
}
