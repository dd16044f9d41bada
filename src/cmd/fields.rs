//! Contract fields: `docpipe extract-fields` generates each done document's answers (title,
//! parties, dates, renewal, notice period, governing law) with the decoder, from one shared
//! context of the clause scorer's best passages, and stores them with the scorer's presence
//! answers in `document_fields`; `docpipe fields DOC` prints them; `docpipe eval-fields`
//! scores them, and the rule-based baseline beside them, against CUAD's answers.
//!
//! Several documents are extracted together: their questions decode in one continuous batch,
//! and the questions of one document share its context's KV cache (prefix reuse).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use docpipe_fields::answer::{
    choose, ground_parties, interpret, resolve_expiration, rules_answers, rules_found, Outcome,
};
use docpipe_fields::normalize::Value;
use docpipe_fields::prompt::{self, Budget, Passage, PROMPT_VERSION};
use docpipe_fields::{Field, Policy, Source, FIELDS, MODEL_THEN_RULES, RULES_THEN_MODEL};
use docpipe_model::chat::Message;
use docpipe_model::constrain::{Constraint, Schema};
use docpipe_model::engine::{Event, Request};
use docpipe_model::sampling::Sampling;
use docpipe_store::fields::{Evidence, FieldRow, FieldsDocument, Label};
use docpipe_store::PgPool;
use uuid::Uuid;

use super::generate::{Decoder, DecoderArgs};
use crate::cli::Common;
use crate::setup;

/// Best segments per field category offered to the context.
const PASSAGES_PER_FIELD: i64 = 2;
/// Tokens an answer may take (parties lists are longer).
const MAX_ANSWER_TOKENS: usize = 64;
const MAX_PARTIES_TOKENS: usize = 160;
/// Between the user message's context and its question: where the shared prefix ends.
const QUESTION_MARK: &str = "\u{1}QUESTION\u{1}";

/// A document with what the extraction reads from Postgres, and the rules' answers.
pub struct DocInput {
    pub doc: FieldsDocument,
    /// The clause scorer's best segments per field category, best first per category; for the
    /// parties, the segment the rules found them in first, where the opening does not hold it.
    pub evidence: Vec<Evidence>,
    pub labels: Vec<Label>,
    /// What the rules found in the whole text ([`rules_found`]).
    pub rules: BTreeMap<&'static str, (Outcome, Option<docpipe_fields::rules::Found>)>,
}

/// Token counts of one document's extraction.
#[derive(Debug, Default, Clone, Copy)]
pub struct DocStats {
    pub context_tokens: usize,
    pub prompt_tokens: usize,
    pub generated_tokens: usize,
    pub retries: usize,
}

/// The decoder, with one JSON constraint per field.
pub struct Extractor {
    decoder: Decoder,
    model: String,
    constraints: Vec<Arc<Constraint>>,
    /// Ask the fields whose policy never stores the model's answer too (`--fields-ask-all`).
    ask_all: bool,
}

impl Extractor {
    pub fn load(args: &DecoderArgs) -> Result<Self> {
        let m = docpipe_ops::metrics::get();
        m.set_ready("decoder", Err("loading the decoder".into()));
        let decoder = args.load()?;
        m.set_ready("decoder", Ok(()));
        let model = args.model_path()?.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let texts = decoder.tokenizer.token_texts();
        let constraints = FIELDS
            .iter()
            .map(|f| {
                let schema =
                    Schema::from_json(&prompt::schema(f)).map_err(|e| anyhow::anyhow!("schema of {}: {e}", f.key))?;
                Ok(Arc::new(Constraint::new(Arc::new(schema), texts.clone())))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Extractor { decoder, model, constraints, ask_all: args.fields_ask_all })
    }

    pub fn engine_stats(&self) -> &docpipe_model::engine::Stats {
        &self.decoder.engine.stats
    }

    /// The chat prompt around `context`, cut where the question goes: (prefix, what follows
    /// the question).
    fn template(&self, context: &str) -> Result<(String, String)> {
        let text = self.decoder.tokenizer.chat_prompt(&[
            Message::new("system", prompt::SYSTEM),
            Message::new("user", &format!("{context}{QUESTION_MARK}")),
        ])?;
        let (head, tail) = text.split_once(QUESTION_MARK).context("chat template dropped the question")?;
        Ok((head.to_string(), tail.to_string()))
    }

    /// A document's shared prefix (system message and context), tokenized once; every
    /// question's tokens ([`Extractor::question_ids`]) follow it, so all the questions of a
    /// document start with exactly the same tokens.
    fn head_ids(&self, context: &str) -> Result<Vec<u32>> {
        Ok(self.decoder.tokenizer.encode(&self.template(context)?.0)?)
    }

    /// A question's own tokens and the template's end of the turn.
    fn question_ids(&self, question: &str) -> Result<Vec<u32>> {
        let tail = self.template("")?.1;
        Ok(self.decoder.tokenizer.encode(&format!("{question}{tail}"))?)
    }

    /// Extract the fields of `docs` together; per document its rows and token counts.
    pub fn extract(&mut self, docs: &[DocInput]) -> Result<Vec<(Vec<FieldRow>, DocStats)>> {
        let contexts: Vec<prompt::Context> = docs.iter().map(context_of).collect();
        let mut stats = vec![DocStats::default(); docs.len()];
        // each document's shared prefix, tokenized once for all its questions
        let mut heads = Vec::with_capacity(docs.len());
        for (d, ctx) in contexts.iter().enumerate() {
            let head = self.head_ids(&prompt::context_message(ctx))?;
            stats[d].context_tokens = head.len();
            heads.push(head);
        }
        // (document, field) → outcome and the answer's confidence
        let mut outcomes: BTreeMap<(usize, usize), (Outcome, Option<String>, Option<f32>)> = BTreeMap::new();
        // a field the rules alone answer is asked only for comparison (`--fields-ask-all`)
        let asked: Vec<usize> = (0..FIELDS.len()).filter(|&f| self.ask_all || FIELDS[f].policy.uses_model()).collect();
        let mut jobs: Vec<(usize, usize)> = (0..docs.len()).flat_map(|d| asked.iter().map(move |&f| (d, f))).collect();
        for strict in [false, true] {
            if jobs.is_empty() {
                break;
            }
            let answers = self.ask(&heads, &jobs, strict, &mut stats)?;
            let mut again = Vec::new();
            for ((d, f), (raw, confidence)) in jobs.iter().copied().zip(answers) {
                let field = &FIELDS[f];
                let outcome = match raw {
                    Ok(a) => (interpret(field, a.as_deref()), a),
                    Err(e) => (Outcome::Invalid(e), None),
                };
                if matches!(outcome.0, Outcome::Invalid(_)) && !strict {
                    again.push((d, f));
                    stats[d].retries += 1;
                }
                outcomes.insert((d, f), (outcome.0, outcome.1, confidence));
            }
            jobs = again;
        }
        let mut out = Vec::with_capacity(docs.len());
        for (d, input) in docs.iter().enumerate() {
            out.push((self.rows(input, &contexts[d], d, &outcomes), stats[d]));
        }
        Ok(out)
    }

    /// Ask the `jobs` (document, field) questions; per job the parsed raw answer (or why it
    /// is not the schema's JSON) and its confidence.
    #[allow(clippy::type_complexity)]
    fn ask(
        &mut self,
        heads: &[Vec<u32>],
        jobs: &[(usize, usize)],
        strict: bool,
        stats: &mut [DocStats],
    ) -> Result<Vec<(Result<Option<String>, String>, Option<f32>)>> {
        let mut results: Vec<(Result<Option<String>, String>, Option<f32>)> =
            vec![(Err("no answer".into()), None); jobs.len()];
        for (i, &(d, f)) in jobs.iter().enumerate() {
            let field = &FIELDS[f];
            let mut ids = heads[d].clone();
            ids.extend(self.question_ids(&prompt::question(field, strict))?);
            stats[d].prompt_tokens += ids.len();
            if tracing::enabled!(tracing::Level::TRACE) {
                tracing::trace!(field = field.key, prompt = %self.decoder.tokenizer.decode(&ids)?, "prompt");
            }
            let max_new_tokens =
                if field.kind == docpipe_fields::Kind::Parties { MAX_PARTIES_TOKENS } else { MAX_ANSWER_TOKENS };
            self.decoder.engine.add(Request {
                id: i as u64,
                prompt: ids,
                sampling: Sampling::Greedy,
                max_new_tokens,
                stop: self.decoder.tokenizer.stop_ids.clone(),
                constraint: Some(self.constraints[f].clone()),
            })?;
        }
        while !self.decoder.engine.is_idle() {
            for ev in self.decoder.engine.step()? {
                if let Event::Done { id, tokens, logprob, finish } = ev {
                    let i = id as usize;
                    let (d, f) = jobs[i];
                    stats[d].generated_tokens += tokens.len();
                    let text = self.decoder.tokenizer.decode(&tokens)?;
                    tracing::debug!(field = FIELDS[f].key, document = d, strict, answer = %text, "answer generated");
                    let confidence = (!tokens.is_empty()).then(|| (logprob / tokens.len() as f64).exp() as f32);
                    let parsed = match finish {
                        docpipe_model::engine::Finish::Length => {
                            Err(format!("answer cut at {} tokens: {text:?}", tokens.len()))
                        }
                        docpipe_model::engine::Finish::Stop => prompt::parse_answer(&FIELDS[f], &text),
                    };
                    results[i] = (parsed, confidence);
                }
            }
        }
        Ok(results)
    }

    /// The stored rows of document `d`: its answers, each from the model or the rules by the
    /// field's policy (both expirations resolved from, and checked against, the effective, else
    /// agreement, date stored beside it before the policy chooses: FIELDS lists those dates
    /// first; the model's parties held to the names the rules found, [`ground_parties`]), then
    /// the clause scorer's presence answers.
    fn rows(
        &self,
        input: &DocInput,
        ctx: &prompt::Context,
        d: usize,
        outcomes: &BTreeMap<(usize, usize), (Outcome, Option<String>, Option<f32>)>,
    ) -> Vec<FieldRow> {
        let mut rules = input.rules.clone();
        // per field: (model outcome, raw, confidence, asked), (rules outcome, hit), the source chosen
        type Answer<'f> = (
            &'f Field,
            (Outcome, Option<String>, Option<f32>, bool),
            (Outcome, Option<docpipe_fields::rules::Found>),
            Source,
        );
        let mut answers: Vec<Answer> = Vec::new();
        for (f, field) in FIELDS.iter().enumerate() {
            let Some((mut by_rules, hit)) = rules.remove(field.key) else { continue };
            // not asked: a field the rules alone answer
            let (mut outcome, raw, confidence, asked) = match outcomes.get(&(d, f)).cloned() {
                Some((o, raw, confidence)) => (o, raw, confidence, true),
                None if !field.policy.uses_model() => (Outcome::None, None, None, false),
                None => continue,
            };
            if field.key == "expiration_date" {
                let stored = |key: &str| {
                    answers.iter().find(|a: &&Answer| a.0.key == key).map(|(_, m, r, s)| match s {
                        Source::Model => m.0.clone(),
                        Source::Rules => r.0.clone(),
                    })
                };
                let (effective, agreement) = (stored("effective_date"), stored("agreement_date"));
                outcome = resolve_expiration(outcome, effective.as_ref(), agreement.as_ref());
                by_rules = resolve_expiration(by_rules, effective.as_ref(), agreement.as_ref());
            }
            if let (
                Outcome::Answered(Value::Parties { parties }),
                Outcome::Answered(Value::Parties { parties: found }),
            ) = (&outcome, &by_rules)
            {
                let parties = ground_parties(parties, found);
                outcome = Outcome::Answered(Value::Parties { parties });
            }
            let source = choose(field.policy, &outcome, &by_rules);
            answers.push((field, (outcome, raw, confidence, asked), (by_rules, hit), source));
        }
        let mut rows = Vec::new();
        for (field, (outcome, raw, confidence, asked), (by_rules, hit), source) in answers {
            let rules_raw = hit.as_ref().map(|h| h.raw.clone());
            let row = match source {
                Source::Rules => {
                    // no hit: a field whose policy takes the rules' silence as its answer
                    let evidence = match &hit {
                        Some(hit) => serde_json::json!([{
                            "segment": null, "char_start": hit.evidence.start, "char_end": hit.evidence.end, "page": null
                        }]),
                        None => serde_json::json!([]),
                    };
                    let mut row = field_row(field.key, &by_rules, rules_raw, evidence, None, "rules", "rules");
                    row.alternative = asked.then(|| alternative("model", &outcome, raw.as_deref(), confidence));
                    row
                }
                Source::Model => {
                    let evidence = evidence_json(field, ctx);
                    let mut row = field_row(field.key, &outcome, raw, evidence, confidence, "model", &self.model);
                    row.alternative = Some(alternative("rules", &by_rules, rules_raw.as_deref(), None));
                    row
                }
            };
            rows.push(row);
        }
        rows.extend(presence_rows(input));
        rows
    }
}

/// The document's context: its opening and the best passages for each field's category.
fn context_of(input: &DocInput) -> prompt::Context {
    let cands: Vec<Passage> = input
        .evidence
        .iter()
        .enumerate()
        .map(|(i, e)| {
            // rank within the category: evidence comes best first per category
            let rank = input.evidence[..i].iter().filter(|x| x.category == e.category).count();
            Passage {
                category: e.category.clone(),
                segment: Some(e.segment_index),
                chars: e.char_start.max(0) as usize..e.char_end.max(0) as usize,
                page: e.page,
                rank,
                text: e.text.clone(),
            }
        })
        .collect();
    prompt::build_context(&input.doc.text, &cands, Budget::default())
}

/// Where an answer's evidence is: the field's passages shown to the model (the opening for
/// the title, the parties and the agreement date).
fn evidence_json(field: &Field, ctx: &prompt::Context) -> serde_json::Value {
    let mut ps = ctx.evidence_for(field.cuad);
    if matches!(field.key, "document_name" | "parties" | "agreement_date" | "effective_date") {
        ps.extend(ctx.evidence_for("opening"));
    }
    serde_json::Value::Array(
        ps.iter()
            .map(|p| {
                serde_json::json!({
                    "segment": p.segment, "char_start": p.chars.start, "char_end": p.chars.end, "page": p.page
                })
            })
            .collect(),
    )
}

/// One stored row for an answer.
pub fn field_row(
    key: &str,
    outcome: &Outcome,
    raw: Option<String>,
    evidence: serde_json::Value,
    confidence: Option<f32>,
    source: &'static str,
    model: &str,
) -> FieldRow {
    let (status, value, reason) = match outcome {
        Outcome::Answered(v) => ("answered", v.clone(), None),
        Outcome::None => ("none", Value::None, None),
        Outcome::Invalid(why) => ("unknown", Value::None, Some(why.clone())),
    };
    FieldRow {
        field: key.to_string(),
        status,
        raw,
        value: serde_json::to_value(&value).unwrap_or(serde_json::Value::Null),
        value_type: value.type_name().to_string(),
        canonical: value.canonical(),
        value_date: match &value {
            Value::Date { date } => Some(*date),
            _ => None,
        },
        value_interval: match &value {
            Value::Duration { duration } => Some(duration.to_iso()),
            _ => None,
        },
        reason,
        evidence,
        confidence,
        source,
        model: model.to_string(),
        prompt_version: PROMPT_VERSION.to_string(),
        alternative: None,
    }
}

/// An answer as the `alternative` column keeps it (the model's with its confidence; a refused
/// answer with the reason it was refused).
fn alternative(source: &str, outcome: &Outcome, raw: Option<&str>, confidence: Option<f32>) -> serde_json::Value {
    let (status, value, reason) = match outcome {
        Outcome::Answered(v) => ("answered", v.clone(), None),
        Outcome::None => ("none", Value::None, None),
        Outcome::Invalid(why) => ("unknown", Value::None, Some(why.as_str())),
    };
    let mut alt =
        serde_json::json!({"source": source, "status": status, "raw": raw, "value": value, "confidence": confidence});
    if let Some(why) = reason {
        alt["reason"] = serde_json::Value::from(why);
    }
    alt
}

/// The clause scorer's presence answers for the categories that are not answer fields.
fn presence_rows(input: &DocInput) -> Vec<FieldRow> {
    input
        .labels
        .iter()
        .filter(|l| !FIELDS.iter().any(|f| f.cuad == l.category))
        .map(|l| FieldRow {
            field: format!("has:{}", l.category),
            status: "answered",
            raw: Some(if l.present { "Yes" } else { "No" }.into()),
            value: serde_json::json!({"type": "boolean", "value": l.present}),
            value_type: "boolean".into(),
            canonical: l.present.to_string(),
            value_date: None,
            value_interval: None,
            reason: None,
            evidence: serde_json::json!([{
                "segment": l.segment_index, "char_start": l.char_start, "char_end": l.char_end, "page": l.page
            }]),
            confidence: Some(l.score),
            source: "clause_scorer",
            model: "clause-scorer".into(),
            prompt_version: PROMPT_VERSION.to_string(),
            alternative: None,
        })
        .collect()
}

/// Count a document's answers by outcome, and the document.
fn count(rows: &[FieldRow], outcome: &str) {
    let m = docpipe_ops::metrics::get();
    for r in rows.iter().filter(|r| r.source == "model") {
        docpipe_ops::metrics::Metrics::outcome(&m.fields_answers, r.status);
    }
    docpipe_ops::metrics::Metrics::outcome(&m.fields_documents, outcome);
}

/// What `extract-fields` is told.
pub struct ExtractOptions {
    pub bucket: Option<String>,
    pub documents: Vec<String>,
    pub redo: bool,
    /// Documents decoded together.
    pub group: usize,
}

/// What a whole extraction did.
#[derive(Debug, Default)]
pub struct Summary {
    pub documents: usize,
    pub failed: usize,
    pub wall: Duration,
    pub stats: DocStats,
    pub prefill_tokens: u64,
    pub cached_prompt_tokens: u64,
}

/// Whether an error from [`load_input`] is the database's connection or server failing (worth
/// retrying), not the document's rows.
fn is_transient(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<docpipe_store::StoreError>().is_some_and(|s| s.is_transient()))
}

async fn load_input(pool: &PgPool, id: Uuid) -> Result<Option<DocInput>> {
    let Some(doc) = docpipe_store::fields::document(pool, &id.to_string()).await? else { return Ok(None) };
    let cats: Vec<String> = FIELDS.iter().map(|f| f.cuad.to_string()).collect();
    let mut evidence = docpipe_store::fields::evidence(pool, id, &cats, PASSAGES_PER_FIELD).await?;
    let labels = docpipe_store::fields::labels(pool, id).await?;
    // regular expressions over the whole text: CPU work, kept off the runtime's other tasks
    let rules = tokio::task::block_in_place(|| rules_found(&doc.text));
    // a contract that opens with a cover page or a table of contents: the segment that ends
    // the sentence naming its parties, first among the parties' passages
    let hit = rules.get("parties").and_then(|(_, hit)| hit.as_ref());
    let parties = docpipe_fields::field("parties").map(|f| f.cuad);
    if let (Some(last), Some(category)) = (Budget::default().parties_past_opening(hit), parties) {
        let last = i32::try_from(last).context("parties' sentence beyond 2^31 characters")?;
        if let Some(seg) = docpipe_store::fields::segment_at(pool, id, last, category).await? {
            evidence.retain(|e| !(e.category == category && e.segment_index == seg.segment_index));
            evidence.insert(0, seg);
        }
    }
    Ok(Some(DocInput { doc, evidence, labels, rules }))
}

/// Extract the fields of the done documents that lack them (or of the named ones).
pub async fn extract(c: &Common, args: &DecoderArgs, o: &ExtractOptions) -> Result<Summary> {
    let pool = setup::db(c).await?;
    let mut ids: Vec<Uuid> = Vec::new();
    for d in &o.documents {
        let doc = docpipe_store::fields::document(&pool, d).await?.with_context(|| format!("no document {d}"))?;
        anyhow::ensure!(
            doc.status == "done",
            "document {} is {}, not done: its clauses are not scored yet",
            doc.key,
            doc.status
        );
        ids.push(doc.id);
    }
    if o.documents.is_empty() {
        ids = docpipe_store::fields::pending(&pool, o.bucket.as_deref(), o.redo).await?;
    }
    let mut summary = Summary::default();
    if ids.is_empty() {
        tracing::info!("no documents awaiting fields");
        return Ok(summary);
    }
    let mut extractor = tokio::task::block_in_place(|| Extractor::load(args))?;
    let t0 = Instant::now();
    for group in ids.chunks(o.group.max(1)) {
        let mut inputs = Vec::new();
        for &id in group {
            if let Some(input) = load_input(&pool, id).await? {
                docpipe_store::fields::set_status(&pool, id, "running", None).await?;
                inputs.push(input);
            }
        }
        let tg = Instant::now();
        let result = tokio::task::block_in_place(|| extractor.extract(&inputs));
        let secs = tg.elapsed().as_secs_f64();
        match result {
            Ok(outputs) => {
                for (input, (rows, st)) in inputs.iter().zip(outputs) {
                    let d = &input.doc;
                    let stored = docpipe_store::fields::store(&pool, d.id, d.generation, d.run_id, &rows).await?;
                    count(&rows, "done");
                    let answered = rows.iter().filter(|r| r.source == "model" && r.status == "answered").count();
                    let unknown = rows.iter().filter(|r| r.status == "unknown").count();
                    tracing::info!(
                        run_id = %d.run_id, document_id = %d.id, document = %d.key, stored, answered, unknown,
                        context_tokens = st.context_tokens, prompt_tokens = st.prompt_tokens,
                        generated_tokens = st.generated_tokens, retries = st.retries,
                        group_s = format!("{secs:.1}"), "fields extracted"
                    );
                    summary.documents += 1;
                    summary.stats.context_tokens += st.context_tokens;
                    summary.stats.prompt_tokens += st.prompt_tokens;
                    summary.stats.generated_tokens += st.generated_tokens;
                    summary.stats.retries += st.retries;
                }
            }
            Err(e) => {
                let why = format!("{e:#}");
                for input in &inputs {
                    tracing::error!(document_id = %input.doc.id, document = %input.doc.key, error = %why, "field extraction failed");
                    let d = &input.doc;
                    docpipe_store::fields::fail(&pool, d.id, d.generation, d.run_id, "permanent", &why).await?;
                    count(&[], "failed");
                    summary.failed += 1;
                }
            }
        }
    }
    summary.wall = t0.elapsed();
    let s = extractor.engine_stats();
    summary.prefill_tokens = s.prefill_tokens;
    summary.cached_prompt_tokens = s.cached_prompt_tokens;
    print_summary(&summary);
    Ok(summary)
}

fn print_summary(s: &Summary) {
    let n = s.documents.max(1) as f64;
    let secs = s.wall.as_secs_f64();
    println!("fields: {} documents ({} failed) in {secs:.1} s", s.documents, s.failed);
    println!("  seconds per contract      {:.1}", secs / n);
    println!("  contracts per hour        {:.0}", if secs > 0.0 { s.documents as f64 * 3600.0 / secs } else { 0.0 });
    println!("  context tokens / contract {:.0}", s.stats.context_tokens as f64 / n);
    println!("  prompt tokens / contract  {:.0}", s.stats.prompt_tokens as f64 / n);
    println!("  prefilled / contract      {:.0}", s.prefill_tokens as f64 / n);
    println!("  generated / contract      {:.0}", s.stats.generated_tokens as f64 / n);
    println!("  retries                   {}", s.stats.retries);
    let total = s.prefill_tokens + s.cached_prompt_tokens;
    if total > 0 {
        println!(
            "  prefix reuse saved        {:.1} % of prompt tokens ({} of {})",
            100.0 * s.cached_prompt_tokens as f64 / total as f64,
            s.cached_prompt_tokens,
            total
        );
    }
}

/// `docpipe fields DOC`: a document's answers with their evidence.
pub async fn show(c: &Common, document: &str) -> Result<()> {
    let pool = setup::db(c).await?;
    let doc =
        docpipe_store::fields::document(&pool, document).await?.with_context(|| format!("no document {document}"))?;
    let rows = docpipe_store::fields::stored(&pool, doc.id).await?;
    if rows.is_empty() {
        println!(
            "{}: no fields yet (status {}); run `docpipe extract-fields --document {}`",
            doc.key, doc.status, doc.id
        );
        return Ok(());
    }
    println!("{} ({})", doc.key, doc.id);
    let order = |f: &str| FIELDS.iter().position(|x| x.key == f).unwrap_or(usize::MAX);
    let mut rows = rows;
    rows.sort_by_key(|r| (order(&r.field), r.field.clone()));
    for r in &rows {
        if r.field.starts_with("has:") {
            continue;
        }
        let value = match r.status.as_str() {
            "answered" => format!("{} [{}]", r.canonical, r.value_type),
            "none" => "— (not stated)".into(),
            _ => format!("unknown: {}", r.reason.as_deref().unwrap_or("")),
        };
        println!("\n{:<36} {value}", r.field);
        if let Some(raw) = &r.raw {
            println!("  answer      {raw}");
        }
        if let Some(conf) = r.confidence {
            println!("  confidence  {conf:.2}");
        }
        if let Some(alt) = &r.alternative {
            let other = alt.get("value").cloned().and_then(|v| serde_json::from_value::<Value>(v).ok());
            let other_status = alt.get("status").and_then(|s| s.as_str()).unwrap_or("none");
            let other = match other {
                _ if other_status == "unknown" => match alt.get("reason").and_then(|r| r.as_str()) {
                    Some(why) => format!("unknown, {why}"),
                    None => "unknown".into(),
                },
                Some(v) if !v.is_none() => v.canonical(),
                _ => "none".into(),
            };
            let who = alt.get("source").and_then(|s| s.as_str()).unwrap_or("?");
            println!("  source      {} ({who}{}: {other})", r.source, verdict(&r.status, &r.canonical, &other));
        } else {
            println!("  source      {}", r.source);
        }
        if let (Some(page), Some(text)) = (r.page, &r.evidence_text) {
            let text: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
            let clipped: String = text.chars().take(240).collect();
            println!("  evidence    p.{page}: {clipped}{}", if text.chars().count() > 240 { " …" } else { "" });
        }
    }
    let present: Vec<&str> =
        rows.iter().filter(|r| r.field.starts_with("has:") && r.canonical == "true").map(|r| &r.field[4..]).collect();
    println!(
        "\nclauses present (clause scorer): {}",
        if present.is_empty() { "none".into() } else { present.join(", ") }
    );
    Ok(())
}

/// Whether the other reader's answer (`other`: its canonical value, `none` or `unknown`)
/// agrees with the stored one; nothing for a stored answer that was refused, which neither
/// agrees nor differs.
fn verdict(status: &str, canonical: &str, other: &str) -> &'static str {
    match status {
        "answered" if other == canonical => " agrees",
        "none" if other == "none" => " agrees",
        "answered" | "none" => " differs",
        _ => "",
    }
}

/// `docpipe eval-fields`: extract what is missing in `bucket`, then score the stored answers
/// and the rule-based baseline against `labels`.
pub async fn eval(c: &Common, args: &DecoderArgs, labels_path: &Path, bucket: &str, group: usize) -> Result<()> {
    let labels = docpipe_fields::eval::read_labels(labels_path)?;
    let opts = ExtractOptions { bucket: Some(bucket.to_string()), documents: Vec::new(), redo: false, group };
    // the model's answer to every field, for the comparison below (the stored ones are the same)
    let args = DecoderArgs { fields_ask_all: true, ..args.clone() };
    extract(c, &args, &opts).await?;
    let pool = setup::db(c).await?;
    let wanted = labels.files();
    let mut files = Vec::new();
    let mut model: BTreeMap<(String, String), Value> = BTreeMap::new();
    let mut model_only: BTreeMap<(String, String), Value> = BTreeMap::new();
    let mut rules: BTreeMap<(String, String), Value> = BTreeMap::new();
    let mut present: BTreeMap<(String, String), bool> = BTreeMap::new();
    for id in docpipe_store::fields::done_in_bucket(&pool, bucket).await? {
        let Some(doc) = docpipe_store::fields::document(&pool, &id.to_string()).await? else { continue };
        let file = doc.key.rsplit('/').next().unwrap_or(&doc.key).to_string();
        if !wanted.contains(&file) {
            continue;
        }
        files.push(file.clone());
        for (field, value, source, alt) in docpipe_store::fields::values(&pool, id).await? {
            // the model's own answer, where the rules' was stored
            if let Some(v) = alt
                .filter(|a| a.get("source").and_then(|s| s.as_str()) == Some("model"))
                .and_then(|a| a.get("value").cloned())
                .and_then(|v| serde_json::from_value::<Value>(v).ok())
            {
                model_only.insert((file.clone(), field.clone()), v);
            }
            match (source.as_str(), field.strip_prefix("has:")) {
                ("clause_scorer", Some(cat)) => {
                    present.insert(
                        (file.clone(), cat.to_string()),
                        value.get("value").and_then(|v| v.as_bool()) == Some(true),
                    );
                }
                _ => {
                    if let Ok(v) = serde_json::from_value::<Value>(value) {
                        if source == "model" {
                            model_only.insert((file.clone(), field.clone()), v.clone());
                        }
                        model.insert((file.clone(), field), v);
                    }
                }
            }
        }
        // the baseline: regular expressions over the same text
        for (k, (o, _)) in rules_answers(&doc.text) {
            if let Outcome::Answered(v) = o {
                rules.insert((file.clone(), k.to_string()), v);
            }
        }
    }
    anyhow::ensure!(!files.is_empty(), "none of the labelled files is a done document in s3://{bucket}");
    let m = docpipe_fields::eval::score(&labels, &files, &model, &present);
    let b = docpipe_fields::eval::score(&labels, &files, &rules, &present);
    let o = docpipe_fields::eval::score(&labels, &files, &model_only, &present);
    // what each policy would store, from the two sources' answers
    let combined = |policy: Policy| {
        let mut out = BTreeMap::new();
        for file in &files {
            for f in FIELDS {
                let key = (file.clone(), f.key.to_string());
                let outcome = |v: Option<&Value>| match v {
                    Some(v) if !v.is_none() => Outcome::Answered(v.clone()),
                    _ => Outcome::None,
                };
                let (mo, ro) = (model_only.get(&key), rules.get(&key));
                let v = match choose(policy, &outcome(mo), &outcome(ro)) {
                    Source::Model => mo,
                    Source::Rules => ro,
                };
                if let Some(v) = v {
                    out.insert(key, v.clone());
                }
            }
        }
        docpipe_fields::eval::score(&labels, &files, &out, &present)
    };
    // documents extracted without --fields-ask-all have no model answer for the rules' fields
    let not_asked = files
        .iter()
        .flat_map(|file| {
            FIELDS.iter().filter(|f| !f.policy.uses_model()).map(move |f| (file.clone(), f.key.to_string()))
        })
        .filter(|key| !model_only.contains_key(key))
        .count();
    let mr = combined(MODEL_THEN_RULES);
    let rm = combined(RULES_THEN_MODEL);
    println!("\nfield extraction on {} contracts ({}), against {}", files.len(), bucket, labels_path.display());
    println!(
        "docpipe: the stored answers, by each field's policy; model→rules: the model's answer, the rules' where it has none; rules→model: the other way"
    );
    println!(
        "{:<38} {:>8} {:>8} {:>8} {:>12} {:>12} {:>6}  policy",
        "field", "docpipe", "model", "rules", "model→rules", "rules→model", "n"
    );
    let acc = |c: usize, t: usize| c as f64 / t.max(1) as f64;
    for (i, f) in FIELDS.iter().enumerate() {
        let (_, c, t) = m.per_field[i];
        let a = |r: &docpipe_fields::eval::Report| acc(r.per_field[i].1, r.per_field[i].2);
        println!(
            "{:<38} {:>8.2} {:>8.2} {:>8.2} {:>12.2} {:>12.2} {t:>6}  {}",
            f.key,
            acc(c, t),
            a(&o),
            a(&b),
            a(&mr),
            a(&rm),
            policy_name(f.policy)
        );
    }
    println!(
        "{:<38} {:>8.2} {:>8.2} {:>8.2} {:>12.2} {:>12.2} {:>6}",
        "overall",
        m.accuracy(),
        o.accuracy(),
        b.accuracy(),
        mr.accuracy(),
        rm.accuracy(),
        m.total
    );
    let categories: std::collections::BTreeSet<&String> = labels.presence.keys().map(|(_, c)| c).collect();
    println!(
        "presence of {} other categories (clause scorer): precision {:.2} recall {:.2}",
        categories.len(),
        m.presence_precision(),
        m.presence_recall()
    );
    if not_asked > 0 {
        println!(
            "note: {not_asked} answers of the rules-only fields were never asked of the model (documents extracted \
             without --fields-ask-all); the model columns count them as none. `docpipe extract-fields --redo \
             --fields-ask-all --bucket {bucket}` asks them"
        );
    }
    print_misses(&m, "miss");
    if readers_wanted(std::env::var("EVAL_FIELDS_ROWS").ok().as_deref()) {
        print_misses(&o, "miss-model");
        print_misses(&b, "miss-rules");
    }
    println!("fields_accuracy_model_only {:.2}", o.accuracy());
    println!("fields_accuracy_rules {:.2}", b.accuracy());
    println!("fields_accuracy {:.2}", m.accuracy());
    Ok(())
}

fn policy_name(p: Policy) -> &'static str {
    match (p.first, p.fill) {
        (Source::Model, false) => "model",
        (Source::Model, true) => "model→rules",
        (Source::Rules, false) => "rules",
        (Source::Rules, true) => "rules→model",
    }
}

/// Whether `EVAL_FIELDS_ROWS`'s value asks for the misses: anything but unset, empty, `0`,
/// `false` or `no` (so that `EVAL_FIELDS_ROWS=0`, as one writes to keep a held-out set's rows
/// unseen, lists none).
fn rows_wanted(value: Option<&str>) -> bool {
    value.is_some_and(|v| !matches!(v.trim().to_ascii_lowercase().as_str(), "" | "0" | "false" | "no"))
}

/// Whether `EVAL_FIELDS_ROWS=readers` asks for each reader's misses too (the model's alone,
/// the rules' alone), beside the stored answers'.
fn readers_wanted(value: Option<&str>) -> bool {
    value.is_some_and(|v| v.trim().eq_ignore_ascii_case("readers"))
}

/// With [`rows_wanted`], every wrong answer of `r`, each line starting with `tag`.
fn print_misses(r: &docpipe_fields::eval::Report, tag: &str) {
    if !rows_wanted(std::env::var("EVAL_FIELDS_ROWS").ok().as_deref()) {
        return;
    }
    for x in r.rows.iter().filter(|x| !x.correct) {
        println!(
            "{tag} {:<40} {:<36} gold {:<30} got {}",
            &x.file[..x.file.len().min(40)],
            x.field,
            x.gold,
            x.predicted
        );
    }
}

/// `docpipe eval-fields --pdfs DIR`: the rule-based baseline alone, on local PDFs (no services,
/// no model), for working on the rules against a large labelled set; each PDF's text is cached
/// by its sha256 under `$DOCPIPE_HOME/text`. Per field: accuracy, how often the rules answer,
/// and how often they are right when they do (what decides which source answers first).
pub async fn eval_rules(labels_path: &Path, pdfs: &Path, ocr: &crate::cli::OcrArgs) -> Result<()> {
    use docpipe_text::extract::{ExtractLimits, Extractor as PdfText};
    use futures_util::StreamExt;
    use sha2::Digest;
    let labels = docpipe_fields::eval::read_labels(labels_path)?;
    let cache = docpipe_text::model_dir::docpipe_home().context("no home directory for the text cache")?.join("text");
    std::fs::create_dir_all(&cache).with_context(|| format!("creating {}", cache.display()))?;
    let limits = ExtractLimits::default();
    // texts read with other OCR settings than the defaults are cached apart
    let variant = ocr.text_variant();
    let ocr = docpipe_text::ocr::Ocr::new(ocr.config(limits.memory_bytes >> 20));
    let pdf_text = PdfText { exe: setup::extractor_exe()?, limits, ocr };
    let wanted: Vec<String> = labels.files().into_iter().filter(|f| pdfs.join(f).is_file()).collect();
    anyhow::ensure!(!wanted.is_empty(), "none of the files of {} is in {}", labels_path.display(), pdfs.display());
    let started = Instant::now();
    let texts: Vec<(String, Result<String>)> = futures_util::stream::iter(wanted.iter().cloned())
        .map(|file| {
            let (pdf_text, cache, variant) = (&pdf_text, &cache, &variant);
            async move {
                let text = async {
                    let path = pdfs.join(&file);
                    let pdf = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
                    let cached = cache.join(format!("{}{variant}.txt", hex::encode(sha2::Sha256::digest(&pdf))));
                    if let Ok(t) = std::fs::read_to_string(&cached) {
                        return Ok(t);
                    }
                    let pages =
                        pdf_text.extract(&pdf).await.with_context(|| format!("extracting {}", path.display()))?;
                    let text = docpipe_text::prepare::DocumentText::from_pages(&pages.pages).text;
                    std::fs::write(&cached, &text).with_context(|| format!("writing {}", cached.display()))?;
                    Ok(text)
                }
                .await;
                (file, text)
            }
        })
        .buffer_unordered(2)
        .collect()
        .await;
    let mut files = Vec::new();
    let mut rules: BTreeMap<(String, String), Value> = BTreeMap::new();
    for (file, text) in texts {
        let text = match text {
            Ok(t) => t,
            Err(e) => {
                eprintln!("skipping {file}: {e:#}");
                continue;
            }
        };
        for (k, (o, _)) in rules_answers(&text) {
            if let Outcome::Answered(v) = o {
                rules.insert((file.clone(), k.to_string()), v);
            }
        }
        files.push(file);
    }
    files.sort();
    let r = docpipe_fields::eval::score(&labels, &files, &rules, &BTreeMap::new());
    println!(
        "\nrules alone on {} contracts of {} ({:.0} s)",
        files.len(),
        pdfs.display(),
        started.elapsed().as_secs_f64()
    );
    println!("{:<38} {:>8} {:>9} {:>10} {:>6}", "field", "accuracy", "answered", "precision", "n");
    for &(k, c, t) in &r.per_field {
        let rows = r.rows.iter().filter(|x| x.field == k && x.predicted != "none");
        let (answered, right) = rows.fold((0, 0), |(a, c), x| (a + 1, c + x.correct as usize));
        println!(
            "{k:<38} {:>8.2} {:>9.2} {:>10.3} {t:>6}",
            c as f64 / t.max(1) as f64,
            answered as f64 / t.max(1) as f64,
            right as f64 / answered.max(1) as f64
        );
    }
    println!("{:<38} {:>8.2} {:>9} {:>10} {:>6}", "overall", r.accuracy(), "", "", r.total);
    print_misses(&r, "miss");
    println!("fields_accuracy_rules {:.2}", r.accuracy());
    Ok(())
}

/// How long a done document may wait without a fields status before a fields worker queues
/// it (its task was lost between the aggregator's commit and its publish, or the aggregator
/// runs without `--fields`).
const STRANDED_AFTER_S: f64 = 300.0;
/// How often a fields worker looks for such documents.
const SWEEP_EVERY: Duration = Duration::from_secs(60);
/// How long a fields worker waits for more tasks to decode together.
const GATHER_WAIT: Duration = Duration::from_millis(250);

/// `docpipe fields-worker`: the decode role, until SIGTERM.
pub async fn worker(c: &Common, args: &DecoderArgs, group: usize) -> Result<()> {
    let pool = setup::db(c).await?;
    let extractor = tokio::task::block_in_place(|| Extractor::load(args))?;
    let extractor = Arc::new(tokio::sync::Mutex::new(extractor));
    serve(c, pool, extractor, group, None, "docpipe-fields", docpipe_ops::shutdown_signal()).await;
    Ok(())
}

/// The fields role, kept connected across broker restarts, until `stop`.
pub async fn serve(
    c: &Common,
    pool: PgPool,
    extractor: Arc<tokio::sync::Mutex<Extractor>>,
    group: usize,
    sweep_bucket: Option<String>,
    name: &str,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    docpipe_bus::supervise(&setup::broker(c), name, stop, |conn, topology, stop| {
        let (pool, extractor, bucket) = (pool.clone(), extractor.clone(), sweep_bucket.clone());
        async move { consume(&conn, &topology, &pool, &extractor, group, bucket.as_deref(), stop).await }
    })
    .await
}

/// Take tasks from `P.fields` (up to `group` decode together), and fail the documents of
/// its dead letters; every minute, queue the done documents that were never queued (only
/// `sweep_bucket`'s, where given).
async fn consume(
    conn: &lapin::Connection,
    topology: &docpipe_bus::Topology,
    pool: &PgPool,
    extractor: &tokio::sync::Mutex<Extractor>,
    group: usize,
    sweep_bucket: Option<&str>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> Result<()> {
    use docpipe_contract::messages::{FieldsTask, SCHEMA_VERSION};
    let group = group.max(1);
    let dead = topology.dead_queue(&topology.fields());
    let queues = [(topology.fields(), "docpipe-fields"), (dead, "docpipe-fields-dlq")];
    let prefetch = u16::try_from(group).unwrap_or(u16::MAX);
    let mut inbox = docpipe_bus::Inbox::open(conn, prefetch, &queues).await?;
    let publisher = docpipe_bus::Publisher::new(conn).await?;
    tracing::info!(queue = topology.fields(), group, "fields worker consuming");
    let mut sweep = tokio::time::interval(SWEEP_EVERY);
    let check = |t: &FieldsTask| match t.schema {
        SCHEMA_VERSION => Ok(()),
        s => Err(format!("fields task with unsupported schema {s} (expected {SCHEMA_VERSION})")),
    };
    loop {
        let first = tokio::select! {
            d = inbox.recv() => d?,
            _ = sweep.tick() => {
                for (id, run_id, generation) in docpipe_store::fields::stranded(pool, STRANDED_AFTER_S, sweep_bucket).await? {
                    tracing::info!(document_id = %id, "queueing a done document that was never queued for fields");
                    let task = FieldsTask { schema: SCHEMA_VERSION, run_id, document_id: id, generation };
                    publisher.publish_all(&topology.fields(), &[task]).await?;
                    docpipe_store::fields::set_status(pool, id, "queued", None).await?;
                }
                continue;
            }
            _ = stop.changed() => break,
        };
        let mut batch = vec![first];
        while batch.len() < group {
            match tokio::time::timeout(GATHER_WAIT, inbox.recv()).await {
                Ok(d) => batch.push(d?),
                Err(_) => break,
            }
        }
        let mut tasks = Vec::new();
        for (queue, delivery) in batch {
            let Some(task) = docpipe_bus::decode::<FieldsTask>(&delivery, "fields task", check).await? else {
                continue;
            };
            if queue == 1 {
                let why = "dead-lettered from the fields queue: failed on every delivery";
                tracing::warn!(run_id = %task.run_id, document_id = %task.document_id, "{why}");
                docpipe_store::fields::fail(pool, task.document_id, task.generation, task.run_id, "permanent", why)
                    .await?;
                docpipe_bus::ack(&delivery).await?;
                continue;
            }
            tasks.push((task, delivery));
        }
        let mut inputs = Vec::new();
        let mut deliveries = Vec::new();
        for (task, delivery) in tasks {
            let loaded = match load_input(pool, task.document_id).await {
                Ok(loaded) => loaded,
                // the connection or the server: the role reconnects and the task is redelivered
                Err(e) if is_transient(&e) => return Err(e),
                // this document's rows are at fault (e.g. no text): it fails alone, the rest go on
                Err(e) => {
                    let why = format!("cannot read the document's evidence: {e:#}");
                    tracing::error!(run_id = %task.run_id, document_id = %task.document_id, error = %why, "field extraction failed");
                    docpipe_store::fields::fail(
                        pool,
                        task.document_id,
                        task.generation,
                        task.run_id,
                        "permanent",
                        &why,
                    )
                    .await?;
                    count(&[], "failed");
                    docpipe_bus::ack(&delivery).await?;
                    continue;
                }
            };
            match loaded {
                Some(input) if input.doc.generation == task.generation && input.doc.status == "done" => {
                    docpipe_store::fields::set_status(pool, task.document_id, "running", None).await?;
                    inputs.push(input);
                    deliveries.push(delivery);
                }
                other => {
                    let why = match other {
                        None => "deleted".to_string(),
                        Some(i) => format!("at generation {} status {}", i.doc.generation, i.doc.status),
                    };
                    tracing::info!(document_id = %task.document_id, generation = task.generation, now = why, "fields task of a superseded document dropped");
                    docpipe_bus::ack(&delivery).await?;
                }
            }
        }
        if inputs.is_empty() {
            continue;
        }
        let t0 = Instant::now();
        let result = {
            let mut ex = extractor.lock().await;
            tokio::task::block_in_place(|| ex.extract(&inputs))
        };
        let secs = t0.elapsed().as_secs_f64();
        match result {
            Ok(outputs) => {
                for ((input, (rows, st)), delivery) in inputs.iter().zip(outputs).zip(&deliveries) {
                    let d = &input.doc;
                    let stored = docpipe_store::fields::store(pool, d.id, d.generation, d.run_id, &rows).await?;
                    count(&rows, "done");
                    tracing::info!(
                        run_id = %d.run_id, document_id = %d.id, document = %d.key, stored,
                        prompt_tokens = st.prompt_tokens, generated_tokens = st.generated_tokens,
                        retries = st.retries, group_s = format!("{secs:.1}"), "fields extracted"
                    );
                    docpipe_bus::ack(delivery).await?;
                }
            }
            Err(e) => {
                let why = format!("field extraction failed: {e:#}");
                for (input, delivery) in inputs.iter().zip(&deliveries) {
                    let d = &input.doc;
                    tracing::error!(run_id = %d.run_id, document_id = %d.id, error = %why, "field extraction failed");
                    docpipe_store::fields::fail(pool, d.id, d.generation, d.run_id, "permanent", &why).await?;
                    count(&[], "failed");
                    docpipe_bus::ack(delivery).await?;
                }
            }
        }
    }
    inbox.close("fields worker stopping").await;
    tracing::info!("fields worker stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{alternative, readers_wanted, rows_wanted, verdict};
    use docpipe_fields::answer::Outcome;

    #[test]
    fn eval_fields_rows_zero_lists_no_misses() {
        for off in [None, Some(""), Some("0"), Some("false"), Some("NO"), Some(" 0 ")] {
            assert!(!rows_wanted(off), "{off:?}");
            assert!(!readers_wanted(off), "{off:?}");
        }
        for on in [Some("1"), Some("true"), Some("yes")] {
            assert!(rows_wanted(on), "{on:?}");
            assert!(!readers_wanted(on), "{on:?}");
        }
        // each reader's misses as well: still a request for the rows
        assert!(rows_wanted(Some("readers")) && readers_wanted(Some("Readers")));
    }

    #[test]
    fn the_other_readers_refused_answer_keeps_its_reason() {
        let why = "\"30\" is not a length of time".to_string();
        let alt = alternative("model", &Outcome::Invalid(why.clone()), Some("30"), Some(0.75));
        assert_eq!(alt["status"], "unknown");
        assert_eq!(alt["reason"], why.as_str());
        assert_eq!(alt["raw"], "30");
        let alt = alternative("rules", &Outcome::None, None, None);
        assert_eq!(alt["status"], "none");
        assert!(alt.get("reason").is_none());
    }

    #[test]
    fn a_refused_answer_neither_agrees_nor_differs() {
        assert_eq!(verdict("answered", "2026-01-15", "2026-01-15"), " agrees");
        assert_eq!(verdict("answered", "2026-01-15", "none"), " differs");
        assert_eq!(verdict("none", "", "none"), " agrees");
        assert_eq!(verdict("none", "", "2026-01-15"), " differs");
        assert_eq!(verdict("none", "", "unknown"), " differs");
        // the model's expiration refused, the rules silent: not "rules agrees: none"
        assert_eq!(verdict("unknown", "", "none"), "");
        assert_eq!(verdict("unknown", "", "2026-01-15"), "");
    }
}
