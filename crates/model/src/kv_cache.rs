//! The paged KV cache: keys and values live in fixed-size blocks of `block_size` token slots
//! (one pool per layer); a sequence owns a block table, the list of its blocks in order, and
//! token `p` of a sequence lives in slot `table[p / block_size] · block_size + p % block_size`.
//!
//! [`BlockPool`] is the bookkeeping (no tensors): a free list, a reference count per block,
//! and the prefix cache: a full block is known by the hash of its tokens chained with the hash
//! of the blocks before it, so a sequence whose prompt starts with tokens already cached (one
//! document's context, asked several questions) takes those blocks instead of computing them
//! again. A freed block keeps its hash until it is handed out again, so it can be revived.
//! [`KvCache`] holds the tensors: per layer `[blocks · block_size, kv_heads, head_dim]`, in
//! the compute precision, or in int8 with one scale per token, KV head and group of 32 values
//! (symmetric, `max |x| / 127`; a few channels of a key are far larger than the rest, and a
//! scale per group keeps them from flattening the others): 1 byte per value and 4 per 32
//! values' scale instead of 2 bytes per value in bf16, dequantized when gathered.

use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};

use tch::{Device, Kind, TchError, Tensor};

/// The cache's storage precision as a user names it (`--kv-dtype`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KvDtype {
    /// The decoder's own precision.
    #[default]
    Auto,
    Bf16,
    Fp16,
    Fp32,
    /// Quantized: one fp32 scale per 32 values of a token's key or value in a KV head.
    Int8,
}

impl std::str::FromStr for KvDtype {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s.trim() {
            "auto" => Self::Auto,
            "bf16" => Self::Bf16,
            "fp16" => Self::Fp16,
            "fp32" => Self::Fp32,
            "int8" => Self::Int8,
            other => return Err(format!("{other:?}: expected auto, bf16, fp16, fp32 or int8")),
        })
    }
}

impl KvDtype {
    /// The storage kind for a decoder computing in `compute`.
    pub fn kind(self, compute: Kind) -> Kind {
        match self {
            Self::Auto => compute,
            Self::Bf16 => Kind::BFloat16,
            Self::Fp16 => Kind::Half,
            Self::Fp32 => Kind::Float,
            Self::Int8 => Kind::Int8,
        }
    }
}

/// Block bookkeeping for the cache.
#[derive(Debug)]
pub struct BlockPool {
    block_size: usize,
    refs: Vec<u32>,
    /// Blocks nobody holds, oldest first (the front is reused first).
    free: VecDeque<u32>,
    /// Hash of a full block's chained contents → block, and back.
    by_hash: HashMap<u64, u32>,
    hash_of: Vec<Option<u64>>,
}

/// The chained hash of a full block: its parent's hash and its tokens.
pub fn block_hash(parent: Option<u64>, tokens: &[u32]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    parent.hash(&mut h);
    tokens.hash(&mut h);
    h.finish()
}

impl BlockPool {
    pub fn new(blocks: usize, block_size: usize) -> Self {
        Self {
            block_size,
            refs: vec![0; blocks],
            free: (0..blocks as u32).collect(),
            by_hash: HashMap::new(),
            hash_of: vec![None; blocks],
        }
    }

    pub fn block_size(&self) -> usize {
        self.block_size
    }

    pub fn total(&self) -> usize {
        self.refs.len()
    }

    /// Blocks not held by any sequence (cached prefixes among them may be reused).
    pub fn free(&self) -> usize {
        self.free.len()
    }

    pub fn used(&self) -> usize {
        self.total() - self.free()
    }

    /// A block for new tokens, or `None` when every block is held.
    pub fn allocate(&mut self) -> Option<u32> {
        let b = self.free.pop_front()?;
        if let Some(h) = self.hash_of[b as usize].take() {
            self.by_hash.remove(&h);
        }
        self.refs[b as usize] = 1;
        Some(b)
    }

    /// Let go of a block; at zero references it is free (and keeps its hash until reused).
    pub fn release(&mut self, b: u32) {
        let r = &mut self.refs[b as usize];
        debug_assert!(*r > 0, "block {b} released more often than taken");
        *r = r.saturating_sub(1);
        if *r == 0 {
            self.free.push_back(b);
        }
    }

    /// One more holder of a block already held (a forked beam shares its parent's blocks).
    pub fn retain(&mut self, b: u32) {
        debug_assert!(self.refs[b as usize] > 0, "block {b} retained while free");
        self.refs[b as usize] += 1;
    }

    pub fn references(&self, b: u32) -> u32 {
        self.refs[b as usize]
    }

    /// The cached blocks holding the longest run of whole leading blocks of `tokens`, taken
    /// (referenced) for the caller, with their chained hashes; at most `max_blocks`.
    pub fn take_prefix(&mut self, tokens: &[u32], max_blocks: usize) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        let mut parent = None;
        for chunk in tokens.chunks_exact(self.block_size).take(max_blocks) {
            let h = block_hash(parent, chunk);
            let Some(&b) = self.by_hash.get(&h) else { break };
            if self.refs[b as usize] == 0 {
                if let Some(i) = self.free.iter().position(|&f| f == b) {
                    self.free.remove(i);
                }
            }
            self.refs[b as usize] += 1;
            out.push((b, h));
            parent = Some(h);
        }
        out
    }

    /// How many whole leading blocks of `tokens` the cache holds (without taking them).
    pub fn cached_blocks(&self, tokens: &[u32]) -> usize {
        let mut parent = None;
        let mut n = 0;
        for chunk in tokens.chunks_exact(self.block_size) {
            let h = block_hash(parent, chunk);
            if !self.by_hash.contains_key(&h) {
                break;
            }
            n += 1;
            parent = Some(h);
        }
        n
    }

    /// Record that block `b` now holds the full block of tokens with chained hash `h` (its
    /// keys and values are written), so later sequences can share it.
    pub fn publish(&mut self, b: u32, h: u64) {
        if self.by_hash.contains_key(&h) || self.hash_of[b as usize].is_some() {
            return;
        }
        self.by_hash.insert(h, b);
        self.hash_of[b as usize] = Some(h);
    }
}

/// The cache's tensors.
pub struct KvCache {
    block_size: usize,
    k: Vec<Tensor>,
    v: Vec<Tensor>,
    /// int8 storage: per layer `[slots, kv_heads, groups]` fp32 scales of `k` and `v` (else
    /// empty), one per [`INT8_GROUP`] values.
    k_scale: Vec<Tensor>,
    v_scale: Vec<Tensor>,
    groups: i64,
    /// The precision keys and values are gathered in.
    compute: Kind,
}

/// Values of a key or value vector that share one int8 scale.
pub const INT8_GROUP: usize = 32;

/// Symmetric int8 of `x` (`[tokens, kv_heads, head_dim]`) in `groups` groups per vector:
/// the values `[tokens, kv_heads, head_dim]` and the scales `[tokens, kv_heads, groups]`.
fn quantize(x: &Tensor, groups: i64) -> Result<(Tensor, Tensor), TchError> {
    let size = x.size();
    let (t, h, d) = (size[0], size[1], size[2]);
    let x = x.f_to_kind(Kind::Float)?.f_reshape([t, h, groups, d / groups])?;
    let scale = x.f_abs()?.f_amax([-1].as_slice(), true)?.f_clamp_min(1e-8)?.f_div_scalar(127.0)?;
    let q = x.f_div(&scale)?.f_round()?.f_clamp(-127, 127)?.f_to_kind(Kind::Int8)?.f_reshape([t, h, d])?;
    Ok((q, scale.f_reshape([t, h, groups])?))
}

/// `q · scale` back in fp32, for int8 values `[S…, h, d]` and scales `[S…, h, groups]`.
fn dequantize(q: &Tensor, scale: &Tensor, groups: i64) -> Result<Tensor, TchError> {
    let size = q.size();
    let d = size[size.len() - 1];
    let mut grouped = size[..size.len() - 1].to_vec();
    grouped.extend_from_slice(&[groups, d / groups]);
    q.f_to_kind(Kind::Float)?.f_reshape(grouped.as_slice())?.f_mul(&scale.f_unsqueeze(-1)?)?.f_reshape(size.as_slice())
}

impl KvCache {
    /// `blocks` blocks of `block_size` slots for each of `layers` layers, stored as `kind`
    /// (`Kind::Int8`: quantized) and gathered as `compute`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        layers: usize,
        blocks: usize,
        block_size: usize,
        kv_heads: usize,
        head_dim: usize,
        kind: Kind,
        compute: Kind,
        device: Device,
    ) -> Result<Self, TchError> {
        let slots = (blocks * block_size) as i64;
        let shape = [slots, kv_heads as i64, head_dim as i64];
        let groups = if head_dim % INT8_GROUP == 0 { (head_dim / INT8_GROUP) as i64 } else { 1 };
        let mut c = Self {
            block_size,
            k: Vec::new(),
            v: Vec::new(),
            k_scale: Vec::new(),
            v_scale: Vec::new(),
            groups,
            compute,
        };
        for _ in 0..layers {
            c.k.push(Tensor::f_zeros(shape, (kind, device))?);
            c.v.push(Tensor::f_zeros(shape, (kind, device))?);
            if kind == Kind::Int8 {
                c.k_scale.push(Tensor::f_zeros([slots, kv_heads as i64, groups], (Kind::Float, device))?);
                c.v_scale.push(Tensor::f_zeros([slots, kv_heads as i64, groups], (Kind::Float, device))?);
            }
        }
        Ok(c)
    }

    fn quantized(&self) -> bool {
        !self.k_scale.is_empty()
    }

    /// Layer `layer`'s key and value pools `[slots, kv_heads, head_dim]` as stored, for a
    /// kernel that reads them in place; `None` where they are not stored in the compute
    /// precision (int8, or a storage kind other than the model's).
    pub fn pools(&self, layer: usize) -> Option<(&Tensor, &Tensor)> {
        self.in_compute_precision(layer).then(|| (&self.k[layer], &self.v[layer]))
    }

    /// [`KvCache::pools`] for a kernel that writes into them.
    pub fn pools_mut(&mut self, layer: usize) -> Option<(&mut Tensor, &mut Tensor)> {
        self.in_compute_precision(layer).then(|| (&mut self.k[layer], &mut self.v[layer]))
    }

    fn in_compute_precision(&self, layer: usize) -> bool {
        !self.quantized() && self.k.get(layer).is_some_and(|k| k.kind() == self.compute)
    }

    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Bytes one token takes across all layers (keys and values, and their scales).
    pub fn bytes_per_token(&self) -> usize {
        self.k
            .iter()
            .chain(&self.v)
            .chain(&self.k_scale)
            .chain(&self.v_scale)
            .map(|t| t.numel() / t.size()[0] as usize * t.kind().elt_size_in_bytes())
            .sum()
    }

    /// Store `k`, `v` (`[tokens, kv_heads, head_dim]`) of layer `layer` at `slots`.
    pub fn write(&mut self, layer: usize, slots: &Tensor, k: &Tensor, v: &Tensor) -> Result<(), TchError> {
        if self.quantized() {
            let (kq, ks) = quantize(k, self.groups)?;
            let (vq, vs) = quantize(v, self.groups)?;
            let _ = self.k[layer].f_index_copy_(0, slots, &kq)?;
            let _ = self.v[layer].f_index_copy_(0, slots, &vq)?;
            let _ = self.k_scale[layer].f_index_copy_(0, slots, &ks)?;
            let _ = self.v_scale[layer].f_index_copy_(0, slots, &vs)?;
            return Ok(());
        }
        let kind = self.k[layer].kind();
        let _ = self.k[layer].f_index_copy_(0, slots, &k.f_to_kind(kind)?)?;
        let _ = self.v[layer].f_index_copy_(0, slots, &v.f_to_kind(kind)?)?;
        Ok(())
    }

    /// Copy block `src`'s keys and values, in every layer, into block `dst`.
    pub fn copy_block(&mut self, src: u32, dst: u32) -> Result<(), TchError> {
        let bs = self.block_size as i64;
        for t in
            self.k.iter_mut().chain(self.v.iter_mut()).chain(self.k_scale.iter_mut()).chain(self.v_scale.iter_mut())
        {
            let from = t.f_narrow(0, src as i64 * bs, bs)?;
            let _ = t.f_narrow(0, dst as i64 * bs, bs)?.f_copy_(&from)?;
        }
        Ok(())
    }

    /// Keys and values at `slots` (any shape `S`): `[S…, kv_heads, head_dim]`.
    pub fn gather(&self, layer: usize, slots: &Tensor) -> Result<(Tensor, Tensor), TchError> {
        let flat = slots.f_reshape([-1])?;
        let mut shape = slots.size();
        shape.extend_from_slice(&self.k[layer].size()[1..]);
        let mut k = self.k[layer].f_index_select(0, &flat)?;
        let mut v = self.v[layer].f_index_select(0, &flat)?;
        if self.quantized() {
            k = dequantize(&k, &self.k_scale[layer].f_index_select(0, &flat)?, self.groups)?;
            v = dequantize(&v, &self.v_scale[layer].f_index_select(0, &flat)?, self.groups)?;
        }
        let k = k.f_to_kind(self.compute)?.f_view(shape.as_slice())?;
        let v = v.f_to_kind(self.compute)?.f_view(shape.as_slice())?;
        Ok((k, v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int8_storage_round_trips_within_half_a_step_and_halves_the_bytes() {
        let (heads, dim) = (2, 64);
        let mut q8 = KvCache::new(1, 4, 4, heads, dim, Kind::Int8, Kind::Float, Device::Cpu).unwrap();
        let f32c = KvCache::new(1, 4, 4, heads, dim, Kind::Float, Kind::Float, Device::Cpu).unwrap();
        let bf16 = KvCache::new(1, 4, 4, heads, dim, Kind::BFloat16, Kind::BFloat16, Device::Cpu).unwrap();
        assert_eq!(f32c.bytes_per_token(), 2 * heads * dim * 4);
        assert_eq!(bf16.bytes_per_token(), 2 * heads * dim * 2);
        assert_eq!(q8.bytes_per_token(), 2 * heads * (dim + 4 * dim / INT8_GROUP));
        tch::manual_seed(3);
        let k = Tensor::randn([3, heads as i64, dim as i64], (Kind::Float, Device::Cpu)).f_mul_scalar(5.0).unwrap();
        let v = Tensor::randn([3, heads as i64, dim as i64], (Kind::Float, Device::Cpu));
        let slots = Tensor::from_slice(&[1i64, 6, 9]);
        q8.write(0, &slots, &k, &v).unwrap();
        let (gk, gv) = q8.gather(0, &slots).unwrap();
        assert_eq!(gk.size(), vec![3, heads as i64, dim as i64]);
        for (x, g) in [(&k, &gk), (&v, &gv)] {
            let grouped = |t: &Tensor| t.reshape([3, heads as i64, (dim / INT8_GROUP) as i64, INT8_GROUP as i64]);
            let step = grouped(x).abs().amax([-1].as_slice(), true).f_div_scalar(127.0).unwrap();
            let err = (grouped(g) - grouped(x)).abs().f_div(&step).unwrap().max().double_value(&[]);
            assert!(err <= 0.5 + 1e-4, "error {err} steps");
        }
        // a copied block carries its scales
        q8.copy_block(2, 0).unwrap();
        let (ck, _) = q8.gather(0, &Tensor::from_slice(&[1i64])).unwrap();
        let (ok, _) = q8.gather(0, &Tensor::from_slice(&[9i64])).unwrap();
        assert!(ck.allclose(&ok, 0.0, 0.0, false));
    }

    #[test]
    fn prefix_blocks_are_shared_and_revived_until_reused() {
        let mut pool = BlockPool::new(4, 2);
        let tokens = [1, 2, 3, 4, 5];
        let a = [pool.allocate().unwrap(), pool.allocate().unwrap()];
        let h0 = block_hash(None, &tokens[0..2]);
        pool.publish(a[0], h0);
        pool.publish(a[1], block_hash(Some(h0), &tokens[2..4]));
        // a second sequence with the same prompt takes both blocks
        let shared: Vec<u32> = pool.take_prefix(&tokens, 8).into_iter().map(|(b, _)| b).collect();
        assert_eq!(shared, a);
        assert_eq!(pool.references(a[0]), 2);
        // a different second block shares only the first
        assert_eq!(pool.take_prefix(&[1, 2, 9, 9], 8), vec![(a[0], h0)]);
        for b in shared.into_iter().chain(a).chain([a[0]]) {
            pool.release(b);
        }
        assert_eq!(pool.free(), 4);
        // freed but not reused: still found
        assert_eq!(pool.take_prefix(&tokens, 1), vec![(a[0], h0)]);
        assert_eq!(pool.free(), 3);
        // reusing a freed block forgets its contents
        let mut got = Vec::new();
        while let Some(b) = pool.allocate() {
            got.push(b);
        }
        assert_eq!(got.len(), 3);
        pool.release(a[0]);
        for b in got {
            pool.release(b);
        }
        assert_eq!(pool.take_prefix(&tokens, 8), vec![(a[0], h0)]);
    }
}
