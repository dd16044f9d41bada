//! Qwen2 decoder (`Qwen2ForCausalLM`), as a GGUF file holds it, running on a paged KV cache.
//!
//! ```text
//! ids ─► token_embd ─► [ layer × N ] ─► output_norm ─► output (lm head) ─► logits
//!
//! layer:  x ─► attn_norm ─► attention ─► + x ─► ffn_norm ─► SwiGLU MLP ─► + x
//! attention: qkv proj (with bias) ─► RoPE (rotate-half, θ = rope.freq_base) on q, k
//!            ─► k, v written to the cache at the tokens' slots
//!            ─► softmax(q·kᵀ/√head_dim, causal)·v over the sequence's cached keys ─► o proj
//! MLP: down(silu(gate(x)) · up(x))
//! RMSNorm: x / rms(x) · w
//! ```
//! Grouped-query attention: `head_count / head_count_kv` query heads share a K/V head.
//! Every size comes from the GGUF metadata ([`Config::from_gguf`]). Weight matrices are held
//! one of four ways ([`Weights`]): dequantized at load into the model's precision (bf16 or
//! fp32); on the CPU, the `Q4_K` and `Q6_K` ones in the file's own blocks ([`KQuantLinear`],
//! with the token embedding's rows dequantized as they are looked up); those blocks and a
//! dense copy, each pass taking the faster for its number of tokens (`Hybrid`); or the `Q4_K`
//! ones repacked for libtorch's int4 kernel ([`Int4Linear`]) and the others dequantized.
//! `Auto` picks at load ([`Weights::resolve`]).
//!
//! A forward pass takes any mix of sequences, each with a run of new tokens (a prompt chunk
//! or one decode token) at known positions and a block table into the [`KvCache`]; it
//! returns the logits of the last new token of each sequence that asks for them.

use tch::{Device, Kind, TchError, Tensor};

use crate::gguf::{dequantize_into, GgmlType, Gguf, GgufError};
use crate::int4::Int4Linear;
use crate::kquant::{self, KQuantLinear};
use crate::kv_cache::KvCache;
use crate::{cpu_decode, cpu_geglu, cpu_norm};

type R<T> = Result<T, TchError>;

#[derive(Debug, thiserror::Error)]
pub enum Qwen2Error {
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error("unsupported model: {0}")]
    Unsupported(String),
    #[error("weight {name}: shape {got:?}, expected {want:?}")]
    Shape { name: String, got: Vec<i64>, want: Vec<i64> },
    #[error("weight {0} missing from the GGUF file")]
    Missing(String),
    #[error("torch: {0}")]
    Torch(#[from] TchError),
}

/// The sizes of the model, from the GGUF metadata (`qwen2.*`).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    pub rms_norm_eps: f64,
    pub rope_theta: f64,
    pub vocab_size: usize,
    pub context_length: usize,
}

impl Config {
    pub fn from_gguf(g: &Gguf) -> Result<Self, Qwen2Error> {
        let arch = g.str("general.architecture")?;
        if arch != "qwen2" {
            return Err(Qwen2Error::Unsupported(format!("general.architecture {arch:?}, expected qwen2")));
        }
        let u = |k: &str| g.u64(&format!("qwen2.{k}")).map(|v| v as usize);
        let (hidden, heads, kv_heads) =
            (u("embedding_length")?, u("attention.head_count")?, u("attention.head_count_kv")?);
        if heads == 0 || kv_heads == 0 || !heads.is_multiple_of(kv_heads) || !hidden.is_multiple_of(heads) {
            return Err(Qwen2Error::Unsupported(format!("{heads} heads, {kv_heads} KV heads, hidden {hidden}")));
        }
        let vocab = g
            .tensor("token_embd.weight")
            .map(|t| t.dims.get(1).copied().unwrap_or(0) as usize)
            .ok_or_else(|| Qwen2Error::Missing("token_embd.weight".into()))?;
        Ok(Self {
            hidden_size: hidden,
            intermediate_size: u("feed_forward_length")?,
            num_layers: u("block_count")?,
            num_heads: heads,
            num_kv_heads: kv_heads,
            head_dim: g
                .get("qwen2.attention.key_length")
                .and_then(|v| v.as_u64())
                .map_or(hidden / heads, |v| v as usize),
            rms_norm_eps: g.f64("qwen2.attention.layer_norm_rms_epsilon")?,
            rope_theta: g.f64("qwen2.rope.freq_base")?,
            vocab_size: vocab,
            context_length: u("context_length")?,
        })
    }
}

/// How the weight matrices are held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weights {
    /// Chosen at load ([`Weights::resolve`]): on CUDA `Dense`; on the CPU in bf16, `Hybrid`
    /// where a dense copy multiplies a prompt chunk clearly faster than the file's blocks (timed
    /// at load: CPUs with bf16 matrix units), else `Gguf`.
    Auto,
    /// Dequantized at load into the model's precision.
    Dense,
    /// `Q4_K` matrices kept in 4 bits ([`Int4Linear`], CPU only); the others dense.
    Q4,
    /// `Q4_K` and `Q6_K` matrices kept in the file's blocks ([`KQuantLinear`], CPU only); the
    /// others dense.
    Gguf,
    /// The file's blocks as `Gguf` and a dense copy beside them (CPU only): a pass of at least
    /// `dense_from_rows` tokens (prompt chunks, many sequences) multiplies the dense copy, a
    /// smaller one (decode steps) the blocks. `None`: the crossover is timed at load.
    Hybrid { dense_from_rows: Option<usize> },
}

impl std::str::FromStr for Weights {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "dense" => Ok(Self::Dense),
            "q4" => Ok(Self::Q4),
            "gguf" => Ok(Self::Gguf),
            "hybrid" => Ok(Self::Hybrid { dense_from_rows: None }),
            _ => match s.strip_prefix("hybrid:").map(str::parse::<usize>) {
                Some(Ok(n)) if n > 0 => Ok(Self::Hybrid { dense_from_rows: Some(n) }),
                _ => Err(format!("unknown weight format {s:?} (auto, gguf, q4, dense, hybrid or hybrid:ROWS)")),
            },
        }
    }
}

impl std::fmt::Display for Weights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::Dense => f.write_str("dense"),
            Self::Q4 => f.write_str("q4"),
            Self::Gguf => f.write_str("gguf"),
            Self::Hybrid { dense_from_rows: None } => f.write_str("hybrid"),
            Self::Hybrid { dense_from_rows: Some(n) } => write!(f, "hybrid:{n}"),
        }
    }
}

/// How much faster the dense copy must multiply a 512-token pass for `Auto` to keep it (it
/// costs 2 bytes per value more than the blocks' 0.56–0.83).
const AUTO_DENSE_SPEEDUP: f64 = 1.3;
/// How much faster the dense copy must be at a pass size for `Hybrid` to use it from there on.
const CROSSOVER_MARGIN: f64 = 1.15;

impl Weights {
    /// `Auto`, and `Hybrid` without a crossover, made concrete for `device` and `kind`: what
    /// [`Qwen2::load`] holds. On the CPU this times layer 0's gate and up projections both ways
    /// at 8, 32, 128 and 512 tokens per pass (under a second).
    pub fn resolve(self, g: &Gguf, device: Device, kind: Kind) -> Result<Self, Qwen2Error> {
        let on_cpu = device == Device::Cpu;
        match self {
            // the blocks and the int4 repacking are CPU kernels: elsewhere every matrix is
            // dense, whatever was asked, and is named so
            _ if !on_cpu => Ok(Weights::Dense),
            Weights::Auto if kind != Kind::BFloat16 => Ok(Weights::Gguf),
            Weights::Auto | Weights::Hybrid { dense_from_rows: None } => {
                let times = time_passes(g, kind)?;
                // the fewest tokens per pass from which the dense copy is clearly the faster
                // (at the crossover the two take about the same time, and one timing each varies)
                let crossover = times.iter().find(|t| t.dense_s * CROSSOVER_MARGIN <= t.blocks_s).map(|t| t.rows);
                let prefill = times.last();
                let pays = prefill.is_some_and(|t| t.dense_s * AUTO_DENSE_SPEEDUP <= t.blocks_s);
                let chosen = match (self, crossover) {
                    (Weights::Auto, Some(rows)) if pays => Weights::Hybrid { dense_from_rows: Some(rows) },
                    (Weights::Auto, _) => Weights::Gguf,
                    (_, rows) => Weights::Hybrid { dense_from_rows: Some(rows.unwrap_or(PROBE_ROWS[3])) },
                };
                let timed: Vec<String> = times
                    .iter()
                    .map(|t| {
                        format!("{} tokens: blocks {:.1} ms, dense {:.1} ms", t.rows, t.blocks_s * 1e3, t.dense_s * 1e3)
                    })
                    .collect();
                tracing::info!(asked = %self, chosen = %chosen, timed = %timed.join("; "), "decoder weights chosen");
                Ok(chosen)
            }
            w => Ok(w),
        }
    }
}

/// Tokens per pass at which [`Weights::resolve`] times the two ways.
const PROBE_ROWS: [usize; 4] = [8, 32, 128, 512];

struct PassTime {
    rows: usize,
    blocks_s: f64,
    dense_s: f64,
}

/// Layer 0's gate and up projections as the file's blocks and dense in `kind`, each timed on
/// one pass of every [`PROBE_ROWS`] (after one untimed pass); empty where the file's matrices
/// are not in a format the blocks kernel reads.
fn time_passes(g: &Gguf, kind: Kind) -> Result<Vec<PassTime>, Qwen2Error> {
    let c = Config::from_gguf(g)?;
    let names = [("blk.0.ffn_gate.weight", c.intermediate_size), ("blk.0.ffn_up.weight", c.intermediate_size)];
    let probe = |weights| Loader { g, device: Device::Cpu, kind, weights }.linear(&names, c.hidden_size);
    let (blocks, dense) = (probe(Weights::Gguf)?, probe(Weights::Dense)?);
    if !matches!(blocks, Linear::KQuant(_)) {
        return Ok(Vec::new());
    }
    let _no_grad = tch::no_grad_guard();
    let mut out = Vec::with_capacity(PROBE_ROWS.len());
    for rows in PROBE_ROWS {
        let x = Tensor::f_randn([rows as i64, c.hidden_size as i64], (kind, Device::Cpu))?;
        let seconds = |l: &Linear| -> R<f64> {
            let _ = l.forward(&x)?;
            let t = std::time::Instant::now();
            let _ = l.forward(&x)?;
            Ok(t.elapsed().as_secs_f64())
        };
        out.push(PassTime { rows, blocks_s: seconds(&blocks)?, dense_s: seconds(&dense)? });
    }
    Ok(out)
}

/// Tensors read from the GGUF file, dequantized into the model's precision (or kept in 4 bits).
struct Loader<'a> {
    g: &'a Gguf,
    device: Device,
    kind: Kind,
    weights: Weights,
}

impl Loader<'_> {
    /// `name` with PyTorch shape `shape` (outermost first), in `kind`.
    fn take_as(&self, name: &str, shape: &[usize], kind: Kind) -> Result<Tensor, Qwen2Error> {
        let info = self.g.tensor(name).ok_or_else(|| Qwen2Error::Missing(name.into()))?;
        let want: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        if info.shape() != want {
            return Err(Qwen2Error::Shape { name: name.into(), got: info.shape(), want });
        }
        // decoded straight into the tensor's memory, on every intra-op thread: the dense copy of
        // the 1.5B is 1.5 G values, and a Vec copied into a tensor cost a pass over 6 GB more
        let values = Tensor::f_empty(want.as_slice(), (Kind::Float, Device::Cpu))?;
        let n = info.elements() as usize;
        // SAFETY: `values` is a new contiguous f32 tensor of `n` elements that nothing else
        // references while this slice lives.
        let out = unsafe { std::slice::from_raw_parts_mut(values.data_ptr() as *mut f32, n) };
        self.g.dequantize_to(info, out, tch::get_num_threads().max(1) as usize)?;
        Ok(values.f_to_kind(kind)?.f_to_device(self.device)?)
    }

    fn take(&self, name: &str, shape: &[usize]) -> Result<Tensor, Qwen2Error> {
        self.take_as(name, shape, self.kind)
    }

    /// The matrices `names` (each `[rows, cols]`) stacked along their output dimension: kept
    /// quantized as [`Weights`] asks when every part is in a format that way reads, else dense.
    fn linear(&self, names: &[(&str, usize)], cols: usize) -> Result<Linear, Qwen2Error> {
        let infos = names
            .iter()
            .map(|(n, _)| self.g.tensor(n).ok_or_else(|| Qwen2Error::Missing(n.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        let all = |f: fn(GgmlType) -> bool| self.device == Device::Cpu && infos.iter().all(|t| f(t.kind));
        let quantized = match self.weights {
            Weights::Q4 => all(|k| k == GgmlType::Q4K),
            Weights::Gguf | Weights::Hybrid { .. } => all(kquant::supported),
            Weights::Dense | Weights::Auto => false,
        };
        if !quantized {
            return Ok(Linear::Dense(self.dense(names, cols)?));
        }
        // the parts' blocks as stored
        let mut raw = Vec::with_capacity(names.len());
        for ((name, rows), info) in names.iter().zip(&infos) {
            let want = vec![*rows as i64, cols as i64];
            if info.shape() != want {
                return Err(Qwen2Error::Shape { name: name.to_string(), got: info.shape(), want });
            }
            raw.push((info.kind, self.g.read_raw(info)?, *rows));
        }
        if self.weights == Weights::Q4 {
            let parts: Vec<(&[u8], usize)> = raw.iter().map(|(_, b, r)| (b.as_slice(), *r)).collect();
            return Ok(Linear::Int4(Int4Linear::from_q4_k(&parts, cols, self.kind, self.device)?));
        }
        let parts: Vec<_> = raw.iter().map(|(k, b, r)| (*k, b.as_slice(), *r)).collect();
        let blocks = KQuantLinear::new(&parts, cols)?;
        match self.weights {
            Weights::Hybrid { dense_from_rows } => Ok(Linear::Hybrid {
                blocks,
                dense: self.dense(names, cols)?,
                dense_from_rows: dense_from_rows.unwrap_or(PROBE_ROWS[3]) as i64,
            }),
            _ => Ok(Linear::KQuant(blocks)),
        }
    }

    /// The matrices `names` dequantized and stacked along their output dimension.
    fn dense(&self, names: &[(&str, usize)], cols: usize) -> Result<Tensor, Qwen2Error> {
        let parts = names.iter().map(|(n, rows)| self.take(n, &[*rows, cols])).collect::<Result<Vec<_>, _>>()?;
        Ok(Tensor::f_cat(&parts, 0)?)
    }
}

/// A weight matrix, applied as `x · Wᵀ`.
enum Linear {
    Dense(Tensor),
    Int4(Int4Linear),
    KQuant(KQuantLinear),
    /// Both: the dense copy for passes of at least `dense_from_rows` rows, else the blocks.
    Hybrid {
        blocks: KQuantLinear,
        dense: Tensor,
        dense_from_rows: i64,
    },
}

impl Linear {
    fn forward(&self, x: &Tensor) -> R<Tensor> {
        match self {
            Linear::Dense(w) => x.f_linear(w, None::<Tensor>),
            Linear::Int4(l) => l.forward(x),
            Linear::KQuant(l) => l.forward(x),
            Linear::Hybrid { blocks, dense, dense_from_rows } => {
                let cols = x.size().last().copied().unwrap_or(1).max(1);
                if x.numel() as i64 / cols >= *dense_from_rows {
                    x.f_linear(dense, None::<Tensor>)
                } else {
                    blocks.forward(x)
                }
            }
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Linear::Dense(w) => w.numel() * w.kind().elt_size_in_bytes(),
            Linear::Int4(l) => l.bytes(),
            Linear::KQuant(l) => l.bytes(),
            Linear::Hybrid { blocks, dense, .. } => blocks.bytes() + dense.numel() * dense.kind().elt_size_in_bytes(),
        }
    }
}

/// The token embedding: dense rows, or (GGUF weights on the CPU) the file's blocks, of which
/// only the rows looked up are dequantized.
enum Embedding {
    Dense(Tensor),
    Blocks { raw: Vec<u8>, kind: GgmlType, cols: usize, rows: usize },
}

impl Embedding {
    /// Rows `ids` as `[ids, hidden]` in `kind` on `device`.
    fn lookup(&self, ids: &[i64], kind: Kind, device: Device) -> R<Tensor> {
        match self {
            Embedding::Dense(w) => w.f_index_select(0, &Tensor::from_slice(ids).f_to_device(device)?),
            Embedding::Blocks { raw, kind: ty, cols, rows } => {
                let (per_block, block_bytes) = ty.block();
                let row_bytes = cols / per_block * block_bytes;
                let mut out = vec![0f32; ids.len() * cols];
                for (&id, y) in ids.iter().zip(out.chunks_exact_mut(*cols)) {
                    if id < 0 || id as usize >= *rows {
                        return Err(TchError::Shape(format!("token id {id} outside the vocabulary of {rows}")));
                    }
                    let at = id as usize * row_bytes;
                    dequantize_into(*ty, &raw[at..at + row_bytes], y);
                }
                Tensor::from_slice(&out).f_view([ids.len() as i64, *cols as i64])?.f_to_kind(kind)?.f_to_device(device)
            }
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Embedding::Dense(w) => w.numel() * w.kind().elt_size_in_bytes(),
            Embedding::Blocks { raw, .. } => raw.len(),
        }
    }
}

struct RmsNorm {
    weight: Tensor,
    eps: f64,
}

impl RmsNorm {
    fn load(l: &Loader, name: &str, dim: usize, eps: f64) -> Result<Self, Qwen2Error> {
        Ok(Self { weight: l.take_as(name, &[dim], Kind::Float)?, eps })
    }

    /// In fp32, cast back to `x`'s precision.
    fn forward(&self, x: &Tensor) -> R<Tensor> {
        let xf = x.f_to_kind(Kind::Float)?;
        xf.f_rms_norm([self.weight.size()[0]], Some(&self.weight), self.eps)?.f_to_kind(x.kind())
    }
}

struct Attention {
    /// q, k and v stacked: `[(heads + 2·kv_heads)·head_dim, hidden]`, and their biases
    qkv: Linear,
    qkv_bias: Tensor,
    o: Linear,
    heads: i64,
    kv_heads: i64,
    head_dim: i64,
}

impl Attention {
    fn load(l: &Loader, p: &str, c: &Config) -> Result<Self, Qwen2Error> {
        let (h, d, q, kv) = (c.hidden_size, c.head_dim, c.num_heads, c.num_kv_heads);
        let b = |n: &str, rows: usize| l.take(&format!("{p}.attn_{n}.bias"), &[rows]);
        let (wq, wk, wv) = (format!("{p}.attn_q.weight"), format!("{p}.attn_k.weight"), format!("{p}.attn_v.weight"));
        Ok(Self {
            qkv: l.linear(&[(&wq, q * d), (&wk, kv * d), (&wv, kv * d)], h)?,
            qkv_bias: Tensor::f_cat(&[b("q", q * d)?, b("k", kv * d)?, b("v", kv * d)?], 0)?,
            o: l.linear(&[(&format!("{p}.attn_output.weight"), h)], q * d)?,
            heads: q as i64,
            kv_heads: kv as i64,
            head_dim: d as i64,
        })
    }

    /// `cpu_kernels`: the bias, RoPE and the cache store in one call, and a decode step's
    /// attention read from the cache in place ([`cpu_decode`]); else libtorch's ops.
    fn forward(&self, x: &Tensor, layer: usize, step: &Step, cache: &mut KvCache, cpu_kernels: bool) -> R<Tensor> {
        let t = x.size()[0];
        let (h, kv, d) = (self.heads, self.kv_heads, self.head_dim);
        let q = if cpu_kernels {
            // a new tensor of this pass, so it may be changed in place
            let qkv = self.qkv.forward(x)?.f_contiguous()?;
            match cache.pools_mut(layer) {
                // keys and values stored by the same call
                Some((k_cache, v_cache)) => {
                    let store = cpu_decode::Store { k_cache, v_cache, slots: &step.slots };
                    cpu_decode::bias_rope_(&qkv, &self.qkv_bias, &step.cos, &step.sin, h + kv, Some(store))?;
                }
                None => {
                    cpu_decode::bias_rope_(&qkv, &self.qkv_bias, &step.cos, &step.sin, h + kv, None)?;
                    let k = qkv.f_narrow(1, h * d, kv * d)?.f_view([t, kv, d])?;
                    let v = qkv.f_narrow(1, (h + kv) * d, kv * d)?.f_view([t, kv, d])?;
                    cache.write(layer, &step.slots, &k, &v)?;
                }
            }
            qkv.f_narrow(1, 0, h * d)?.f_view([t, h, d])?
        } else {
            let qkv = self.qkv.forward(x)?;
            let (q, k, v) = cpu_decode::reference_bias_rope(&qkv, &self.qkv_bias, &step.cos, &step.sin, h, kv)?;
            cache.write(layer, &step.slots, &k, &v)?;
            q
        };
        let scale = (d as f64).powf(-0.5);
        let out = match &step.decode {
            // one new token per sequence: read from the cache in place where the kernel can
            Some(dec) => match cache.pools(layer).filter(|_| cpu_kernels) {
                Some((kc, vc)) => cpu_decode::paged_decode_attention(&q, kc, vc, &dec.keys, &dec.lens, scale)?,
                None => {
                    let (ks, vs) = cache.gather(layer, &dec.keys)?; // [b, len, kv, d]
                    cpu_decode::reference_decode_attention(&q, &ks, &vs, &dec.mask, scale)?
                }
            },
            // prompt chunks: sequence by sequence, causal within the chunk
            None => {
                let mut outs = Vec::with_capacity(step.seqs.len());
                for s in &step.seqs {
                    let (ks, vs) = cache.gather(layer, &s.keys.f_unsqueeze(0)?)?;
                    let qs = q.f_narrow(0, s.first, s.len)?.f_unsqueeze(0)?.f_transpose(1, 2)?;
                    let (ks, vs) = (ks.f_transpose(1, 2)?, vs.f_transpose(1, 2)?);
                    let o = Tensor::f_scaled_dot_product_attention(
                        &qs,
                        &ks,
                        &vs,
                        s.mask.as_ref(),
                        0.0,
                        s.causal,
                        scale,
                        true,
                    )?;
                    outs.push(o.f_transpose(1, 2)?.f_reshape([s.len, h * d])?);
                }
                Tensor::f_cat(&outs, 0)?
            }
        };
        self.o.forward(&out)
    }
}

/// SwiGLU: `down(silu(gate(x)) · up(x))`.
struct Mlp {
    gate_up: Linear,
    down: Linear,
}

impl Mlp {
    fn load(l: &Loader, p: &str, c: &Config) -> Result<Self, Qwen2Error> {
        let (h, i) = (c.hidden_size, c.intermediate_size);
        Ok(Self {
            gate_up: l.linear(&[(&format!("{p}.ffn_gate.weight"), i), (&format!("{p}.ffn_up.weight"), i)], h)?,
            down: l.linear(&[(&format!("{p}.ffn_down.weight"), h)], i)?,
        })
    }

    /// `cpu_kernels`: the activation and product in one pass ([`cpu_geglu::swiglu`]).
    fn forward(&self, x: &Tensor, cpu_kernels: bool) -> R<Tensor> {
        let gu = self.gate_up.forward(x)?;
        let act = if cpu_kernels { cpu_geglu::swiglu(&gu)? } else { cpu_geglu::reference_swiglu(&gu)? };
        self.down.forward(&act)
    }
}

struct Layer {
    attn_norm: RmsNorm,
    attn: Attention,
    ffn_norm: RmsNorm,
    mlp: Mlp,
}

impl Layer {
    fn forward(&self, x: &Tensor, i: usize, step: &Step, cache: &mut KvCache) -> R<Tensor> {
        let x = x.f_add(&self.attn.forward(&self.attn_norm.forward(x)?, i, step, cache, false)?)?;
        x.f_add(&self.mlp.forward(&self.ffn_norm.forward(&x)?, false)?)
    }

    /// With the CPU kernels: `y` is `x` already normed by `attn_norm`; returns the layer's
    /// output and it normed by `next` (the next layer's `attn_norm`, or the final norm), each
    /// residual add fused with the norm after it.
    fn forward_fused(
        &self,
        x: &Tensor,
        y: &Tensor,
        i: usize,
        step: &Step,
        cache: &mut KvCache,
        next: &RmsNorm,
    ) -> R<(Tensor, Tensor)> {
        let attn = self.attn.forward(y, i, step, cache, true)?;
        let (x, y) = cpu_norm::add_then_rms_norm(x, &attn, &self.ffn_norm.weight, self.ffn_norm.eps)?;
        cpu_norm::add_then_rms_norm(&x, &self.mlp.forward(&y, true)?, &next.weight, next.eps)
    }
}

/// One sequence's share of a forward pass.
#[derive(Debug, Clone)]
pub struct SeqInput<'a> {
    /// The new tokens.
    pub tokens: &'a [u32],
    /// The position of `tokens[0]`: how many of the sequence's tokens are already cached.
    pub start: usize,
    /// The sequence's KV-cache blocks, covering positions `0..start + tokens.len()`.
    pub blocks: &'a [u32],
    /// Whether to return the logits after its last new token.
    pub logits: bool,
}

/// Per-pass tensors shared by every layer.
struct Step {
    cos: Tensor,
    sin: Tensor,
    /// Cache slot of each new token.
    slots: Tensor,
    seqs: Vec<SeqStep>,
    decode: Option<DecodeStep>,
}

struct SeqStep {
    first: i64,
    len: i64,
    /// Slots of positions `0..start + len`.
    keys: Tensor,
    /// Causal mask `[len, start + len]` (none for a single token, or where `causal` says it).
    mask: Option<Tensor>,
    /// A whole prompt from position 0 off the CPU: causal attention without a mask, which lets
    /// CUDA use its fused (FlashAttention) kernel. The CPU keeps the mask, and its numerics.
    causal: bool,
}

struct DecodeStep {
    /// `[batch, longest]` slots, padded.
    keys: Tensor,
    /// `[batch]`: how many keys of each row are real (the first ones).
    lens: Tensor,
    /// `[batch, 1, 1, longest]`: true where a key is real.
    mask: Tensor,
}

pub struct Qwen2 {
    pub config: Config,
    embed: Embedding,
    layers: Vec<Layer>,
    norm: RmsNorm,
    lm_head: Linear,
    inv_freq: Tensor,
    device: Device,
    kind: Kind,
    weights: Weights,
    /// Norms fused with the residual adds, the bias with RoPE and the cache store, and decode
    /// attention read from the cache in place: the CPU kernels, where built, in fp32 or bf16
    /// (`DOCPIPE_DECODER_KERNELS=0`: libtorch's ops, for comparison).
    cpu_kernels: bool,
}

impl Qwen2 {
    pub fn load(g: &Gguf, device: Device, kind: Kind, weights: Weights) -> Result<Self, Qwen2Error> {
        let c = Config::from_gguf(g)?;
        let weights = weights.resolve(g, device, kind)?;
        let l = Loader { g, device, kind, weights };
        let eps = c.rms_norm_eps;
        let mut layers = Vec::with_capacity(c.num_layers);
        for i in 0..c.num_layers {
            let p = format!("blk.{i}");
            layers.push(Layer {
                attn_norm: RmsNorm::load(&l, &format!("{p}.attn_norm.weight"), c.hidden_size, eps)?,
                attn: Attention::load(&l, &p, &c)?,
                ffn_norm: RmsNorm::load(&l, &format!("{p}.ffn_norm.weight"), c.hidden_size, eps)?,
                mlp: Mlp::load(&l, &p, &c)?,
            });
        }
        let blocks = matches!(weights, Weights::Gguf | Weights::Hybrid { .. }) && device == Device::Cpu;
        let embed = match g.tensor("token_embd.weight") {
            Some(t) if blocks => {
                let want = vec![c.vocab_size as i64, c.hidden_size as i64];
                if t.shape() != want {
                    return Err(Qwen2Error::Shape { name: t.name.clone(), got: t.shape(), want });
                }
                let (rows, cols) = (c.vocab_size, c.hidden_size);
                Embedding::Blocks { raw: g.read_raw(t)?, kind: t.kind, cols, rows }
            }
            _ => Embedding::Dense(l.take("token_embd.weight", &[c.vocab_size, c.hidden_size])?),
        };
        // tied embeddings unless the file carries its own output matrix
        let lm_head = match (g.tensor("output.weight"), &embed) {
            (Some(_), _) => l.linear(&[("output.weight", c.vocab_size)], c.hidden_size)?,
            (None, Embedding::Dense(w)) => Linear::Dense(w.shallow_clone()),
            (None, Embedding::Blocks { .. }) => l.linear(&[("token_embd.weight", c.vocab_size)], c.hidden_size)?,
        };
        let d = c.head_dim as i64;
        let exps = Tensor::f_arange_start_step(0, d, 2, (Kind::Double, device))?.f_div_scalar(d as f64)?;
        let inv_freq = Tensor::f_full([d / 2], c.rope_theta, (Kind::Double, device))?
            .f_pow(&exps)?
            .f_reciprocal()?
            .f_to_kind(Kind::Float)?;
        Ok(Self {
            norm: RmsNorm::load(&l, "output_norm.weight", c.hidden_size, eps)?,
            config: c,
            embed,
            layers,
            lm_head,
            inv_freq,
            device,
            kind,
            weights,
            cpu_kernels: device == Device::Cpu
                && cpu_norm::available()
                && matches!(kind, Kind::Float | Kind::BFloat16)
                && std::env::var_os("DOCPIPE_DECODER_KERNELS").is_none_or(|v| v != "0"),
        })
    }

    /// The same model run op by op in libtorch on the CPU too (what CUDA runs), instead of the
    /// CPU kernels: for comparison and for the test that the two agree.
    pub fn without_cpu_kernels(mut self) -> Self {
        self.cpu_kernels = false;
        self
    }

    /// Whether the CPU kernels run the layers ([`Qwen2::without_cpu_kernels`]).
    pub fn uses_cpu_kernels(&self) -> bool {
        self.cpu_kernels
    }

    /// How the weight matrices are held (`Auto` resolved).
    pub fn weights(&self) -> Weights {
        self.weights
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    pub fn device(&self) -> Device {
        self.device
    }

    /// Bytes of the weights as held in memory.
    pub fn weight_bytes(&self) -> usize {
        let elt = self.kind.elt_size_in_bytes();
        let mut bytes = self.embed.bytes() + self.norm.weight.numel() * 4;
        let tied = matches!((&self.lm_head, &self.embed), (Linear::Dense(w), Embedding::Dense(e)) if w.data_ptr() == e.data_ptr());
        if !tied {
            bytes += self.lm_head.bytes();
        }
        for l in &self.layers {
            bytes += l.attn.qkv.bytes() + l.attn.qkv_bias.numel() * elt + l.attn.o.bytes();
            bytes += l.mlp.gate_up.bytes() + l.mlp.down.bytes();
            bytes += (l.attn_norm.weight.numel() + l.ffn_norm.weight.numel()) * 4;
        }
        bytes
    }

    /// Run the new tokens of `seqs` through the model, writing their keys and values into
    /// `cache`; returns `[n, vocab]` fp32 logits, one row per sequence with `logits` set.
    pub fn forward(&self, seqs: &[SeqInput], cache: &mut KvCache) -> R<Tensor> {
        let _guard = tch::no_grad_guard();
        let step = self.step(seqs, cache.block_size())?;
        let ids: Vec<i64> = seqs.iter().flat_map(|s| s.tokens.iter().map(|&t| t as i64)).collect();
        let mut x = self.embed.lookup(&ids, self.kind, self.device)?;
        // with the CPU kernels every row leaves the last layer normed (`normed`); else only
        // the rows whose logits are asked for are normed, below
        let mut normed = None;
        if self.cpu_kernels {
            let mut y = match self.layers.first() {
                Some(l) => cpu_norm::rms_norm(&x, &l.attn_norm.weight, l.attn_norm.eps)?,
                None => x.shallow_clone(),
            };
            for (i, layer) in self.layers.iter().enumerate() {
                let next = self.layers.get(i + 1).map_or(&self.norm, |l| &l.attn_norm);
                (x, y) = layer.forward_fused(&x, &y, i, &step, cache, next)?;
            }
            normed = Some(y);
        } else {
            for (i, layer) in self.layers.iter().enumerate() {
                x = layer.forward(&x, i, &step, cache)?;
            }
        }
        let mut last = Vec::new();
        let mut first = 0i64;
        for s in seqs {
            first += s.tokens.len() as i64;
            if s.logits {
                last.push(first - 1);
            }
        }
        if last.is_empty() {
            return Tensor::f_zeros([0, self.config.vocab_size as i64], (Kind::Float, self.device));
        }
        let last = Tensor::from_slice(&last).f_to_device(self.device)?;
        let rows = match normed {
            Some(y) => y.f_index_select(0, &last)?,
            None => self.norm.forward(&x.f_index_select(0, &last)?)?,
        };
        self.lm_head.forward(&rows)?.f_to_kind(Kind::Float)
    }

    fn step(&self, seqs: &[SeqInput], block_size: usize) -> R<Step> {
        let dev = self.device;
        let slot = |s: &SeqInput, p: usize| (s.blocks[p / block_size] as usize * block_size + p % block_size) as i64;
        let mut positions = Vec::new();
        let mut slots = Vec::new();
        for s in seqs {
            for p in s.start..s.start + s.tokens.len() {
                positions.push(p as i64);
                slots.push(slot(s, p));
            }
        }
        let pos = Tensor::from_slice(&positions).f_to_device(dev)?.f_to_kind(Kind::Float)?;
        let freqs = pos.f_outer(&self.inv_freq)?;
        let emb = Tensor::f_cat(&[&freqs, &freqs], -1)?.f_unsqueeze(1)?; // [t, 1, head_dim]
        let (cos, sin) = (emb.f_cos()?, emb.f_sin()?);
        let slots = Tensor::from_slice(&slots).f_to_device(dev)?;
        let all_decode = seqs.iter().all(|s| s.tokens.len() == 1);
        let mut step = Step { cos, sin, slots, seqs: Vec::new(), decode: None };
        if all_decode {
            let longest = seqs.iter().map(|s| s.start + 1).max().unwrap_or(1);
            let mut keys = Vec::with_capacity(seqs.len() * longest);
            let mut mask = Vec::with_capacity(seqs.len() * longest);
            for s in seqs {
                let n = s.start + 1;
                for p in 0..longest {
                    keys.push(slot(s, p.min(n - 1)));
                    mask.push(p < n);
                }
            }
            let b = seqs.len() as i64;
            let lens: Vec<i64> = seqs.iter().map(|s| s.start as i64 + 1).collect();
            step.decode = Some(DecodeStep {
                keys: Tensor::from_slice(&keys).f_view([b, longest as i64])?.f_to_device(dev)?,
                lens: Tensor::from_slice(&lens).f_to_device(dev)?,
                mask: Tensor::from_slice(&mask).f_view([b, 1, 1, longest as i64])?.f_to_device(dev)?,
            });
            return Ok(step);
        }
        let mut first = 0i64;
        for s in seqs {
            let len = s.tokens.len() as i64;
            let total = s.start + s.tokens.len();
            let keys: Vec<i64> = (0..total).map(|p| slot(s, p)).collect();
            let causal = len > 1 && s.start == 0 && dev != Device::Cpu;
            let mask = if len > 1 && !causal {
                // query i (position start + i) sees keys 0..=start + i
                let q = Tensor::f_arange(len, (Kind::Int64, dev))?.f_add_scalar(s.start as i64)?.f_unsqueeze(1)?;
                let k = Tensor::f_arange(total as i64, (Kind::Int64, dev))?.f_unsqueeze(0)?;
                Some(k.f_le_tensor(&q)?)
            } else {
                None
            };
            step.seqs.push(SeqStep { first, len, keys: Tensor::from_slice(&keys).f_to_device(dev)?, mask, causal });
            first += len;
        }
        Ok(step)
    }
}

#[cfg(test)]
mod tests {
    use super::Weights;

    #[test]
    fn weight_formats_parse_and_print_back() {
        for s in ["auto", "dense", "q4", "gguf", "hybrid", "hybrid:32"] {
            let w: Weights = s.parse().unwrap();
            assert_eq!(w.to_string(), s);
        }
        assert_eq!("hybrid:64".parse(), Ok(Weights::Hybrid { dense_from_rows: Some(64) }));
        for bad in ["hybrid:0", "hybrid:x", "int4", ""] {
            let err = bad.parse::<Weights>().unwrap_err();
            assert!(err.contains("unknown weight format"), "{bad}: {err}");
        }
    }
}
