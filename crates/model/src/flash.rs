//! Packed (variable-length) FlashAttention on CUDA, with an optional sliding window.
//!
//! A batch's real tokens are laid end to end (`[tokens, heads, head_dim]`, no padding) and
//! `cu_seqlens` (int32, `[batch + 1]`) marks where each sequence starts. FlashAttention-2 then
//! attends within each sequence, and with `window = Some(w)` only to keys with |i − j| ≤ w:
//! the sliding layers' band is computed and nothing outside it, and no padding at all.
//!
//! tch does not expose ATen's `_flash_attention_forward`, so a small C++ shim
//! (`csrc/flash_varlen.cpp`, compiled by `build.rs` against libtorch's headers) calls it. The
//! op exists only in libtorch's CUDA library and only for fp16/bf16 with FlashAttention-2's
//! head sizes; [`available`] tells whether it runs here and agrees with the dense reference.

use tch::{Device, Kind, Tensor};

#[derive(Debug, thiserror::Error)]
pub enum FlashError {
    #[error("packed attention is not built into this binary (LIBTORCH unset at build time)")]
    NotBuilt,
    #[error("flash attention: {0}")]
    Torch(String),
}

#[cfg(flash_shim)]
mod ffi {
    use std::ffi::{c_char, c_int, c_void};
    extern "C" {
        pub fn docpipe_flash_varlen(
            q: *const c_void,
            k: *const c_void,
            v: *const c_void,
            cu_seqlens: *const c_void,
            max_len: i64,
            scale: f64,
            window: i64,
            out: *mut *mut c_void,
            err: *mut c_char,
            err_len: usize,
        ) -> c_int;
    }
}

/// Attention of packed `q` `[tokens, heads, d]` over `k`, `v` `[tokens, kv_heads, d]` (heads a
/// multiple of kv_heads), sequences delimited by `cu_seqlens`, none longer than `max_len`.
/// Returns `[tokens, heads, d]`.
#[cfg(flash_shim)]
pub fn varlen(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    cu_seqlens: &Tensor,
    max_len: i64,
    scale: f64,
    window: Option<i64>,
) -> Result<Tensor, FlashError> {
    let (q, k, v) = (q.contiguous(), k.contiguous(), v.contiguous());
    let mut out: *mut std::ffi::c_void = std::ptr::null_mut();
    // SAFETY: every pointer is a live `at::Tensor*` owned by a tch Tensor that outlives the
    // call; on success the shim stores a new heap `at::Tensor*` in `out`.
    crate::shim::call(|err, len| unsafe {
        ffi::docpipe_flash_varlen(
            q.as_ptr().cast(),
            k.as_ptr().cast(),
            v.as_ptr().cast(),
            cu_seqlens.as_ptr().cast(),
            max_len,
            scale,
            window.unwrap_or(-1),
            &mut out,
            err,
            len,
        )
    })
    .map_err(FlashError::Torch)?;
    // SAFETY: `out` is the handle the shim just made, owned by nothing else.
    unsafe { crate::shim::take(out) }.map_err(FlashError::Torch)
}

#[cfg(not(flash_shim))]
pub fn varlen(
    _q: &Tensor,
    _k: &Tensor,
    _v: &Tensor,
    _cu_seqlens: &Tensor,
    _max_len: i64,
    _scale: f64,
    _window: Option<i64>,
) -> Result<Tensor, FlashError> {
    Err(FlashError::NotBuilt)
}

/// The same computation as [`varlen`] with libtorch's `scaled_dot_product_attention`, one
/// sequence at a time, on any device and in any precision: what the kernel is checked
/// against, and how packed tokens are tested where the kernel does not run (the CPU).
pub fn varlen_reference(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    cu_seqlens: &Tensor,
    scale: f64,
    window: Option<i64>,
) -> Result<Tensor, tch::TchError> {
    let bounds = Vec::<i64>::try_from(cu_seqlens.f_to_device(Device::Cpu)?.f_to_kind(Kind::Int64)?)?;
    let heads = q.size()[1];
    let mut out = Vec::with_capacity(bounds.len().saturating_sub(1));
    for pair in bounds.windows(2) {
        let (start, len) = (pair[0], pair[1] - pair[0]);
        // one sequence as `[1, heads, len, d]`, K/V heads repeated for their query heads
        let part = |x: &Tensor| -> Result<Tensor, tch::TchError> {
            let y = x.f_narrow(0, start, len)?.f_transpose(0, 1)?;
            let rep = heads / y.size()[0];
            y.f_repeat_interleave_self_int(rep, Some(0), None)?.f_unsqueeze(0)
        };
        let mask = match window {
            Some(w) => {
                let pos = Tensor::f_arange(len, (Kind::Int64, q.device()))?;
                Some(pos.f_unsqueeze(1)?.f_sub(&pos.f_unsqueeze(0)?)?.f_abs()?.f_le(w)?)
            }
            None => None,
        };
        let o = Tensor::f_scaled_dot_product_attention(
            &part(q)?,
            &part(k)?,
            &part(v)?,
            mask.as_ref(),
            0.0,
            false,
            scale,
            false,
        )?;
        out.push(o.f_squeeze_dim(0)?.f_transpose(0, 1)?);
    }
    Tensor::f_cat(&out, 0)
}

/// Whether packed attention runs on `device` in `kind` for this head layout, and matches
/// [`varlen_reference`] in fp32 (two sequences of different lengths, with and without a
/// window of `window` tokens each side); the reason when not.
pub fn available(
    device: Device,
    kind: Kind,
    heads: i64,
    kv_heads: i64,
    head_dim: i64,
    window: i64,
) -> Result<(), String> {
    if !device.is_cuda() {
        return Err("not a CUDA device".into());
    }
    if !matches!(kind, Kind::BFloat16 | Kind::Half) {
        return Err(format!("FlashAttention needs fp16 or bf16, not {kind:?}"));
    }
    let _guard = tch::no_grad_guard();
    let check = || -> Result<f64, tch::TchError> {
        let lens = [window * 3 + 7, window + 3];
        let total: i64 = lens.iter().sum();
        let opts = (Kind::Float, device);
        let q = Tensor::f_randn([total, heads, head_dim], opts)?;
        let k = Tensor::f_randn([total, kv_heads, head_dim], opts)?;
        let v = Tensor::f_randn([total, kv_heads, head_dim], opts)?;
        let cu = Tensor::f_from_slice(&[0i32, lens[0] as i32, total as i32])?.f_to_device(device)?;
        let scale = (head_dim as f64).powf(-0.5);
        let mut worst = 0f64;
        for w in [Some(window), None] {
            let got = varlen(&q.f_to_kind(kind)?, &k.f_to_kind(kind)?, &v.f_to_kind(kind)?, &cu, lens[0], scale, w)
                .map_err(|e| tch::TchError::Torch(e.to_string()))?
                .f_to_kind(Kind::Float)?;
            let want = varlen_reference(&q, &k, &v, &cu, scale, w)?;
            worst = worst.max(f64::try_from(got.f_sub(&want)?.f_abs()?.f_max()?)?);
        }
        Ok(worst)
    };
    let worst = check().map_err(|e| e.to_string())?;
    // bf16 rounding of q, k, v and the output: differences of a few 1e-2 at most on unit data
    if worst.is_finite() && worst < 0.05 {
        Ok(())
    } else {
        Err(format!("packed attention differs from the dense reference by {worst}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On the CPU the op does not exist: the shim must turn libtorch's exception into an
    /// error (not an abort), and the model must fall back.
    #[test]
    fn cpu_call_is_a_clean_error() {
        let t = |shape: [i64; 3]| Tensor::zeros(shape, (Kind::BFloat16, Device::Cpu));
        let cu = Tensor::from_slice(&[0i32, 4]);
        let err = varlen(&t([4, 3, 256]), &t([4, 1, 256]), &t([4, 1, 256]), &cu, 4, 0.0625, Some(2)).unwrap_err();
        if cfg!(flash_shim) {
            assert!(matches!(err, FlashError::Torch(ref m) if !m.is_empty()), "{err}");
        } else {
            assert!(matches!(err, FlashError::NotBuilt), "{err}");
        }
        let why = available(Device::Cpu, Kind::BFloat16, 3, 1, 256, 256).unwrap_err();
        assert!(why.contains("CUDA"), "{why}");
    }
}
