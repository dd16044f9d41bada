//! The decode engine: continuous batching of generation requests over the paged KV cache.
//!
//! Every [`Engine::step`] is one forward pass over a batch the scheduler builds afresh:
//! 1. running sequences first, each with its next token (decoding) or its next prompt chunk;
//!    when the cache has no block for one, the most recently admitted running sequence is
//!    preempted: its blocks are freed and it goes back to the head of the queue, to be
//!    recomputed from its tokens so far (nothing it generated is lost);
//! 2. then waiting sequences, while the step's token budget and the cache allow: each takes
//!    the cached blocks of its longest already-computed prefix (a document's context shared by
//!    every question asked of it is prefilled once) and prefills the rest in chunks.
//!
//! After the pass, each sequence whose prompt is complete samples a token; a sequence ends on
//! a stop token or at its `max_new_tokens`, and leaves the batch at once, freeing its blocks.
//! A request whose prompt and answer cannot fit the whole cache is refused when added.
//!
//! A beam-search request ([`Sampling::Beam`]) runs as up to `width` sequences of the batch,
//! one per beam ([`crate::beam`] chooses them): once every beam of the request has its next
//! token's log-probabilities, the best extensions become the next beams; a beam extended twice
//! is forked, the fork sharing its full KV blocks and getting a copy of its last, partly
//! filled one. Its tokens are sent when the search is over (the best answer is not known
//! before).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tch::{Kind, TchError};

use crate::beam::{Beam, BeamSearch, Offer};
use crate::constrain::Constraint;
use crate::kv_cache::{block_hash, BlockPool, KvCache};
use crate::qwen2::{Qwen2, SeqInput};
use crate::sampling::{sample, top_log_probs, Rng, Sampling};

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("request {id}: {reason}")]
    Refused { id: u64, reason: String },
    #[error("torch: {0}")]
    Torch(#[from] TchError),
    #[error("request {id}: no token could be sampled (logits not finite, or the JSON constraint allows none)")]
    Sampling { id: u64 },
}

#[derive(Debug, Clone)]
pub struct Request {
    pub id: u64,
    pub prompt: Vec<u32>,
    pub sampling: Sampling,
    pub max_new_tokens: usize,
    pub stop: Vec<u32>,
    /// Keep the output to a JSON schema ([`Constraint`]).
    pub constraint: Option<Arc<Constraint>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// A stop token (not included in the output).
    Stop,
    /// `max_new_tokens` reached.
    Length,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Token {
        id: u64,
        token: u32,
    },
    /// `logprob`: the sum of the generated tokens' log-probabilities under the model's own
    /// (unconstrained) distribution — what a confidence is computed from.
    Done {
        id: u64,
        finish: Finish,
        tokens: Vec<u32>,
        logprob: f64,
    },
}

#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Token slots per cache block.
    pub block_size: usize,
    /// Blocks in the cache (per layer).
    pub blocks: usize,
    /// The most tokens one forward pass takes (decode tokens and prompt chunks together).
    pub max_batch_tokens: usize,
    /// The most sequences decoding at once.
    pub max_running: usize,
    /// Precision of the cached keys and values (`Kind::Int8`: quantized, one scale per 32
    /// values of a token's key or value in a KV head).
    pub kv_kind: Kind,
    /// Share the cached blocks of a prompt prefix already computed (off: every prompt is
    /// prefilled whole — for measuring what the sharing saves).
    pub prefix_reuse: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            block_size: 16,
            blocks: 1024,
            max_batch_tokens: 512,
            max_running: 64,
            kv_kind: Kind::BFloat16,
            prefix_reuse: true,
        }
    }
}

/// Counters for `/metrics` and the benchmarks.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub steps: u64,
    pub prefill_tokens: u64,
    pub decode_tokens: u64,
    /// Prompt tokens taken from the prefix cache instead of computed.
    pub cached_prompt_tokens: u64,
    pub preemptions: u64,
    pub forward_time: Duration,
    pub prefill_time: Duration,
    pub decode_time: Duration,
    /// Time to first token of each finished request.
    pub ttft: Vec<Duration>,
}

struct Seq {
    req: Request,
    /// Prompt and generated tokens.
    tokens: Vec<u32>,
    prompt_len: usize,
    /// Tokens whose keys and values are in the cache.
    computed: usize,
    blocks: Vec<u32>,
    /// Chained hash of each full block already published to the prefix cache.
    hashes: Vec<u64>,
    rng: Rng,
    /// The generated text, for the JSON constraint.
    text: String,
    arrived: Instant,
    first_token: Option<Instant>,
    /// Sum of the generated tokens' log-probabilities.
    logprob: f64,
    /// For a beam of a beam search: its sum as the search ranks it (under the constraint),
    /// and its candidates for the next token once computed.
    beam: Option<BeamState>,
}

#[derive(Clone)]
struct BeamState {
    sum: f64,
    offers: Option<Vec<Offer>>,
}

impl Seq {
    fn generated(&self) -> &[u32] {
        &self.tokens[self.prompt_len..]
    }
}

pub struct Engine {
    model: Qwen2,
    cache: KvCache,
    pool: BlockPool,
    cfg: EngineConfig,
    waiting: VecDeque<Seq>,
    running: Vec<Seq>,
    /// The searches of the beam-search requests, by request id.
    searches: BTreeMap<u64, BeamSearch>,
    pub stats: Stats,
}

impl Engine {
    pub fn new(model: Qwen2, cfg: EngineConfig) -> Result<Self, EngineError> {
        let c = &model.config;
        let cache = KvCache::new(
            c.num_layers,
            cfg.blocks,
            cfg.block_size,
            c.num_kv_heads,
            c.head_dim,
            cfg.kv_kind,
            model.kind(),
            model.device(),
        )?;
        Ok(Self {
            pool: BlockPool::new(cfg.blocks, cfg.block_size),
            model,
            cache,
            cfg,
            waiting: VecDeque::new(),
            running: Vec::new(),
            searches: BTreeMap::new(),
            stats: Stats::default(),
        })
    }

    pub fn model(&self) -> &Qwen2 {
        &self.model
    }

    pub fn cache(&self) -> &KvCache {
        &self.cache
    }

    pub fn pool(&self) -> &BlockPool {
        &self.pool
    }

    pub fn running(&self) -> usize {
        self.running.len()
    }

    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    pub fn is_idle(&self) -> bool {
        self.running.is_empty() && self.waiting.is_empty()
    }

    /// Queue a request; refused when it can never fit.
    pub fn add(&mut self, req: Request) -> Result<(), EngineError> {
        let refuse = |reason: String| EngineError::Refused { id: req.id, reason };
        if req.prompt.is_empty() {
            return Err(refuse("empty prompt".into()));
        }
        let need = req.prompt.len() + req.max_new_tokens;
        let room = self.pool.total() * self.pool.block_size();
        // the beams share the prompt's full blocks; each holds its own copy of the prompt's
        // last, partly filled block and its answer, and a fork needs one block more while it
        // copies
        let width = match req.sampling {
            Sampling::Beam { width, .. } => width.max(1),
            _ => 1,
        };
        if width > self.cfg.max_running {
            return Err(refuse(format!(
                "beam width {width} is over the {} sequences that may run at once",
                self.cfg.max_running
            )));
        }
        let bs = self.pool.block_size();
        let own = (req.prompt.len() % bs + req.max_new_tokens).div_ceil(bs);
        let held = req.prompt.len() / bs + width * own + (width > 1) as usize;
        if held > self.pool.total() {
            return Err(refuse(format!(
                "prompt {} + {width} × max new tokens {} needs {held} blocks of {bs} tokens, over the KV cache's {} ({room} token slots)",
                req.prompt.len(),
                req.max_new_tokens,
                self.pool.total()
            )));
        }
        if need > self.model.config.context_length {
            return Err(refuse(format!(
                "{need} tokens, over the model's context of {}",
                self.model.config.context_length
            )));
        }
        if let Some(&t) = req.prompt.iter().find(|&&t| t as usize >= self.model.config.vocab_size) {
            return Err(refuse(format!("token id {t} outside the vocabulary")));
        }
        let seed = match req.sampling {
            Sampling::Random { seed, .. } => seed,
            Sampling::Greedy => 0,
            Sampling::Beam { width, length_penalty } => {
                if self.searches.contains_key(&req.id) {
                    return Err(refuse("a beam search with this id is running".into()));
                }
                self.searches.insert(req.id, BeamSearch::new(width, length_penalty, req.max_new_tokens));
                0
            }
        };
        let beam = matches!(req.sampling, Sampling::Beam { .. }).then(|| BeamState { sum: 0.0, offers: None });
        self.waiting.push_back(Seq {
            tokens: req.prompt.clone(),
            prompt_len: req.prompt.len(),
            computed: 0,
            blocks: Vec::new(),
            hashes: Vec::new(),
            rng: Rng::new(seed),
            text: String::new(),
            arrived: Instant::now(),
            first_token: None,
            logprob: 0.0,
            beam,
            req,
        });
        Ok(())
    }

    /// Make sure `s` has blocks for its first `upto` tokens.
    fn grow(pool: &mut BlockPool, s: &mut Seq, upto: usize) -> bool {
        while s.blocks.len() * pool.block_size() < upto {
            match pool.allocate() {
                Some(b) => s.blocks.push(b),
                None => return false,
            }
        }
        true
    }

    fn free(pool: &mut BlockPool, s: &mut Seq) {
        for b in s.blocks.drain(..) {
            pool.release(b);
        }
        s.hashes.clear();
        s.computed = 0;
        // a beam offers again once recomputed
        if let Some(b) = s.beam.as_mut() {
            b.offers = None;
        }
    }

    /// Whether a running sequence is still prefilling whole blocks that `tokens` starts with
    /// and the cache does not hold yet: then the waiting sequence waits for them instead of
    /// computing the same prefix a second time (questions about one document arrive together).
    fn prefix_in_flight(&self, tokens: &[u32]) -> bool {
        let bs = self.pool.block_size();
        let cached = self.pool.cached_blocks(tokens);
        self.running.iter().any(|r| {
            let common = r.tokens.iter().zip(tokens).take_while(|(a, b)| a == b).count() / bs;
            common > cached && r.computed / bs < common
        })
    }

    /// One scheduling decision and forward pass; returns what happened.
    pub fn step(&mut self) -> Result<Vec<Event>, EngineError> {
        let mut budget = self.cfg.max_batch_tokens;
        // (index into running, new tokens) of this pass
        let mut plan: Vec<(usize, usize)> = Vec::new();
        let mut i = 0;
        while i < self.running.len() && budget > 0 {
            let s = &self.running[i];
            let n = (s.tokens.len() - s.computed).min(budget);
            if n == 0 {
                // a beam waiting for the other beams of its search
                i += 1;
                continue;
            }
            let upto = s.computed + n;
            if Self::grow(&mut self.pool, &mut self.running[i], upto) {
                plan.push((i, n));
                budget -= n;
                i += 1;
                continue;
            }
            // out of blocks: preempt the newest running sequence (perhaps this one) and retry
            let mut victim = self.running.pop().expect("running is not empty");
            Self::free(&mut self.pool, &mut victim);
            self.stats.preemptions += 1;
            docpipe_ops::metrics::get().decoder_preemptions.inc();
            self.waiting.push_front(victim);
            plan.retain(|&(j, _)| j < self.running.len());
        }
        // admit waiting sequences while there is room
        let mut next = 0;
        while budget > 0 && self.running.len() < self.cfg.max_running && next < self.waiting.len() {
            if self.cfg.prefix_reuse && self.prefix_in_flight(&self.waiting[next].tokens) {
                next += 1;
                continue;
            }
            let Some(mut s) = self.waiting.remove(next) else { break };
            // share cached full blocks of the prompt, leaving at least one token to compute
            let bs = self.pool.block_size();
            let shareable = if self.cfg.prefix_reuse { (s.tokens.len() - 1) / bs } else { 0 };
            let (blocks, hashes) = self.pool.take_prefix(&s.tokens, shareable).into_iter().unzip();
            (s.blocks, s.hashes) = (blocks, hashes);
            s.computed = s.blocks.len() * bs;
            self.stats.cached_prompt_tokens += s.computed as u64;
            docpipe_ops::metrics::get().decoder_cached_prompt_tokens.inc_by(s.computed as u64);
            let n = (s.tokens.len() - s.computed).min(budget);
            let upto = s.computed + n;
            if !Self::grow(&mut self.pool, &mut s, upto) {
                Self::free(&mut self.pool, &mut s);
                self.waiting.insert(next, s);
                break;
            }
            budget -= n;
            self.running.push(s);
            plan.push((self.running.len() - 1, n));
        }
        if plan.is_empty() {
            // only beams waiting for the rest of their search hold the cache, and what waits
            // cannot be admitted: the newest search (or sequence) goes, all its beams together,
            // behind what waits, to be recomputed once that has run
            if !self.waiting.is_empty() {
                if let Some(last) = self.running.last() {
                    let search = last.beam.is_some().then_some(last.req.id);
                    let mut j = self.running.len();
                    let mut victims = Vec::new();
                    while j > 0 {
                        j -= 1;
                        let r = &self.running[j];
                        let goes = match search {
                            Some(id) => r.beam.is_some() && r.req.id == id,
                            None => j == self.running.len() - 1,
                        };
                        if goes {
                            victims.push(self.running.remove(j));
                        }
                    }
                    for mut v in victims.into_iter().rev() {
                        Self::free(&mut self.pool, &mut v);
                        self.stats.preemptions += 1;
                        docpipe_ops::metrics::get().decoder_preemptions.inc();
                        self.waiting.push_back(v);
                    }
                }
            }
            return Ok(Vec::new());
        }
        let inputs: Vec<SeqInput> = plan
            .iter()
            .map(|&(j, n)| {
                let s = &self.running[j];
                SeqInput {
                    tokens: &s.tokens[s.computed..s.computed + n],
                    start: s.computed,
                    blocks: &s.blocks,
                    logits: s.computed + n == s.tokens.len(),
                }
            })
            .collect();
        let new_tokens: usize = plan.iter().map(|&(_, n)| n).sum();
        let decoding = plan.iter().all(|&(j, n)| n == 1 && self.running[j].computed >= self.running[j].prompt_len);
        let t0 = Instant::now();
        let logits = self.model.forward(&inputs, &mut self.cache)?;
        let vocab = self.model.config.vocab_size;
        let flat = Vec::<f32>::try_from(logits.f_contiguous()?.f_view([-1])?)?;
        // each row's log-normaliser by libtorch's vector code: a sampled token's log-probability
        // is then one subtraction, not an exp per vocabulary entry per sequence
        let log_z = Vec::<f32>::try_from(logits.f_logsumexp([-1].as_slice(), false)?)?;
        let logits: Vec<(&[f32], f32)> = flat.chunks_exact(vocab).zip(log_z).collect();
        let dt = t0.elapsed();
        self.stats.steps += 1;
        self.stats.forward_time += dt;
        let metrics = docpipe_ops::metrics::get();
        if decoding {
            self.stats.decode_tokens += new_tokens as u64;
            self.stats.decode_time += dt;
            metrics.decoder_decode_tokens.inc_by(new_tokens as u64);
            metrics.decoder_decode_seconds.inc_by(dt.as_secs_f64());
            metrics.decoder_inter_token_seconds.observe(dt.as_secs_f64());
        } else {
            self.stats.prefill_tokens += new_tokens as u64;
            self.stats.prefill_time += dt;
            metrics.decoder_prefill_tokens.inc_by(new_tokens as u64);
            metrics.decoder_prefill_seconds.inc_by(dt.as_secs_f64());
        }
        let mut events = Vec::new();
        let mut rows = logits.into_iter();
        let mut finished = Vec::new();
        let bs = self.pool.block_size();
        for &(j, n) in &plan {
            let s = &mut self.running[j];
            s.computed += n;
            // publish the blocks this pass filled, for later sequences with the same prefix
            while s.hashes.len() < s.computed / bs {
                let k = s.hashes.len();
                let h = block_hash(s.hashes.last().copied(), &s.tokens[k * bs..(k + 1) * bs]);
                self.pool.publish(s.blocks[k], h);
                s.hashes.push(h);
            }
            if s.computed < s.tokens.len() {
                continue;
            }
            let (row, log_z) = rows.next().expect("one row of logits per sequence that asked");
            let log_prob = |t: u32| row.get(t as usize).map_or(f64::NEG_INFINITY, |&x| x as f64 - log_z as f64);
            if let (Some(beam), Sampling::Beam { width, .. }) = (&mut s.beam, &s.req.sampling) {
                // a beam offers its best tokens to its search, which chooses after the pass
                // 2·width candidates that go on, whatever the stop tokens among them
                let n = 2 * width + s.req.stop.len();
                let ranked = match &s.req.constraint {
                    None => top_log_probs(row, n),
                    Some(c) => {
                        let mut masked = row.to_vec();
                        c.mask(&s.text, &s.req.stop, &mut masked);
                        top_log_probs(&masked, n)
                    }
                };
                if ranked.is_empty() {
                    return Err(EngineError::Sampling { id: s.req.id });
                }
                let offers = ranked.into_iter().map(|(token, lp)| Offer { token, logprob: lp, raw: log_prob(token) });
                beam.offers = Some(offers.collect());
                continue;
            }
            let token = match &s.req.constraint {
                None => sample(row, &s.req.sampling, &mut s.rng),
                Some(c) => {
                    let mut masked = row.to_vec();
                    c.mask(&s.text, &s.req.stop, &mut masked);
                    let t = sample(&masked, &s.req.sampling, &mut s.rng);
                    if let Some(t) = t {
                        s.text.push_str(c.text(t));
                    }
                    t
                }
            }
            .ok_or(EngineError::Sampling { id: s.req.id })?;
            s.logprob += log_prob(token);
            s.first_token.get_or_insert_with(Instant::now);
            if s.req.stop.contains(&token) {
                finished.push((j, Finish::Stop));
                continue;
            }
            s.tokens.push(token);
            events.push(Event::Token { id: s.req.id, token });
            if s.generated().len() >= s.req.max_new_tokens {
                finished.push((j, Finish::Length));
            }
        }
        let (forks, dropped) = self.advance_searches(&mut events)?;
        let mut leaving: Vec<(usize, Option<Finish>)> =
            finished.into_iter().map(|(j, f)| (j, Some(f))).chain(dropped.into_iter().map(|j| (j, None))).collect();
        leaving.sort_by(|a, b| b.0.cmp(&a.0));
        for (j, finish) in leaving {
            let mut s = self.running.remove(j);
            Self::free(&mut self.pool, &mut s);
            let Some(finish) = finish else { continue };
            if let Some(t) = s.first_token {
                self.stats.ttft.push(t - s.arrived);
                metrics.decoder_ttft_seconds.observe((t - s.arrived).as_secs_f64());
            }
            events.push(Event::Done { id: s.req.id, finish, tokens: s.generated().to_vec(), logprob: s.logprob });
        }
        for f in forks {
            if f.computed == 0 {
                // no block for its copy: recomputed from the parent's cached prefix
                self.waiting.push_front(f);
            } else {
                self.running.push(f);
            }
        }
        metrics.decoder_running.set(self.running.len() as i64);
        metrics.decoder_waiting.set(self.waiting.len() as i64);
        metrics.decoder_kv_blocks_used.set(self.pool.used() as i64);
        metrics.decoder_kv_blocks_free.set(self.pool.free() as i64);
        Ok(events)
    }

    /// Every beam search whose beams all have their candidates takes its step: returns the
    /// forks (new beams) and the running indices of the beams that end (not extended, or the
    /// search over, its answer sent in `events`). Beams extended once take their token in place.
    fn advance_searches(&mut self, events: &mut Vec<Event>) -> Result<(Vec<Seq>, Vec<usize>), EngineError> {
        let mut forks = Vec::new();
        let mut dropped = Vec::new();
        if self.searches.is_empty() {
            return Ok((forks, dropped));
        }
        let ids: Vec<u64> = self.searches.keys().copied().collect();
        let bs = self.pool.block_size();
        for id in ids {
            let members: Vec<usize> = (0..self.running.len())
                .filter(|&j| self.running[j].beam.is_some() && self.running[j].req.id == id)
                .collect();
            let ready = !members.is_empty()
                && members.iter().all(|&j| self.running[j].beam.as_ref().is_some_and(|b| b.offers.is_some()))
                && !self.waiting.iter().any(|w| w.beam.is_some() && w.req.id == id);
            if !ready {
                continue;
            }
            let beams: Vec<Beam> = members
                .iter()
                .map(|&j| {
                    let s = &self.running[j];
                    Beam {
                        tokens: s.generated().to_vec(),
                        logprob: s.beam.as_ref().map_or(0.0, |b| b.sum),
                        raw: s.logprob,
                    }
                })
                .collect();
            let offers: Vec<Vec<Offer>> = members
                .iter()
                .map(|&j| self.running[j].beam.as_mut().and_then(|b| b.offers.take()).unwrap_or_default())
                .collect();
            let search = self.searches.get_mut(&id).expect("the search of a running beam");
            let next = search.step(&beams, &offers, &self.running[members[0]].req.stop);
            if search.is_done() {
                let search = self.searches.remove(&id).expect("the search of a running beam");
                let first = &self.running[members[0]];
                let (arrived, now) = (first.arrived, Instant::now());
                self.stats.ttft.push(now - arrived);
                docpipe_ops::metrics::get().decoder_ttft_seconds.observe((now - arrived).as_secs_f64());
                let best = search.best().cloned().ok_or(EngineError::Sampling { id })?;
                events.extend(best.tokens.iter().map(|&token| Event::Token { id, token }));
                let finish = if best.stopped { Finish::Stop } else { Finish::Length };
                events.push(Event::Done { id, finish, tokens: best.tokens, logprob: best.raw });
                dropped.extend(members);
                continue;
            }
            // the beams not extended give their blocks back first, for the forks' copies
            let mut extended = vec![false; members.len()];
            for n in &next {
                extended[n.parent] = true;
            }
            for (&j, _) in members.iter().zip(&extended).filter(|(_, e)| !**e) {
                Self::free(&mut self.pool, &mut self.running[j]);
            }
            // then the forks, from their parents as they are
            let mut extended = vec![false; members.len()];
            let mut in_place = Vec::new();
            for n in &next {
                let parent = &self.running[members[n.parent]];
                if !extended[n.parent] {
                    extended[n.parent] = true;
                    in_place.push(*n);
                    continue;
                }
                let mut f = Seq {
                    req: parent.req.clone(),
                    tokens: parent.tokens.clone(),
                    prompt_len: parent.prompt_len,
                    computed: parent.computed,
                    blocks: Vec::new(),
                    hashes: parent.hashes.clone(),
                    rng: parent.rng.clone(),
                    text: parent.text.clone(),
                    arrived: parent.arrived,
                    first_token: parent.first_token,
                    logprob: n.raw,
                    beam: Some(BeamState { sum: n.logprob, offers: None }),
                };
                let full = parent.computed / bs;
                let partial = parent.computed % bs != 0;
                for &b in &parent.blocks[..full] {
                    self.pool.retain(b);
                    f.blocks.push(b);
                }
                if partial {
                    match self.pool.allocate() {
                        Some(b) => {
                            self.cache.copy_block(parent.blocks[full], b)?;
                            f.blocks.push(b);
                        }
                        None => {
                            Self::free(&mut self.pool, &mut f);
                        }
                    }
                }
                Self::extend(&mut f, n.token);
                forks.push(f);
            }
            for n in in_place {
                let s = &mut self.running[members[n.parent]];
                s.logprob = n.raw;
                if let Some(b) = s.beam.as_mut() {
                    b.sum = n.logprob;
                }
                Self::extend(s, n.token);
            }
            dropped.extend(members.iter().zip(&extended).filter(|(_, e)| !**e).map(|(&j, _)| j));
        }
        Ok((forks, dropped))
    }

    /// A beam takes its next token.
    fn extend(s: &mut Seq, token: u32) {
        if let Some(c) = &s.req.constraint {
            s.text.push_str(c.text(token));
        }
        s.first_token.get_or_insert_with(Instant::now);
        s.tokens.push(token);
    }

    /// Run until every queued request is done; the events in order.
    pub fn run(&mut self) -> Result<Vec<Event>, EngineError> {
        let mut all = Vec::new();
        while !self.is_idle() {
            all.extend(self.step()?);
        }
        Ok(all)
    }
}
