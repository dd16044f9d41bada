//! Gated activations on the CPU in one pass (`csrc/cpu_geglu.cpp`): from the stacked gate/up
//! projection to Gemma's `gelu_tanh(gate) · up` or Qwen2's `silu(gate) · up`. libtorch's version makes three passes (the
//! activation over a strided half, a copy, the product) through an accurate vector tanh: ~12 %
//! of the perf samples of a bf16 forward_bench run on a 2-core Xeon with AMX. Results are
//! rounded where it rounds them, so outputs agree up to the last bit of the activation.
//!
//! Built with the other CPU kernels (see [`crate::cpu_norm::available`]).

use tch::{TchError, Tensor};

#[cfg(cpu_kernels)]
mod ffi {
    use std::ffi::{c_char, c_int, c_void};
    extern "C" {
        pub fn docpipe_cpu_glu(
            gate_up: *const c_void,
            act: i32,
            out: *mut *mut c_void,
            err: *mut c_char,
            err_len: usize,
        ) -> c_int;
    }
}

/// `gelu_tanh(gate_up[..., :n]) · gate_up[..., n:]` for `gate_up` `[..., 2·n]`, fp32 or bf16
/// on the CPU. Returns `[..., n]`.
#[cfg(cpu_kernels)]
pub fn geglu(gate_up: &Tensor) -> Result<Tensor, TchError> {
    glu(gate_up, 0)
}

/// `silu(gate_up[..., :n]) · gate_up[..., n:]` (Qwen2's SwiGLU), as [`geglu`].
#[cfg(cpu_kernels)]
pub fn swiglu(gate_up: &Tensor) -> Result<Tensor, TchError> {
    glu(gate_up, 1)
}

#[cfg(cpu_kernels)]
fn glu(gate_up: &Tensor, act: i32) -> Result<Tensor, TchError> {
    let x = gate_up.f_contiguous()?;
    let mut out: *mut std::ffi::c_void = std::ptr::null_mut();
    // SAFETY: `x` is a live `at::Tensor*` handle owned by a tch Tensor that outlives the call;
    // on success the shim stores a new heap `at::Tensor*` in `out`.
    crate::shim::call(|err, len| unsafe { ffi::docpipe_cpu_glu(x.as_ptr().cast(), act, &mut out, err, len) })
        .map_err(TchError::Torch)?;
    // SAFETY: `out` is the handle the successful call just stored.
    unsafe { crate::shim::take(out) }.map_err(TchError::Torch)
}

#[cfg(not(cpu_kernels))]
pub fn geglu(_gate_up: &Tensor) -> Result<Tensor, TchError> {
    Err(TchError::Torch("the CPU kernels are not built into this binary (LIBTORCH unset at build time)".into()))
}

#[cfg(not(cpu_kernels))]
pub fn swiglu(_gate_up: &Tensor) -> Result<Tensor, TchError> {
    Err(TchError::Torch("the CPU kernels are not built into this binary (LIBTORCH unset at build time)".into()))
}

/// libtorch's op-by-op GeGLU, as the model computes it without the kernel.
pub fn reference(gate_up: &Tensor) -> Result<Tensor, TchError> {
    let n = gate_up.size()[gate_up.dim() - 1] / 2;
    gate_up.f_narrow(-1, 0, n)?.f_gelu("tanh")?.f_mul(&gate_up.f_narrow(-1, n, n)?)
}

/// libtorch's op-by-op SwiGLU, as the model computes it without the kernel.
pub fn reference_swiglu(gate_up: &Tensor) -> Result<Tensor, TchError> {
    let n = gate_up.size()[gate_up.dim() - 1] / 2;
    gate_up.f_narrow(-1, 0, n)?.f_silu()?.f_mul(&gate_up.f_narrow(-1, n, n)?)
}

#[cfg(all(test, cpu_kernels))]
mod tests {
    use tch::{Device, Kind};

    use super::*;

    /// max |a − b| / (|b| + floor)
    fn max_rel_diff(a: &Tensor, b: &Tensor, floor: f64) -> f64 {
        let (a, b) = (a.to_kind(Kind::Double), b.to_kind(Kind::Double));
        f64::try_from(((&a - &b).abs() / (b.abs() + floor)).max()).unwrap()
    }

    /// Over the activation's whole range (large negative gates, where the exp saturates, to
    /// large positive ones), in fp32 and bf16, on an odd row count, against the formula in
    /// fp64. libtorch's own fp32 version is further off for negative gates (1 + tanh(z)
    /// cancels: 3e-3 relative at a gate of −4), so the truth here is fp64; its bf16 version is
    /// also checked, within bf16 rounding.
    #[test]
    fn equals_the_formula_in_fp32_and_bf16() {
        tch::manual_seed(7);
        let gate = Tensor::linspace(-30.0, 30.0, 37 * 64, (Kind::Double, Device::Cpu)).view([37, 64]);
        let up = Tensor::randn([37, 64], (Kind::Double, Device::Cpu)) * 3.0;
        for kind in [Kind::Float, Kind::BFloat16] {
            let gate_up = Tensor::cat(&[&gate, &up], 1).to_kind(kind);
            let got = geglu(&gate_up).unwrap();
            assert_eq!(got.size(), [37, 64]);
            assert_eq!(got.kind(), kind);
            let truth = reference(&gate_up.to_kind(Kind::Double)).unwrap();
            // fp32: the exp's ~1e-7; bf16: a rounding of the activation and of the product
            let tol = if kind == Kind::Float { 1e-5 } else { 2.0 * 2f64.powi(-8) };
            let d = max_rel_diff(&got, &truth, 1e-6);
            assert!(d <= tol, "{kind:?}: max relative diff to fp64 {d}");
            if kind == Kind::BFloat16 {
                let d = max_rel_diff(&got, &reference(&gate_up).unwrap(), 1e-3);
                assert!(d <= tol, "bf16: max relative diff to libtorch's ops {d}");
            }
        }
    }

    /// SwiGLU the same way: fp64 truth, and libtorch's bf16 ops within bf16 rounding.
    #[test]
    fn swiglu_equals_the_formula_in_fp32_and_bf16() {
        tch::manual_seed(8);
        let gate = Tensor::linspace(-90.0, 90.0, 37 * 64, (Kind::Double, Device::Cpu)).view([37, 64]);
        let up = Tensor::randn([37, 64], (Kind::Double, Device::Cpu)) * 3.0;
        for kind in [Kind::Float, Kind::BFloat16] {
            let gate_up = Tensor::cat(&[&gate, &up], 1).to_kind(kind);
            let got = swiglu(&gate_up).unwrap();
            assert_eq!((got.size(), got.kind()), (vec![37, 64], kind));
            let truth = reference_swiglu(&gate_up.to_kind(Kind::Double)).unwrap();
            let tol = if kind == Kind::Float { 1e-5 } else { 2.0 * 2f64.powi(-8) };
            let d = max_rel_diff(&got, &truth, 1e-6);
            assert!(d <= tol, "{kind:?}: max relative diff to fp64 {d}");
            if kind == Kind::BFloat16 {
                let d = max_rel_diff(&got, &reference_swiglu(&gate_up).unwrap(), 1e-3);
                assert!(d <= tol, "bf16: max relative diff to libtorch's ops {d}");
            }
        }
    }

    #[test]
    fn nan_stays_nan_and_bad_input_is_an_error() {
        let gate_up = Tensor::from_slice(&[f32::NAN, 1.0, 2.0, 3.0]).view([1, 4]);
        let out = geglu(&gate_up).unwrap();
        assert!(f64::try_from(out.get(0).get(0)).unwrap().is_nan());
        let odd = Tensor::zeros([2, 3], (Kind::Float, Device::Cpu));
        assert!(geglu(&odd).unwrap_err().to_string().contains("2·n"));
        let half = Tensor::zeros([2, 4], (Kind::Half, Device::Cpu));
        assert!(geglu(&half).is_err());
    }
}
