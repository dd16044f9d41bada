//! The paged KV cache: keys and values live in fixed-size blocks of `block_size` token slots
//! (one pool per layer); a sequence owns a block table, the list of its blocks in order, and
//! token `p` of a sequence lives in slot `table[p / block_size] · block_size + p % block_size`.
//!
//! [`BlockPool`] is the bookkeeping (no tensors): a free list, a reference count per block,
//! and the prefix cache: a full block is known by the hash of its tokens chained with the hash
//! of the blocks before it, so a sequence whose prompt starts with tokens already cached (one
//! document's context, asked several questions) takes those blocks instead of computing them
//! again. A freed block keeps its hash until it is handed out again, so it can be revived.
//! [`KvCache`] holds the tensors: per layer `[blocks · block_size, kv_heads, head_dim]`.

use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};

use tch::{Device, Kind, TchError, Tensor};

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
}

impl KvCache {
    /// `blocks` blocks of `block_size` slots for each of `layers` layers.
    pub fn new(
        layers: usize,
        blocks: usize,
        block_size: usize,
        kv_heads: usize,
        head_dim: usize,
        kind: Kind,
        device: Device,
    ) -> Result<Self, TchError> {
        let shape = [(blocks * block_size) as i64, kv_heads as i64, head_dim as i64];
        let mut k = Vec::with_capacity(layers);
        let mut v = Vec::with_capacity(layers);
        for _ in 0..layers {
            k.push(Tensor::f_zeros(shape, (kind, device))?);
            v.push(Tensor::f_zeros(shape, (kind, device))?);
        }
        Ok(Self { block_size, k, v })
    }

    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Bytes one token takes across all layers (keys and values).
    pub fn bytes_per_token(&self) -> usize {
        self.k.iter().chain(&self.v).map(|t| t.numel() / t.size()[0] as usize * t.kind().elt_size_in_bytes()).sum()
    }

    /// Store `k`, `v` (`[tokens, kv_heads, head_dim]`) of layer `layer` at `slots`.
    pub fn write(&mut self, layer: usize, slots: &Tensor, k: &Tensor, v: &Tensor) -> Result<(), TchError> {
        let kind = self.k[layer].kind();
        let _ = self.k[layer].f_index_copy_(0, slots, &k.f_to_kind(kind)?)?;
        let _ = self.v[layer].f_index_copy_(0, slots, &v.f_to_kind(kind)?)?;
        Ok(())
    }

    /// Keys and values at `slots` (any shape `S`): `[S…, kv_heads, head_dim]`.
    pub fn gather(&self, layer: usize, slots: &Tensor) -> Result<(Tensor, Tensor), TchError> {
        let flat = slots.f_reshape([-1])?;
        let mut shape = slots.size();
        shape.extend_from_slice(&self.k[layer].size()[1..]);
        let k = self.k[layer].f_index_select(0, &flat)?.f_view(shape.as_slice())?;
        let v = self.v[layer].f_index_select(0, &flat)?.f_view(shape.as_slice())?;
        Ok((k, v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
