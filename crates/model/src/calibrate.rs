//! The batch budget from the memory available: a calibration pass at start.

use docpipe_batching::Backend;

use crate::device;
use crate::embedder::{EmbedError, SentenceEmbedder};

/// What a calibration pass measured, and the token budget derived from it.
#[derive(Debug, Clone, Copy)]
pub struct Calibration {
    /// Length of the calibration sequence (the longest a chunk can be).
    pub seq_len: usize,
    /// Peak memory of the pass above what was in use before it, per token.
    pub bytes_per_token: u64,
    /// Memory available to forward passes (free device memory, or the CPU's available memory
    /// within the cgroup limit), the calibration pass's own cache included.
    pub available: u64,
    /// Padded tokens per forward pass: `fraction` of `available` over `bytes_per_token`,
    /// whole sequences, at least one and at most `cap`.
    pub budget: usize,
}

/// Pairs of calibration passes, of which the largest cost counts.
const ROUNDS: usize = 2;

/// Derive the per-pass token budget from the memory available. After a warm-up, two forward
/// passes over synthetic sequences of `seq_len` tokens (one, then three of them; twice, the
/// larger cost kept) measure what one more sequence costs at that length (the most per token,
/// as global attention grows with length) as the difference of their peaks, so memory the
/// allocator already holds cancels out.
/// A budget of `available × fraction / bytes_per_token` padded tokens then keeps a pass of
/// full-length chunks within `fraction` of the memory. It is an estimate: a pass that still
/// runs out of memory is split and retried (`docpipe_batching::split_on_failure`).
pub fn calibrate_budget(
    model: &SentenceEmbedder,
    seq_len: usize,
    fraction: f64,
    cap: usize,
) -> Result<Calibration, EmbedError> {
    let device = model.device();
    let seq: Vec<u32> = (0..seq_len).map(|t| 1000 + ((t * 7919) % 100_000) as u32).collect();
    // memory a pass of n sequences adds to what is in use when it starts
    let growth = |n: usize| -> Result<u64, EmbedError> {
        device::reset_peak(device);
        let before = device::in_use(device).unwrap_or(0);
        model.embed(&vec![seq.as_slice(); n])?;
        Ok(device::peak_since_reset(device).unwrap_or(before).saturating_sub(before))
    };
    model.embed(&[seq.as_slice()])?; // one-time allocations (kernels, caches) out of the way

    // On the CPU the peaks are the process's resident memory, which the heap's free lists blur:
    // one pair of passes measured 35 KB per token where the next measured 62 KB (a 2-core AMD
    // EPYC, fp32). The larger of two pairs: a budget too small costs a little speed, one too
    // large the memory it was to keep.
    let mut per_seq = 1;
    for _ in 0..ROUNDS {
        let (one, three) = (growth(1)?, growth(3)?);
        per_seq = per_seq.max(three.saturating_sub(one) / 2);
    }
    let bytes_per_token = per_seq.div_ceil(seq_len as u64).max(1);
    // CUDA: the allocator keeps what the passes needed cached for the next ones
    let cached = if device.is_cuda() { 3 * per_seq } else { 0 };
    let available = device::memory_available(device).map(|a| a + cached).unwrap_or(0);
    let fit = (available as f64 * fraction / bytes_per_token as f64) as usize;
    let budget = (fit / seq_len * seq_len).clamp(seq_len, cap.max(seq_len));
    Ok(Calibration { seq_len, bytes_per_token, available, budget })
}
