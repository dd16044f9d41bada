//! A sentence-transformers model directory, run in libtorch: encoder → mean pooling →
//! Dense layers → L2 normalisation, as `modules.json` lists them.
//!
//! The pipeline after the encoder runs in fp32 whatever the encoder's precision: it is a few
//! small matrix products per sequence, and it keeps bf16 rounding out of the final vector.

use std::ops::Range;
use std::path::{Path, PathBuf};

use docpipe_batching::Backend;
use docpipe_text::{ModelDir, ModelDirError};
use serde::Deserialize;
use tch::{Device, Kind, Tensor};
use tokenizers::Tokenizer;

use crate::gemma3::{AttentionImpl, Config, Gemma3Encoder, ModelError, Weights};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    F32,
    Bf16,
    F16,
}

impl Precision {
    pub fn kind(self) -> Kind {
        match self {
            Precision::F32 => Kind::Float,
            Precision::Bf16 => Kind::BFloat16,
            Precision::F16 => Kind::Half,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "fp32",
            Precision::Bf16 => "bf16",
            Precision::F16 => "fp16",
        }
    }
}

impl std::str::FromStr for Precision {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fp32" | "f32" | "float32" => Ok(Precision::F32),
            "bf16" | "bfloat16" => Ok(Precision::Bf16),
            "fp16" | "f16" | "float16" => Ok(Precision::F16),
            _ => Err(format!("unknown precision {s:?} (expected fp32, bf16 or fp16)")),
        }
    }
}

#[derive(Debug, Deserialize)]
struct Module {
    path: String,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Debug, Deserialize)]
struct PoolingConfig {
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
}

#[derive(Debug, Deserialize)]
struct DenseConfig {
    in_features: usize,
    out_features: usize,
    #[serde(default)]
    bias: bool,
    #[serde(default)]
    activation_function: String,
}

struct Dense {
    weight: Tensor,
    bias: Option<Tensor>,
}

/// Everything between the encoder's hidden states and the sentence embedding.
struct Head {
    dense: Vec<Dense>,
    normalize: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error("{path}: {message}")]
    Layout { path: PathBuf, message: String },
    #[error(transparent)]
    ModelDir(#[from] ModelDirError),
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error("token id {id} is outside the vocabulary ({vocab})")]
    BadToken { id: u32, vocab: usize },
    #[error("empty input sequence")]
    Empty,
    #[error("sequence of {len} tokens is longer than the model's {max} positions")]
    TooLong { len: usize, max: usize },
    #[error("span {start}..{end} is empty or outside the sequence of {len} tokens")]
    BadSpan { start: usize, end: usize, len: usize },
}

impl From<tch::TchError> for EmbedError {
    fn from(e: tch::TchError) -> Self {
        EmbedError::Model(ModelError::from(e))
    }
}

/// A sequence's sentence embedding and its spans' embeddings.
pub type Embedded = (Vec<f32>, Vec<Vec<f32>>);

/// `[n, dim]` on any device → `n` rows on the host.
fn rows(t: &Tensor, n: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
    let flat: Vec<f32> = Vec::<f32>::try_from(t.f_to_device(Device::Cpu)?.f_flatten(0, -1)?)?;
    let dim = flat.len() / n.max(1);
    Ok(flat.chunks(dim.max(1)).map(|c| c.to_vec()).collect())
}

pub struct SentenceEmbedder {
    encoder: Gemma3Encoder,
    head: Head,
    tokenizer: Tokenizer,
    prompts: serde_json::Map<String, serde_json::Value>,
    name: String,
    precision: Precision,
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, EmbedError> {
    let raw =
        std::fs::read_to_string(path).map_err(|e| EmbedError::Layout { path: path.into(), message: e.to_string() })?;
    serde_json::from_str(&raw).map_err(|e| EmbedError::Layout { path: path.into(), message: e.to_string() })
}

impl SentenceEmbedder {
    /// Load a sentence-transformers directory onto `device` with the encoder in `precision`.
    pub fn load(dir: &Path, device: Device, precision: Precision) -> Result<Self, EmbedError> {
        let _guard = tch::no_grad_guard();
        let model_dir = ModelDir::open(dir)?;
        let config = Config::from_file(&dir.join("config.json"))?;
        let mut weights = Weights::load(&dir.join("model.safetensors"), device, precision.kind())?;
        let encoder = Gemma3Encoder::load(config, &mut weights)?;
        drop(weights);
        let head = load_head(dir, device, encoder.config.hidden_size)?;
        let tokenizer = model_dir.tokenizer()?;
        let prompts = model_dir.prompts()?;
        let name = model_dir.name();
        Ok(Self { encoder, head, tokenizer, prompts, name, precision })
    }

    /// How attention is computed: packed FlashAttention where it runs (CUDA, fp16/bf16), the
    /// GEMM attention on CPUs without AMX in bf16, else banded; dense is the reference (see
    /// [`AttentionImpl`]).
    pub fn attention(&self) -> AttentionImpl {
        self.encoder.attention()
    }

    /// Choose how attention is computed; `Packed` is refused, with the reason, where it
    /// cannot run.
    pub fn set_attention(&mut self, attention: AttentionImpl) -> Result<(), String> {
        self.encoder.set_attention(attention)
    }

    /// `name/precision`, recorded with every stored embedding.
    pub fn label(&self) -> String {
        format!("{}/{}", self.name, self.precision.name())
    }

    pub fn device(&self) -> Device {
        self.encoder.device()
    }

    /// Memory the model's device holds now (see [`crate::device::memory_in_use`]).
    pub fn memory_in_use(&self) -> Option<u64> {
        crate::device::memory_in_use(self.device())
    }

    pub fn max_len(&self) -> usize {
        self.encoder.config.max_position_embeddings
    }

    /// Output dimension of the sentence embedding.
    pub fn dim(&self) -> usize {
        self.head.dense.last().map(|d| d.weight.size()[0] as usize).unwrap_or(self.encoder.config.hidden_size)
    }

    /// Token ids (with special tokens) for `prompt_name`'s prompt followed by `text`.
    pub fn tokenize(&self, prompt_name: Option<&str>, text: &str) -> Result<Vec<u32>, EmbedError> {
        let prompt = prompt_name.and_then(|p| self.prompts.get(p)).and_then(|p| p.as_str()).unwrap_or("");
        let enc =
            self.tokenizer.encode(format!("{prompt}{text}"), true).map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        Ok(enc.get_ids().to_vec())
    }

    /// Sentence embeddings of pre-tokenized sequences, as one padded batch, and for each
    /// sequence one embedding per span of its positions (late chunking): the span's token
    /// states, from the same forward pass, mean-pooled and sent through the same Dense layers
    /// and normalisation as the whole sequence.
    pub fn embed_with_spans(&self, seqs: &[&[u32]], spans: &[&[Range<usize>]]) -> Result<Vec<Embedded>, EmbedError> {
        let _guard = tch::no_grad_guard();
        if seqs.is_empty() {
            return Ok(Vec::new());
        }
        let max = seqs.iter().map(|s| s.len()).max().unwrap_or(0);
        if seqs.iter().any(|s| s.is_empty()) {
            return Err(EmbedError::Empty);
        }
        if max > self.max_len() {
            return Err(EmbedError::TooLong { len: max, max: self.max_len() });
        }
        for (s, sp) in seqs.iter().zip(spans) {
            if let Some(bad) = sp.iter().find(|r| r.is_empty() || r.end > s.len()) {
                return Err(EmbedError::BadSpan { start: bad.start, end: bad.end, len: s.len() });
            }
        }
        // an out-of-range id would be a device-side assert on CUDA, fatal to the process
        let vocab = self.encoder.config.vocab_size;
        if let Some(&bad) = seqs.iter().flat_map(|s| s.iter()).find(|&&id| id as usize >= vocab) {
            return Err(EmbedError::BadToken { id: bad, vocab });
        }
        let pad = self.encoder.config.pad_token_id;
        let mut ids = vec![pad; seqs.len() * max];
        let mut valid = vec![false; seqs.len() * max];
        for (b, s) in seqs.iter().enumerate() {
            for (t, &id) in s.iter().enumerate() {
                ids[b * max + t] = id as i64;
                valid[b * max + t] = true;
            }
        }
        let device = self.device();
        let shape = [seqs.len() as i64, max as i64];
        let ids = Tensor::f_from_slice(&ids)?.f_view(shape)?.f_to_device(device)?;
        let valid = Tensor::f_from_slice(&valid)?.f_view(shape)?.f_to_device(device)?;
        let hidden = self.encoder.forward(&ids, &valid)?;
        let pooled = self.head.project(&self.head.mean(&hidden, &valid)?)?;
        let sentences = rows(&pooled, seqs.len())?;
        let n_spans: usize = spans.iter().map(|s| s.len()).sum();
        let mut span_rows = if n_spans == 0 {
            Vec::new()
        } else {
            let (starts, ends): (Vec<i64>, Vec<i64>) = spans
                .iter()
                .enumerate()
                .flat_map(|(b, sp)| {
                    sp.iter().map(move |r| ((b * (max + 1) + r.start) as i64, (b * (max + 1) + r.end) as i64))
                })
                .unzip();
            let means = self.head.span_means(&hidden, &starts, &ends)?;
            rows(&self.head.project(&means)?, n_spans)?
        }
        .into_iter();
        Ok(sentences
            .into_iter()
            .zip(spans)
            .map(|(sentence, sp)| (sentence, span_rows.by_ref().take(sp.len()).collect()))
            .collect())
    }
}

impl Backend for SentenceEmbedder {
    type Error = EmbedError;

    fn label(&self) -> String {
        SentenceEmbedder::label(self)
    }

    fn max_len(&self) -> usize {
        SentenceEmbedder::max_len(self)
    }

    fn tokenize(&self, prompt_name: Option<&str>, text: &str) -> Result<Vec<u32>, EmbedError> {
        SentenceEmbedder::tokenize(self, prompt_name, text)
    }

    fn embed_with_spans(&self, seqs: &[&[u32]], spans: &[&[Range<usize>]]) -> Result<Vec<Embedded>, EmbedError> {
        SentenceEmbedder::embed_with_spans(self, seqs, spans)
    }

    fn memory_in_use(&self) -> Option<u64> {
        SentenceEmbedder::memory_in_use(self)
    }

    fn is_permanent(e: &EmbedError) -> bool {
        matches!(
            e,
            EmbedError::BadToken { .. } | EmbedError::TooLong { .. } | EmbedError::Empty | EmbedError::BadSpan { .. }
        )
    }
}

fn load_head(dir: &Path, device: Device, hidden: usize) -> Result<Head, EmbedError> {
    let modules_path = dir.join("modules.json");
    let modules: Vec<Module> = read_json(&modules_path)?;
    let layout = |message: String| EmbedError::Layout { path: modules_path.clone(), message };
    let mut dense = Vec::new();
    let mut normalize = false;
    let mut width = hidden;
    for m in &modules {
        let kind = m.kind.rsplit('.').next().unwrap_or(&m.kind);
        match kind {
            "Transformer" => {}
            "Pooling" => {
                let cfg: PoolingConfig = read_json(&dir.join(&m.path).join("config.json"))?;
                if !cfg.pooling_mode_mean_tokens {
                    return Err(layout(format!("{}: only mean pooling is supported", m.path)));
                }
            }
            "Dense" => {
                let cfg: DenseConfig = read_json(&dir.join(&m.path).join("config.json"))?;
                if !cfg.activation_function.is_empty() && !cfg.activation_function.ends_with("Identity") {
                    return Err(layout(format!("{}: activation {} not supported", m.path, cfg.activation_function)));
                }
                if cfg.in_features != width {
                    return Err(layout(format!(
                        "{}: in_features {} but previous width {}",
                        m.path, cfg.in_features, width
                    )));
                }
                let mut w = Weights::load(&dir.join(&m.path).join("model.safetensors"), device, Kind::Float)?;
                let weight = w.take("linear.weight", &[cfg.out_features, cfg.in_features])?;
                let bias = if cfg.bias { Some(w.take("linear.bias", &[cfg.out_features])?) } else { None };
                dense.push(Dense { weight, bias });
                width = cfg.out_features;
            }
            "Normalize" => normalize = true,
            other => return Err(layout(format!("module type {other} not supported"))),
        }
    }
    Ok(Head { dense, normalize })
}

impl Head {
    /// Mean over real tokens; `[batch, hidden]` fp32.
    fn mean(&self, hidden: &Tensor, valid: &Tensor) -> Result<Tensor, tch::TchError> {
        let h = hidden.f_to_kind(Kind::Float)?;
        let m = valid.f_to_kind(Kind::Float)?.f_unsqueeze(-1)?;
        // masked_fill rather than multiply: 0 · NaN would still be NaN
        let h = h.f_masked_fill(&m.f_eq(0.0)?, 0.0)?;
        let sum = h.f_sum_dim_intlist(1, false, None::<Kind>)?;
        let count = m.f_sum_dim_intlist(1, false, None::<Kind>)?.f_clamp_min(1.0)?;
        sum.f_div(&count)
    }

    /// Means of position spans `[start, end)`, given as flat indices `b * (len + 1) + pos`
    /// into the per-row prefix sums; `[spans, hidden]` fp32. Prefix sums in fp64, so a short
    /// span late in a long sequence keeps its precision.
    fn span_means(&self, hidden: &Tensor, starts: &[i64], ends: &[i64]) -> Result<Tensor, tch::TchError> {
        let (b, _, h) = hidden.size3()?;
        let x = hidden.f_to_kind(Kind::Double)?;
        let zero = Tensor::f_zeros([b, 1, h], (Kind::Double, x.device()))?;
        let prefix = Tensor::f_cat(&[zero, x.f_cumsum(1, Kind::Double)?], 1)?.f_flatten(0, 1)?;
        let idx = |v: &[i64]| Tensor::f_from_slice(v).and_then(|t| t.f_to_device(x.device()));
        let (s, e) = (idx(starts)?, idx(ends)?);
        let len: Vec<f64> = starts.iter().zip(ends).map(|(s, e)| (e - s) as f64).collect();
        let len = Tensor::f_from_slice(&len)?.f_to_device(x.device())?.f_unsqueeze(-1)?;
        prefix.f_index_select(0, &e)?.f_sub(&prefix.f_index_select(0, &s)?)?.f_div(&len)?.f_to_kind(Kind::Float)
    }

    /// The Dense stack, then L2 normalisation; `[n, dim]` fp32.
    fn project(&self, pooled: &Tensor) -> Result<Tensor, tch::TchError> {
        let mut x = pooled.shallow_clone();
        for d in &self.dense {
            x = x.f_linear(&d.weight, d.bias.as_ref())?;
        }
        if self.normalize {
            let norm =
                x.f_pow_tensor_scalar(2)?.f_sum_dim_intlist(-1, true, None::<Kind>)?.f_sqrt()?.f_clamp_min(1e-12)?;
            x = x.f_div(&norm)?;
        }
        Ok(x)
    }
}
