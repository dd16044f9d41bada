//! 4-bit weights that stay 4-bit in memory: a GGUF `Q4_K` matrix repacked, without loss, for
//! libtorch's int4 weight-only matmul (`_weight_int4pack_mm_for_cpu`, AVX2/AVX-512 kernels that
//! unpack 4-bit weights in registers).
//!
//! `Q4_K` stores each 32-value sub-block as `w = d·sc · q − dmin·m` with `q ∈ 0..16`. libtorch's
//! format is groups of `G` values along the input dimension with `w = (q − 8)·scale + zero`;
//! with `G = 32`, `scale = d·sc` and `zero = 8·d·sc − dmin·m` give the same weights exactly (in
//! fp32; in bf16 the scale and zero are rounded, like the weights of the bf16 path). Per value:
//! 4 bits plus 2 × 16 or 32 bits per 32 values for scale and zero.

use tch::{Device, Kind, TchError, Tensor};

/// Values per scale/zero group (one `Q4_K` sub-block).
pub const GROUP: usize = 32;
const BLOCK: usize = 256;
const BLOCK_BYTES: usize = 144;

/// A linear layer `y = x · Wᵀ` with `W` `[out, in]` in 4 bits.
pub struct Int4Linear {
    packed: Tensor,
    /// `[in / GROUP, out, 2]`: scale and zero, in the activations' precision.
    scales_zeros: Tensor,
    out_features: i64,
    in_features: i64,
}

impl Int4Linear {
    /// From the raw `Q4_K` data of matrices stacked along the output dimension (each
    /// `[rows, cols]`, row-major, `cols` a multiple of 256): `parts` are `(bytes, rows)`.
    pub fn from_q4_k(parts: &[(&[u8], usize)], cols: usize, kind: Kind, device: Device) -> Result<Self, TchError> {
        if !cols.is_multiple_of(BLOCK) {
            return Err(TchError::Shape(format!("Q4_K rows of {cols} values are not whole blocks")));
        }
        let rows: usize = parts.iter().map(|p| p.1).sum();
        let groups = cols / GROUP;
        let mut q = vec![0i32; rows * cols];
        // [groups, rows, 2] scale/zero
        let mut sz = vec![0f32; groups * rows * 2];
        let mut row = 0;
        for &(bytes, n) in parts {
            if bytes.len() != n * cols / BLOCK * BLOCK_BYTES {
                return Err(TchError::Shape(format!("{} bytes of Q4_K for {n} × {cols}", bytes.len())));
            }
            for (r, row_bytes) in bytes.chunks_exact(cols / BLOCK * BLOCK_BYTES).enumerate() {
                let out_row = row + r;
                for (b, block) in row_bytes.chunks_exact(BLOCK_BYTES).enumerate() {
                    let d = half::f16::from_le_bytes([block[0], block[1]]).to_f32();
                    let dmin = half::f16::from_le_bytes([block[2], block[3]]).to_f32();
                    let (scales, qs) = (&block[4..16], &block[16..144]);
                    for g in 0..4 {
                        let bytes32 = &qs[32 * g..32 * g + 32];
                        for (half_, shift) in [(0usize, 0u8), (1, 4)] {
                            let j = 2 * g + half_;
                            let (sc, m) = crate::gguf::scale_min_k4(j, scales);
                            let (scale, min) = (d * sc, dmin * m);
                            let group = (b * BLOCK + 32 * j) / GROUP;
                            sz[(group * rows + out_row) * 2] = scale;
                            sz[(group * rows + out_row) * 2 + 1] = 8.0 * scale - min;
                            let base = out_row * cols + b * BLOCK + 32 * j;
                            for (l, &byte) in bytes32.iter().enumerate() {
                                q[base + l] = ((byte >> shift) & 0x0f) as i32;
                            }
                        }
                    }
                }
            }
            row += n;
        }
        let q = Tensor::from_slice(&q).f_view([rows as i64, cols as i64])?;
        let packed = q.f_internal_convert_weight_to_int4pack_for_cpu(2)?.f_to_device(device)?;
        let scales_zeros =
            Tensor::from_slice(&sz).f_view([groups as i64, rows as i64, 2])?.f_to_kind(kind)?.f_to_device(device)?;
        Ok(Self { packed, scales_zeros, out_features: rows as i64, in_features: cols as i64 })
    }

    /// `x` `[..., in]` → `[..., out]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor, TchError> {
        let size = x.size();
        let flat = x.f_reshape([-1, self.in_features])?.f_contiguous()?;
        let y = flat.f_internal_weight_int4pack_mm_for_cpu(&self.packed, GROUP as i64, &self.scales_zeros)?;
        let mut out = size;
        let last = out.len() - 1;
        out[last] = self.out_features;
        y.f_view(out.as_slice())
    }

    /// Bytes held: packed weights, scales and zeros.
    pub fn bytes(&self) -> usize {
        self.packed.numel() * self.packed.kind().elt_size_in_bytes()
            + self.scales_zeros.numel() * self.scales_zeros.kind().elt_size_in_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::{dequantize_into, GgmlType};

    /// Random-looking but valid Q4_K blocks.
    fn q4k_blocks(n: usize, seed: u32) -> Vec<u8> {
        let mut s = seed;
        let mut next = || {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (s >> 24) as u8
        };
        let mut out = Vec::with_capacity(n * BLOCK_BYTES);
        for _ in 0..n {
            out.extend(half::f16::from_f32(0.01 + next() as f32 * 1e-4).to_le_bytes());
            out.extend(half::f16::from_f32(0.005 + next() as f32 * 1e-4).to_le_bytes());
            out.extend((0..140).map(|_| next()));
        }
        out
    }

    #[test]
    fn repacked_q4_k_multiplies_like_its_dequantized_matrix() {
        let (rows_a, rows_b, cols) = (48, 16, 512);
        let a = q4k_blocks(rows_a * cols / BLOCK, 1);
        let b = q4k_blocks(rows_b * cols / BLOCK, 2);
        let lin = Int4Linear::from_q4_k(&[(&a, rows_a), (&b, rows_b)], cols, Kind::Float, Device::Cpu).unwrap();
        let mut w = vec![0f32; (rows_a + rows_b) * cols];
        dequantize_into(GgmlType::Q4K, &a, &mut w[..rows_a * cols]);
        dequantize_into(GgmlType::Q4K, &b, &mut w[rows_a * cols..]);
        let w = Tensor::from_slice(&w).view([(rows_a + rows_b) as i64, cols as i64]);
        let x = Tensor::randn([3, cols as i64], (Kind::Float, Device::Cpu));
        let want = x.linear(&w, None::<Tensor>);
        let got = lin.forward(&x).unwrap();
        let err = (&got - &want).abs().max().double_value(&[]);
        let scale = want.abs().max().double_value(&[]);
        assert!(err <= 1e-4 * scale.max(1.0), "max |Δ| {err} (max |y| {scale})");
        // bf16 activations: scales and zeros rounded to bf16
        let lin16 = Int4Linear::from_q4_k(&[(&a, rows_a), (&b, rows_b)], cols, Kind::BFloat16, Device::Cpu).unwrap();
        let got16 = lin16.forward(&x.to_kind(Kind::BFloat16)).unwrap().to_kind(Kind::Float);
        let err16 = (&got16 - &want).abs().max().double_value(&[]);
        assert!(err16 <= 2e-2 * scale.max(1.0), "bf16: max |Δ| {err16} (max |y| {scale})");
        assert!(lin.bytes() < (rows_a + rows_b) * cols, "under a byte per weight: {}", lin.bytes());
    }
}
