//! `docpipe train-clauses --labels L --pdfs DIR`: train the clause scorer that docpipe ships
//! (`make train-clauses`).
//!
//! Per training PDF, in a fixed order: extract and segment it as ingest does, locate its gold
//! clauses, and embed a sample of its segments as the pipeline does, caching the result under
//! the PDF's sha256. By default (`--embeddings contextual`, what the worker stores for every
//! segment) the chunks holding its positives and one chunk drawn at random are forwarded as
//! the worker's chunk pass does ([`docpipe_clauses::train::choose_chunks`]); with
//! `standalone`, positives and a seeded, weighted sample of the rest, within a token budget
//! ([`docpipe_clauses::train::choose`]), are embedded on their own as the worker's standalone
//! pass does; `both` learns from the two samples together. Several documents go through one
//! length-sorted pass. A document in
//! the cache is not extracted or embedded again, so an interrupted run resumes where it
//! stopped and a learning curve on nested subsets (`--docs`) costs no model time. Then every
//! category is learned at once, and the scorer file is written with its sha256 and a fixture
//! of recorded scores.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use docpipe_batching::{embed_by_length, Backend};
use docpipe_clauses::artifact::{self, Artifact, Fixture, FixtureSegment};
use docpipe_clauses::gold::{self, gold_and_positives, present_in, Doc};
use docpipe_clauses::learn;
use docpipe_clauses::scorer::{Scorer, Segment};
use docpipe_clauses::stored::StoredCategory;
use docpipe_clauses::taxonomy::builtin;
use docpipe_clauses::train::{artifact_categories, choose, choose_chunks, ChunkPlan, Plan, Sampled};
use docpipe_contract::defaults;
use docpipe_contract::messages::ChunkTask;
use docpipe_model::SentenceEmbedder;
use docpipe_text::extract::{ExtractLimits, Extractor};
use docpipe_text::ocr::Ocr;
use docpipe_text::prepare::TaskIds;
use docpipe_text::prepare::{DocumentText, ModelInput};
use sha2::{Digest, Sha256};
use tracing::{info, warn};

use crate::cli::{Common, OcrArgs, WorkerArgs};
use crate::setup;

/// Which segment embeddings a scorer learns from (or an evaluation scores).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Embeddings {
    /// Each segment embedded on its own, as the worker's standalone pass does.
    Standalone,
    /// Each segment pooled inside the chunk that owns it, as the worker's chunk pass does;
    /// sampled by chunk ([`ChunkPlan`]).
    Contextual(ChunkPlan),
    /// Both samples of every document, learned as one document (each sample's segments ranked
    /// against both's): one scorer for the standalone embeddings the worker stores for its
    /// candidate segments and the contextual ones it stores for the rest.
    Both(ChunkPlan),
}

impl Embeddings {
    pub fn name(self) -> &'static str {
        match self {
            Embeddings::Standalone => "standalone",
            Embeddings::Contextual(_) => "contextual",
            Embeddings::Both(_) => "both",
        }
    }
}

#[derive(Clone)]
pub struct Options {
    pub labels: PathBuf,
    pub pdfs: PathBuf,
    pub out: PathBuf,
    pub name: String,
    pub cache: Option<PathBuf>,
    pub docs: usize,
    pub plan: Plan,
    pub seed: u64,
    pub embeddings: Embeddings,
    /// Where to write the training documents' out-of-fold scores, if anywhere.
    pub out_of_fold: Option<PathBuf>,
}

fn sha256_file(path: &Path) -> Result<(Vec<u8>, String)> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let sha = artifact::sha256_hex(&bytes);
    Ok((bytes, sha))
}

/// Where the cached training documents of one segmentation and sample live.
fn cache_dir(o: &Options, model: &str) -> PathBuf {
    let base = o.cache.clone().unwrap_or_else(|| {
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
        home.join(".cache/docpipe/clause-train")
    });
    // a different sample or model is a different cache (`Both` reads the two caches)
    if let Embeddings::Contextual(c) | Embeddings::Both(c) = o.embeddings {
        if c == ChunkPlan::WHOLE {
            return base.join(format!("{model}-contextual-whole"));
        }
        return base.join(format!("{model}-contextual-c{}-r{}-s{}", c.positive_chunks, c.random_chunks, o.seed));
    }
    let p = &o.plan;
    if *p == Plan::WHOLE {
        return base.join(format!("{model}-whole"));
    }
    base.join(format!("{model}-t{}-p{}-n{}-s{}", p.max_tokens, p.per_category, p.negatives, o.seed))
}

/// The training files: those in the labels file and the PDF folder, in a fixed shuffled order
/// (so that the first N are a random subset and smaller subsets nest in larger ones).
fn training_files(labels: &gold::Labels, pdfs: &Path, seed: u64) -> Vec<String> {
    let mut files: Vec<String> = labels.keys().map(|(f, _)| f.clone()).collect();
    files.dedup();
    files.retain(|f| {
        let there = pdfs.join(f).is_file();
        if !there {
            warn!(file = %f, "in the labels file but not in the PDF folder; left out");
        }
        there
    });
    let key = |f: &String| {
        let mut h = Sha256::new();
        h.update(seed.to_le_bytes());
        h.update(f.as_bytes());
        h.finalize().to_vec()
    };
    files.sort_by_cached_key(key);
    files
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
}

fn read_embeddings(path: &Path, dim: usize) -> Result<Vec<Vec<f32>>> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    if dim == 0 || bytes.len() % (4 * dim) != 0 {
        bail!("{}: {} bytes is not a whole number of {dim}-float embeddings", path.display(), bytes.len());
    }
    Ok(bytes
        .chunks_exact(4 * dim)
        .map(|e| e.chunks_exact(4).map(|f| f32::from_le_bytes([f[0], f[1], f[2], f[3]])).collect())
        .collect())
}

/// Everything the training run needs loaded once.
struct Trainer<'a> {
    input: ModelInput,
    extractor: Extractor,
    labels: &'a gold::Labels,
    present: &'a gold::Present,
    rarity: Vec<String>,
    plan: Plan,
    embeddings: Embeddings,
    seed: u64,
    model: Option<SentenceEmbedder>,
    budget: usize,
}

/// Documents embedded together: one length-sorted pass over all their segments pads far less
/// than one pass per document.
const GROUP: usize = 12;

impl Trainer<'_> {
    /// Extract, segment and sample one training PDF; for contextual embeddings, with the
    /// chunks to forward.
    async fn prepare(&self, file: &str, pdf: &[u8], sha: &str) -> Result<(Sampled, Vec<ChunkTask>)> {
        let pages = self.extractor.extract(pdf).await.with_context(|| format!("extracting {file}"))?;
        let doc = DocumentText::from_pages(&pages.pages);
        let prepared = self.input.prepare(&doc.text).with_context(|| format!("tokenizing {file}"))?;
        let terms =
            docpipe_chunker::segment::terms_of_ranges(&doc.text, prepared.segments.iter().map(|s| s.chars.clone()));
        let all: Vec<Segment> = prepared
            .segments
            .iter()
            .zip(terms)
            .enumerate()
            .map(|(i, (s, terms))| Segment { index: i, chars: s.chars.clone(), embedding: Vec::new(), terms })
            .collect();
        let clauses = self.labels.range((file.to_string(), String::new())..).take_while(|((f, _), _)| f == file);
        let (gold, positives, unlocated) = gold_and_positives(&doc.text, &all, clauses.map(|((_, c), v)| (c, v)));
        // the document's own seed: the same sample whichever documents are trained with it
        let seed = u64::from_le_bytes(Sha256::digest(format!("{}{sha}", self.seed)).as_slice()[..8].try_into()?);
        let inputs = prepared.standalone_inputs();
        let (chosen, tasks) = match self.embeddings {
            Embeddings::Standalone => {
                let lengths: Vec<usize> = inputs.iter().map(|i| i.as_ref().map_or(0, |x| x.len())).collect();
                (choose(&lengths, &gold, &positives, &self.rarity, &self.plan, seed), Vec::new())
            }
            Embeddings::Contextual(plan) | Embeddings::Both(plan) => {
                // each segment's owner: the chunk whose owned tokens hold its middle token
                let mut owner: Vec<Option<usize>> = vec![None; all.len()];
                for (k, c) in prepared.chunks.iter().enumerate() {
                    for seg in &c.segments {
                        let tokens = seg.tokens[0] as usize..seg.tokens[1] as usize;
                        if let Some(o) = owner.get_mut(seg.index as usize).filter(|o| o.is_none()) {
                            if docpipe_chunker::owns(&c.chunk.owned, &tokens) {
                                *o = Some(k);
                            }
                        }
                    }
                }
                let (chunks, chosen) = choose_chunks(&owner, &gold, &positives, &self.rarity, &plan, seed);
                let ids = TaskIds {
                    run_id: uuid::Uuid::nil(),
                    document_id: uuid::Uuid::nil(),
                    generation: 0,
                    count: prepared.chunks.len() as u32,
                    published_ms: 0,
                };
                let tasks = chunks.iter().map(|&k| prepared.chunks[k].clone().into_task(ids)).collect();
                (chosen, tasks)
            }
        };
        let mut sampled = Sampled::new(file.to_string(), sha.to_string(), &all, &inputs, &gold, &positives, &chosen);
        sampled.present = present_in(self.present, file);
        sampled.unlocated = unlocated;
        if !tasks.is_empty() {
            sampled.chunks = tasks.iter().map(|t: &ChunkTask| t.meta.index as usize).collect();
            sampled.tokens = tasks.iter().map(|t| t.input_ids.len()).sum();
        }
        Ok((sampled, tasks))
    }

    fn model(&mut self, c: &Common, w: &WorkerArgs) -> Result<&SentenceEmbedder> {
        if self.model.is_none() {
            let model = setup::load_model(c, w)?;
            self.budget = setup::worker_config(w, &model)?.max_batch_tokens;
            self.model = Some(model);
        }
        self.model.as_ref().context("the model is loaded")
    }

    /// Embed the chosen segments of a group of documents in one pass and cache each document:
    /// its embeddings first, the document last, so a document is cached only when whole.
    fn embed_and_cache(
        &mut self,
        c: &Common,
        w: &WorkerArgs,
        group: &[(Sampled, Vec<ChunkTask>)],
        dir: &Path,
    ) -> Result<()> {
        self.model(c, w)?;
        let (model, budget) = (self.model.as_ref().context("the model is loaded")?, self.budget);
        let mut per_doc: Vec<Vec<Vec<f32>>> = Vec::with_capacity(group.len());
        if self.embeddings == Embeddings::Standalone {
            let seqs: Vec<&[u32]> =
                group.iter().flat_map(|(s, _)| s.chosen.iter().map(|x| x.input_ids.as_slice())).collect();
            let mut embedded = embed_by_length(model, &seqs, budget).into_iter();
            for (s, _) in group {
                let mut doc = Vec::with_capacity(s.chosen.len());
                for x in &s.chosen {
                    let e = embedded.next().context("one embedding per segment")?;
                    doc.push(e.with_context(|| format!("embedding segment {} of {}", x.index, s.file))?);
                }
                per_doc.push(doc);
            }
        } else {
            // the chunk pass of the worker, over the chosen chunks of the whole group
            let tasks: Vec<&ChunkTask> = group.iter().flat_map(|(_, t)| t.iter()).collect();
            let mut embedded = docpipe_worker::batch::embed_chunks(model, &tasks, budget).into_iter();
            for (s, tasks) in group {
                let mut pooled: BTreeMap<usize, Vec<f32>> = BTreeMap::new();
                for t in tasks {
                    let e = embedded.next().context("one result per chunk")?;
                    let e = e
                        .map_err(|e| anyhow::anyhow!(e.message))
                        .with_context(|| format!("embedding chunk {} of {}", t.meta.index, s.file))?;
                    let owned = t.meta.owned_tokens[0] as usize..t.meta.owned_tokens[1] as usize;
                    for seg in e.segments {
                        if docpipe_chunker::owns(&owned, &(seg.tokens[0] as usize..seg.tokens[1] as usize)) {
                            pooled.insert(seg.index as usize, seg.embedding);
                        }
                    }
                }
                let doc = s
                    .chosen
                    .iter()
                    .map(|x| {
                        pooled.remove(&x.index).with_context(|| {
                            format!("segment {} of {}: no contextual embedding from its chunk", x.index, s.file)
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                per_doc.push(doc);
            }
        }
        for ((s, _), doc) in group.iter().zip(per_doc) {
            let mut raw = Vec::with_capacity(s.chosen.len() * 768 * 4);
            for e in doc {
                raw.extend(e.iter().flat_map(|f| f.to_le_bytes()));
            }
            write_atomic(&dir.join(format!("{}.f32", s.pdf_sha256)), &raw)?;
            write_atomic(&dir.join(format!("{}.json", s.pdf_sha256)), &serde_json::to_vec(s)?)?;
        }
        Ok(())
    }
}

/// Labelled PDFs ready for the learner or the evaluation: each cut into segments, its chosen
/// segments ([`Options::plan`]) embedded on their own, from the cache where it has them.
pub struct Corpus {
    pub docs: Vec<Doc>,
    /// Each document's file name.
    pub files: Vec<String>,
    /// The built-in categories with their query embeddings.
    pub queries: Vec<StoredCategory>,
    pub labels_sha: String,
    /// `sha256  file` of every PDF used.
    pub pdf_lines: Vec<String>,
    /// Files that could not be read.
    pub failed: Vec<String>,
    pub model_name: String,
    /// Segments in the documents, segments embedded, their tokens.
    pub stats: (usize, usize, usize),
    /// Gold clauses not located in the text.
    pub unlocated: usize,
}

pub async fn corpus(c: &Common, w: &WorkerArgs, ocr: &OcrArgs, o: &Options) -> Result<Corpus> {
    let Embeddings::Both(plan) = o.embeddings else { return corpus_of(c, w, ocr, o).await };
    let standalone = corpus_of(c, w, ocr, &Options { embeddings: Embeddings::Standalone, ..o.clone() }).await?;
    let contextual = corpus_of(c, w, ocr, &Options { embeddings: Embeddings::Contextual(plan), ..o.clone() }).await?;
    merge_corpora(standalone, contextual)
}

/// The two samples of each document as one document ([`Doc::merge`]).
fn merge_corpora(s: Corpus, x: Corpus) -> Result<Corpus> {
    let mut other: BTreeMap<String, Doc> = x.files.into_iter().zip(x.docs).collect();
    let (mut docs, mut files, mut failed) = (Vec::new(), Vec::new(), s.failed);
    for (file, doc) in s.files.into_iter().zip(s.docs) {
        match other.remove(&file) {
            Some(d) => {
                docs.push(doc.merge(d).with_context(|| format!("merging the two samples of {file}"))?);
                files.push(file);
            }
            None => {
                warn!(file = %file, "no contextual sample of this document; left out");
                failed.push(file);
            }
        }
    }
    failed.extend(x.failed.into_iter().filter(|f| !failed.contains(f)).collect::<Vec<_>>());
    Ok(Corpus {
        docs,
        files,
        queries: s.queries,
        labels_sha: s.labels_sha,
        pdf_lines: s.pdf_lines,
        failed,
        model_name: s.model_name,
        stats: (s.stats.0, s.stats.1 + x.stats.1, s.stats.2 + x.stats.2),
        unlocated: s.unlocated,
    })
}

/// [`corpus`] for one kind of embeddings.
async fn corpus_of(c: &Common, w: &WorkerArgs, ocr: &OcrArgs, o: &Options) -> Result<Corpus> {
    let (labels_bytes, labels_sha) = sha256_file(&o.labels)?;
    drop(labels_bytes);
    let (labels, present) = gold::read_labels(&o.labels)?;
    let mut files = training_files(&labels, &o.pdfs, o.seed);
    if files.is_empty() {
        bail!("none of the files in {} is in {}", o.labels.display(), o.pdfs.display());
    }
    if o.docs > 0 {
        files.truncate(o.docs);
    }
    let model_dir = setup::model_dir(c)?;
    let model_name = model_dir.name();
    let dir = cache_dir(o, &model_name);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating the training cache {}", dir.display()))?;
    let limits = ExtractLimits::default();
    let ocr = Ocr::new(ocr.config(limits.memory_bytes >> 20));
    let extractor =
        Extractor { exe: std::env::current_exe().context("locating the docpipe binary for extraction")?, limits, ocr };
    extractor.ocr.check().await?;
    // categories by the number of training documents with a gold clause, rarest first
    let mut with_clauses: BTreeMap<&String, usize> = BTreeMap::new();
    for ((_, cat), clauses) in &labels {
        *with_clauses.entry(cat).or_default() += usize::from(!clauses.is_empty());
    }
    let mut rarity: Vec<(usize, String)> = with_clauses.into_iter().map(|(c, n)| (n, c.clone())).collect();
    rarity.sort();
    let mut trainer = Trainer {
        input: ModelInput::load(&model_dir, defaults::CHUNK_TOKENS, defaults::CHUNK_OVERLAP)?,
        extractor,
        labels: &labels,
        present: &present,
        rarity: rarity.into_iter().map(|(_, c)| c).collect(),
        plan: o.plan,
        embeddings: o.embeddings,
        seed: o.seed,
        model: None,
        budget: defaults::CPU_BATCH_TOKENS,
    };
    info!(documents = files.len(), cache = %dir.display(), "preparing labelled documents");
    let (mut sampled, mut pdf_lines, mut failed) = (Vec::new(), Vec::new(), Vec::new());
    let (mut embedded_now, mut tokens_now, mut extract_seconds, mut embed_seconds) = (0usize, 0usize, 0f64, 0f64);
    let mut group: Vec<(Sampled, Vec<ChunkTask>)> = Vec::new();
    for (k, file) in files.iter().enumerate() {
        let (pdf, sha) = sha256_file(&o.pdfs.join(file))?;
        pdf_lines.push(format!("{sha}  {file}"));
        let cached = dir.join(format!("{sha}.json"));
        if cached.is_file() && dir.join(format!("{sha}.f32")).is_file() {
            let mut s: Sampled = serde_json::from_slice(&std::fs::read(&cached)?)
                .with_context(|| format!("reading the cached {}", cached.display()))?;
            // two names for one PDF share its cache entry
            s.file.clone_from(file);
            sampled.push(s);
        } else {
            let t0 = Instant::now();
            match trainer.prepare(file, &pdf, &sha).await {
                Ok(s) => group.push(s),
                Err(e) => {
                    warn!(file = %file, error = format!("{e:#}"), "training document left out");
                    failed.push(file.clone());
                }
            }
            extract_seconds += t0.elapsed().as_secs_f64();
        }
        if group.len() >= GROUP || (k + 1 == files.len() && !group.is_empty()) {
            let t0 = Instant::now();
            trainer.embed_and_cache(c, w, &group, &dir)?;
            let secs = t0.elapsed().as_secs_f64();
            let tokens: usize = group.iter().map(|(s, _)| s.tokens).sum();
            let segments: usize = group.iter().map(|(s, _)| s.chosen.len()).sum();
            let all: usize = group.iter().map(|(s, _)| s.segments).sum();
            embedded_now += group.len();
            tokens_now += tokens;
            embed_seconds += secs;
            let per_doc = (extract_seconds + embed_seconds) / embedded_now as f64;
            eprintln!(
                "[{:>3}/{}] {} documents embedded: {segments} of their {all} segments, {tokens} tokens in {secs:.0} s \
                 ({:.0} tokens/s); about {:.0} min left",
                k + 1,
                files.len(),
                group.len(),
                tokens as f64 / secs.max(1e-9),
                per_doc * (files.len() - k - 1) as f64 / 60.0
            );
            sampled.extend(group.drain(..).map(|(s, _)| s));
        }
    }
    let cached = sampled.len() - embedded_now;
    eprintln!(
        "{} documents ready ({embedded_now} prepared now: {extract_seconds:.0} s extracting, {tokens_now} tokens embedded in {embed_seconds:.0} s; {cached} from the cache; {} left out)",
        sampled.len(),
        failed.len()
    );
    if sampled.is_empty() {
        bail!("no labelled document could be read");
    }

    // the category queries: the learner's prior
    let queries = category_queries(&mut trainer, c, w)?;
    let stats = (
        sampled.iter().map(|s| s.segments).sum::<usize>(),
        sampled.iter().map(|s| s.chosen.len()).sum::<usize>(),
        sampled.iter().map(|s| s.tokens).sum::<usize>(),
    );
    let unlocated = sampled.iter().map(|s| s.unlocated).sum();
    let mut docs: Vec<Doc> = Vec::with_capacity(sampled.len());
    let files: Vec<String> = sampled.iter().map(|s| s.file.clone()).collect();
    for mut s in sampled {
        // presence from the labels as read now (not as cached)
        s.present = present_in(&present, &s.file);
        let emb = read_embeddings(&dir.join(format!("{}.f32", s.pdf_sha256)), queries[0].query.len())?;
        if emb.len() != s.chosen.len() {
            bail!(
                "cached {}: {} embeddings for {} segments (delete it to embed again)",
                s.file,
                emb.len(),
                s.chosen.len()
            );
        }
        docs.push(s.into_doc(emb));
    }
    pdf_lines.sort();
    Ok(Corpus { docs, files, queries, labels_sha, pdf_lines, failed, model_name, stats, unlocated })
}

pub async fn run(c: &Common, w: &WorkerArgs, ocr: &OcrArgs, o: &Options) -> Result<()> {
    let started = Instant::now();
    let Corpus { docs, files, queries, labels_sha, pdf_lines, failed, model_name, stats, .. } =
        corpus(c, w, ocr, o).await?;
    let t_learn = Instant::now();
    let refs: Vec<&Doc> = docs.iter().collect();
    let (scorers, calibration) = learn::learn_with_estimate(&refs, &queries);
    let learn_seconds = t_learn.elapsed().as_secs_f64();
    if let Some(path) = &o.out_of_fold {
        let Some((_, oof)) = &calibration else {
            bail!("--out-of-fold: {} documents are too few to fold", docs.len());
        };
        write_out_of_fold(path, &files, &refs, &queries, &scorers, oof)?;
    }
    let estimate = calibration.map(|(e, _)| e);
    let artifact = Artifact {
        format: artifact::FORMAT.into(),
        version: artifact::VERSION,
        name: o.name.clone(),
        model: model_name,
        embeddings: o.embeddings.name().into(),
        dim: queries[0].query.len(),
        training: artifact::Training {
            labels: o.labels.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default(),
            labels_sha256: labels_sha,
            pdfs_sha256: artifact::sha256_hex(pdf_lines.join("\n").as_bytes()),
            documents: docs.len(),
            segments: stats.0,
            segments_embedded: stats.1,
            tokens_embedded: stats.2,
            plan: match o.embeddings {
                Embeddings::Standalone | Embeddings::Both(_) => Some(o.plan),
                Embeddings::Contextual(_) => None,
            },
            chunk_plan: match o.embeddings {
                Embeddings::Contextual(c) | Embeddings::Both(c) => Some(c),
                Embeddings::Standalone => None,
            },
            seed: o.seed,
            trained_at: chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string(),
            docpipe: env!("CARGO_PKG_VERSION").into(),
        },
        categories: artifact_categories(&queries, &scorers, &refs),
    };
    let json = artifact.to_json();
    let sha = artifact::sha256_hex(&json);
    if let Some(parent) = o.out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    write_atomic(&o.out, &json)?;
    let name = o.out.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    write_atomic(&sidecar(&o.out, ".sha256"), format!("{sha}  {name}\n").as_bytes())?;
    let fixture = fixture(&artifact, &sha, docs.first());
    write_atomic(&sidecar(&o.out, ".fixture.json"), &serde_json::to_vec_pretty(&fixture)?)?;

    let mut out = std::io::stdout().lock();
    writeln!(out, "scorer {} written to {} ({} bytes, sha256 {sha})", o.name, o.out.display(), json.len())?;
    writeln!(
        out,
        "trained on {} documents: {} of their {} segments embedded ({} tokens), learned in {learn_seconds:.0} s",
        docs.len(),
        stats.1,
        stats.0,
        stats.2
    )?;
    if let Some(e) = estimate {
        writeln!(
            out,
            "expected presence on new documents ({}-fold, out-of-fold scores of the training documents): \
             precision {:.2} recall {:.2}",
            e.folds,
            e.presence_precision(),
            e.presence_recall()
        )?;
    }
    if !failed.is_empty() {
        writeln!(out, "left out (could not be read): {}", failed.join(", "))?;
    }
    writeln!(out, "train_seconds {:.0}", started.elapsed().as_secs_f64())?;
    Ok(())
}

/// Out-of-fold scores kept per document and category.
const OUT_OF_FOLD_TOP: usize = 10;

/// One line per training document and category: file, category, whether the document has it
/// (CUAD's answers), its segments, how many it holds, the final scorer's presence threshold,
/// and its best out-of-fold scores, descending.
fn write_out_of_fold(
    path: &Path,
    files: &[String],
    docs: &[&Doc],
    cats: &[StoredCategory],
    scorers: &[Scorer],
    oof: &docpipe_clauses::calibrate::OutOfFold,
) -> Result<()> {
    let mut tsv = String::from("file\tcategory\tpresent\tsegments\tembedded\tthreshold\tbest\n");
    for (i, (file, d)) in files.iter().zip(docs).enumerate() {
        let total = (0..d.segments.len()).map(|j| d.weight(j)).sum::<f32>().round();
        for (k, (cat, s)) in cats.iter().zip(scorers).enumerate() {
            let mut best = oof.scores(i, k).to_vec();
            best.sort_by(|a, b| b.total_cmp(a));
            best.truncate(OUT_OF_FOLD_TOP);
            let best: Vec<String> = best.iter().map(|x| format!("{x:.6}")).collect();
            let present = u8::from(d.present.contains(&cat.name));
            let line = format!(
                "{file}\t{}\t{present}\t{total}\t{}\t{:.6}\t{}\n",
                cat.name,
                d.segments.len(),
                s.threshold,
                best.join(",")
            );
            tsv.push_str(&line);
        }
    }
    write_atomic(path, tsv.as_bytes())
}

/// `x.json` → `x.json.sha256`, `x.fixture.json`.
fn sidecar(out: &Path, suffix: &str) -> PathBuf {
    let s = out.to_string_lossy();
    match suffix {
        ".fixture.json" => PathBuf::from(format!("{}{suffix}", s.strip_suffix(".json").unwrap_or(&s))),
        _ => PathBuf::from(format!("{s}{suffix}")),
    }
}

/// The built-in categories' queries, embedded with the query prompt (the learner's prior).
fn category_queries(t: &mut Trainer<'_>, c: &Common, w: &WorkerArgs) -> Result<Vec<StoredCategory>> {
    if t.model.is_none() {
        t.model = Some(setup::load_model(c, w)?);
    }
    let model = t.model.as_ref().context("the model is loaded")?;
    let cats = builtin();
    let texts: Vec<String> = cats.iter().map(|c| c.query()).collect();
    let refs: Vec<&str> = texts.iter().map(|t| t.as_str()).collect();
    let embedded = model.embed_texts(Some("query"), &refs).context("embedding the clause categories")?;
    let mut out: Vec<StoredCategory> =
        cats.iter().zip(embedded).map(|(c, q)| StoredCategory { name: c.name.clone(), query: q }).collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// A few segments of the first training document and the artifact's scores of them: for
/// each category, its best-scoring segment there, and the document's first segment.
fn fixture(a: &Artifact, sha: &str, doc: Option<&Doc>) -> Fixture {
    let scorers: BTreeMap<String, Scorer> = a.scorers();
    let mut picked: Vec<usize> = Vec::new();
    if let Some(d) = doc {
        picked.push(0);
        for s in scorers.values() {
            let (rank, _) = docpipe_clauses::scorer::ranking(d, s);
            if let Some(&best) = rank.first() {
                if !picked.contains(&best) && picked.len() < 6 {
                    picked.push(best);
                }
            }
        }
    }
    let segments = doc
        .map(|d| {
            picked
                .iter()
                .filter_map(|&i| d.segments.get(i))
                .map(|seg| FixtureSegment {
                    index: seg.index,
                    embedding: seg.embedding.clone(),
                    terms: seg.terms.clone(),
                    scores: scorers.iter().map(|(n, s)| (n.clone(), s.score(seg))).collect(),
                })
                .collect()
        })
        .unwrap_or_default();
    Fixture { artifact_sha256: sha.to_string(), segments }
}
