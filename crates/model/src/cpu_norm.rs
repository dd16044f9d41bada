//! Gemma's RMSNorm on the CPU in one pass per row (`csrc/cpu_norm.cpp`), alone or fused with
//! the residual add before the next norm (Gemma's normed residual, or Qwen2's plain one). libtorch's op-by-op version (fp32 copy, square,
//! mean, rsqrt, two products, cast back) makes six passes over memory per norm, and
//! a layer has six norms; here a norm is one pass and results are rounded where the op-by-op
//! version rounds them, so outputs agree up to the order of a sum.
//!
//! Built when `LIBTORCH` is set at build time (see `build.rs`); [`available`] says so, and the
//! model keeps libtorch's ops otherwise.

use tch::{TchError, Tensor};

/// Whether the kernels are built into this binary.
pub fn available() -> bool {
    cfg!(cpu_kernels)
}

#[cfg(not(cpu_kernels))]
fn not_built() -> TchError {
    TchError::Torch("the CPU kernels are not built into this binary (LIBTORCH unset at build time)".into())
}

#[cfg(cpu_kernels)]
mod ffi {
    use std::ffi::{c_char, c_int, c_void};
    extern "C" {
        pub fn docpipe_cpu_rms_norm(
            x: *const c_void,
            s: *const c_void,
            eps: f64,
            y: *mut *mut c_void,
            err: *mut c_char,
            err_len: usize,
        ) -> c_int;
        pub fn docpipe_cpu_rms_norm_rope(
            x: *const c_void,
            s: *const c_void,
            cos: *const c_void,
            sin: *const c_void,
            eps: f64,
            out: *mut *mut c_void,
            err: *mut c_char,
            err_len: usize,
        ) -> c_int;
        pub fn docpipe_cpu_add_rms_norm(
            x: *const c_void,
            h: *const c_void,
            s_h: *const c_void,
            s_next: *const c_void,
            eps: f64,
            x_out: *mut *mut c_void,
            y: *mut *mut c_void,
            err: *mut c_char,
            err_len: usize,
        ) -> c_int;
    }
}

/// A shim call's error as libtorch's.
#[cfg(cpu_kernels)]
fn checked(f: impl FnOnce(*mut std::ffi::c_char, usize) -> std::ffi::c_int) -> Result<(), TchError> {
    crate::shim::call(f).map_err(TchError::Torch)
}

/// Take over a tensor handle the shim returned.
#[cfg(cpu_kernels)]
fn take(ptr: *mut std::ffi::c_void) -> Result<Tensor, TchError> {
    // SAFETY: only called with handles a successful shim call just stored (or null).
    unsafe { crate::shim::take(ptr) }.map_err(TchError::Torch)
}

/// `x / rms(x) · scale` over the last dimension; `x` fp32 or bf16 on the CPU, `scale` fp32
/// (`1 + w`).
#[cfg(cpu_kernels)]
pub fn rms_norm(x: &Tensor, scale: &Tensor, eps: f64) -> Result<Tensor, TchError> {
    let x = x.f_contiguous()?;
    let mut y: *mut std::ffi::c_void = std::ptr::null_mut();
    // SAFETY: the inputs are live `at::Tensor*` handles owned by tch Tensors that outlive the
    // call; on success the shim stores a new heap `at::Tensor*` in `y`.
    checked(|err, len| unsafe {
        ffi::docpipe_cpu_rms_norm(x.as_ptr().cast(), scale.as_ptr().cast(), eps, &mut y, err, len)
    })?;
    take(y)
}

/// The q/k norm and the rotary embedding after it: `rope(x / rms(x) · scale)` for `x`
/// `[tokens, heads, d]` (strided over tokens and heads is fine), `cos`/`sin` `[positions, d]`
/// in `x`'s precision, token `t` at position `t mod positions`. Returns `[tokens, heads, d]`.
#[cfg(cpu_kernels)]
pub fn rms_norm_rope(x: &Tensor, scale: &Tensor, eps: f64, cos: &Tensor, sin: &Tensor) -> Result<Tensor, TchError> {
    let (cos, sin) = (cos.f_contiguous()?, sin.f_contiguous()?);
    let mut out: *mut std::ffi::c_void = std::ptr::null_mut();
    // SAFETY: as in `rms_norm`.
    checked(|err, len| unsafe {
        ffi::docpipe_cpu_rms_norm_rope(
            x.as_ptr().cast(),
            scale.as_ptr().cast(),
            cos.as_ptr().cast(),
            sin.as_ptr().cast(),
            eps,
            &mut out,
            err,
            len,
        )
    })?;
    take(out)
}

#[cfg(not(cpu_kernels))]
pub fn rms_norm_rope(
    _x: &Tensor,
    _scale: &Tensor,
    _eps: f64,
    _cos: &Tensor,
    _sin: &Tensor,
) -> Result<Tensor, TchError> {
    Err(not_built())
}

/// The residual step `x + h / rms(h) · scale_h`.
pub fn add_rms_norm(x: &Tensor, h: &Tensor, scale_h: &Tensor, eps: f64) -> Result<Tensor, TchError> {
    Ok(add_norm(x, h, Some(scale_h), None, eps)?.0)
}

/// The residual step, and the sum's norm with `scale_next`: `(sum, norm(sum))`.
pub fn add_rms_norm_then(
    x: &Tensor,
    h: &Tensor,
    scale_h: &Tensor,
    scale_next: &Tensor,
    eps: f64,
) -> Result<(Tensor, Tensor), TchError> {
    let (sum, normed) = add_norm(x, h, Some(scale_h), Some(scale_next), eps)?;
    let normed = normed.ok_or_else(|| TchError::Torch("add_rms_norm: the shim returned no norm".into()))?;
    Ok((sum, normed))
}

/// A pre-norm residual: `x' = x + h` and `rms_norm(x') · scale_next`, in one pass (Qwen2).
pub fn add_then_rms_norm(x: &Tensor, h: &Tensor, scale_next: &Tensor, eps: f64) -> Result<(Tensor, Tensor), TchError> {
    let (sum, normed) = add_norm(x, h, None, Some(scale_next), eps)?;
    let normed = normed.ok_or_else(|| TchError::Torch("add_rms_norm: the shim returned no norm".into()))?;
    Ok((sum, normed))
}

#[cfg(cpu_kernels)]
fn add_norm(
    x: &Tensor,
    h: &Tensor,
    scale_h: Option<&Tensor>,
    scale_next: Option<&Tensor>,
    eps: f64,
) -> Result<(Tensor, Option<Tensor>), TchError> {
    let (x, h) = (x.f_contiguous()?, h.f_contiguous()?);
    let (mut xo, mut y): (*mut std::ffi::c_void, *mut std::ffi::c_void) = (std::ptr::null_mut(), std::ptr::null_mut());
    let next = scale_next.map_or(std::ptr::null(), |s| s.as_ptr().cast());
    let of_h = scale_h.map_or(std::ptr::null(), |s| s.as_ptr().cast());
    // SAFETY: as in `rms_norm`; `y` stays null when `scale_next` is.
    checked(|err, len| unsafe {
        ffi::docpipe_cpu_add_rms_norm(x.as_ptr().cast(), h.as_ptr().cast(), of_h, next, eps, &mut xo, &mut y, err, len)
    })?;
    Ok((take(xo)?, (!y.is_null()).then(|| take(y)).transpose()?))
}

#[cfg(not(cpu_kernels))]
pub fn rms_norm(_x: &Tensor, _scale: &Tensor, _eps: f64) -> Result<Tensor, TchError> {
    Err(not_built())
}

#[cfg(not(cpu_kernels))]
fn add_norm(
    _x: &Tensor,
    _h: &Tensor,
    _scale_h: Option<&Tensor>,
    _scale_next: Option<&Tensor>,
    _eps: f64,
) -> Result<(Tensor, Option<Tensor>), TchError> {
    Err(not_built())
}

/// The kernel tests below exist only where the kernels are built; this one fails, instead of
/// letting them vanish, when `LIBTORCH` was set for the build and they still were not.
#[test]
fn kernels_are_built_with_libtorch() {
    if option_env!("LIBTORCH").is_some_and(|d| !d.is_empty()) {
        assert!(available(), "LIBTORCH was set at build time but the CPU kernels were not built");
    }
}

#[cfg(all(test, cpu_kernels))]
mod tests {
    use tch::{Device, Kind};

    use super::*;

    /// libtorch's op-by-op norm, rounded where the model rounds it.
    fn reference(x: &Tensor, s: &Tensor, eps: f64) -> Tensor {
        let xf = x.to_kind(Kind::Float);
        let var = xf.pow_tensor_scalar(2).mean_dim(-1, true, None::<Kind>);
        (xf * (var + eps).rsqrt() * s).to_kind(x.kind())
    }

    fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
        f64::try_from((a.to_kind(Kind::Float) - b.to_kind(Kind::Float)).abs().max()).unwrap()
    }

    #[test]
    fn equals_libtorch_ops_in_fp32_and_bf16() {
        tch::manual_seed(3);
        let s = Tensor::randn([768], (Kind::Float, Device::Cpu)) * 0.5 + 1.0;
        let s2 = Tensor::randn([768], (Kind::Float, Device::Cpu)) * 0.5 + 1.0;
        for kind in [Kind::Float, Kind::BFloat16] {
            // odd row count and large values: every row, and rounding near the top of the range
            let x = (Tensor::randn([37, 768], (Kind::Float, Device::Cpu)) * 30.0).to_kind(kind);
            let h = (Tensor::randn([37, 768], (Kind::Float, Device::Cpu)) * 3.0).to_kind(kind);
            // one ulp of bf16 at these magnitudes (outputs up to ~10), a rounding flip at most
            let tol = if kind == Kind::Float { 1e-4 } else { 0.07 };
            let d = max_diff(&rms_norm(&x, &s, 1e-6).unwrap(), &reference(&x, &s, 1e-6));
            assert!(d <= tol, "{kind:?} rms_norm: max |diff| {d}");
            let (xo, y) = add_rms_norm_then(&x, &h, &s, &s2, 1e-6).unwrap();
            let want_x = &x + reference(&h, &s, 1e-6);
            let d = max_diff(&xo, &want_x);
            assert!(d <= tol * 8.0, "{kind:?} residual: max |diff| {d}");
            let d = max_diff(&y, &reference(&want_x, &s2, 1e-6));
            assert!(d <= tol, "{kind:?} next norm: max |diff| {d}");
            assert_eq!(max_diff(&add_rms_norm(&x, &h, &s, 1e-6).unwrap(), &xo), 0.0);
            // Qwen2's residual: h added as it is, then the next norm
            let (xo, y) = add_then_rms_norm(&x, &h, &s2, 1e-6).unwrap();
            let want_x = &x + &h;
            assert_eq!(max_diff(&xo, &want_x), 0.0, "{kind:?} plain residual");
            let d = max_diff(&y, &reference(&want_x, &s2, 1e-6));
            assert!(d <= tol, "{kind:?} norm after a plain residual: max |diff| {d}");
        }
    }

    /// Norm and RoPE on a strided view (three heads of a wider projection, as the model
    /// passes q), positions repeating every `p` tokens (a padded batch), against the op-by-op
    /// version.
    #[test]
    fn rope_equals_libtorch_ops() {
        tch::manual_seed(5);
        let (tokens, heads, d, p) = (12i64, 3i64, 64i64, 4i64);
        let s = Tensor::randn([d], (Kind::Float, Device::Cpu)) * 0.5 + 1.0;
        let angles = Tensor::randn([p, d], (Kind::Float, Device::Cpu)) * 3.0;
        for kind in [Kind::Float, Kind::BFloat16] {
            let wide = (Tensor::randn([tokens, (heads + 2) * d], (Kind::Float, Device::Cpu)) * 4.0).to_kind(kind);
            let x = wide.narrow(1, d, heads * d).view([tokens, heads, d]);
            let (cos, sin) = (angles.cos().to_kind(kind), angles.sin().to_kind(kind));
            let got = rms_norm_rope(&x, &s, 1e-6, &cos, &sin).unwrap();
            let n = reference(&x, &s, 1e-6);
            let idx = Tensor::arange(tokens, (Kind::Int64, Device::Cpu)).remainder(p);
            let (c, sn) = (cos.index_select(0, &idx).unsqueeze(1), sin.index_select(0, &idx).unsqueeze(1));
            let rotated = Tensor::cat(&[-n.narrow(2, d / 2, d / 2), n.narrow(2, 0, d / 2)], 2);
            let want = &n * c + rotated * sn;
            let tol = if kind == Kind::Float { 1e-5 } else { 0.04 };
            let diff = max_diff(&got, &want);
            assert!(diff <= tol, "{kind:?}: max |diff| {diff}");
        }
    }

    #[test]
    fn bad_input_is_an_error() {
        let x = Tensor::zeros([4, 8], (Kind::Float, Device::Cpu));
        let wrong = Tensor::ones([7], (Kind::Float, Device::Cpu));
        let err = rms_norm(&x, &wrong, 1e-6).unwrap_err().to_string();
        assert!(err.contains("scale"), "{err}");
        let half = Tensor::zeros([4, 8], (Kind::Half, Device::Cpu));
        assert!(rms_norm(&half, &Tensor::ones([8], (Kind::Float, Device::Cpu)), 1e-6).is_err());
    }
}
