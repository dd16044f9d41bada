//! Packed attention from plain GEMMs, block by block: the fast path on the CPU.
//!
//! The layout is the one FlashAttention takes ([`crate::flash`]): a batch's real tokens end to
//! end, `q` `[tokens, heads, d]`, `k`/`v` `[tokens, kv_heads, d]`, sequences delimited by
//! `cu_seqlens`. Each sequence is cut into blocks of queries, and each block is a few GEMMs
//! (three in bf16, two in fp32) and a softmax against the keys its window reaches — a contiguous slice of `k`, so nothing
//! is copied and nothing outside the band is computed but the block's ragged edges, which a
//! bias masks. The query heads that share a K/V head are stacked into the same GEMM
//! (grouped-query attention), and there is no padding anywhere.
//!
//! Why not libtorch's CPU attention: it keeps `q·kᵀ` in fp32 through a bf16 → fp32 GEMM that,
//! on a CPU without AMX, runs at about the fp32 rate; bf16 → bf16 GEMMs run at the bf16 rate
//! (on a 2-core AVX512-BF16 EPYC: 890 against 184 GFLOP/s). Timed there in a Python replica
//! of the same libtorch ops, a sliding layer's attention over one 2048-token sequence took
//! 29 ms through the banded SDPA form and 10 ms this way.
//!
//! The catch is precision: a bf16 GEMM rounds each score to 8 significant bits, so a score of
//! 20 carries an error of up to 0.06 — 6 % on its softmax weight. In reduced precision the
//! scores are therefore *centred* inside the GEMM: a first GEMM finds each row's maximum `m`,
//! then `q` gets an extra column `m` and `k` a column `−1`, and the second GEMM yields
//! `q·k − m`, accumulated in fp32 before the one rounding. The scores that carry the weight
//! (those near the maximum) are then small and finely rounded; softmax ignores the per-row
//! constant. [`tests::centring_keeps_bf16_scores_exact`] shows the difference.

use tch::{Device, Kind, TchError, Tensor};

type R<T> = Result<T, TchError>;

/// Queries per block on windowed layers. Smaller blocks waste fewer keys at the band's edges
/// (`block + 2·window` keys per block), larger ones make larger GEMMs: 128 was the fastest of
/// 64/128/256 for a window of 256 on a 2-core EPYC (11.0/9.9/10.6 ms per 2048-token sequence,
/// timed in a Python replica of these ops).
const WINDOW_BLOCK: i64 = 128;
/// Queries per block on full layers: bounds the score matrix to `heads/kv · 512 × len`.
const FULL_BLOCK: i64 = 512;
/// Columns appended to `q` and `k` for centring: one carries the row maximum, the rest are
/// zeros that keep rows a multiple of 16 elements long.
const CENTRE_COLS: i64 = 16;

/// Attention of packed `q` `[tokens, heads, d]` over `k`, `v` `[tokens, kv_heads, d]` (heads a
/// multiple of kv_heads), sequences delimited by `cu_seqlens`, and with `window = Some(w)`
/// only keys with |i − j| ≤ w. Returns `[tokens, heads, d]` in `q`'s precision.
pub fn varlen(q: &Tensor, k: &Tensor, v: &Tensor, cu_seqlens: &Tensor, scale: f64, window: Option<i64>) -> R<Tensor> {
    let bounds = Vec::<i64>::try_from(cu_seqlens.f_to_device(Device::Cpu)?.f_to_kind(Kind::Int64)?)?;
    let (heads, kv_heads, d) = (q.size()[1], k.size()[1], q.size()[2]);
    let rep = heads / kv_heads;
    let centre = !matches!(q.kind(), Kind::Float | Kind::Double);
    let block = if window.is_some() { WINDOW_BLOCK } else { FULL_BLOCK };
    let band = window.map(|w| BandBias::new(block, w, q.kind(), q.device())).transpose()?;
    let mut sequences = Vec::with_capacity(bounds.len().saturating_sub(1));
    for pair in bounds.windows(2) {
        let (start, len) = (pair[0], pair[1] - pair[0]);
        if len <= 0 {
            continue;
        }
        let mut groups = Vec::with_capacity(kv_heads as usize);
        for g in 0..kv_heads {
            // this group's query heads `[len, rep, d]`, its K/V head `[len, d]`
            let qg = q.f_narrow(0, start, len)?.f_narrow(1, g * rep, rep)?;
            let kg = k.f_narrow(0, start, len)?.f_select(1, g)?;
            let vg = v.f_narrow(0, start, len)?.f_select(1, g)?;
            let ka = if centre { Some(centring_keys(&kg)?) } else { None };
            let mut blocks = Vec::with_capacity((len / block + 1) as usize);
            let mut s0 = 0;
            while s0 < len {
                let rows = block.min(len - s0);
                let (k0, k1) = match window {
                    Some(w) => ((s0 - w).max(0), (s0 + rows + w).min(len)),
                    None => (0, len),
                };
                let bias = band.as_ref().map(|b| b.slice(s0, rows, k0, k1 - k0)).transpose()?;
                // heads stacked as rows: `[rows·rep, d]`, row r·rep + h
                let qb = qg.f_narrow(0, s0, rows)?.f_reshape([rows * rep, d])?;
                let out = attend(
                    &qb,
                    &kg.f_narrow(0, k0, k1 - k0)?,
                    ka.as_ref().map(|ka| ka.f_narrow(0, k0, k1 - k0)).transpose()?.as_ref(),
                    &vg.f_narrow(0, k0, k1 - k0)?,
                    bias.as_ref(),
                    rep,
                    scale,
                )?;
                blocks.push(out.f_view([rows, rep, d])?);
                s0 += rows;
            }
            groups.push(Tensor::f_cat(&blocks, 0)?);
        }
        sequences.push(Tensor::f_cat(&groups, 1)?);
    }
    if sequences.is_empty() {
        return q.f_zeros_like(); // no tokens at all
    }
    Tensor::f_cat(&sequences, 0)
}

/// One block: `softmax(scale · q·kᵀ + bias)·v` for `q` `[rows·rep, d]` (heads interleaved),
/// `k`, `v` `[n, d]`, `bias` `[rows, n]` (0 or −∞, the same for every head). With `ka` (the
/// keys with centring columns, see the module doc) the scores are centred before rounding.
fn attend(
    q: &Tensor,
    k: &Tensor,
    ka: Option<&Tensor>,
    v: &Tensor,
    bias: Option<&Tensor>,
    rep: i64,
    scale: f64,
) -> R<Tensor> {
    let n = k.size()[0];
    let rows = q.size()[0] / rep;
    // `[rows·rep, n]` scores plus the bias, broadcast over the heads
    let masked = |s: Tensor| -> R<Tensor> {
        match bias {
            Some(b) => s.f_view([rows, rep, n])?.f_add(&b.f_unsqueeze(1)?)?.f_view([rows * rep, n]),
            None => Ok(s),
        }
    };
    let scores = match ka {
        Some(ka) => {
            // the row maximum over the keys this query may see, then q·k − max in one GEMM
            let max = masked(q.f_mm(&k.f_transpose(0, 1)?)?)?.f_amax([-1].as_slice(), true)?;
            let zeros = Tensor::f_zeros([rows * rep, CENTRE_COLS - 1], (q.kind(), q.device()))?;
            Tensor::f_cat(&[q, &max, &zeros], 1)?.f_mm(&ka.f_transpose(0, 1)?)?
        }
        None => q.f_mm(&k.f_transpose(0, 1)?)?,
    };
    let scores = masked(scores.f_mul_scalar(scale)?)?;
    scores.f_softmax(-1, scores.kind())?.f_mm(v)
}

/// `k` `[n, d]` with the centring columns appended: `[k, −1, 0…]`, `[n, d + CENTRE_COLS]`.
fn centring_keys(k: &Tensor) -> R<Tensor> {
    let n = k.size()[0];
    let opts = (k.kind(), k.device());
    let minus_one = Tensor::f_full([n, 1], -1.0, opts)?;
    let zeros = Tensor::f_zeros([n, CENTRE_COLS - 1], opts)?;
    Tensor::f_cat(&[k, &minus_one, &zeros], 1)
}

/// The band's bias for every block: `[block, block + 2w]`, 0 where |i − j| ≤ w, −∞ elsewhere,
/// for queries `s0..s0+block` against keys from `s0 − w`; a block near either end of the
/// sequence, whose keys are clipped, takes a slice of it.
struct BandBias {
    full: Tensor,
    window: i64,
}

impl BandBias {
    fn new(block: i64, window: i64, kind: Kind, device: Device) -> R<Self> {
        let i = Tensor::f_arange(block, (Kind::Int64, device))?.f_unsqueeze(1)?.f_add_scalar(window)?;
        let j = Tensor::f_arange(block + 2 * window, (Kind::Int64, device))?.f_unsqueeze(0)?;
        let outside = i.f_sub(&j)?.f_abs()?.f_gt(window)?;
        let full = Tensor::f_zeros(outside.size(), (kind, device))?.f_masked_fill(&outside, f64::NEG_INFINITY)?;
        Ok(Self { full, window })
    }

    /// Bias of queries `s0..s0+rows` against keys `k0..k0+n`.
    fn slice(&self, s0: i64, rows: i64, k0: i64, n: i64) -> R<Tensor> {
        self.full.f_narrow(0, 0, rows)?.f_narrow(1, k0 - (s0 - self.window), n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cu_seqlens(lens: &[i64]) -> Tensor {
        let mut cu = vec![0i32];
        for l in lens {
            cu.push(cu[cu.len() - 1] + *l as i32);
        }
        Tensor::from_slice(&cu)
    }

    /// fp32 reference: each sequence alone, dense scores, a boolean window mask.
    fn reference(q: &Tensor, k: &Tensor, v: &Tensor, lens: &[i64], scale: f64, window: Option<i64>) -> Tensor {
        let f = |t: &Tensor| t.to_kind(Kind::Float);
        crate::flash::varlen_reference(&f(q), &f(k), &f(v), &cu_seqlens(lens), scale, window).unwrap()
    }

    fn inputs(total: i64, spread: f64) -> (Tensor, Tensor, Tensor) {
        inputs_with(total, 3, 1, spread)
    }

    fn inputs_with(total: i64, heads: i64, kv_heads: i64, spread: f64) -> (Tensor, Tensor, Tensor) {
        tch::manual_seed(7);
        let q = Tensor::randn([total, heads, 64], (Kind::Float, Device::Cpu)) * spread;
        let k = Tensor::randn([total, kv_heads, 64], (Kind::Float, Device::Cpu));
        let v = Tensor::randn([total, kv_heads, 64], (Kind::Float, Device::Cpu));
        (q, k, v)
    }

    fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
        f64::try_from((a.to_kind(Kind::Float) - b).abs().max()).unwrap()
    }

    /// Sequences shorter than a block, spanning several, and empty, with and without a
    /// window, with one and with two K/V heads: fp32 agrees with the dense reference to
    /// rounding.
    #[test]
    fn equals_dense_attention_per_sequence() {
        let lens = [300i64, 5, 0, WINDOW_BLOCK * 3 + 17];
        let total = lens.iter().sum();
        let cu = cu_seqlens(&lens);
        // one K/V head for 3 query heads (this model), and 2 for 4
        for (heads, kv_heads) in [(3, 1), (4, 2)] {
            let (q, k, v) = inputs_with(total, heads, kv_heads, 1.0);
            for window in [Some(40), Some(3), None] {
                let got = varlen(&q, &k, &v, &cu, 0.125, window).unwrap();
                assert_eq!(got.size(), q.size());
                let diff = max_diff(&got, &reference(&q, &k, &v, &lens, 0.125, window));
                assert!(diff < 1e-5, "{heads}/{kv_heads} heads, window {window:?}: max |diff| {diff}");
            }
        }
    }

    /// Large scores (queries scaled ×8, scores up to ~60): with centring, bf16 attention stays
    /// close to fp32 attention over the same (bf16-rounded) inputs, and clearly closer than
    /// attention from one plain bf16 GEMM, whose scores are rounded as they come.
    #[test]
    fn centring_keeps_bf16_scores_exact() {
        let lens = [700i64];
        let (q, k, v) = inputs(700, 8.0);
        let cu = cu_seqlens(&lens);
        let bf = |t: &Tensor| t.to_kind(Kind::BFloat16);
        let want = reference(&bf(&q), &bf(&k), &bf(&v), &lens, 0.125, Some(100));
        let centred = varlen(&bf(&q), &bf(&k), &bf(&v), &cu, 0.125, Some(100)).unwrap();
        let plain = {
            let scores = (bf(&q).reshape([700 * 3, 64]).mm(&bf(&k).reshape([700, 64]).t_())) * 0.125;
            let i = Tensor::arange(700, (Kind::Int64, Device::Cpu));
            let outside = (i.unsqueeze(1) - i.unsqueeze(0)).abs().gt(100);
            let outside = outside.unsqueeze(1).expand([700, 3, 700], false).reshape([2100, 700]);
            let p = scores.masked_fill(&outside, f64::NEG_INFINITY).softmax(-1, Kind::BFloat16);
            p.mm(&bf(&v).reshape([700, 64])).reshape([700, 3, 64])
        };
        let (e_centred, e_plain) = (max_diff(&centred, &want), max_diff(&plain, &want));
        eprintln!("max |diff| to fp32: centred {e_centred:.4}, plain bf16 scores {e_plain:.4}");
        assert!(e_centred < 0.05, "centred bf16 attention is off by {e_centred}");
        assert!(e_centred * 3.0 < e_plain, "centring should matter here: {e_centred} vs {e_plain}");
    }
}
