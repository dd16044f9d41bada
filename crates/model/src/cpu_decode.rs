//! Two pieces of Qwen2's attention on the CPU as one call each (`csrc/cpu_decode.cpp`): the
//! q/k/v bias and the rotary embedding, in place on the stacked projection, and a decode
//! step's attention read straight from the paged KV cache. At batch 1 a decode step's tensors
//! are a few KB, so libtorch's dozen small ops for each cost their dispatch, not arithmetic,
//! and its attention first copied every cached key and value into one padded tensor.
//!
//! Built with the other CPU kernels (see [`crate::cpu_norm::available`]); [`reference_bias_rope`]
//! and [`reference_decode_attention`] are the op-by-op versions the model runs without them.

use tch::{Kind, TchError, Tensor};

#[cfg(cpu_kernels)]
mod ffi {
    use std::ffi::{c_char, c_int, c_void};
    extern "C" {
        pub fn docpipe_cpu_bias_rope_(
            qkv: *const c_void,
            bias: *const c_void,
            cos: *const c_void,
            sin: *const c_void,
            rope_heads: i64,
            k_cache: *mut c_void,
            v_cache: *mut c_void,
            slots: *const c_void,
            err: *mut c_char,
            err_len: usize,
        ) -> c_int;
        #[allow(clippy::too_many_arguments)]
        pub fn docpipe_cpu_paged_decode_attention(
            q: *const c_void,
            k_cache: *const c_void,
            v_cache: *const c_void,
            keys: *const c_void,
            lens: *const c_void,
            scale: f64,
            out: *mut *mut c_void,
            err: *mut c_char,
            err_len: usize,
        ) -> c_int;
    }
}

/// Where [`bias_rope_`] also stores each token's key and value: the cache's key and value
/// rows `[rows, kv_heads, head_dim]` (contiguous, in `qkv`'s precision) and the row of each
/// token (int64 `[tokens]`).
pub struct Store<'a> {
    pub k_cache: &'a mut Tensor,
    pub v_cache: &'a mut Tensor,
    pub slots: &'a Tensor,
}

/// `qkv` `[tokens, width]` (contiguous, fp32 or bf16) `+= bias`, then its first `rope_heads`
/// heads (head_dim from `cos`) rotated by `cos`/`sin` (fp32, `[tokens, …, head_dim]`), in place.
/// With `store`, `qkv` is q, k and v (`kv_heads` each for k and v, q the rest of the rotated
/// heads), and each token's k and v are also written into the cache at its slot.
#[cfg(cpu_kernels)]
pub fn bias_rope_(
    qkv: &Tensor,
    bias: &Tensor,
    cos: &Tensor,
    sin: &Tensor,
    rope_heads: i64,
    store: Option<Store>,
) -> Result<(), TchError> {
    use std::ffi::c_void;
    let (kc, vc, slots): (*mut c_void, *mut c_void, *const c_void) = match &store {
        Some(s) => {
            (s.k_cache.as_ptr() as *mut c_void, s.v_cache.as_ptr() as *mut c_void, s.slots.as_ptr() as *const c_void)
        }
        None => (std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null()),
    };
    // SAFETY: live tensor handles (the caches borrowed mutably for the call); the shim checks
    // shapes, kinds and slots, and writes only into `qkv` and the caches' rows at `slots`.
    crate::shim::call(|err, len| unsafe {
        ffi::docpipe_cpu_bias_rope_(
            qkv.as_ptr().cast(),
            bias.as_ptr().cast(),
            cos.as_ptr().cast(),
            sin.as_ptr().cast(),
            rope_heads,
            kc,
            vc,
            slots,
            err,
            len,
        )
    })
    .map_err(TchError::Torch)
}

/// One query token per sequence, `q` `[b, heads, head_dim]` (heads packed), against the cached
/// keys and values `[slots, kv_heads, head_dim]` at `keys[s, 0..lens[s]]` (int64 `[b, n]` and
/// `[b]`): `[b, heads · head_dim]` in `q`'s precision.
#[cfg(cpu_kernels)]
pub fn paged_decode_attention(
    q: &Tensor,
    k_cache: &Tensor,
    v_cache: &Tensor,
    keys: &Tensor,
    lens: &Tensor,
    scale: f64,
) -> Result<Tensor, TchError> {
    let mut out: *mut std::ffi::c_void = std::ptr::null_mut();
    // SAFETY: live tensor handles; the shim checks every shape, kind and cache slot, reads
    // only, and on success stores a new heap `at::Tensor*` in `out`.
    crate::shim::call(|err, len| unsafe {
        ffi::docpipe_cpu_paged_decode_attention(
            q.as_ptr().cast(),
            k_cache.as_ptr().cast(),
            v_cache.as_ptr().cast(),
            keys.as_ptr().cast(),
            lens.as_ptr().cast(),
            scale,
            &mut out,
            err,
            len,
        )
    })
    .map_err(TchError::Torch)?;
    // SAFETY: `out` is the handle the successful call just stored.
    unsafe { crate::shim::take(out) }.map_err(TchError::Torch)
}

#[cfg(not(cpu_kernels))]
const MISSING: &str = "the CPU kernels are not built into this binary (LIBTORCH unset at build time)";

#[cfg(not(cpu_kernels))]
pub fn bias_rope_(_: &Tensor, _: &Tensor, _: &Tensor, _: &Tensor, _: i64, _: Option<Store>) -> Result<(), TchError> {
    Err(TchError::Torch(MISSING.into()))
}

#[cfg(not(cpu_kernels))]
pub fn paged_decode_attention(
    _: &Tensor,
    _: &Tensor,
    _: &Tensor,
    _: &Tensor,
    _: &Tensor,
    _: f64,
) -> Result<Tensor, TchError> {
    Err(TchError::Torch(MISSING.into()))
}

/// `x·cos + rotate_half(x)·sin` on `[tokens, heads, head_dim]`, in fp32, back in `x`'s precision.
pub fn reference_rope(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor, TchError> {
    let xf = x.f_to_kind(Kind::Float)?;
    let half = xf.size()[2] / 2;
    let rotated = Tensor::f_cat(&[&xf.f_narrow(-1, half, half)?.f_neg()?, &xf.f_narrow(-1, 0, half)?], -1)?;
    xf.f_mul(cos)?.f_add(&rotated.f_mul(sin)?)?.f_to_kind(x.kind())
}

/// The op-by-op [`bias_rope_`]: `(q, k, v)` as `[tokens, heads, head_dim]` views, q and k
/// rotated, from `qkv` `[tokens, (heads + 2·kv_heads)·head_dim]`.
pub fn reference_bias_rope(
    qkv: &Tensor,
    bias: &Tensor,
    cos: &Tensor,
    sin: &Tensor,
    heads: i64,
    kv_heads: i64,
) -> Result<(Tensor, Tensor, Tensor), TchError> {
    let (t, d) = (qkv.size()[0], cos.size()[cos.dim() - 1]);
    let qkv = qkv.f_add(bias)?;
    let q = qkv.f_narrow(1, 0, heads * d)?.f_view([t, heads, d])?;
    let k = qkv.f_narrow(1, heads * d, kv_heads * d)?.f_view([t, kv_heads, d])?;
    let v = qkv.f_narrow(1, (heads + kv_heads) * d, kv_heads * d)?.f_view([t, kv_heads, d])?;
    Ok((reference_rope(&q, cos, sin)?, reference_rope(&k, cos, sin)?, v))
}

/// The op-by-op decode attention: `q` `[b, heads, d]`, gathered keys and values
/// `[b, n, kv_heads, d]` padded to the longest sequence, `mask` `[b, 1, 1, n]` true where a key
/// is real. The query heads of a KV head are rows of one matrix (no copy of K/V per head).
pub fn reference_decode_attention(
    q: &Tensor,
    ks: &Tensor,
    vs: &Tensor,
    mask: &Tensor,
    scale: f64,
) -> Result<Tensor, TchError> {
    let (b, h, d) = (q.size()[0], q.size()[1], q.size()[2]);
    let kv = ks.size()[2];
    let q = q.f_reshape([b, kv, h / kv, d])?;
    let scores = q.f_matmul(&ks.f_permute([0, 2, 3, 1])?)?.f_to_kind(Kind::Float)?.f_mul_scalar(scale)?;
    let p = scores
        .f_masked_fill(&mask.f_logical_not()?, f64::NEG_INFINITY)?
        .f_softmax(-1, Kind::Float)?
        .f_to_kind(vs.kind())?;
    p.f_matmul(&vs.f_permute([0, 2, 1, 3])?)?.f_reshape([b, h * d])
}

#[cfg(all(test, cpu_kernels))]
mod tests {
    use tch::Device;

    use super::*;

    fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
        f64::try_from((a.to_kind(Kind::Double) - b.to_kind(Kind::Double)).abs().max()).unwrap()
    }

    #[test]
    fn bias_rope_equals_the_op_by_op_version() {
        tch::manual_seed(11);
        let (t, heads, kv, d) = (5i64, 6i64, 2i64, 64i64);
        let pos = Tensor::arange(t, (Kind::Float, Device::Cpu)) * 37.0;
        let inv = Tensor::arange(d / 2, (Kind::Float, Device::Cpu)).multiply_scalar(-2.0 / d as f64).exp2() * 0.9;
        let f = pos.outer(&inv);
        let emb = Tensor::cat(&[&f, &f], -1).unsqueeze(1);
        let (cos, sin) = (emb.cos(), emb.sin());
        for kind in [Kind::Float, Kind::BFloat16] {
            let qkv = (Tensor::randn([t, (heads + 2 * kv) * d], (Kind::Float, Device::Cpu)) * 3.0).to_kind(kind);
            let bias = Tensor::randn([(heads + 2 * kv) * d], (Kind::Float, Device::Cpu)).to_kind(kind);
            let (q, k, v) = reference_bias_rope(&qkv, &bias, &cos, &sin, heads, kv).unwrap();
            let got = qkv.copy();
            bias_rope_(&got, &bias, &cos, &sin, heads + kv, None).unwrap();
            let want = Tensor::cat(&[q.reshape([t, -1]), k.reshape([t, -1]), v.reshape([t, -1])], 1);
            // and with the cache: the same qkv, k and v stored at their slots, nothing else touched
            let zeros = || Tensor::zeros([9, kv, d], (kind, Device::Cpu));
            let (mut kc, mut vc) = (zeros(), zeros());
            let slots = Tensor::from_slice(&[7i64, 0, 3, 8, 5]);
            let stored = qkv.copy();
            let store = Store { k_cache: &mut kc, v_cache: &mut vc, slots: &slots };
            bias_rope_(&stored, &bias, &cos, &sin, heads + kv, Some(store)).unwrap();
            assert_eq!(max_diff(&stored, &got), 0.0, "{kind:?}: storing changed qkv");
            let k_rows = got.narrow(1, heads * d, kv * d).view([t, kv, d]);
            assert_eq!(max_diff(&kc.index_select(0, &slots), &k_rows), 0.0, "{kind:?}: stored keys");
            assert_eq!(max_diff(&vc.index_select(0, &slots), &v), 0.0, "{kind:?}: stored values");
            let untouched = Tensor::from_slice(&[1i64, 2, 4, 6]);
            assert_eq!(f64::try_from(kc.index_select(0, &untouched).abs().sum(Kind::Double)).unwrap(), 0.0);
            // fp32: a fused multiply-add's last bit; bf16: that bit flipping a rounding
            let tol = if kind == Kind::Float { 1e-5 } else { 0.07 };
            let diff = max_diff(&got, &want);
            assert!(diff <= tol, "{kind:?}: max |diff| {diff}");
            assert_eq!(
                max_diff(&got.narrow(1, (heads + kv) * d, kv * d), &v.reshape([t, -1])),
                0.0,
                "{kind:?}: v is only biased"
            );
        }
    }

    /// Three sequences of different lengths, their slots scattered over the cache, grouped
    /// query heads, against the gather-and-mask version in fp32 (and bf16 within its rounding).
    #[test]
    fn paged_attention_equals_the_gathered_version() {
        tch::manual_seed(12);
        let (heads, kv, d, slots) = (6i64, 2i64, 64i64, 96i64);
        let lens = [1i64, 17, 40];
        let longest = 40;
        let perm = Tensor::randperm(slots, (Kind::Int64, Device::Cpu));
        let mut keys = Vec::new();
        let mut mask = Vec::new();
        for (s, &n) in lens.iter().enumerate() {
            for p in 0..longest {
                let slot = perm.int64_value(&[(s as i64 * 30 + p.min(n - 1)) % slots]);
                keys.push(slot);
                mask.push(p < n);
            }
        }
        let b = lens.len() as i64;
        let keys_t = Tensor::from_slice(&keys).view([b, longest]);
        let mask_t = Tensor::from_slice(&mask).view([b, 1, 1, longest]);
        let lens_t = Tensor::from_slice(&lens);
        for kind in [Kind::Float, Kind::BFloat16] {
            let kc = (Tensor::randn([slots, kv, d], (Kind::Float, Device::Cpu)) * 2.0).to_kind(kind);
            let vc = Tensor::randn([slots, kv, d], (Kind::Float, Device::Cpu)).to_kind(kind);
            // q as the model passes it: a view into a wider projection
            let wide = Tensor::randn([b, (heads + 2 * kv) * d], (Kind::Float, Device::Cpu)).to_kind(kind);
            let q = wide.narrow(1, 0, heads * d).view([b, heads, d]);
            let scale = (d as f64).powf(-0.5);
            let got = paged_decode_attention(&q, &kc, &vc, &keys_t, &lens_t, scale).unwrap();
            let flat = keys_t.reshape([-1]);
            let ks = kc.index_select(0, &flat).view([b, longest, kv, d]);
            let vs = vc.index_select(0, &flat).view([b, longest, kv, d]);
            let want = reference_decode_attention(
                &q.to_kind(Kind::Float),
                &ks.to_kind(Kind::Float),
                &vs.to_kind(Kind::Float),
                &mask_t,
                scale,
            )
            .unwrap();
            assert_eq!(got.size(), [b, heads * d]);
            assert_eq!(got.kind(), kind);
            let tol = if kind == Kind::Float { 1e-5 } else { 0.02 };
            let diff = max_diff(&got, &want);
            assert!(diff <= tol, "{kind:?}: max |diff| {diff}");
        }
    }

    #[test]
    fn bad_slots_and_lengths_are_refused() {
        let kc = Tensor::zeros([8, 1, 4], (Kind::Float, Device::Cpu));
        let q = Tensor::zeros([1, 2, 4], (Kind::Float, Device::Cpu));
        let scale = 0.5;
        let err = paged_decode_attention(
            &q,
            &kc,
            &kc,
            &Tensor::from_slice(&[3i64, 8]).view([1, 2]),
            &Tensor::from_slice(&[2i64]),
            scale,
        )
        .unwrap_err();
        assert!(err.to_string().contains("outside the cache"), "{err}");
        let err = paged_decode_attention(
            &q,
            &kc,
            &kc,
            &Tensor::from_slice(&[3i64, 4]).view([1, 2]),
            &Tensor::from_slice(&[3i64]),
            scale,
        )
        .unwrap_err();
        assert!(err.to_string().contains("has 3 keys of 2"), "{err}");
        let zeros = |shape: &[i64]| Tensor::zeros(shape, (Kind::Float, Device::Cpu));
        let (qkv, bias, cs) = (zeros(&[2, 8]), zeros(&[8]), zeros(&[2, 4]));
        let err = bias_rope_(&qkv, &bias, &cs, &cs, 3, None).unwrap_err();
        assert!(err.to_string().contains("do not fit"), "{err}");
        let (mut kc, mut vc) = (zeros(&[4, 1, 4]), zeros(&[4, 1, 4]));
        let slots = Tensor::from_slice(&[1i64, 4]);
        let store = Store { k_cache: &mut kc, v_cache: &mut vc, slots: &slots };
        let err = bias_rope_(&qkv, &bias, &cs, &cs, 1, Some(store)).unwrap_err();
        assert!(err.to_string().contains("are not q, k and v"), "{err}");
        let store = Store { k_cache: &mut kc, v_cache: &mut vc, slots: &slots };
        let err = bias_rope_(&zeros(&[2, 12]), &zeros(&[12]), &cs, &cs, 2, Some(store)).unwrap_err();
        assert!(err.to_string().contains("outside the cache"), "{err}");
    }
}
