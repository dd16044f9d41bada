//! Gemma-3 text encoder, as EmbeddingGemma runs it: bidirectional attention, a sliding
//! window on most layers, full attention on the rest.
//!
//! ```text
//! ids ─► embed × √hidden ─► [ layer × N ] ─► norm ─► hidden states
//!
//! layer:  x ─► input_norm ─► attention ─► post_attn_norm ─► + x
//!           ─► pre_ffw_norm ─► GeGLU MLP ─► post_ffw_norm ─► + x
//! attention: qkv proj ─► q_norm/k_norm ─► RoPE(θ by layer type)
//!            ─► softmax(q·kᵀ / √query_pre_attn_scalar + mask)·v ─► o proj
//! mask:  full layers      — every real (non-padding) token
//!        sliding layers   — real tokens with |i − j| < sliding_window / 2 + 1
//!                           (a window of `sliding_window` centred on the query)
//! ```
//! Every size comes from `config.json`; RMSNorms use Gemma's `x · (1 + w)` in fp32 (on CUDA,
//! libtorch's fused `rms_norm` with `1 + w` in the model's precision; on the CPU, our one-pass
//! kernel, fused with the residual add before the next norm: [`cpu_norm`]); GeGLU on the
//! CPU is one pass too ([`cpu_geglu`]).
//!
//! Attention runs in one of these forms ([`AttentionImpl`]), all computing the same thing:
//! `Packed` (CUDA, fp16/bf16) lays the real tokens end to end and runs FlashAttention over
//! each sequence, with the window on sliding layers — no padding, no work outside the band;
//! `PackedGemm` (the CPU in bf16, without AMX) is the same layout with attention from plain
//! GEMMs, block by block over the band, scores centred before their bf16 rounding
//! ([`gemm_attention`]); `PackedReference` is the same layout with libtorch's attention one
//! sequence at a time (how the packing is tested on the CPU); `Banded` computes sliding layers
//! block by block, only near the diagonal, on the padded batch (CUDA without FlashAttention);
//! `PackedBanded` (the CPU in fp32 or with AMX) is the packed layout with attention one
//! sequence at a time, banded on sliding layers and unmasked on full ones, so padding costs
//! nothing anywhere (a batch too short to band, such as segments, stays padded); `Dense` is
//! the plain masked matrix, the reference the others are tested against.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;
use tch::{Device, Kind, TchError, Tensor};

use crate::{cpu_geglu, cpu_norm, flash, gemm_attention};

type R<T> = Result<T, TchError>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LayerType {
    SlidingAttention,
    FullAttention,
}

/// The fields of `config.json` this encoder uses.
#[derive(Debug, Clone, Deserialize)]
pub struct Config {
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub rms_norm_eps: f64,
    pub rope_theta: f64,
    pub rope_local_base_freq: f64,
    pub sliding_window: usize,
    pub layer_types: Vec<LayerType>,
    pub query_pre_attn_scalar: f64,
    pub vocab_size: usize,
    pub max_position_embeddings: usize,
    pub hidden_activation: String,
    #[serde(default)]
    pub use_bidirectional_attention: bool,
    #[serde(default)]
    pub pad_token_id: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("cannot read {path}: {message}")]
    Read { path: String, message: String },
    #[error("unsupported config: {0}")]
    Unsupported(String),
    #[error("weight {0} missing from the checkpoint")]
    MissingWeight(String),
    #[error("weight {name} has shape {got:?}, expected {want:?}")]
    Shape { name: String, got: Vec<i64>, want: Vec<i64> },
    #[error("torch: {0}")]
    Torch(#[from] TchError),
}

impl Config {
    /// Sliding layers let token i see token j iff |i − j| < `window_reach()`.
    ///
    /// A bidirectional window of `sliding_window` tokens is centred on the query, so it
    /// reaches `sliding_window / 2 + 1` (exclusive) to each side: 257 for EmbeddingGemma's 512.
    /// This is what the reference (transformers' Gemma3 config with
    /// `use_bidirectional_attention`) computes; a causal window reaches `sliding_window` back.
    pub fn window_reach(&self) -> usize {
        if self.use_bidirectional_attention {
            self.sliding_window / 2 + 1
        } else {
            self.sliding_window
        }
    }

    pub fn from_file(path: &Path) -> Result<Self, ModelError> {
        let read_err = |message: String| ModelError::Read { path: path.display().to_string(), message };
        let raw = std::fs::read_to_string(path).map_err(|e| read_err(e.to_string()))?;
        let cfg: Config = serde_json::from_str(&raw).map_err(|e| read_err(e.to_string()))?;
        if cfg.layer_types.len() != cfg.num_hidden_layers {
            return Err(ModelError::Unsupported(format!(
                "{} layer_types for {} layers",
                cfg.layer_types.len(),
                cfg.num_hidden_layers
            )));
        }
        if cfg.hidden_activation != "gelu_pytorch_tanh" {
            return Err(ModelError::Unsupported(format!("hidden_activation {}", cfg.hidden_activation)));
        }
        if cfg.num_key_value_heads == 0 || !cfg.num_attention_heads.is_multiple_of(cfg.num_key_value_heads) {
            return Err(ModelError::Unsupported("heads not a multiple of KV heads".into()));
        }
        Ok(cfg)
    }
}

/// Named weights from a safetensors file, converted on the way out.
pub struct Weights {
    map: HashMap<String, Tensor>,
    device: Device,
    kind: Kind,
}

impl Weights {
    pub fn load(path: &Path, device: Device, kind: Kind) -> Result<Self, ModelError> {
        let tensors = Tensor::read_safetensors(path)
            .map_err(|e| ModelError::Read { path: path.display().to_string(), message: e.to_string() })?;
        Ok(Self { map: tensors.into_iter().collect(), device, kind })
    }

    /// Take `name`, check its shape, move it to the device in the model's precision.
    pub fn take(&mut self, name: &str, shape: &[usize]) -> Result<Tensor, ModelError> {
        self.take_as(name, shape, self.kind)
    }

    pub fn take_as(&mut self, name: &str, shape: &[usize], kind: Kind) -> Result<Tensor, ModelError> {
        let t = self.map.remove(name).ok_or_else(|| ModelError::MissingWeight(name.into()))?;
        let want: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        if t.size() != want {
            return Err(ModelError::Shape { name: name.into(), got: t.size(), want });
        }
        Ok(t.f_to_device(self.device)?.f_to_kind(kind)?)
    }
}

/// Gemma RMSNorm: `x / rms(x) · (1 + w)`, computed in fp32 and cast back.
struct RmsNorm {
    scale: Tensor, // 1 + w, fp32
    /// `1 + w` in the model's precision, for libtorch's fused kernel (CUDA): one pass over
    /// `x` instead of six. `DOCPIPE_FUSED_RMSNORM=0` turns it off (to compare).
    fused: Option<Tensor>,
    /// On the CPU, our one-pass kernel ([`cpu_norm`]); the same switch turns it off.
    cpu_kernel: bool,
    eps: f64,
}

impl RmsNorm {
    fn load(w: &mut Weights, name: &str, dim: usize, eps: f64) -> Result<Self, ModelError> {
        let weight = w.take_as(name, &[dim], Kind::Float)?;
        let scale = weight.f_add_scalar(1.0)?;
        let fused_on = std::env::var("DOCPIPE_FUSED_RMSNORM").map_or(true, |v| v != "0");
        let fused = (w.device.is_cuda() && fused_on).then(|| scale.f_to_kind(w.kind)).transpose()?;
        let cpu_kernel = w.device == Device::Cpu && fused_on && cpu_norm::available();
        Ok(Self { scale, fused, cpu_kernel, eps })
    }

    fn forward(&self, x: &Tensor) -> R<Tensor> {
        if let Some(w) = &self.fused {
            return x.f_rms_norm([w.size()[0]], Some(w), self.eps);
        }
        if self.cpu_kernel {
            return cpu_norm::rms_norm(x, &self.scale, self.eps);
        }
        let xf = x.f_to_kind(Kind::Float)?;
        let var = xf.f_pow_tensor_scalar(2)?.f_mean_dim(-1, true, None::<Kind>)?;
        xf.f_mul(&var.f_add_scalar(self.eps)?.f_rsqrt()?)?.f_mul(&self.scale)?.f_to_kind(x.kind())
    }

    /// q/k norm then RoPE on `[..., heads, head_dim]` (one pass on the CPU).
    fn forward_rope(&self, x: &Tensor, rope: &(Tensor, Tensor)) -> R<Tensor> {
        if self.cpu_kernel {
            let size = x.size();
            let (n, d) = (size[size.len() - 2], size[size.len() - 1]);
            let (cos, sin) = (rope.0.f_reshape([-1, d])?, rope.1.f_reshape([-1, d])?);
            return cpu_norm::rms_norm_rope(&x.f_reshape([-1, n, d])?, &self.scale, self.eps, &cos, &sin)?
                .f_view(size.as_slice());
        }
        apply_rope(&self.forward(x)?, &rope.0, &rope.1)
    }

    /// The residual step `x + norm(h)` (in one pass on the CPU).
    fn add_to(&self, x: &Tensor, h: &Tensor) -> R<Tensor> {
        if self.cpu_kernel {
            return cpu_norm::add_rms_norm(x, h, &self.scale, self.eps);
        }
        x.f_add(&self.forward(h)?)
    }

    /// The residual step and `next`'s norm of the sum: `(sum, next(sum))`, one pass on the CPU.
    fn add_to_then(&self, x: &Tensor, h: &Tensor, next: &RmsNorm) -> R<(Tensor, Tensor)> {
        if self.cpu_kernel {
            return cpu_norm::add_rms_norm_then(x, h, &self.scale, &next.scale, self.eps);
        }
        let sum = self.add_to(x, h)?;
        let normed = next.forward(&sum)?;
        Ok((sum, normed))
    }
}

/// Rotary position embedding tables for one base frequency.
struct Rope {
    inv_freq: Tensor, // [head_dim / 2], fp32
}

impl Rope {
    fn new(theta: f64, head_dim: usize, device: Device) -> R<Self> {
        let exps =
            Tensor::f_arange_start_step(0, head_dim as i64, 2, (Kind::Float, device))?.f_div_scalar(head_dim as f64)?;
        let inv_freq =
            Tensor::f_full([head_dim as i64 / 2], theta, (Kind::Float, device))?.f_pow(&exps)?.f_reciprocal()?;
        Ok(Self { inv_freq })
    }

    /// `(cos, sin)` of shape `[len, 1, head_dim]` in `kind` (broadcast over heads), for
    /// positions `0..len`, or for the given positions (`[tokens]` int64) when packed.
    fn tables(&self, len: i64, positions: Option<&Tensor>, kind: Kind) -> R<(Tensor, Tensor)> {
        let pos = Tensor::f_arange(len, (Kind::Float, self.inv_freq.device()))?;
        let freqs = pos.f_outer(&self.inv_freq)?;
        let emb = Tensor::f_cat(&[&freqs, &freqs], -1)?;
        let emb = match positions {
            Some(p) => emb.f_index_select(0, p)?,
            None => emb,
        }
        .f_unsqueeze(1)?;
        Ok((emb.f_cos()?.f_to_kind(kind)?, emb.f_sin()?.f_to_kind(kind)?))
    }
}

/// `x·cos + rotate_half(x)·sin` on `[..., len, heads, head_dim]`.
fn apply_rope(x: &Tensor, cos: &Tensor, sin: &Tensor) -> R<Tensor> {
    let half = x.size()[x.dim() - 1] / 2;
    let x1 = x.f_narrow(-1, 0, half)?;
    let x2 = x.f_narrow(-1, half, half)?;
    let rotated = Tensor::f_cat(&[&x2.f_neg()?, &x1], -1)?;
    x.f_mul(cos)?.f_add(&rotated.f_mul(sin)?)
}

struct Attention {
    /// q, k and v projections stacked: `[(heads + 2·kv_heads)·head_dim, hidden]`, one GEMM
    qkv_proj: Tensor,
    o_proj: Tensor,
    q_norm: RmsNorm,
    k_norm: RmsNorm,
    heads: i64,
    kv_heads: i64,
    head_dim: i64,
    scale: f64,
}

impl Attention {
    fn load(w: &mut Weights, p: &str, c: &Config) -> Result<Self, ModelError> {
        let (h, d, q, kv) = (c.hidden_size, c.head_dim, c.num_attention_heads, c.num_key_value_heads);
        let q_proj = w.take(&format!("{p}.q_proj.weight"), &[q * d, h])?;
        let k_proj = w.take(&format!("{p}.k_proj.weight"), &[kv * d, h])?;
        let v_proj = w.take(&format!("{p}.v_proj.weight"), &[kv * d, h])?;
        Ok(Self {
            qkv_proj: Tensor::f_cat(&[q_proj, k_proj, v_proj], 0)?,
            o_proj: w.take(&format!("{p}.o_proj.weight"), &[h, q * d])?,
            q_norm: RmsNorm::load(w, &format!("{p}.q_norm.weight"), d, c.rms_norm_eps)?,
            k_norm: RmsNorm::load(w, &format!("{p}.k_norm.weight"), d, c.rms_norm_eps)?,
            heads: q as i64,
            kv_heads: kv as i64,
            head_dim: d as i64,
            scale: c.query_pre_attn_scalar.powf(-0.5),
        })
    }

    /// `x`: `[batch, len, hidden]`, or `[tokens, hidden]` with a packed mask.
    fn forward(&self, x: &Tensor, rope: &(Tensor, Tensor), mask: &Mask) -> R<Tensor> {
        let size = x.size();
        let lead = &size[..size.len() - 1];
        let qkv = x.f_linear(&self.qkv_proj, None::<Tensor>)?;
        // heads [first, first + n) of the stacked projection: `[..., len, n, head_dim]`
        let heads = |first: i64, n: i64| -> R<Tensor> {
            let shape: Vec<i64> = lead.iter().copied().chain([n, self.head_dim]).collect();
            qkv.f_narrow(-1, first * self.head_dim, n * self.head_dim)?.f_view(shape.as_slice())
        };
        let (h, kv) = (self.heads, self.kv_heads);
        let q = self.q_norm.forward_rope(&heads(0, h)?, rope)?;
        let k = self.k_norm.forward_rope(&heads(h, kv)?, rope)?;
        let v = heads(h + kv, kv)?;
        let out = match mask {
            Mask::Packed { cu_seqlens, max_len, window, kernel } => match kernel {
                PackedKernel::Flash => flash::varlen(&q, &k, &v, cu_seqlens, *max_len, self.scale, *window)
                    .map_err(|e| TchError::Torch(e.to_string()))?,
                PackedKernel::Gemm => gemm_attention::varlen(&q, &k, &v, cu_seqlens, self.scale, *window)?,
                PackedKernel::Reference => flash::varlen_reference(&q, &k, &v, cu_seqlens, self.scale, *window)?,
            },
            Mask::Dense(m) => {
                let (q, k, v) = (q.f_transpose(1, 2)?, k.f_transpose(1, 2)?, v.f_transpose(1, 2)?);
                let (k, v) = (self.share_kv(&k)?, self.share_kv(&v)?);
                Tensor::f_scaled_dot_product_attention(&q, &k, &v, Some(m), 0.0, false, self.scale, false)?
                    .f_transpose(1, 2)?
            }
            Mask::Banded { block, mask } => {
                let (q, k, v) = (q.f_transpose(1, 2)?, k.f_transpose(1, 2)?, v.f_transpose(1, 2)?);
                self.banded(&q, &k, &v, *block, mask)?.f_transpose(1, 2)?
            }
            Mask::PerSequence(seqs) => self.per_sequence(&q, &k, &v, seqs)?,
        };
        let shape: Vec<i64> = lead.iter().copied().chain([h * self.head_dim]).collect();
        out.f_reshape(shape.as_slice())?.f_linear(&self.o_proj, None::<Tensor>)
    }

    /// Packed `[tokens, heads, head_dim]` q/k/v, attention one sequence at a time in the
    /// padded forms (no mask on full layers, banded or a dense window on sliding ones): the
    /// projections and the MLP see only real tokens, and each sequence's attention only its
    /// own length (rounded up to whole blocks when banded).
    fn per_sequence(&self, q: &Tensor, k: &Tensor, v: &Tensor, seqs: &[SeqAttention]) -> R<Tensor> {
        let mut out = Vec::with_capacity(seqs.len());
        for s in seqs {
            // one sequence as `[1, heads, len, head_dim]`, padded to `pad` more positions
            let part = |x: &Tensor, pad: i64| -> R<Tensor> {
                let y = x.f_narrow(0, s.start, s.len)?.f_transpose(0, 1)?.f_unsqueeze(0)?;
                if pad > 0 {
                    y.f_constant_pad_nd([0, 0, 0, pad])
                } else {
                    Ok(y)
                }
            };
            let sdpa = |mask: Option<&Tensor>| -> R<Tensor> {
                let (k, v) = (self.share_kv(&part(k, 0)?)?, self.share_kv(&part(v, 0)?)?);
                Tensor::f_scaled_dot_product_attention(&part(q, 0)?, &k, &v, mask, 0.0, false, self.scale, false)
            };
            let o = match &s.keys {
                SeqKeys::All => sdpa(None)?,
                SeqKeys::Window(mask) => sdpa(Some(mask))?,
                SeqKeys::Band { block, padded, mask } => {
                    let pad = padded - s.len;
                    self.banded(&part(q, pad)?, &part(k, pad)?, &part(v, pad)?, *block, mask)?.f_narrow(2, 0, s.len)?
                }
            };
            out.push(o.f_squeeze_dim(0)?.f_transpose(0, 1)?); // [len, heads, head_dim]
        }
        Tensor::f_cat(&out, 0)
    }

    /// Grouped-query attention: every query head of a group reads the same K/V head.
    /// `[n, kv_heads, len, head_dim]` → `[n, heads, len, head_dim]`.
    fn share_kv(&self, t: &Tensor) -> R<Tensor> {
        if self.kv_heads == self.heads {
            return Ok(t.shallow_clone());
        }
        let (n, len) = (t.size()[0], t.size()[2]);
        let rep = self.heads / self.kv_heads;
        t.f_unsqueeze(2)?.f_expand([n, self.kv_heads, rep, len, self.head_dim], false)?.f_reshape([
            n,
            self.heads,
            len,
            self.head_dim,
        ])
    }

    /// Sliding-window attention that computes only the band: the sequence is cut into blocks
    /// of `block` queries, and each block attends to itself and its two neighbour blocks
    /// (`3 × block` keys) instead of all `len` keys. Exact when `block ≥ reach − 1`.
    fn banded(&self, q: &Tensor, k: &Tensor, v: &Tensor, block: i64, mask: &Tensor) -> R<Tensor> {
        let (b, h, l, d) = (q.size()[0], self.heads, q.size()[2], self.head_dim);
        let nb = l / block;
        // [b, h, l, d] → [b·nb, h, block, d]
        let qb = q.f_reshape([b, h, nb, block, d])?.f_transpose(1, 2)?.f_reshape([b * nb, h, block, d])?;
        // keys of blocks i−1, i, i+1: pad one block on each side, then a sliding view
        let neighbours = |t: &Tensor| -> R<Tensor> {
            let kv = t.size()[1];
            let w = t.f_constant_pad_nd([0, 0, block, block])?.f_unfold(2, 3 * block, block)?; // [b, kv, nb, d, 3·block]
            let w = w.f_permute([0, 2, 1, 4, 3])?.f_reshape([b * nb, kv, 3 * block, d])?;
            self.share_kv(&w)
        };
        let (kb, vb) = (neighbours(k)?, neighbours(v)?);
        let out = Tensor::f_scaled_dot_product_attention(&qb, &kb, &vb, Some(mask), 0.0, false, self.scale, false)?;
        out.f_view([b, nb, h, block, d])?.f_transpose(1, 2)?.f_reshape([b, h, l, d])
    }
}

/// GeGLU: `down(gelu_tanh(gate(x)) · up(x))`.
struct Mlp {
    /// gate and up projections stacked: `[2·intermediate, hidden]`, one GEMM
    gate_up: Tensor,
    down: Tensor,
    /// On the CPU, the activation in one pass ([`cpu_geglu`]); `DOCPIPE_FUSED_GEGLU=0` turns
    /// it off (to compare).
    cpu_kernel: bool,
}

impl Mlp {
    fn load(w: &mut Weights, p: &str, c: &Config) -> Result<Self, ModelError> {
        let (h, i) = (c.hidden_size, c.intermediate_size);
        let gate = w.take(&format!("{p}.gate_proj.weight"), &[i, h])?;
        let up = w.take(&format!("{p}.up_proj.weight"), &[i, h])?;
        Ok(Self {
            gate_up: Tensor::f_cat(&[gate, up], 0)?,
            down: w.take(&format!("{p}.down_proj.weight"), &[h, i])?,
            cpu_kernel: w.device == Device::Cpu
                && cpu_norm::available()
                && std::env::var("DOCPIPE_FUSED_GEGLU").map_or(true, |v| v != "0"),
        })
    }

    fn forward(&self, x: &Tensor) -> R<Tensor> {
        let gate_up = x.f_linear(&self.gate_up, None::<Tensor>)?;
        let act = if self.cpu_kernel { cpu_geglu::geglu(&gate_up)? } else { cpu_geglu::reference(&gate_up)? };
        act.f_linear(&self.down, None::<Tensor>)
    }
}

struct Layer {
    kind: LayerType,
    input_norm: RmsNorm,
    attn: Attention,
    post_attn_norm: RmsNorm,
    pre_ffw_norm: RmsNorm,
    mlp: Mlp,
    post_ffw_norm: RmsNorm,
}

impl Layer {
    fn load(w: &mut Weights, i: usize, c: &Config) -> Result<Self, ModelError> {
        let p = format!("layers.{i}");
        let norm =
            |w: &mut Weights, n: &str| RmsNorm::load(w, &format!("{p}.{n}.weight"), c.hidden_size, c.rms_norm_eps);
        Ok(Self {
            kind: c.layer_types[i],
            input_norm: norm(w, "input_layernorm")?,
            attn: Attention::load(w, &format!("{p}.self_attn"), c)?,
            post_attn_norm: norm(w, "post_attention_layernorm")?,
            pre_ffw_norm: norm(w, "pre_feedforward_layernorm")?,
            mlp: Mlp::load(w, &format!("{p}.mlp"), c)?,
            post_ffw_norm: norm(w, "post_feedforward_layernorm")?,
        })
    }

    fn forward(&self, x: &Tensor, rope: &(Tensor, Tensor), mask: &Mask) -> R<Tensor> {
        let attn = self.attn.forward(&self.input_norm.forward(x)?, rope, mask)?;
        let (x, mlp_in) = self.post_attn_norm.add_to_then(x, &attn, &self.pre_ffw_norm)?;
        self.post_ffw_norm.add_to(&x, &self.mlp.forward(&mlp_in)?)
    }
}

/// Which keys each query may attend to.
enum Mask {
    /// Additive (0 or −∞, in the model's precision) `[batch, 1, len, len]`.
    Dense(Tensor),
    /// Additive `[batch · blocks, 1, block, 3 · block]` (see [`Attention::banded`]).
    Banded { block: i64, mask: Tensor },
    /// Packed tokens: sequences delimited by `cu_seqlens`, keys within `window` each side.
    Packed { cu_seqlens: Tensor, max_len: i64, window: Option<i64>, kernel: PackedKernel },
    /// Packed tokens, attention computed one sequence at a time (see
    /// [`Attention::per_sequence`]).
    PerSequence(Vec<SeqAttention>),
}

/// One sequence of a packed batch: its tokens `start..start + len`, and its keys.
struct SeqAttention {
    start: i64,
    len: i64,
    keys: SeqKeys,
}

/// Which keys a sequence's queries see, within the sequence (bidirectional).
enum SeqKeys {
    /// All of them (full layers): no mask.
    All,
    /// Those within the window, as a dense additive `[1, 1, len, len]` mask.
    Window(Tensor),
    /// Those within the window, banded (see [`Attention::banded`]) over the sequence padded to
    /// `padded` positions (whole blocks); mask `[blocks, 1, block, 3 · block]`.
    Band { block: i64, padded: i64, mask: Tensor },
}

impl SeqKeys {
    /// The same keys, sharing the mask's storage.
    fn shallow_clone(&self) -> Self {
        match self {
            Self::All => Self::All,
            Self::Window(m) => Self::Window(m.shallow_clone()),
            Self::Band { block, padded, mask } => {
                Self::Band { block: *block, padded: *padded, mask: mask.shallow_clone() }
            }
        }
    }
}

/// What computes attention over packed tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PackedKernel {
    /// [`flash::varlen`]: FlashAttention-2 (CUDA, fp16/bf16)
    Flash,
    /// [`gemm_attention::varlen`]: GEMMs block by block (the CPU's fast path)
    Gemm,
    /// [`flash::varlen_reference`]: libtorch's attention, one sequence at a time
    Reference,
}

/// The packed layout's windows are symmetric (|i − j| ≤ w); a causal model would need more.
const PACKED_NEEDS_BIDIRECTIONAL: &str = "packed attention is implemented for bidirectional encoders only";

/// How attention is computed; every form gives the same outputs (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttentionImpl {
    Packed,
    PackedGemm,
    PackedReference,
    PackedBanded,
    Banded,
    Dense,
}

impl std::fmt::Display for AttentionImpl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Packed => "packed",
            Self::PackedGemm => "packed-gemm",
            Self::PackedReference => "packed-reference",
            Self::PackedBanded => "packed-banded",
            Self::Banded => "banded",
            Self::Dense => "dense",
        })
    }
}

impl std::str::FromStr for AttentionImpl {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "packed" | "flash" => Ok(Self::Packed),
            "packed-gemm" | "gemm" => Ok(Self::PackedGemm),
            "packed-reference" => Ok(Self::PackedReference),
            "packed-banded" => Ok(Self::PackedBanded),
            "banded" => Ok(Self::Banded),
            "dense" => Ok(Self::Dense),
            _ => Err(format!(
                "unknown attention {s:?} (expected packed, packed-gemm, packed-reference, packed-banded, banded or dense)"
            )),
        }
    }
}

/// The encoder: token ids in, final hidden states out.
pub struct Gemma3Encoder {
    pub config: Config,
    embed_tokens: Tensor,
    embed_scale: Tensor,
    layers: Vec<Layer>,
    norm: RmsNorm,
    rope_global: Rope,
    rope_local: Rope,
    device: Device,
    kind: Kind,
    attention: AttentionImpl,
    /// Why `Packed` cannot run here, if it cannot.
    packed_unavailable: Option<String>,
}

impl Gemma3Encoder {
    pub fn load(config: Config, weights: &mut Weights) -> Result<Self, ModelError> {
        let (device, kind) = (weights.device, weights.kind);
        let embed_tokens = weights.take("embed_tokens.weight", &[config.vocab_size, config.hidden_size])?;
        // HF keeps √hidden as a tensor cast to the weights' dtype (rounded in bf16).
        let embed_scale =
            Tensor::f_from_slice(&[(config.hidden_size as f64).sqrt()])?.f_to_kind(kind)?.f_to_device(device)?;
        let layers =
            (0..config.num_hidden_layers).map(|i| Layer::load(weights, i, &config)).collect::<Result<_, _>>()?;
        let norm = RmsNorm::load(weights, "norm.weight", config.hidden_size, config.rms_norm_eps)?;
        let rope_global = Rope::new(config.rope_theta, config.head_dim, device)?;
        let rope_local = Rope::new(config.rope_local_base_freq, config.head_dim, device)?;
        let (heads, kv_heads, head_dim) =
            (config.num_attention_heads as i64, config.num_key_value_heads as i64, config.head_dim as i64);
        let window = config.window_reach() as i64 - 1;
        let packed_unavailable = if !config.use_bidirectional_attention {
            Some(PACKED_NEEDS_BIDIRECTIONAL.to_string())
        } else {
            flash::available(device, kind, heads, kv_heads, head_dim, window).err()
        };
        // CPU: GEMM attention in reduced precision, where bf16 GEMMs outrun libtorch's attention
        // kernel (it keeps q·kᵀ in fp32 unless the CPU has AMX tiles); in fp32 both run on the
        // same fp32 GEMMs and banded was as fast. On AMX banded was faster (see docs/benchmarks.md).
        let gemm_pays = !device.is_cuda()
            && kind != Kind::Float
            && config.use_bidirectional_attention
            && !crate::device::cpu_has_amx();
        // Elsewhere on the CPU, banded attention on the packed layout: a batch's shorter
        // sequences cost their own tokens, not the longest one's (padding was a fifth of the
        // work of a contract's chunks, whose last one is short).
        let packed_banded = !device.is_cuda() && config.use_bidirectional_attention;
        let attention = match &packed_unavailable {
            None => AttentionImpl::Packed,
            Some(_) if gemm_pays => AttentionImpl::PackedGemm,
            Some(_) if packed_banded => AttentionImpl::PackedBanded,
            Some(_) => AttentionImpl::Banded,
        };
        match (&packed_unavailable, device.is_cuda()) {
            (None, _) => tracing::info!("attention: packed FlashAttention"),
            (Some(why), true) => tracing::warn!(reason = %why, "attention: banded (packed FlashAttention unavailable)"),
            (Some(_), false) => tracing::debug!(attention = %attention, "attention on the CPU"),
        }
        Ok(Self {
            config,
            embed_tokens,
            embed_scale,
            layers,
            norm,
            rope_global,
            rope_local,
            device,
            kind,
            attention,
            packed_unavailable,
        })
    }

    pub fn attention(&self) -> AttentionImpl {
        self.attention
    }

    /// Choose how attention is computed; `Packed` only where it runs (CUDA, fp16/bf16), the
    /// packed layout only for bidirectional encoders.
    pub fn set_attention(&mut self, attention: AttentionImpl) -> Result<(), String> {
        if let (AttentionImpl::Packed, Some(why)) = (attention, &self.packed_unavailable) {
            return Err(why.clone());
        }
        let packed_layout = matches!(
            attention,
            AttentionImpl::PackedGemm | AttentionImpl::PackedReference | AttentionImpl::PackedBanded
        );
        if packed_layout && !self.config.use_bidirectional_attention {
            return Err(PACKED_NEEDS_BIDIRECTIONAL.into());
        }
        self.attention = attention;
        Ok(())
    }

    pub fn device(&self) -> Device {
        self.device
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// `ids`: int64 `[batch, len]`, right-padded; `valid`: bool `[batch, len]`, true for real
    /// tokens. Returns `[batch, len, hidden]` in the model's precision.
    pub fn forward(&self, ids: &Tensor, valid: &Tensor) -> R<Tensor> {
        match self.attention {
            AttentionImpl::Packed => return self.forward_packed(ids, valid, Some(PackedKernel::Flash)),
            AttentionImpl::PackedGemm => return self.forward_packed(ids, valid, Some(PackedKernel::Gemm)),
            AttentionImpl::PackedReference => return self.forward_packed(ids, valid, Some(PackedKernel::Reference)),
            // Sequences too short to band (a batch of segments): the padded form, whose one
            // attention call per layer outruns many small ones (64 × 120 tokens: 7–11 %).
            AttentionImpl::PackedBanded if self.banded_block(ids.size()[1]).is_some() => {
                return self.forward_packed(ids, valid, None)
            }
            AttentionImpl::PackedBanded | AttentionImpl::Banded | AttentionImpl::Dense => {}
        }
        let len = ids.size()[1];
        // Banded attention needs whole blocks: pad with masked tokens, cut them off at the end.
        let block = self.band_block(len);
        let padded = block.map(|b| (len + b - 1) / b * b).unwrap_or(len);
        let (ids, valid) = if padded > len {
            let extra = [0, padded - len];
            (ids.f_constant_pad_nd(extra)?, valid.f_constant_pad_nd(extra)?)
        } else {
            (ids.shallow_clone(), valid.shallow_clone())
        };
        let mut x = Tensor::f_embedding(&self.embed_tokens, &ids, -1, false, false)?.f_mul(&self.embed_scale)?;
        let full_mask = Mask::Dense(self.additive(&self.full_mask(&valid, padded)?)?);
        let sliding_mask = match block {
            Some(b) => Mask::Banded { block: b, mask: self.additive(&self.band_mask(&valid, padded, b)?)? },
            None => Mask::Dense(self.additive(&self.sliding_mask(&valid, padded)?)?),
        };
        let rope_global = self.rope_global.tables(padded, None, self.kind)?;
        let rope_local = self.rope_local.tables(padded, None, self.kind)?;
        for layer in &self.layers {
            x = match layer.kind {
                LayerType::FullAttention => layer.forward(&x, &rope_global, &full_mask)?,
                LayerType::SlidingAttention => layer.forward(&x, &rope_local, &sliding_mask)?,
            };
        }
        self.norm.forward(&x)?.f_narrow(1, 0, len)
    }

    /// The same computation on the real tokens only, laid end to end (`[tokens, hidden]`):
    /// every layer's work is proportional to the tokens, not to batch × longest. The real
    /// tokens of each row must come first (right padding). Scattered back to `[batch, len,
    /// hidden]` at the end, zeros at padding. Attention by `kernel`, or with none one sequence
    /// at a time in the padded forms ([`Mask::PerSequence`]).
    fn forward_packed(&self, ids: &Tensor, valid: &Tensor, kernel: Option<PackedKernel>) -> R<Tensor> {
        let (b, len) = (ids.size()[0], ids.size()[1]);
        let real = valid.f_reshape([-1])?.f_nonzero()?.f_squeeze_dim(1)?; // [tokens] into b·len
        let positions = real.f_remainder(len)?;
        let lens = valid.f_sum_dim_intlist(1, false, Kind::Int64)?;
        let zero = Tensor::f_zeros([1], (Kind::Int64, self.device))?;
        let cu_seqlens = Tensor::f_cat(&[zero, lens.f_cumsum(0, Kind::Int64)?], 0)?.f_to_kind(Kind::Int)?;
        let ids = ids.f_reshape([-1])?.f_index_select(0, &real)?;
        let mut x = Tensor::f_embedding(&self.embed_tokens, &ids, -1, false, false)?.f_mul(&self.embed_scale)?;
        let window = self.config.window_reach() as i64 - 1;
        let (full, sliding) = match kernel {
            Some(kernel) => (
                Mask::Packed { cu_seqlens: cu_seqlens.shallow_clone(), max_len: len, window: None, kernel },
                Mask::Packed { cu_seqlens, max_len: len, window: Some(window), kernel },
            ),
            None => self.per_sequence_masks(&lens)?,
        };
        let rope_global = self.rope_global.tables(len, Some(&positions), self.kind)?;
        let rope_local = self.rope_local.tables(len, Some(&positions), self.kind)?;
        for layer in &self.layers {
            x = match layer.kind {
                LayerType::FullAttention => layer.forward(&x, &rope_global, &full)?,
                LayerType::SlidingAttention => layer.forward(&x, &rope_local, &sliding)?,
            };
        }
        let x = self.norm.forward(&x)?;
        let hidden = self.config.hidden_size as i64;
        Tensor::f_zeros([b * len, hidden], (x.kind(), self.device))?
            .f_index_copy(0, &real, &x)?
            .f_view([b, len, hidden])
    }

    /// The full and sliding layers' masks of [`Mask::PerSequence`], for sequences of
    /// `lens` tokens laid end to end; one mask per distinct length.
    fn per_sequence_masks(&self, lens: &Tensor) -> R<(Mask, Mask)> {
        let lens = Vec::<i64>::try_from(lens.f_to_device(Device::Cpu)?)?;
        let mut by_len: HashMap<i64, SeqKeys> = HashMap::new();
        let (mut full, mut sliding) = (Vec::with_capacity(lens.len()), Vec::with_capacity(lens.len()));
        let mut start = 0;
        for &len in &lens {
            if !by_len.contains_key(&len) {
                let keys = match self.banded_block(len) {
                    Some(block) => {
                        let padded = (len + block - 1) / block * block;
                        let valid = Tensor::f_arange(padded, (Kind::Int64, self.device))?.f_lt(len)?.f_unsqueeze(0)?;
                        SeqKeys::Band { block, padded, mask: self.additive(&self.band_mask(&valid, padded, block)?)? }
                    }
                    None => {
                        let valid = Tensor::f_ones([1, len], (Kind::Bool, self.device))?;
                        SeqKeys::Window(self.additive(&self.sliding_mask(&valid, len)?)?)
                    }
                };
                by_len.insert(len, keys);
            }
            full.push(SeqAttention { start, len, keys: SeqKeys::All });
            sliding.push(SeqAttention { start, len, keys: by_len[&len].shallow_clone() });
            start += len;
        }
        Ok((Mask::PerSequence(full), Mask::PerSequence(sliding)))
    }

    /// Additive form (0 or −∞, in the model's precision) of a boolean mask, made once per
    /// pass: given a boolean mask, libtorch's attention converts it on every layer (~2 % of
    /// the perf samples of a bf16 forward_bench run on the CPU).
    fn additive(&self, allowed: &Tensor) -> R<Tensor> {
        Tensor::f_zeros(allowed.size().as_slice(), (self.kind, self.device))?
            .f_masked_fill(&allowed.f_logical_not()?, f64::NEG_INFINITY)
    }

    /// Block size for banded sliding attention, when it saves work at this length: blocks of
    /// `reach − 1` queries see `3 × block` keys, worth it once the sequence spans 4 blocks.
    fn band_block(&self, len: i64) -> Option<i64> {
        if self.attention != AttentionImpl::Banded {
            return None;
        }
        self.banded_block(len)
    }

    /// [`Self::band_block`] whatever the layout (bidirectional encoders only).
    fn banded_block(&self, len: i64) -> Option<i64> {
        if !self.config.use_bidirectional_attention {
            return None;
        }
        let block = (self.config.window_reach() as i64 - 1).max(1);
        (len >= 4 * block).then_some(block)
    }

    /// Positions `(i, j)` as `[len, 1]` and `[1, len]` int64 tensors.
    fn positions(&self, len: i64) -> R<(Tensor, Tensor)> {
        let pos = Tensor::f_arange(len, (Kind::Int64, self.device))?;
        Ok((pos.f_unsqueeze(1)?, pos.f_unsqueeze(0)?))
    }

    /// Full layers: every real key (only earlier ones when causal). `[batch, 1, len, len]`.
    fn full_mask(&self, valid: &Tensor, len: i64) -> R<Tensor> {
        let keys = valid.f_unsqueeze(1)?.f_unsqueeze(1)?; // [b, 1, 1, len]
        let (i, j) = self.positions(len)?;
        let allowed =
            if self.config.use_bidirectional_attention { keys } else { keys.f_logical_and(&j.f_le_tensor(&i)?)? };
        // Padding queries also see themselves, so no softmax row is empty: an all-masked row
        // would be NaN, and a NaN value vector poisons real rows even at weight 0.
        allowed.f_logical_or(&i.f_eq_tensor(&j)?)
    }

    /// Sliding layers, dense form: real keys within the window. `[batch, 1, len, len]`.
    fn sliding_mask(&self, valid: &Tensor, len: i64) -> R<Tensor> {
        let keys = valid.f_unsqueeze(1)?.f_unsqueeze(1)?;
        let (i, j) = self.positions(len)?;
        let reach = self.config.window_reach() as i64;
        let band = if self.config.use_bidirectional_attention {
            i.f_sub(&j)?.f_abs()?.f_lt(reach)?
        } else {
            j.f_le_tensor(&i)?.f_logical_and(&i.f_sub(&j)?.f_lt(reach)?)?
        };
        keys.f_logical_and(&band)?.f_logical_or(&i.f_eq_tensor(&j)?)
    }

    /// Sliding layers, banded form: for each block of queries, its `3 × block` neighbour keys.
    /// `[batch · blocks, 1, block, 3 · block]`.
    fn band_mask(&self, valid: &Tensor, len: i64, block: i64) -> R<Tensor> {
        let (b, nb) = (valid.size()[0], len / block);
        let reach = self.config.window_reach() as i64;
        // query qi of a block sits at offset qi + block among its 3·block neighbour keys
        let qi = Tensor::f_arange(block, (Kind::Int64, self.device))?.f_unsqueeze(1)?.f_add_scalar(block)?;
        let kj = Tensor::f_arange(3 * block, (Kind::Int64, self.device))?.f_unsqueeze(0)?;
        let band = qi.f_sub(&kj)?.f_abs()?.f_lt(reach)?; // [block, 3·block]
        let own = qi.f_eq_tensor(&kj)?;
        // keys beyond either end of the sequence are padding (false)
        let keys = valid.f_constant_pad_nd([block, block])?.f_unfold(1, 3 * block, block)?; // [b, nb, 3·block]
        keys.f_unsqueeze(2)?.f_logical_and(&band)?.f_logical_or(&own)?.f_reshape([b * nb, 1, block, 3 * block])
    }
}
