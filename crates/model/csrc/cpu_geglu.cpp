// Gated activations on the CPU in one pass, Gemma's GeGLU and Qwen2's SwiGLU: from the
// stacked gate/up projection `[rows, 2·n]` (gate first, as the models stack them) to `[rows, n]`:
//
//   GeGLU:  out = gelu_tanh(gate) · up,   gelu_tanh(x) = ½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
//   SwiGLU: out = silu(gate) · up,        silu(x) = x / (1 + e^(−x))
//
// libtorch does this in three passes (gelu over a strided half, a copy, a product) through an
// accurate vector tanh; here it is one pass with ½·(1 + tanh(z)) = 1 / (1 + e^(−2z)) and an
// exp of a few multiply-adds (range reduction by powers of two and a degree-6 polynomial, as in
// Cephes' expf; relative error ~1e-7, far below bf16's 4e-3). Results are rounded where
// libtorch's version rounds them: the activation, then the product.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu_common.h"

namespace {

using namespace docpipe;

// e^x in fp32 arithmetic that the compiler vectorises: x = k·ln2 + r with |r| ≤ ln2/2,
// e^r by a polynomial, 2^k by building the exponent bits. Inputs are clamped to ±80, well
// inside fp32's normal range, so neither this nor a quotient by it is ever subnormal (the CPU
// computes subnormals by microcode, ~100× slower; at the bounds the activation is x·1e-35
// or x, its bf16 value either way); a NaN stays NaN.
inline float exp_approx(float x) {
  const float hi = 80.0f, lo = -80.0f;
  x = x > hi ? hi : x;
  x = x < lo ? lo : x;
  // round(x / ln2) by adding and removing 1.5·2^23 (exact for |x / ln2| < 2^22)
  const float shifter = 12582912.0f;
  float k = (x * 1.44269504088896341f + shifter) - shifter;
  float r = x - k * 0.693359375f + k * 2.12194440e-4f;  // ln2 in two parts: the first is exact
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  uint32_t bits = uint32_t(int32_t(k) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

template <class P>
inline void geglu_row(const typename P::T *gate, const typename P::T *up, typename P::T *out, int64_t n) {
  const float c = 0.7978845608028654f;  // √(2/π)
#pragma omp simd
  for (int64_t i = 0; i < n; i++) {
    float x = P::load(gate[i]);
    float z = c * (x + 0.044715f * x * x * x);
    float act = P::load(P::store(x / (1.0f + exp_approx(-2.0f * z))));
    out[i] = P::store(act * P::load(up[i]));
  }
}

template <class P>
inline void swiglu_row(const typename P::T *gate, const typename P::T *up, typename P::T *out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++) {
    float x = P::load(gate[i]);
    float act = P::load(P::store(x / (1.0f + exp_approx(-x))));
    out[i] = P::store(act * P::load(up[i]));
  }
}

enum Activation { GELU_TANH = 0, SILU = 1 };

template <class P>
inline void glu_rows(const typename P::T *gu, typename P::T *out, int64_t b, int64_t e, int64_t n, int act) {
  for (int64_t r = b; r < e; r++) {
    if (act == SILU) swiglu_row<P>(gu + r * 2 * n, gu + r * 2 * n + n, out + r * n, n);
    else geglu_row<P>(gu + r * 2 * n, gu + r * 2 * n + n, out + r * n, n);
  }
}

CLONES void glu_rows_f32(const float *gu, float *out, int64_t b, int64_t e, int64_t n, int act) {
  glu_rows<F32>(gu, out, b, e, n, act);
}
CLONES void glu_rows_bf16(const uint16_t *gu, uint16_t *out, int64_t b, int64_t e, int64_t n, int act) {
  glu_rows<BF16>(gu, out, b, e, n, act);
}

constexpr int64_t GRAIN_ROWS = 16;

}  // namespace

// out = act(gate_up[..., :n]) · gate_up[..., n:] for gate_up [..., 2·n] (contiguous, fp32 or
// bf16, CPU), act 0 = gelu_tanh, 1 = silu; out is [..., n].
extern "C" int docpipe_cpu_glu(const at::Tensor *gate_up, int32_t act, at::Tensor **out, char *err, size_t err_len) {
  try {
    const at::Tensor &x = *gate_up;
    if (act != GELU_TANH && act != SILU) throw std::invalid_argument("glu: unknown activation " + std::to_string(act));
    if (!x.device().is_cpu() || !x.is_contiguous() || x.dim() < 1 || x.size(-1) % 2 != 0)
      throw std::invalid_argument("glu: expected a contiguous CPU tensor [..., 2·n]");
    int64_t n = x.size(-1) / 2, rows = n == 0 ? 0 : x.numel() / (2 * n);
    std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
    shape.back() = n;
    at::Tensor o = at::empty(shape, x.options());
    if (x.scalar_type() == at::kFloat) {
      const float *xp = x.data_ptr<float>();
      float *op = o.data_ptr<float>();
      at::parallel_for(0, rows, GRAIN_ROWS, [&](int64_t b, int64_t e) { glu_rows_f32(xp, op, b, e, n, act); });
    } else if (x.scalar_type() == at::kBFloat16) {
      auto xp = reinterpret_cast<const uint16_t *>(x.data_ptr());
      auto op = reinterpret_cast<uint16_t *>(o.data_ptr());
      at::parallel_for(0, rows, GRAIN_ROWS, [&](int64_t b, int64_t e) { glu_rows_bf16(xp, op, b, e, n, act); });
    } else {
      throw std::invalid_argument("glu: fp32 or bf16 only");
    }
    *out = new at::Tensor(o);
    return 0;
  } catch (const std::exception &e) {
    return fail(e, err, err_len);
  }
}
