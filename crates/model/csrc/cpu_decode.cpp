// Two pieces of the Qwen2 decoder's attention on the CPU, each one call where libtorch's
// op-by-op version is a dozen small ops. At a decode step every tensor is a few KB, so what
// those ops cost is their dispatch and allocation, not arithmetic; and the op-by-op attention
// first copies every cached key and value of the step into one padded tensor.
//
//   bias_rope_(qkv, bias, cos, sin, rope_heads [, k_cache, v_cache, slots])
//       in place on [tokens, heads·d]: qkv += bias, rounded to qkv's precision as libtorch's
//       add rounds it; then the first rope_heads heads of each token (q's and k's) rotated,
//       x·cos + rotate_half(x)·sin in fp32 with rotate_half(x) = [−x₂, x₁], rounded once.
//       With the caches, each token's k and v (the heads after q's) are also copied into their
//       rows at slots[token]: the index_copy_ libtorch would do next, without its dispatch.
//
//   paged_decode_attention(q, k_cache, v_cache, keys, lens, scale)
//       one query token per sequence against that sequence's cached keys and values, read in
//       place at their cache slots (keys[b, 0..lens[b]]): softmax(q·kᵀ·scale)·v. Grouped-query
//       attention: the query heads that share a KV head are done together, so each cached
//       row is read once for all of them. Scores, softmax and the weighted sum are fp32; the
//       output is rounded once to q's precision (the op-by-op version also rounded the scores
//       and the probabilities to it).
//
// Loops are plain C++ that the compiler vectorises per instruction set (CLONES); the work is
// split over libtorch's threads by token (bias_rope_) and by (sequence, KV head).
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu_common.h"

namespace {

using namespace docpipe;

constexpr int64_t MAX_HEAD_DIM = 1024;

template <class P>
inline void bias_rope_row(typename P::T *row, const typename P::T *bias, const float *cos, const float *sin,
                          int64_t width, int64_t rope_heads, int64_t d) {
#pragma omp simd
  for (int64_t i = 0; i < width; i++) row[i] = P::store(P::load(row[i]) + P::load(bias[i]));
  const int64_t half = d / 2;
  float x[MAX_HEAD_DIM];
  for (int64_t h = 0; h < rope_heads; h++) {
    typename P::T *y = row + h * d;
#pragma omp simd
    for (int64_t i = 0; i < d; i++) x[i] = P::load(y[i]);
#pragma omp simd
    for (int64_t i = 0; i < half; i++) y[i] = P::store(x[i] * cos[i] + -x[i + half] * sin[i]);
#pragma omp simd
    for (int64_t i = half; i < d; i++) y[i] = P::store(x[i] * cos[i] + x[i - half] * sin[i]);
  }
}

// Where the caches are given: k's values start at `k_off` in a row, v's at `v_off`, each
// `kv_width` values, stored at cache row slots[t] (`kv_width` values per cache row).
struct RopeShape {
  int64_t width, rope_heads, d;
  const int64_t *slots;
  int64_t k_off, v_off, kv_width;
};

template <class P>
inline void bias_rope_rows(typename P::T *x, const typename P::T *bias, const float *cos, const float *sin,
                           typename P::T *kc, typename P::T *vc, int64_t b, int64_t e, const RopeShape &s) {
  for (int64_t t = b; t < e; t++) {
    typename P::T *row = x + t * s.width;
    bias_rope_row<P>(row, bias, cos + t * s.d, sin + t * s.d, s.width, s.rope_heads, s.d);
    if (s.slots) {
      std::memcpy(kc + s.slots[t] * s.kv_width, row + s.k_off, sizeof(typename P::T) * s.kv_width);
      std::memcpy(vc + s.slots[t] * s.kv_width, row + s.v_off, sizeof(typename P::T) * s.kv_width);
    }
  }
}

CLONES void bias_rope_f32(float *x, const float *bias, const float *cos, const float *sin, float *kc, float *vc,
                          int64_t b, int64_t e, const RopeShape &s) {
  bias_rope_rows<F32>(x, bias, cos, sin, kc, vc, b, e, s);
}
CLONES void bias_rope_bf16(uint16_t *x, const uint16_t *bias, const float *cos, const float *sin, uint16_t *kc,
                           uint16_t *vc, int64_t b, int64_t e, const RopeShape &s) {
  bias_rope_rows<BF16>(x, bias, cos, sin, kc, vc, b, e, s);
}

// One (sequence, KV head): its `group` query heads (rows of q, `q_head` apart) against `n`
// cached rows at `slots`, each row of the cache `row` elements with this head's d values at
// `head_off`. Scratch: scores [group, n], qf and acc [group, d].
struct AttnTask {
  int64_t group, d, n, row, head_off;
  float scale;
};

template <class P>
inline void attend(const typename P::T *q, int64_t q_head, const typename P::T *kc, const typename P::T *vc,
                   const int64_t *slots, typename P::T *out, const AttnTask &a, float *scores, float *qf, float *acc) {
  const int64_t g = a.group, d = a.d, n = a.n;
  for (int64_t j = 0; j < g; j++) {
#pragma omp simd
    for (int64_t i = 0; i < d; i++) qf[j * d + i] = P::load(q[j * q_head + i]);
  }
  for (int64_t t = 0; t < n; t++) {
    const typename P::T *k = kc + slots[t] * a.row + a.head_off;
    for (int64_t j = 0; j < g; j++) {
      const float *qj = qf + j * d;
      float s = 0.f;
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < d; i++) s += qj[i] * P::load(k[i]);
      scores[j * n + t] = s * a.scale;
    }
  }
  for (int64_t j = 0; j < g; j++) {
    float *sj = scores + j * n;
    float mx = sj[0];
    for (int64_t t = 1; t < n; t++) mx = std::max(mx, sj[t]);
    float sum = 0.f;
    for (int64_t t = 0; t < n; t++) {
      sj[t] = std::exp(sj[t] - mx);
      sum += sj[t];
    }
    const float inv = 1.f / sum;
    for (int64_t t = 0; t < n; t++) sj[t] *= inv;
  }
  std::fill(acc, acc + g * d, 0.f);
  for (int64_t t = 0; t < n; t++) {
    const typename P::T *v = vc + slots[t] * a.row + a.head_off;
    for (int64_t j = 0; j < g; j++) {
      const float p = scores[j * n + t];
      float *aj = acc + j * d;
#pragma omp simd
      for (int64_t i = 0; i < d; i++) aj[i] += p * P::load(v[i]);
    }
  }
  for (int64_t j = 0; j < g; j++) {
#pragma omp simd
    for (int64_t i = 0; i < d; i++) out[j * d + i] = P::store(acc[j * d + i]);
  }
}

CLONES void attend_f32(const float *q, int64_t q_head, const float *kc, const float *vc, const int64_t *slots,
                       float *out, const AttnTask &a, float *scores, float *qf, float *acc) {
  attend<F32>(q, q_head, kc, vc, slots, out, a, scores, qf, acc);
}
CLONES void attend_bf16(const uint16_t *q, int64_t q_head, const uint16_t *kc, const uint16_t *vc,
                        const int64_t *slots, uint16_t *out, const AttnTask &a, float *scores, float *qf, float *acc) {
  attend<BF16>(q, q_head, kc, vc, slots, out, a, scores, qf, acc);
}

bool fp32_or_bf16(const at::Tensor &t) { return t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16; }

}  // namespace

// qkv [tokens, width] (contiguous, fp32 or bf16, CPU) += bias [width] (same precision); then
// heads 0..rope_heads of each token (head_dim d = cos.size(-1)) rotated with cos/sin
// [tokens, …, d] fp32 contiguous, in place. Where k_cache is not null: qkv holds q (heads
// 0..rope_heads − kv_heads), k and v (kv_heads each), and each token's k and v are stored at
// row slots[token] (int64 [tokens]) of k_cache and v_cache ([rows, kv_heads, d], contiguous,
// qkv's precision).
extern "C" int docpipe_cpu_bias_rope_(const at::Tensor *qkv_, const at::Tensor *bias_, const at::Tensor *cos_,
                                      const at::Tensor *sin_, int64_t rope_heads, at::Tensor *k_cache,
                                      at::Tensor *v_cache, const at::Tensor *slots_, char *err, size_t err_len) {
  try {
    const at::Tensor &x = *qkv_, &bias = *bias_, &cos = *cos_, &sin = *sin_;
    if (!x.device().is_cpu() || !x.is_contiguous() || x.dim() != 2 || !fp32_or_bf16(x))
      throw std::invalid_argument("bias_rope_: qkv must be a contiguous 2-D fp32 or bf16 CPU tensor");
    const int64_t tokens = x.size(0), width = x.size(1);
    if (!bias.is_contiguous() || bias.scalar_type() != x.scalar_type() || bias.numel() != width)
      throw std::invalid_argument("bias_rope_: bias must be contiguous [" + std::to_string(width) + "] like qkv");
    if (cos.dim() < 1 || cos.sizes() != sin.sizes())
      throw std::invalid_argument("bias_rope_: cos and sin differ in shape");
    const int64_t d = cos.size(-1);
    for (const at::Tensor *t : {&cos, &sin})
      if (!t->device().is_cpu() || !t->is_contiguous() || t->scalar_type() != at::kFloat || t->numel() != tokens * d)
        throw std::invalid_argument("bias_rope_: cos/sin must be contiguous fp32 [tokens, head_dim]");
    if (d <= 0 || d % 2 != 0 || d > MAX_HEAD_DIM || rope_heads < 0 || rope_heads * d > width)
      throw std::invalid_argument("bias_rope_: head_dim " + std::to_string(d) + " and " + std::to_string(rope_heads) +
                                  " rotated heads do not fit rows of " + std::to_string(width));
    RopeShape s{width, rope_heads, d, nullptr, 0, 0, 0};
    if (k_cache) {
      if (!v_cache || !slots_) throw std::invalid_argument("bias_rope_: k_cache without v_cache and slots");
      const at::Tensor &kc = *k_cache, &vc = *v_cache, &slots = *slots_;
      for (const at::Tensor *c : {&kc, &vc})
        if (!c->device().is_cpu() || !c->is_contiguous() || c->dim() != 3 || c->scalar_type() != x.scalar_type() ||
            c->size(2) != d || c->sizes() != kc.sizes())
          throw std::invalid_argument("bias_rope_: the caches must be contiguous [rows, kv_heads, d] in qkv's precision");
      const int64_t kv = kc.size(1), rows = kc.size(0);
      if (rope_heads <= kv || (rope_heads + kv) * d != width)
        throw std::invalid_argument("bias_rope_: rows of " + std::to_string(width) + " are not q, k and v of " +
                                    std::to_string(kv) + " KV heads");
      if (slots.scalar_type() != at::kLong || !slots.is_contiguous() || slots.numel() != tokens)
        throw std::invalid_argument("bias_rope_: slots must be int64 [tokens]");
      const int64_t *sl = slots.data_ptr<int64_t>();
      for (int64_t t = 0; t < tokens; t++)
        if (sl[t] < 0 || sl[t] >= rows)
          throw std::invalid_argument("bias_rope_: cache slot " + std::to_string(sl[t]) + " outside the cache of " +
                                      std::to_string(rows));
      s.slots = sl;
      s.k_off = (rope_heads - kv) * d;
      s.v_off = rope_heads * d;
      s.kv_width = kv * d;
    }
    const float *cp = cos.data_ptr<float>(), *sp = sin.data_ptr<float>();
    if (x.scalar_type() == at::kFloat) {
      float *xp = x.data_ptr<float>();
      const float *bp = bias.data_ptr<float>();
      float *kc = k_cache ? k_cache->data_ptr<float>() : nullptr, *vc = k_cache ? v_cache->data_ptr<float>() : nullptr;
      at::parallel_for(0, tokens, 16, [&](int64_t b, int64_t e) { bias_rope_f32(xp, bp, cp, sp, kc, vc, b, e, s); });
    } else {
      auto xp = reinterpret_cast<uint16_t *>(x.data_ptr());
      auto bp = reinterpret_cast<const uint16_t *>(bias.data_ptr());
      auto kc = k_cache ? reinterpret_cast<uint16_t *>(k_cache->data_ptr()) : nullptr;
      auto vc = k_cache ? reinterpret_cast<uint16_t *>(v_cache->data_ptr()) : nullptr;
      at::parallel_for(0, tokens, 16, [&](int64_t b, int64_t e) { bias_rope_bf16(xp, bp, cp, sp, kc, vc, b, e, s); });
    }
    return 0;
  } catch (const std::exception &e) {
    return fail(e, err, err_len);
  }
}

// q [b, heads, d] (each head's d values contiguous, any stride between tokens), k_cache and
// v_cache [slots, kv_heads, d] contiguous in q's precision, keys [b, ≥ max lens] int64 cache
// slots, lens [b] int64 (≥ 1): out [b, heads·d] in q's precision.
extern "C" int docpipe_cpu_paged_decode_attention(const at::Tensor *q_, const at::Tensor *kc_,
                                                  const at::Tensor *vc_, const at::Tensor *keys_,
                                                  const at::Tensor *lens_, double scale, at::Tensor **out,
                                                  char *err, size_t err_len) {
  try {
    const at::Tensor &q = *q_, &kc = *kc_, &vc = *vc_, &keys = *keys_, &lens = *lens_;
    if (!q.device().is_cpu() || q.dim() != 3 || q.stride(2) != 1 || q.stride(1) != q.size(2) || !fp32_or_bf16(q))
      throw std::invalid_argument("paged_decode_attention: q must be fp32 or bf16 [b, heads, d] on the CPU, heads packed");
    const int64_t b = q.size(0), heads = q.size(1), d = q.size(2);
    for (const at::Tensor *c : {&kc, &vc})
      if (!c->device().is_cpu() || !c->is_contiguous() || c->dim() != 3 || c->scalar_type() != q.scalar_type() ||
          c->size(2) != d || c->sizes() != kc.sizes())
        throw std::invalid_argument("paged_decode_attention: the caches must be contiguous [slots, kv_heads, d] in q's precision");
    const int64_t kv = kc.size(1), slots = kc.size(0);
    if (kv <= 0 || heads % kv != 0)
      throw std::invalid_argument("paged_decode_attention: " + std::to_string(heads) + " query heads for " +
                                  std::to_string(kv) + " KV heads");
    if (keys.scalar_type() != at::kLong || !keys.is_contiguous() || keys.dim() != 2 || keys.size(0) != b ||
        lens.scalar_type() != at::kLong || !lens.is_contiguous() || lens.numel() != b)
      throw std::invalid_argument("paged_decode_attention: keys must be int64 [b, n] and lens int64 [b]");
    const int64_t width = keys.size(1);
    const int64_t *kp = keys.data_ptr<int64_t>(), *lp = lens.data_ptr<int64_t>();
    int64_t longest = 0;
    for (int64_t s = 0; s < b; s++) {
      if (lp[s] < 1 || lp[s] > width)
        throw std::invalid_argument("paged_decode_attention: sequence " + std::to_string(s) + " has " +
                                    std::to_string(lp[s]) + " keys of " + std::to_string(width));
      for (int64_t t = 0; t < lp[s]; t++)
        if (kp[s * width + t] < 0 || kp[s * width + t] >= slots)
          throw std::invalid_argument("paged_decode_attention: cache slot " + std::to_string(kp[s * width + t]) +
                                      " outside the cache of " + std::to_string(slots));
      longest = std::max(longest, lp[s]);
    }
    const int64_t group = heads / kv;
    at::Tensor o = at::empty({b, heads * d}, q.options());
    at::parallel_for(0, b * kv, 1, [&](int64_t first, int64_t last) {
      std::vector<float> scratch(group * longest + 2 * group * d);
      float *scores = scratch.data(), *qf = scores + group * longest, *acc = qf + group * d;
      for (int64_t task = first; task < last; task++) {
        const int64_t s = task / kv, h = task % kv;
        const AttnTask a{group, d, lp[s], kv * d, h * d, float(scale)};
        const int64_t q_off = s * q.stride(0) + h * group * d, o_off = s * heads * d + h * group * d;
        if (q.scalar_type() == at::kFloat) {
          attend_f32(q.data_ptr<float>() + q_off, d, kc.data_ptr<float>(), vc.data_ptr<float>(), kp + s * width,
                     o.data_ptr<float>() + o_off, a, scores, qf, acc);
        } else {
          attend_bf16(reinterpret_cast<const uint16_t *>(q.data_ptr()) + q_off, d,
                      reinterpret_cast<const uint16_t *>(kc.data_ptr()), reinterpret_cast<const uint16_t *>(vc.data_ptr()),
                      kp + s * width, reinterpret_cast<uint16_t *>(o.data_ptr()) + o_off, a, scores, qf, acc);
        }
      }
    });
    *out = new at::Tensor(o);
    return 0;
  } catch (const std::exception &e) {
    return fail(e, err, err_len);
  }
}
