//! GGUF k-quant matrices (`Q4_K`, `Q6_K`) kept in their own blocks and multiplied there
//! (`csrc/cpu_kquant.cpp`): the activations are quantized to 8 bits per 256 values and each
//! block's dot product is integer arithmetic on AVX512-VNNI (else AVX2, else scalar code), as
//! llama.cpp computes it. The weights take the file's 4.5 and 6.6 bits per value in memory and
//! are read once per step, whatever the batch: what decoding at batch 1 is bound by.
//!
//! A matrix may stack parts of different types along its output dimension (q, k and v are
//! stacked; `attn_v` is often `Q6_K` where `attn_q` is `Q4_K`).
//!
//! The blocks live in memory of their own, mapped for transparent huge pages where the kernel
//! allows them (`madvise`): a decode step streams every block once, and on 4 KB pages that is a
//! page walk every 4 KB (batch-1 decoding of the 1.5B on a 2-core EPYC: 25.1–25.4 tokens/s on
//! small pages, 28.1–28.9 with huge pages; docs/decoder.md).

use tch::{Device, TchError, Tensor};

use crate::gguf::GgmlType;

/// Values per block of both formats.
const BLOCK: usize = 256;

/// The formats the kernel reads.
/// Which code multiplies (the kernel's `path` argument): the best the CPU has (AVX512-VNNI, else
/// AVX2, else scalar), or, for tests, the scalar or the AVX2 code (the scalar where the CPU has
/// no AVX2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Path {
    Best = 0,
    Scalar = 1,
    Avx2 = 2,
}

/// `DOCPIPE_KQUANT_KERNEL=scalar|avx2` holds the kernel to less than the CPU has (to measure
/// what each path is worth in one run; `docs/decoder.md`); unset or anything else: the best.
static KERNEL: std::sync::LazyLock<Path> =
    std::sync::LazyLock::new(|| match std::env::var("DOCPIPE_KQUANT_KERNEL").as_deref() {
        Ok("scalar") => Path::Scalar,
        Ok("avx2") => Path::Avx2,
        _ => Path::Best,
    });

pub fn supported(kind: GgmlType) -> bool {
    matches!(kind, GgmlType::Q4K | GgmlType::Q6K)
}

struct Part {
    /// `[rows, cols / 256 · block bytes]` bytes, as in the file; a view of `_memory` where it
    /// has one (declared first: dropped before the memory it points into).
    blocks: Tensor,
    _memory: Option<HugeMemory>,
    kind: GgmlType,
    rows: i64,
}

/// An anonymous mapping of at least `len` bytes whose whole 2 MB pages are advised for
/// transparent huge pages: the start is aligned to 2 MB (the mapping is made 2 MB longer to
/// allow it), and the tail past the last whole 2 MB stays on small pages, so no more memory is
/// touched than the bytes need.
struct HugeMemory {
    map: *mut libc::c_void,
    map_len: usize,
    start: *mut u8,
}

// SAFETY: the mapping is plain memory owned by this value; it is written once, when made, and
// only read after that.
unsafe impl Send for HugeMemory {}
unsafe impl Sync for HugeMemory {}

const HUGE_PAGE: usize = 2 << 20;

impl HugeMemory {
    /// A copy of `bytes`; `None` where the mapping cannot be made (the caller then keeps the
    /// bytes in libtorch's memory).
    fn copy_of(bytes: &[u8]) -> Option<Self> {
        let map_len = bytes.len().checked_add(HUGE_PAGE)?;
        // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return None;
        }
        let offset = (HUGE_PAGE - map as usize % HUGE_PAGE) % HUGE_PAGE;
        // SAFETY: offset < HUGE_PAGE, and the mapping is HUGE_PAGE longer than `bytes`.
        let start = unsafe { map.cast::<u8>().add(offset) };
        let whole = bytes.len() / HUGE_PAGE * HUGE_PAGE;
        if whole > 0 {
            // advice only: where the kernel refuses it (THP off) the pages are small ones
            // SAFETY: `start..start + whole` lies inside the mapping.
            let _ = unsafe { libc::madvise(start.cast(), whole, libc::MADV_HUGEPAGE) };
        }
        // SAFETY: the mapping holds `bytes.len()` bytes from `start`, and does not overlap `bytes`.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), start, bytes.len()) };
        Some(Self { map, map_len, start })
    }
}

impl Drop for HugeMemory {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `copy_of`, unmapped once.
        unsafe { libc::munmap(self.map, self.map_len) };
    }
}

/// A linear layer `y = x · Wᵀ` with `W` `[out, in]` in GGUF k-quant blocks (CPU).
pub struct KQuantLinear {
    parts: Vec<Part>,
    out_features: i64,
    in_features: i64,
}

impl KQuantLinear {
    /// From the raw blocks of matrices stacked along the output dimension: `parts` are
    /// `(type, bytes, rows)`, each `[rows, cols]` row-major.
    pub fn new(parts: &[(GgmlType, &[u8], usize)], cols: usize) -> Result<Self, TchError> {
        if cols == 0 || !cols.is_multiple_of(BLOCK) {
            return Err(TchError::Shape(format!("k-quant rows of {cols} values are not whole 256-blocks")));
        }
        let mut out = Vec::with_capacity(parts.len());
        for &(kind, bytes, rows) in parts {
            if !supported(kind) {
                return Err(TchError::Kind(format!("{} is not a k-quant format the kernel reads", kind.name())));
            }
            let row_bytes = cols / BLOCK * kind.block().1;
            if bytes.len() != rows * row_bytes {
                return Err(TchError::Shape(format!("{} bytes of {} for {rows} × {cols}", bytes.len(), kind.name())));
            }
            let shape = [rows as i64, row_bytes as i64];
            let (blocks, memory) = match HugeMemory::copy_of(bytes) {
                // SAFETY: `memory` holds `bytes.len()` = rows · row_bytes bytes at `start` and
                // lives in the same Part as the tensor, which is dropped first; the tensor is
                // private to this type and only read.
                Some(m) => {
                    let strides = [row_bytes as i64, 1];
                    (unsafe { Tensor::f_from_blob(m.start, &shape, &strides, tch::Kind::Uint8, Device::Cpu)? }, Some(m))
                }
                None => (Tensor::from_slice(bytes).f_view(shape)?, None),
            };
            out.push(Part { blocks, _memory: memory, kind, rows: rows as i64 });
        }
        let out_features = out.iter().map(|p| p.rows).sum();
        Ok(Self { parts: out, out_features, in_features: cols as i64 })
    }

    /// `x` `[..., in]` (fp32 or bf16) → `[..., out]` in `x`'s precision.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor, TchError> {
        self.forward_with(x, *KERNEL)
    }

    /// With a given kernel path: the scalar or the AVX2 code even where the CPU has more (tests).
    pub(crate) fn forward_with(&self, x: &Tensor, path: Path) -> Result<Tensor, TchError> {
        let size = x.size();
        if size.last() != Some(&self.in_features) {
            return Err(TchError::Shape(format!("input {size:?} for a matrix of {} columns", self.in_features)));
        }
        // a decode step's input is already a contiguous matrix: no reshape or view to dispatch
        let matrix = size.len() == 2 && x.is_contiguous();
        let flat = if matrix { x.shallow_clone() } else { x.f_reshape([-1, self.in_features])?.f_contiguous()? };
        let xq = ffi::quantize(&flat, path)?;
        let y = Tensor::f_empty([flat.size()[0], self.out_features], (x.kind(), Device::Cpu))?;
        let parts: Vec<(&Tensor, GgmlType)> = self.parts.iter().map(|p| (&p.blocks, p.kind)).collect();
        ffi::matmul(&xq, &parts, self.in_features, &y, path)?;
        if matrix {
            return Ok(y);
        }
        let mut out = size;
        let last = out.len() - 1;
        out[last] = self.out_features;
        y.f_view(out.as_slice())
    }

    /// Bytes held: the blocks as in the file.
    pub fn bytes(&self) -> usize {
        self.parts.iter().map(|p| p.blocks.numel()).sum()
    }
}

#[cfg(cpu_kernels)]
mod ffi {
    use std::ffi::{c_char, c_int, c_void};

    use tch::{TchError, Tensor};

    use super::Path;
    use crate::gguf::GgmlType;

    extern "C" {
        fn docpipe_q8_quantize(
            x: *const c_void,
            path: i32,
            out: *mut *mut c_void,
            err: *mut c_char,
            err_len: usize,
        ) -> c_int;
        fn docpipe_kquant_matmul(
            xq: *const c_void,
            ws: *const *const c_void,
            kinds: *const i32,
            nparts: i64,
            k: i64,
            y: *mut c_void,
            path: i32,
            err: *mut c_char,
            err_len: usize,
        ) -> c_int;
    }

    pub(super) fn quantize(x: &Tensor, path: Path) -> Result<Tensor, TchError> {
        let mut out: *mut c_void = std::ptr::null_mut();
        // SAFETY: `x` is a live `at::Tensor*` handle; on success the shim stores a new heap
        // `at::Tensor*` in `out`.
        crate::shim::call(|err, len| unsafe {
            docpipe_q8_quantize(x.as_ptr().cast(), path as i32, &mut out, err, len)
        })
        .map_err(TchError::Torch)?;
        // SAFETY: `out` is the handle the successful call just stored.
        unsafe { crate::shim::take(out) }.map_err(TchError::Torch)
    }

    /// `y = xq · [W₀; W₁; …]ᵀ`, the parts stacked along the output dimension in one call.
    pub(super) fn matmul(
        xq: &Tensor,
        parts: &[(&Tensor, GgmlType)],
        k: i64,
        y: &Tensor,
        path: Path,
    ) -> Result<(), TchError> {
        let mut ids = Vec::with_capacity(parts.len());
        for (_, kind) in parts {
            ids.push(match kind {
                GgmlType::Q4K => 12,
                GgmlType::Q6K => 14,
                other => {
                    return Err(TchError::Kind(format!("{} is not a k-quant format the kernel reads", other.name())))
                }
            });
        }
        let ws: Vec<*const c_void> = parts.iter().map(|(w, _)| w.as_ptr() as *const c_void).collect();
        // SAFETY: live tensor handles (`ws` and `ids` outlive the call, one entry per part); the
        // shim checks shapes and types and writes only into `y`.
        crate::shim::call(|err, len| unsafe {
            docpipe_kquant_matmul(
                xq.as_ptr().cast(),
                ws.as_ptr(),
                ids.as_ptr(),
                parts.len() as i64,
                k,
                y.as_ptr() as *mut c_void,
                path as i32,
                err,
                len,
            )
        })
        .map_err(TchError::Torch)
    }
}

#[cfg(not(cpu_kernels))]
mod ffi {
    use tch::{TchError, Tensor};

    use super::Path;
    use crate::gguf::GgmlType;

    const MISSING: &str = "the CPU kernels are not built into this binary (LIBTORCH unset at build time)";

    pub(super) fn quantize(_x: &Tensor, _path: Path) -> Result<Tensor, TchError> {
        Err(TchError::Torch(MISSING.into()))
    }

    pub(super) fn matmul(_: &Tensor, _: &[(&Tensor, GgmlType)], _: i64, _: &Tensor, _: Path) -> Result<(), TchError> {
        Err(TchError::Torch(MISSING.into()))
    }
}

#[cfg(all(test, cpu_kernels))]
mod tests {
    use tch::Kind;

    use super::*;
    use crate::gguf::dequantize_into;

    /// Random-looking but valid blocks of `kind`: small positive f16 scales, any other bytes.
    fn blocks(kind: GgmlType, n: usize, seed: u32) -> Vec<u8> {
        let mut s = seed;
        let mut next = || {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (s >> 24) as u8
        };
        let bytes = kind.block().1;
        let mut out = Vec::with_capacity(n * bytes);
        for _ in 0..n {
            let mut b: Vec<u8> = (0..bytes).map(|_| next()).collect();
            let d = half::f16::from_f32(0.001 + next() as f32 * 1e-5).to_le_bytes();
            match kind {
                GgmlType::Q4K => {
                    b[0..2].copy_from_slice(&d);
                    b[2..4].copy_from_slice(&half::f16::from_f32(0.0005 + next() as f32 * 1e-5).to_le_bytes());
                }
                _ => b[208..210].copy_from_slice(&d),
            }
            out.extend(b);
        }
        out
    }

    /// max |got − want| relative to max |want|.
    fn rel_err(got: &Tensor, want: &Tensor) -> f64 {
        let err = (got.to_kind(Kind::Float) - want).abs().max().double_value(&[]);
        err / want.abs().max().double_value(&[]).max(1e-6)
    }

    #[test]
    fn stacked_q4_k_and_q6_k_multiply_like_their_dequantized_matrices() {
        let (rows_a, rows_b, cols) = (40, 24, 768);
        let a = blocks(GgmlType::Q4K, rows_a * cols / BLOCK, 1);
        let b = blocks(GgmlType::Q6K, rows_b * cols / BLOCK, 2);
        let lin = KQuantLinear::new(&[(GgmlType::Q4K, &a, rows_a), (GgmlType::Q6K, &b, rows_b)], cols).unwrap();
        let mut w = vec![0f32; (rows_a + rows_b) * cols];
        dequantize_into(GgmlType::Q4K, &a, &mut w[..rows_a * cols]);
        dequantize_into(GgmlType::Q6K, &b, &mut w[rows_a * cols..]);
        let w = Tensor::from_slice(&w).view([(rows_a + rows_b) as i64, cols as i64]);
        // 1 row (a decode step), 37 (crosses an activation tile of 32), and a 3-D input
        for shape in [vec![1i64, cols as i64], vec![37, cols as i64], vec![2, 3, cols as i64]] {
            let x = Tensor::randn(shape.as_slice(), (Kind::Float, Device::Cpu));
            let want = x.linear(&w, None::<Tensor>);
            let fast = lin.forward(&x).unwrap();
            let avx2 = lin.forward_with(&x, Path::Avx2).unwrap();
            let scalar = lin.forward_with(&x, Path::Scalar).unwrap();
            assert_eq!(fast.size(), want.size());
            // 8-bit activations: the error llama.cpp's Q8_K dot products have
            assert!(rel_err(&fast, &want) < 2e-2, "vector path: {}", rel_err(&fast, &want));
            assert!(rel_err(&scalar, &want) < 2e-2, "scalar path: {}", rel_err(&scalar, &want));
            // the paths do the same integer arithmetic; only fp32 summation order differs
            assert!(rel_err(&fast, &scalar) < 1e-5, "vector vs scalar: {}", rel_err(&fast, &scalar));
            assert!(rel_err(&avx2, &scalar) < 1e-5, "AVX2 vs scalar: {}", rel_err(&avx2, &scalar));
            let x16 = x.to_kind(Kind::BFloat16);
            let got16 = lin.forward(&x16).unwrap();
            assert_eq!(got16.kind(), Kind::BFloat16);
            let want16 = x16.to_kind(Kind::Float).linear(&w, None::<Tensor>);
            assert!(rel_err(&got16, &want16) < 3e-2, "bf16: {}", rel_err(&got16, &want16));
        }
        assert_eq!(lin.bytes(), a.len() + b.len());
    }

    #[test]
    fn bad_shapes_are_refused_with_a_reason() {
        let a = blocks(GgmlType::Q4K, 2, 3);
        assert!(KQuantLinear::new(&[(GgmlType::Q4K, &a, 2)], 200).is_err());
        assert!(KQuantLinear::new(&[(GgmlType::Q4K, &a, 3)], 256).is_err());
        assert!(KQuantLinear::new(&[(GgmlType::Q8_0, &a, 1)], 256).is_err());
        let lin = KQuantLinear::new(&[(GgmlType::Q4K, &a, 2)], 256).unwrap();
        let err = lin.forward(&Tensor::zeros([1, 512], (Kind::Float, Device::Cpu))).unwrap_err();
        assert!(err.to_string().contains("256 columns"), "{err}");
    }
}
