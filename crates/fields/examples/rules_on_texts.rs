//! The rule-based baseline on texts already extracted, for working on the rules: `cargo run -p
//! docpipe-fields --example rules_on_texts -- LABELS.tsv FILES.tsv [FIELD]`, where FILES.tsv
//! lists `file<TAB>text path` (`docpipe eval-fields --pdfs` caches the texts under
//! `$DOCPIPE_HOME/text`). Prints per field the accuracy, how often the rules answer, how often
//! they are right when they do, and how often CUAD has no answer where they find none; in how
//! many texts the parties' sentence ends past the decoder context's opening; then each miss of
//! FIELD (or of all; `none` lists no miss) with the gold answer, the rules' answer and their
//! evidence. With `RULES_BY_POSITION=1` it also prints, per field, how often the rules are
//! right by where in the text their evidence starts.

use std::collections::BTreeMap;

use docpipe_fields::answer::{rules_answers, Outcome};
use docpipe_fields::eval::{read_labels, score};
use docpipe_fields::prompt::Budget;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, labels, files, rest @ ..] = args.as_slice() else {
        eprintln!("usage: rules_on_texts LABELS.tsv FILES.tsv [FIELD]");
        std::process::exit(2);
    };
    let labels = read_labels(std::path::Path::new(labels)).unwrap_or_else(|e| panic!("{e}"));
    let list = std::fs::read_to_string(files).unwrap_or_else(|e| panic!("{files}: {e}"));
    let mut names = Vec::new();
    let mut predicted = BTreeMap::new();
    let mut evidence = BTreeMap::new();
    // where in the text each answer's evidence starts (characters)
    let mut starts = BTreeMap::new();
    // texts whose parties' sentence ends past the decoder context's opening
    let mut past_opening = 0;
    for line in list.lines() {
        let Some((file, path)) = line.split_once('\t') else { continue };
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        for (k, (o, hit)) in rules_answers(&text) {
            if k == "parties" && Budget::default().parties_past_opening(hit.as_ref()).is_some() {
                past_opening += 1;
            }
            if let Some(h) = hit {
                starts.insert((file.to_string(), k.to_string()), h.evidence.start);
                let span: String = text.chars().skip(h.evidence.start).take(h.evidence.len()).collect();
                let ev = span.split_whitespace().collect::<Vec<_>>().join(" ");
                evidence.insert((file.to_string(), k.to_string()), (h.raw, ev));
            }
            if let Outcome::Answered(v) = o {
                predicted.insert((file.to_string(), k.to_string()), v);
            }
        }
        names.push(file.to_string());
    }
    let r = score(&labels, &names, &predicted, &BTreeMap::new());
    // "silent → none": where the rules find nothing, how often CUAD says the contract does not
    // state the field either (what a guess by another reader there would have to beat)
    println!("{:<38} {:>8} {:>9} {:>10} {:>15}", "field", "accuracy", "answered", "precision", "silent → none");
    for &(k, c, t) in &r.per_field {
        let (answered, right) = r
            .rows
            .iter()
            .filter(|x| x.field == k && x.predicted != "none")
            .fold((0, 0), |(a, c), x| (a + 1, c + x.correct as usize));
        let (silent, none) = r
            .rows
            .iter()
            .filter(|x| x.field == k && x.predicted == "none")
            .fold((0, 0), |(s, n), x| (s + 1, n + x.correct as usize));
        println!(
            "{k:<38} {:>8.3} {:>9.2} {:>10.3} {:>8.2} of {silent:>3}",
            c as f64 / t.max(1) as f64,
            answered as f64 / t.max(1) as f64,
            right as f64 / answered.max(1) as f64,
            none as f64 / silent.max(1) as f64
        );
    }
    println!("overall {:.3}", r.accuracy());
    println!("parties' sentence past the context's opening: {past_opening} of {} texts", names.len());
    let only = rest.first();
    // RULES_BY_POSITION=1: per field, how often the rules are right by where their evidence
    // starts, to see whether answers found deep in a text are worth storing
    if std::env::var("RULES_BY_POSITION").is_ok_and(|v| v == "1") {
        const EDGES: [usize; 5] = [0, 2_000, 5_000, 20_000, usize::MAX];
        println!("\nright / answered by where the evidence starts (characters)");
        println!("{:<38} {:>10} {:>10} {:>10} {:>10}", "field", "<2k", "2k-5k", "5k-20k", ">=20k");
        for &(k, _, _) in &r.per_field {
            let mut cells = [(0usize, 0usize); 4];
            for x in r.rows.iter().filter(|x| x.field == k && x.predicted != "none") {
                let Some(&at) = starts.get(&(x.file.clone(), k.to_string())) else { continue };
                let b = EDGES.windows(2).position(|w| at >= w[0] && at < w[1]).unwrap_or(3);
                cells[b].0 += x.correct as usize;
                cells[b].1 += 1;
            }
            let cell = |(c, n): (usize, usize)| format!("{c}/{n}");
            println!(
                "{k:<38} {:>10} {:>10} {:>10} {:>10}",
                cell(cells[0]),
                cell(cells[1]),
                cell(cells[2]),
                cell(cells[3])
            );
        }
    }
    for x in r.rows.iter().filter(|x| !x.correct && only.is_none_or(|f| f == x.field)) {
        let (raw, ev) = evidence.get(&(x.file.clone(), x.field.to_string())).cloned().unwrap_or_default();
        let ev: String = ev.chars().take(300).collect();
        println!(
            "\n{} {}\n  gold {}  got {} ({raw:?})\n  {ev}",
            &x.file[..x.file.len().min(50)],
            x.field,
            x.gold,
            x.predicted
        );
    }
}
