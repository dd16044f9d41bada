// Gemma's RMSNorm on the CPU in one pass over each row, alone, fused with the residual add
// that precedes the next norm, or (q/k norms) with the rotary embedding that follows:
//
//   rms_norm(x)               y  = x / rms(x) · s
//   add_rms_norm(x, h)        x' = x + h / rms(h) · s_h;   y = x' / rms(x') · s_next
//                             (or x' = x + h, without s_h: Qwen2's residual before its norms)
//   rms_norm_rope(x)          y  = rope(x / rms(x) · s)
//
// `s` is `1 + w` in fp32. The arithmetic is fp32 and every result is rounded to the tensor's
// precision exactly where libtorch's op-by-op version rounds it (the normed `h`, the sum `x'`,
// `y`), so the outputs equal the unfused ones up to the order of the sum of squares; the
// unfused version makes six passes over memory per norm instead of one.
//
// The row loops are plain C++ that the compiler vectorises, once per instruction set
// (`target_clones`, chosen when the library loads); rows are split over libtorch's threads.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "cpu_common.h"

namespace {

using namespace docpipe;

template <class P>
inline float inv_rms(const typename P::T *x, int64_t d, float eps) {
  float acc = 0.f;
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < d; i++) {
    float v = P::load(x[i]);
    acc += v * v;
  }
  return 1.f / std::sqrt(acc / float(d) + eps);
}

template <class P>
inline void norm_row(const typename P::T *x, const float *s, typename P::T *y, int64_t d, float eps) {
  float r = inv_rms<P>(x, d, eps);
#pragma omp simd
  for (int64_t i = 0; i < d; i++) y[i] = P::store(P::load(x[i]) * r * s[i]);
}

template <class P>
inline void add_norm_row(const typename P::T *x, const typename P::T *h, const float *sh, const float *sn,
                         typename P::T *xo, typename P::T *y, int64_t d, float eps) {
  if (sh) {
    float rh = inv_rms<P>(h, d, eps);
#pragma omp simd
    for (int64_t i = 0; i < d; i++) {
      float hn = P::load(P::store(P::load(h[i]) * rh * sh[i]));  // the normed h, rounded
      xo[i] = P::store(P::load(x[i]) + hn);
    }
  } else {
#pragma omp simd
    for (int64_t i = 0; i < d; i++) xo[i] = P::store(P::load(x[i]) + P::load(h[i]));
  }
  if (y) norm_row<P>(xo, sn, y, d, eps);
}

// q/k norm then RoPE on one head's row: n = norm(x), out = n·cos + rotate_half(n)·sin, with
// rotate_half(n) = [−n₂, n₁]; rounded after the norm, each product and the sum, as the
// op-by-op version (in the model's precision) rounds them.
template <class P>
inline void norm_rope_row(const typename P::T *x, const float *s, const typename P::T *cos,
                          const typename P::T *sin, typename P::T *out, float *n, int64_t d, float eps) {
  float r = inv_rms<P>(x, d, eps);
  int64_t half = d / 2;
#pragma omp simd
  for (int64_t i = 0; i < d; i++) n[i] = P::load(P::store(P::load(x[i]) * r * s[i]));
#pragma omp simd
  for (int64_t i = 0; i < half; i++) {
    float a = P::load(P::store(n[i] * P::load(cos[i])));
    float b = P::load(P::store(-n[i + half] * P::load(sin[i])));
    out[i] = P::store(a + b);
  }
#pragma omp simd
  for (int64_t i = half; i < d; i++) {
    float a = P::load(P::store(n[i] * P::load(cos[i])));
    float b = P::load(P::store(n[i - half] * P::load(sin[i])));
    out[i] = P::store(a + b);
  }
}

CLONES void norm_rows_f32(const float *x, const float *s, float *y, int64_t b, int64_t e, int64_t d, float eps) {
  for (int64_t r = b; r < e; r++) norm_row<F32>(x + r * d, s, y + r * d, d, eps);
}
CLONES void norm_rows_bf16(const uint16_t *x, const float *s, uint16_t *y, int64_t b, int64_t e, int64_t d,
                           float eps) {
  for (int64_t r = b; r < e; r++) norm_row<BF16>(x + r * d, s, y + r * d, d, eps);
}
CLONES void add_norm_rows_f32(const float *x, const float *h, const float *sh, const float *sn, float *xo, float *y,
                              int64_t b, int64_t e, int64_t d, float eps) {
  for (int64_t r = b; r < e; r++)
    add_norm_row<F32>(x + r * d, h + r * d, sh, sn, xo + r * d, y ? y + r * d : nullptr, d, eps);
}
CLONES void add_norm_rows_bf16(const uint16_t *x, const uint16_t *h, const float *sh, const float *sn,
                               uint16_t *xo, uint16_t *y, int64_t b, int64_t e, int64_t d, float eps) {
  for (int64_t r = b; r < e; r++)
    add_norm_row<BF16>(x + r * d, h + r * d, sh, sn, xo + r * d, y ? y + r * d : nullptr, d, eps);
}

// Rows [b, e) of tokens × heads; x row (t, h) at x + t·st + h·sh, table row t mod p.
struct RopeArgs {
  int64_t heads, d, st, sh, p;
  float eps;
};

template <class P>
inline void norm_rope_rows(const typename P::T *x, const float *s, const typename P::T *cos,
                           const typename P::T *sin, typename P::T *out, int64_t b, int64_t e, const RopeArgs &a) {
  float n[1024];
  for (int64_t r = b; r < e; r++) {
    int64_t t = r / a.heads, h = r % a.heads, pos = t % a.p;
    norm_rope_row<P>(x + t * a.st + h * a.sh, s, cos + pos * a.d, sin + pos * a.d, out + r * a.d, n, a.d, a.eps);
  }
}

CLONES void norm_rope_rows_f32(const float *x, const float *s, const float *cos, const float *sin, float *out,
                               int64_t b, int64_t e, const RopeArgs &a) {
  norm_rope_rows<F32>(x, s, cos, sin, out, b, e, a);
}
CLONES void norm_rope_rows_bf16(const uint16_t *x, const float *s, const uint16_t *cos, const uint16_t *sin,
                                uint16_t *out, int64_t b, int64_t e, const RopeArgs &a) {
  norm_rope_rows<BF16>(x, s, cos, sin, out, b, e, a);
}

void check(const at::Tensor &t, const at::Tensor &like, const char *what) {
  if (!t.device().is_cpu() || !t.is_contiguous() || t.scalar_type() != like.scalar_type() ||
      t.sizes() != like.sizes())
    throw std::invalid_argument(std::string(what) + ": expected a contiguous CPU tensor like x");
}

void check_scale(const at::Tensor &s, int64_t d, const char *what) {
  if (!s.device().is_cpu() || !s.is_contiguous() || s.scalar_type() != at::kFloat || s.dim() != 1 ||
      s.size(0) != d)
    throw std::invalid_argument(std::string(what) + ": expected contiguous fp32 [last dim of x]");
}

constexpr int64_t GRAIN_ROWS = 32;

}  // namespace

// y = rms_norm(x) · s over the last dimension of x (contiguous, fp32 or bf16, CPU).
extern "C" int docpipe_cpu_rms_norm(const at::Tensor *x, const at::Tensor *s, double eps, at::Tensor **y, char *err,
                                    size_t err_len) {
  try {
    check(*x, *x, "x");
    int64_t d = x->size(-1), rows = x->numel() / d;
    check_scale(*s, d, "scale");
    at::Tensor out = at::empty_like(*x);
    const float *sp = s->data_ptr<float>();
    float e = float(eps);
    if (x->scalar_type() == at::kFloat) {
      const float *xp = x->data_ptr<float>();
      float *yp = out.data_ptr<float>();
      at::parallel_for(0, rows, GRAIN_ROWS, [&](int64_t b, int64_t end) { norm_rows_f32(xp, sp, yp, b, end, d, e); });
    } else if (x->scalar_type() == at::kBFloat16) {
      auto xp = reinterpret_cast<const uint16_t *>(x->data_ptr());
      auto yp = reinterpret_cast<uint16_t *>(out.data_ptr());
      at::parallel_for(0, rows, GRAIN_ROWS, [&](int64_t b, int64_t end) { norm_rows_bf16(xp, sp, yp, b, end, d, e); });
    } else {
      throw std::invalid_argument("rms_norm: fp32 or bf16 only");
    }
    *y = new at::Tensor(out);
    return 0;
  } catch (const std::exception &e) {
    return fail(e, err, err_len);
  }
}

// x' = x + rms_norm(h) · s_h (x' = x + h where s_h is null: a pre-norm model's residual), and
// y = rms_norm(x') · s_next when s_next is given (else y is left null).
extern "C" int docpipe_cpu_add_rms_norm(const at::Tensor *x, const at::Tensor *h, const at::Tensor *s_h,
                                        const at::Tensor *s_next, double eps, at::Tensor **x_out, at::Tensor **y,
                                        char *err, size_t err_len) {
  try {
    check(*x, *x, "x");
    check(*h, *x, "h");
    int64_t d = x->size(-1), rows = x->numel() / d;
    if (s_h) check_scale(*s_h, d, "scale of h");
    if (s_next) check_scale(*s_next, d, "scale of the next norm");
    at::Tensor xo = at::empty_like(*x);
    at::Tensor out = s_next ? at::empty_like(*x) : at::Tensor();
    const float *shp = s_h ? s_h->data_ptr<float>() : nullptr;
    const float *snp = s_next ? s_next->data_ptr<float>() : nullptr;
    float e = float(eps);
    if (x->scalar_type() == at::kFloat) {
      const float *xp = x->data_ptr<float>(), *hp = h->data_ptr<float>();
      float *xop = xo.data_ptr<float>(), *yp = s_next ? out.data_ptr<float>() : nullptr;
      at::parallel_for(0, rows, GRAIN_ROWS,
                       [&](int64_t b, int64_t end) { add_norm_rows_f32(xp, hp, shp, snp, xop, yp, b, end, d, e); });
    } else if (x->scalar_type() == at::kBFloat16) {
      auto xp = reinterpret_cast<const uint16_t *>(x->data_ptr());
      auto hp = reinterpret_cast<const uint16_t *>(h->data_ptr());
      auto xop = reinterpret_cast<uint16_t *>(xo.data_ptr());
      auto yp = s_next ? reinterpret_cast<uint16_t *>(out.data_ptr()) : nullptr;
      at::parallel_for(0, rows, GRAIN_ROWS,
                       [&](int64_t b, int64_t end) { add_norm_rows_bf16(xp, hp, shp, snp, xop, yp, b, end, d, e); });
    } else {
      throw std::invalid_argument("add_rms_norm: fp32 or bf16 only");
    }
    *x_out = new at::Tensor(xo);
    *y = s_next ? new at::Tensor(out) : nullptr;
    return 0;
  } catch (const std::exception &e) {
    return fail(e, err, err_len);
  }
}

// out = rope(rms_norm(x) · s) for x [tokens, heads, d] (any token and head strides, the last
// dimension contiguous), cos/sin [p, d] contiguous in x's precision, token t at position
// t mod p. out is contiguous [tokens, heads, d].
extern "C" int docpipe_cpu_rms_norm_rope(const at::Tensor *x, const at::Tensor *s, const at::Tensor *cos,
                                         const at::Tensor *sin, double eps, at::Tensor **out, char *err,
                                         size_t err_len) {
  try {
    if (!x->device().is_cpu() || x->dim() != 3 || x->stride(2) != 1)
      throw std::invalid_argument("rms_norm_rope: x must be [tokens, heads, d] on the CPU, d contiguous");
    int64_t n = x->size(0), heads = x->size(1), d = x->size(2);
    if (d > 1024 || d % 2 != 0) throw std::invalid_argument("rms_norm_rope: head_dim must be even and at most 1024");
    check_scale(*s, d, "scale");
    for (const at::Tensor *t : {cos, sin})
      if (!t->device().is_cpu() || !t->is_contiguous() || t->scalar_type() != x->scalar_type() || t->dim() != 2 ||
          t->size(1) != d || t->size(0) == 0)
        throw std::invalid_argument("rms_norm_rope: cos/sin must be contiguous [positions, d] in x's precision");
    if (cos->sizes() != sin->sizes()) throw std::invalid_argument("rms_norm_rope: cos and sin differ in shape");
    at::Tensor o = at::empty({n, heads, d}, x->options().memory_format(at::MemoryFormat::Contiguous));
    RopeArgs a{heads, d, x->stride(0), x->stride(1), cos->size(0), float(eps)};
    const float *sp = s->data_ptr<float>();
    int64_t rows = n * heads;
    if (x->scalar_type() == at::kFloat) {
      const float *xp = x->data_ptr<float>(), *cp = cos->data_ptr<float>(), *snp = sin->data_ptr<float>();
      float *op = o.data_ptr<float>();
      at::parallel_for(0, rows, GRAIN_ROWS,
                       [&](int64_t b, int64_t e) { norm_rope_rows_f32(xp, sp, cp, snp, op, b, e, a); });
    } else if (x->scalar_type() == at::kBFloat16) {
      auto xp = reinterpret_cast<const uint16_t *>(x->data_ptr());
      auto cp = reinterpret_cast<const uint16_t *>(cos->data_ptr());
      auto snp = reinterpret_cast<const uint16_t *>(sin->data_ptr());
      auto op = reinterpret_cast<uint16_t *>(o.data_ptr());
      at::parallel_for(0, rows, GRAIN_ROWS,
                       [&](int64_t b, int64_t e) { norm_rope_rows_bf16(xp, sp, cp, snp, op, b, e, a); });
    } else {
      throw std::invalid_argument("rms_norm_rope: fp32 or bf16 only");
    }
    *out = new at::Tensor(o);
    return 0;
  } catch (const std::exception &e) {
    return fail(e, err, err_len);
  }
}
