//! `docpipe generate`: try the decode engine — one or more prompts through the generative model
//! (a GGUF file), with continuous batching; a single prompt streams its tokens to stdout.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use docpipe_model::chat::{ChatTokenizer, Message, TextStream};
use docpipe_model::constrain::{Constraint, Schema};
use docpipe_model::device;
use docpipe_model::engine::{Engine, EngineConfig, Event, Finish, Request};
use docpipe_model::gguf::Gguf;
use docpipe_model::qwen2::{Qwen2, Weights};
use docpipe_model::sampling::Sampling;

/// The decoder and how to run it (shared by the commands that generate).
#[derive(clap::Args, Clone, Debug)]
pub struct DecoderArgs {
    /// The generative model, a GGUF file (`make decoder` fetches the default,
    /// Qwen2.5-Coder-1.5B-Instruct Q4_K_M, into $DOCPIPE_HOME).
    #[arg(long = "decoder", id = "decoder", env = "DOCPIPE_DECODER")]
    pub model: Option<PathBuf>,
    /// auto, cpu, cuda or cuda:N.
    #[arg(long = "decoder-device", id = "decoder_device", env = "DOCPIPE_DECODER_DEVICE", default_value = "auto")]
    pub device: String,
    /// Weights and activations: auto (as the embedding model decides), fp32, bf16, fp16 (CUDA).
    #[arg(long = "decoder-dtype", id = "decoder_dtype", env = "DOCPIPE_DECODER_DTYPE", default_value = "auto")]
    pub dtype: String,
    /// Weight matrices: `gguf` keeps the GGUF's Q4_K and Q6_K matrices in the file's blocks and
    /// multiplies them there (CPU; the others, and all on CUDA, are dequantized); `q4` repacks
    /// the Q4_K ones for libtorch's int4 kernel and dequantizes the rest; `dense` dequantizes all
    /// of them at load; `hybrid[:ROWS]` keeps the blocks and a dense copy, multiplying passes of
    /// at least ROWS tokens (timed at load when omitted) with the copy. `auto`: dense on CUDA;
    /// on the CPU in bf16, hybrid where the copy is at least 1.3× as fast on a 512-token pass
    /// (CPUs with AMX or a fast AVX512-BF16), else gguf.
    #[arg(long = "decoder-weights", id = "decoder_weights", env = "DOCPIPE_DECODER_WEIGHTS", default_value = "auto")]
    pub weights: Weights,
    /// KV-cache token slots per block.
    #[arg(long, env = "DOCPIPE_KV_BLOCK_SIZE", default_value_t = 16)]
    pub kv_block_size: usize,
    /// KV-cache precision: auto (the decoder's dtype), bf16, fp16, fp32, or int8 (one scale
    /// per 32 values: 0.56× the bytes of bf16 per token, so nearly twice the tokens in the same memory).
    #[arg(long, env = "DOCPIPE_KV_DTYPE", default_value = "auto")]
    pub kv_dtype: docpipe_model::kv_cache::KvDtype,
    /// KV-cache size in tokens (all sequences together).
    #[arg(long, env = "DOCPIPE_KV_TOKENS", default_value_t = 32768)]
    pub kv_tokens: usize,
    /// The most tokens in one forward pass (prompt chunks and decode tokens together).
    #[arg(long, env = "DOCPIPE_DECODE_BATCH_TOKENS", default_value_t = 512)]
    pub decode_batch_tokens: usize,
    /// The most sequences decoding at once.
    #[arg(long, env = "DOCPIPE_MAX_SEQUENCES", default_value_t = 64)]
    pub max_sequences: usize,
    /// Share the KV cache of a prompt prefix already computed (a document's context across
    /// its questions); `false` prefills every prompt whole.
    #[arg(long, env = "DOCPIPE_PREFIX_REUSE", default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub prefix_reuse: bool,
    /// Contract fields: also ask the decoder the fields whose stored answer comes from the
    /// rule-based reader alone (agreement and effective dates, renewal term, notice period,
    /// governing law), so that its answer is kept beside the rules' (`alternative`) for
    /// comparison; about a third more time per contract. `eval-fields` always asks them.
    #[arg(
        long = "fields-ask-all",
        env = "DOCPIPE_FIELDS_ASK_ALL",
        default_value_t = false,
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        default_missing_value = "true"
    )]
    pub fields_ask_all: bool,
}

/// The default model file, as `make decoder` puts it in `$DOCPIPE_HOME`.
const DEFAULT_DECODER: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";

/// A loaded decoder: the model in an engine, and its tokenizer.
pub struct Decoder {
    pub engine: Engine,
    pub tokenizer: ChatTokenizer,
}

impl DecoderArgs {
    /// The model file: `--decoder`, or the default in `$DOCPIPE_HOME`.
    pub fn model_path(&self) -> Result<PathBuf> {
        Ok(match &self.model {
            Some(p) => p.clone(),
            None => docpipe_text::model_dir::docpipe_home()
                .context("neither DOCPIPE_HOME nor HOME is set: pass --decoder FILE.gguf")?
                .join(DEFAULT_DECODER),
        })
    }

    pub fn load(&self) -> Result<Decoder> {
        let path = self.model_path()?;
        if !path.exists() {
            bail!(
                "decoder model {} not found: run `make decoder` (or scripts/provision.sh decoder), or pass --decoder FILE.gguf",
                path.display()
            );
        }
        let choice: device::DeviceChoice =
            self.device.parse().map_err(|e: String| anyhow::anyhow!("--decoder-device: {e}"))?;
        let dev = device::resolve(choice)?;
        let precision = device::precision(&self.dtype, dev)?;
        let t0 = std::time::Instant::now();
        let g = Gguf::open(&path)?;
        let tokenizer = ChatTokenizer::from_gguf(&g).with_context(|| format!("tokenizer of {}", path.display()))?;
        let model = Qwen2::load(&g, dev, precision.kind(), self.weights)
            .with_context(|| format!("loading {}", path.display()))?;
        let bs = self.kv_block_size.max(1);
        let cfg = EngineConfig {
            block_size: bs,
            blocks: self.kv_tokens.div_ceil(bs).max(1),
            max_batch_tokens: self.decode_batch_tokens.max(1),
            max_running: self.max_sequences.max(1),
            kv_kind: self.kv_dtype.kind(precision.kind()),
            prefix_reuse: self.prefix_reuse,
        };
        let engine = Engine::new(model, cfg)?;
        tracing::info!(
            model = %path.display(),
            device = ?dev,
            precision = precision.name(),
            weights = %engine.model().weights(),
            weight_bytes = engine.model().weight_bytes(),
            kv_bytes_per_token = engine.cache().bytes_per_token(),
            load_s = t0.elapsed().as_secs_f64(),
            "decoder loaded"
        );
        Ok(Decoder { engine, tokenizer })
    }
}

pub struct Options {
    pub prompts: Vec<String>,
    pub prompt_file: Option<PathBuf>,
    pub system: Option<String>,
    pub raw: bool,
    pub sampling: Sampling,
    pub max_new_tokens: usize,
    /// A JSON schema (inline, or a file) the answers must follow.
    pub json_schema: Option<String>,
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

pub fn run(args: &DecoderArgs, o: &Options) -> Result<()> {
    let mut prompts = o.prompts.clone();
    if let Some(f) = &o.prompt_file {
        let text = read(f)?;
        match prompts.is_empty() {
            true => prompts.push(text),
            // the file is the context of every question
            false => prompts.iter_mut().for_each(|q| *q = format!("{text}\n\n{q}")),
        }
    }
    if prompts.is_empty() {
        bail!("nothing to generate from: give --prompt TEXT (repeatable) and/or --prompt-file FILE");
    }
    let schema = match &o.json_schema {
        None => None,
        Some(s) => {
            let text = if s.trim_start().starts_with('{') { s.clone() } else { read(Path::new(s))? };
            let v: serde_json::Value = serde_json::from_str(&text).context("--json-schema is not JSON")?;
            Some(Arc::new(Schema::from_json(&v).map_err(|e| anyhow::anyhow!("--json-schema: {e}"))?))
        }
    };
    let Decoder { mut engine, tokenizer } = args.load()?;
    let constraint = schema.map(|s| Arc::new(Constraint::new(s, tokenizer.token_texts())));
    for (i, p) in prompts.iter().enumerate() {
        let text = if o.raw {
            p.clone()
        } else {
            let mut messages = Vec::new();
            if let Some(s) = &o.system {
                messages.push(Message::new("system", s));
            }
            messages.push(Message::new("user", p));
            tokenizer.chat_prompt(&messages)?
        };
        let ids = tokenizer.encode(&text)?;
        engine.add(Request {
            id: i as u64,
            prompt: ids,
            sampling: o.sampling,
            max_new_tokens: o.max_new_tokens,
            stop: tokenizer.stop_ids.clone(),
            constraint: constraint.clone(),
        })?;
    }
    let stream = prompts.len() == 1;
    let mut text = TextStream::new();
    let mut out = std::io::stdout().lock();
    let t0 = std::time::Instant::now();
    let mut answers = vec![String::new(); prompts.len()];
    while !engine.is_idle() {
        for ev in engine.step()? {
            match ev {
                Event::Token { token, .. } if stream => {
                    write!(out, "{}", text.push(&tokenizer, token)?)?;
                    out.flush()?;
                }
                Event::Token { .. } => {}
                Event::Done { id, finish, tokens, .. } => {
                    answers[id as usize] = tokenizer.decode(&tokens)?;
                    let why = match finish {
                        Finish::Stop => "stop token",
                        Finish::Length => "max new tokens",
                    };
                    tracing::debug!(sequence = id, tokens = tokens.len(), finish = why, "sequence done");
                }
            }
        }
    }
    if stream {
        writeln!(out)?;
    } else {
        for (i, a) in answers.iter().enumerate() {
            writeln!(out, "--- {}\n{a}", i + 1)?;
        }
    }
    let s = &engine.stats;
    let rate = |n: u64, d: std::time::Duration| if d.is_zero() { 0.0 } else { n as f64 / d.as_secs_f64() };
    let ttft = s.ttft.iter().map(|d| d.as_secs_f64()).fold(0.0, f64::max);
    tracing::info!(
        sequences = prompts.len(),
        prefill_tokens = s.prefill_tokens,
        cached_prompt_tokens = s.cached_prompt_tokens,
        decode_tokens = s.decode_tokens,
        prefill_tok_s = format!("{:.1}", rate(s.prefill_tokens, s.prefill_time)),
        decode_tok_s = format!("{:.1}", rate(s.decode_tokens, s.decode_time)),
        max_ttft_s = format!("{ttft:.2}"),
        preemptions = s.preemptions,
        wall_s = format!("{:.2}", t0.elapsed().as_secs_f64()),
        "generation done"
    );
    Ok(())
}
