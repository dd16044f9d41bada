// Matrix products with GGUF k-quant weights (Q4_K, Q6_K) read in their own 4.5- and 6.6-bit
// blocks, as llama.cpp does: the activations are quantized to 8 bits per 256-value block
// (one fp32 scale, and the sums of each 16 values), and each 256-value block's dot product is
// integer arithmetic on the CPU's VNNI units, scaled once per block.
//
// A 256-value weight block in both formats is `d·sc_k·q_i − dmin·m_k` for its sixteen
// 16-value sub-blocks k (Q4_K's 32-value sub-blocks give two k each; Q6_K has dmin = d and
// m_k = 32·sc_k, its q_i being 6 bits stored unsigned with an offset of 32). With x_i = dx·p_i:
//
//   Σ_i w_i·x_i = dx · (d · Σ_k sc_k · Σ_{i∈k} q_i·p_i  −  dmin · Σ_k m_k · Σ_{i∈k} p_i)
//
// The inner sums are u8×s8 products summed in pairs (vpmaddubsw, at most 2·63·127) and then
// multiplied by the scales and summed in pairs again (vpdpwssd), in int32 lanes; the lanes
// are turned to fp32 once per block. Weights are unpacked once per tile of activation rows, so
// one call serves a decode step (a few rows: the weights are streamed once) and a prompt chunk.
//
// Without AVX512-VNNI (checked once, at the first call) the same integer arithmetic runs in
// 256-bit AVX2 lanes, and without AVX2 in scalar code: slower, and equal up to the order of the
// fp32 sums.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/Half.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu_common.h"

namespace {

using namespace docpipe;

constexpr int64_t QK = 256;  // values per block
constexpr int Q4_K = 12, Q6_K = 14;  // ggml's type ids
constexpr int64_t Q4_K_BYTES = 144, Q6_K_BYTES = 210;

// An activation row quantized: QK int8 per block, then one fp32 scale per block, then the
// int16 sums of each 16 values.
struct Q8Row {
  static int64_t bytes(int64_t k) { return k + 4 * (k / QK) + 2 * (k / 16); }
};

inline float f16_to_float(const uint8_t *p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return float(c10::Half(h, c10::Half::from_bits()));
}

template <class P>
void quantize_row(const typename P::T *x, int64_t k, uint8_t *out) {
  int8_t *q = reinterpret_cast<int8_t *>(out);
  float *d = reinterpret_cast<float *>(out + k);
  int16_t *sums = reinterpret_cast<int16_t *>(out + k + 4 * (k / QK));
  for (int64_t b = 0; b < k / QK; b++) {
    const typename P::T *xb = x + b * QK;
    float amax = 0.0f;
    for (int64_t i = 0; i < QK; i++) amax = std::max(amax, std::fabs(P::load(xb[i])));
    const float scale = amax / 127.0f, inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    d[b] = scale;
    for (int64_t s = 0; s < QK / 16; s++) {
      int sum = 0;
      for (int64_t i = 16 * s; i < 16 * s + 16; i++) {
        int v = int(std::nearbyint(P::load(xb[i]) * inv));
        v = std::min(127, std::max(-127, v));
        q[b * QK + i] = int8_t(v);
        sum += v;
      }
      sums[b * (QK / 16) + s] = int16_t(sum);
    }
  }
}

// One weight block unpacked: q as unsigned bytes in value order, the sixteen sub-block
// scales and mins, d and dmin.
struct Block {
  alignas(64) uint8_t q[QK];
  int16_t sc[16];
  int16_t m[16];
  float d, dmin;
};

// Q4_K's 12 bytes of 6-bit scales and mins (at b + 4) as eight scales then eight mins, one per
// byte, rearranged with 32-bit masks as llama.cpp does.
inline void q4_k_scales_mins(const uint8_t *b, uint8_t out[16]) {
  uint32_t u[4];
  std::memcpy(u, b + 4, 12);
  const uint32_t m1 = 0x3f3f3f3f, m2 = 0x0f0f0f0f, m3 = 0x03030303;
  u[3] = ((u[2] >> 4) & m2) | (((u[1] >> 6) & m3) << 4);
  const uint32_t mins_lo = u[1] & m1;
  u[1] = (u[2] & m2) | (((u[0] >> 6) & m3) << 4);
  u[2] = mins_lo;
  u[0] &= m1;
  std::memcpy(out, u, 16);
}

inline void unpack_q4_k(const uint8_t *b, Block &o) {
  o.d = f16_to_float(b);
  o.dmin = f16_to_float(b + 2);
  uint8_t sm[16];
  q4_k_scales_mins(b, sm);
  for (int k = 0; k < 16; k++) {
    o.sc[k] = sm[k / 2];
    o.m[k] = sm[8 + k / 2];
  }
  const uint8_t *qs = b + 16;
  for (int g = 0; g < 4; g++)
    for (int l = 0; l < 32; l++) {
      o.q[64 * g + l] = qs[32 * g + l] & 0x0f;
      o.q[64 * g + 32 + l] = qs[32 * g + l] >> 4;
    }
}

inline void unpack_q6_k(const uint8_t *b, Block &o) {
  const uint8_t *ql = b, *qh = b + 128;
  const int8_t *sc = reinterpret_cast<const int8_t *>(b + 192);
  o.d = o.dmin = f16_to_float(b + 208);
  for (int k = 0; k < 16; k++) {
    o.sc[k] = sc[k];
    o.m[k] = int16_t(32 * sc[k]);
  }
  for (int n = 0; n < 2; n++)
    for (int l = 0; l < 32; l++) {
      const uint8_t a = ql[64 * n + l], c = ql[64 * n + l + 32], hb = qh[32 * n + l];
      o.q[128 * n + l] = (a & 0x0f) | ((hb & 3) << 4);
      o.q[128 * n + l + 32] = (c & 0x0f) | (((hb >> 2) & 3) << 4);
      o.q[128 * n + l + 64] = (a >> 4) | (((hb >> 4) & 3) << 4);
      o.q[128 * n + l + 96] = (c >> 4) | (((hb >> 6) & 3) << 4);
    }
}

// Σ over one block, in the exact integer arithmetic the vector path does.
inline float block_dot_scalar(const Block &w, const int8_t *p, float dx, const int16_t *psum) {
  int32_t s1 = 0, s2 = 0;
  for (int k = 0; k < 16; k++) {
    int32_t inner = 0;
    for (int i = 16 * k; i < 16 * k + 16; i++) inner += int32_t(w.q[i]) * p[i];
    s1 += w.sc[k] * inner;
    s2 += w.m[k] * psum[k];
  }
  return dx * (w.d * float(s1) - w.dmin * float(s2));
}

// A tile of weight rows against a tile of activation rows, y[m][n] over all of K.
struct Problem {
  const uint8_t *xq;  // activation rows, Q8Row layout
  int64_t rows, k;
  const uint8_t *w;  // weight rows in GGUF blocks
  int type;
  int64_t n;
  float *y;      // [rows, ldy] results in fp32,
  uint16_t *y16;  // or in bf16 (one of the two is set)
  int64_t ldy;
  void store(int64_t m, int64_t n, float v) const {
    if (y16) y16[m * ldy + n] = float_to_bf16(v);
    else y[m * ldy + n] = v;
  }
  int64_t row_bytes() const { return (k / QK) * (type == Q4_K ? Q4_K_BYTES : Q6_K_BYTES); }
  int64_t xq_bytes() const { return Q8Row::bytes(k); }
};

// A scratch array of over-aligned blocks (std::vector does not align them here).
template <class T>
struct Aligned {
  T *p;
  explicit Aligned(int64_t n) : p(static_cast<T *>(std::aligned_alloc(alignof(T), sizeof(T) * std::max<int64_t>(n, 1)))) {
    if (!p) throw std::bad_alloc();
  }
  ~Aligned() { std::free(p); }
  Aligned(const Aligned &) = delete;
  Aligned &operator=(const Aligned &) = delete;
  T &operator[](int64_t i) { return p[i]; }
};

constexpr int64_t TILE_M = 32;  // activation rows per pass over an unpacked weight row tile
constexpr int64_t TILE_N = 4;   // weight rows unpacked at a time, at most
constexpr int64_t TILE_BYTES = 24 << 10;  // and at most this many bytes of them

void rows_scalar(const Problem &pb, int64_t n0, int64_t n1) {
  const int64_t nb = pb.k / QK;
  Aligned<Block> blocks(nb);
  for (int64_t n = n0; n < n1; n++) {
    const uint8_t *wr = pb.w + n * pb.row_bytes();
    for (int64_t b = 0; b < nb; b++) {
      if (pb.type == Q4_K) unpack_q4_k(wr + b * Q4_K_BYTES, blocks[b]);
      else unpack_q6_k(wr + b * Q6_K_BYTES, blocks[b]);
    }
    for (int64_t m = 0; m < pb.rows; m++) {
      const uint8_t *x = pb.xq + m * pb.xq_bytes();
      const int8_t *p = reinterpret_cast<const int8_t *>(x);
      const float *dx = reinterpret_cast<const float *>(x + pb.k);
      const int16_t *ps = reinterpret_cast<const int16_t *>(x + pb.k + 4 * nb);
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; b++) acc += block_dot_scalar(blocks[b], p + b * QK, dx[b], ps + 16 * b);
      pb.store(m, n, acc);
    }
  }
}

#define VNNI __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512dq")))

// A block unpacked for the vector loop: 4 × 64 unsigned values, for each 64 the scales of its
// 32 value pairs, and the 16 mins. (alignas: in code built for the baseline ISA, as this file
// is, a 512-bit vector type is only 16-byte aligned.)
struct alignas(64) VBlock {
  __m512i q[4];
  __m512i sc[4];
  __m256i m;
  float d, dmin;
};

// Permutation indices: which 16-bit scale each value pair of a 64-value vector takes. Q6_K's
// scales are per 16 values (pair e of vector v: sub-block 4v + e/8), Q4_K's per 32 (2v + e/16);
// and Q4_K's mins spread to the 16 sums of 16 values (k/2).
struct ScaleIndex {
  alignas(64) int16_t by16[4][32];
  alignas(64) int16_t by32[4][32];
  alignas(32) int16_t min32[16];
  ScaleIndex() {
    for (int v = 0; v < 4; v++)
      for (int e = 0; e < 32; e++) {
        by16[v][e] = int16_t(4 * v + e / 8);
        by32[v][e] = int16_t(2 * v + e / 16);
      }
    for (int k = 0; k < 16; k++) min32[k] = int16_t(k / 2);
  }
};
const ScaleIndex SCALE_INDEX;

VNNI inline float f16c(const uint8_t *p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// An activation row quantized as quantize_row does it, 16 values at a time: the same fp32
// products, rounded to nearest even as nearbyint rounds them, so the bytes are the same.
VNNI inline __m512 load16(const float *p) { return _mm512_loadu_ps(p); }
VNNI inline __m512 load16(const uint16_t *p) {
  const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}

template <class P>
VNNI void quantize_row_vnni(const typename P::T *x, int64_t k, uint8_t *out) {
  int8_t *q = reinterpret_cast<int8_t *>(out);
  float *d = reinterpret_cast<float *>(out + k);
  int16_t *sums = reinterpret_cast<int16_t *>(out + k + 4 * (k / QK));
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  for (int64_t b = 0; b < k / QK; b++) {
    const typename P::T *xb = x + b * QK;
    __m512 vmax = _mm512_setzero_ps();
    for (int64_t i = 0; i < QK; i += 16) vmax = _mm512_max_ps(vmax, _mm512_abs_ps(load16(xb + i)));
    const float amax = _mm512_reduce_max_ps(vmax);
    const float scale = amax / 127.0f, inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    d[b] = scale;
    const __m512 vinv = _mm512_set1_ps(inv);
    for (int64_t s = 0; s < QK / 16; s++) {
      const __m512 v = _mm512_roundscale_ps(_mm512_mul_ps(load16(xb + 16 * s), vinv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      const __m512i iv = _mm512_min_epi32(hi, _mm512_max_epi32(lo, _mm512_cvtps_epi32(v)));
      _mm_storeu_si128(reinterpret_cast<__m128i *>(q + b * QK + 16 * s), _mm512_cvtepi32_epi8(iv));
      sums[b * (QK / 16) + s] = int16_t(_mm512_reduce_add_epi32(iv));
    }
  }
}

VNNI inline void vunpack_q4_k(const uint8_t *b, VBlock &o) {
  o.d = f16c(b);
  o.dmin = f16c(b + 2);
  alignas(16) uint8_t u[16];
  q4_k_scales_mins(b, u);
  const __m128i sm = _mm_load_si128(reinterpret_cast<const __m128i *>(u));  // sc[0..8], m[0..8]
  const __m512i sc = _mm512_castsi128_si512(_mm_cvtepu8_epi16(sm));
  for (int v = 0; v < 4; v++)
    o.sc[v] = _mm512_permutexvar_epi16(_mm512_load_si512(SCALE_INDEX.by32[v]), sc);
  o.m = _mm256_permutexvar_epi16(_mm256_load_si256(reinterpret_cast<const __m256i *>(SCALE_INDEX.min32)),
                                 _mm256_castsi128_si256(_mm_cvtepu8_epi16(_mm_srli_si128(sm, 8))));
  const uint8_t *qs = b + 16;
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  for (int g = 0; g < 4; g++) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(qs + 32 * g));
    const __m256i lo = _mm256_and_si256(raw, low4);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
    o.q[g] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
  }
}

VNNI inline void vunpack_q6_k(const uint8_t *b, VBlock &o) {
  const uint8_t *ql = b, *qh = b + 128;
  o.d = o.dmin = f16c(b + 208);
  const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(b + 192)));
  const __m512i s = _mm512_castsi256_si512(sc16);
  for (int v = 0; v < 4; v++) o.sc[v] = _mm512_permutexvar_epi16(_mm512_load_si512(SCALE_INDEX.by16[v]), s);
  o.m = _mm256_slli_epi16(sc16, 5);
  const __m512i low4 = _mm512_set1_epi8(0x0f), low2 = _mm512_set1_epi8(3);
  for (int n = 0; n < 2; n++) {
    const __m512i l = _mm512_loadu_si512(ql + 64 * n);  // [ql0 | ql1]: 64 bytes
    const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(qh + 32 * n));
    // high bits of values 0..63 ([hb | hb >> 2]) and of 64..127 ([hb >> 4 | hb >> 6])
    const __m512i h01 = _mm512_inserti64x4(_mm512_castsi256_si512(hb), _mm256_srli_epi16(hb, 2), 1);
    const __m512i h23 = _mm512_srli_epi16(h01, 4);
    o.q[2 * n] = _mm512_or_si512(_mm512_and_si512(l, low4), _mm512_slli_epi16(_mm512_and_si512(h01, low2), 4));
    o.q[2 * n + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), low4),
                                     _mm512_slli_epi16(_mm512_and_si512(h23, low2), 4));
  }
}

VNNI inline void vunpack(int type, const uint8_t *b, VBlock &o) {
  if (type == Q4_K) vunpack_q4_k(b, o);
  else vunpack_q6_k(b, o);
}

// Running sums of one (weight row, activation row) pair: the scaled products in 16 lanes, the
// scaled mins in 8.
struct VAcc {
  __m512 prod;
  __m256 min;
};

VNNI inline void vzero(VAcc &a) {
  a.prod = _mm512_setzero_ps();
  a.min = _mm256_setzero_ps();
}

// One block of one activation row (Q8Row `x`, block `b` of `nb`) into `a`.
VNNI inline void vdot(const VBlock &w, const uint8_t *x, int64_t k, int64_t nb, int64_t b, VAcc &a) {
  const int8_t *p = reinterpret_cast<const int8_t *>(x) + b * QK;
  const float dx = reinterpret_cast<const float *>(x + k)[b];
  const int16_t *ps = reinterpret_cast<const int16_t *>(x + k + 4 * nb) + 16 * b;
  __m512i s1 = _mm512_setzero_si512();
  for (int v = 0; v < 4; v++) {
    const __m512i pairs = _mm512_maddubs_epi16(w.q[v], _mm512_loadu_si512(p + 64 * v));
    s1 = _mm512_dpwssd_epi32(s1, pairs, w.sc[v]);
  }
  const __m256i s2 = _mm256_madd_epi16(w.m, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(ps)));
  a.prod = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1), _mm512_set1_ps(dx * w.d), a.prod);
  a.min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s2), _mm256_set1_ps(dx * w.dmin), a.min);
}

VNNI inline float vresult(const VAcc &a) {
  const __m128 lo = _mm256_castps256_ps128(a.min), hi = _mm256_extractf128_ps(a.min, 1);
  __m128 s = _mm_add_ps(lo, hi);
  s = _mm_hadd_ps(s, s);
  s = _mm_hadd_ps(s, s);
  return _mm512_reduce_add_ps(a.prod) - _mm_cvtss_f32(s);
}

constexpr int64_t PREFETCH_BLOCKS = 8;
constexpr auto PREFETCH_HINT = _MM_HINT_T0;

// Few activation rows (a decode step): each weight block is unpacked into registers and used
// at once by the M rows, so the weights pass through the cores once, with nothing stored. The
// row's stream is prefetched PREFETCH_BLOCKS ahead (past a row's end: the next row): the
// hardware prefetcher alone keeps too few reads in flight to fill the memory bandwidth
// (batch-1 decoding of the 1.5B model: 8.0 → 12.0–12.7 tokens/s on a 2-core Xeon). Reading two
// rows side by side, as two streams, was slower (10.7).
template <int M>
VNNI void rows_fused(const Problem &pb, int64_t n0, int64_t n1) {
  const int64_t nb = pb.k / QK, wbytes = pb.type == Q4_K ? Q4_K_BYTES : Q6_K_BYTES;
  const uint8_t *x[M];
  for (int m = 0; m < M; m++) x[m] = pb.xq + m * pb.xq_bytes();
  for (int64_t n = n0; n < n1; n++) {
    const uint8_t *wr = pb.w + n * pb.row_bytes();
    VAcc acc[M];
    for (int m = 0; m < M; m++) vzero(acc[m]);
    for (int64_t b = 0; b < nb; b++) {
      const char *ahead = reinterpret_cast<const char *>(wr + (b + PREFETCH_BLOCKS) * wbytes);
      for (int64_t line = 0; line < wbytes; line += 64) _mm_prefetch(ahead + line, PREFETCH_HINT);
      VBlock w;
      vunpack(pb.type, wr + b * wbytes, w);
      for (int m = 0; m < M; m++) vdot(w, x[m], pb.k, nb, b, acc[m]);
    }
    for (int m = 0; m < M; m++) pb.store(m, n, vresult(acc[m]));
  }
}

// Many activation rows (a prompt chunk): a few weight rows are unpacked into a scratch tile
// once and used by every activation row of the tile, MR activation rows per pass so that each
// unpacked block loaded into registers serves MR dot products.
template <int MR>
VNNI void tile_rows(const Problem &pb, const VBlock *tile, int64_t tn, int64_t t0, int64_t m0) {
  const int64_t nb = pb.k / QK;
  const uint8_t *x[MR];
  for (int m = 0; m < MR; m++) x[m] = pb.xq + (m0 + m) * pb.xq_bytes();
  for (int64_t r = 0; r < tn; r++) {
    VAcc acc[MR];
    for (int m = 0; m < MR; m++) vzero(acc[m]);
    for (int64_t b = 0; b < nb; b++) {
      const VBlock w = tile[r * nb + b];
      for (int m = 0; m < MR; m++) vdot(w, x[m], pb.k, nb, b, acc[m]);
    }
    for (int m = 0; m < MR; m++) pb.store(m0 + m, t0 + r, vresult(acc[m]));
  }
}

VNNI void rows_tiled(const Problem &pb, int64_t n0, int64_t n1) {
  const int64_t nb = pb.k / QK, wbytes = pb.type == Q4_K ? Q4_K_BYTES : Q6_K_BYTES;
  // as many weight rows as fit the L1 cache's share of the tile (one row of a long matrix)
  const int64_t tile_rows_n = std::max<int64_t>(1, std::min<int64_t>(TILE_N, TILE_BYTES / (nb * int64_t(sizeof(VBlock)))));
  Aligned<VBlock> tile(tile_rows_n * nb);
  for (int64_t t0 = n0; t0 < n1; t0 += tile_rows_n) {
    const int64_t tn = std::min(tile_rows_n, n1 - t0);
    for (int64_t r = 0; r < tn; r++) {
      const uint8_t *wr = pb.w + (t0 + r) * pb.row_bytes();
      for (int64_t b = 0; b < nb; b++) vunpack(pb.type, wr + b * wbytes, tile[r * nb + b]);
    }
    int64_t m = 0;
    for (; m + 4 <= pb.rows; m += 4) tile_rows<4>(pb, &tile[0], tn, t0, m);
    for (; m < pb.rows; m++) tile_rows<1>(pb, &tile[0], tn, t0, m);
  }
}

// Up to this many activation rows go through the fused path.
constexpr int64_t FUSED_ROWS = 4;

VNNI void rows_vnni(const Problem &pb, int64_t n0, int64_t n1) {
  if (pb.rows > FUSED_ROWS) return rows_tiled(pb, n0, n1);
  switch (pb.rows) {
    case 1: return rows_fused<1>(pb, n0, n1);
    case 2: return rows_fused<2>(pb, n0, n1);
    case 3: return rows_fused<3>(pb, n0, n1);
    default: return rows_fused<4>(pb, n0, n1);
  }
}

// ---------------------------------------------------------------------------------------------
// AVX2 (x86 CPUs without AVX512-VNNI: AMD Zen 1–3, Intel before Ice Lake): the same integer
// arithmetic in 256-bit lanes, vpmaddwd and an add where VNNI has vpdpwssd.

#define AVX2 __attribute__((target("avx2,fma")))

bool has_vnni();

// A block unpacked for the AVX2 loop: 8 × 32 unsigned values, for each 32 the scale of each of
// its 16 value pairs, and the 16 mins.
struct alignas(32) ABlock {
  __m256i q[8];
  __m256i sc[8];
  __m256i m;
  float d, dmin;
};

// Vector v holds values 32v..32v+31: sub-blocks 2v and 2v+1, eight value pairs each.
AVX2 inline __m256i pair_scales(int16_t lo, int16_t hi) { return _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo)); }

AVX2 inline void aunpack_q4_k(const uint8_t *b, ABlock &o) {
  o.d = f16_to_float(b);
  o.dmin = f16_to_float(b + 2);
  uint8_t sm[16];
  q4_k_scales_mins(b, sm);
  alignas(32) int16_t m[16];
  for (int k = 0; k < 16; k++) m[k] = sm[8 + k / 2];
  o.m = _mm256_load_si256(reinterpret_cast<const __m256i *>(m));
  for (int v = 0; v < 8; v++) o.sc[v] = _mm256_set1_epi16(sm[v]);  // Q4_K: one scale per 32 values
  const uint8_t *qs = b + 16;
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  for (int g = 0; g < 4; g++) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(qs + 32 * g));
    o.q[2 * g] = _mm256_and_si256(raw, low4);
    o.q[2 * g + 1] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
  }
}

AVX2 inline void aunpack_q6_k(const uint8_t *b, ABlock &o) {
  const uint8_t *ql = b, *qh = b + 128;
  const int8_t *sc = reinterpret_cast<const int8_t *>(b + 192);
  o.d = o.dmin = f16_to_float(b + 208);
  o.m = _mm256_slli_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(sc))), 5);
  for (int v = 0; v < 8; v++) o.sc[v] = pair_scales(sc[2 * v], sc[2 * v + 1]);
  const __m256i low4 = _mm256_set1_epi8(0x0f), low2 = _mm256_set1_epi8(3);
  for (int n = 0; n < 2; n++) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(ql + 64 * n));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(ql + 64 * n + 32));
    const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(qh + 32 * n));
    // the two high bits of each value, from bit pair 0, 1, 2 or 3 of its qh byte, put at bit 4
    const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(hb, low2), 4);
    const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), low2), 4);
    const __m256i h2 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), low2), 4);
    const __m256i h3 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), low2), 4);
    o.q[4 * n] = _mm256_or_si256(_mm256_and_si256(a, low4), h0);
    o.q[4 * n + 1] = _mm256_or_si256(_mm256_and_si256(c, low4), h1);
    o.q[4 * n + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), low4), h2);
    o.q[4 * n + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), low4), h3);
  }
}

AVX2 inline void aunpack(int type, const uint8_t *b, ABlock &o) {
  if (type == Q4_K) aunpack_q4_k(b, o);
  else aunpack_q6_k(b, o);
}

struct AAcc {
  __m256 prod, min;
};

// One block of one activation row (Q8Row `x`, block `b` of `nb`) into `a`.
AVX2 inline void adot(const ABlock &w, const uint8_t *x, int64_t k, int64_t nb, int64_t b, AAcc &a) {
  const int8_t *p = reinterpret_cast<const int8_t *>(x) + b * QK;
  const float dx = reinterpret_cast<const float *>(x + k)[b];
  const int16_t *ps = reinterpret_cast<const int16_t *>(x + k + 4 * nb) + 16 * b;
  __m256i s1 = _mm256_setzero_si256();
  for (int v = 0; v < 8; v++) {
    const __m256i pairs =
        _mm256_maddubs_epi16(w.q[v], _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + 32 * v)));
    s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(pairs, w.sc[v]));
  }
  const __m256i s2 = _mm256_madd_epi16(w.m, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(ps)));
  a.prod = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s1), _mm256_set1_ps(dx * w.d), a.prod);
  a.min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s2), _mm256_set1_ps(dx * w.dmin), a.min);
}

AVX2 inline float aresult(const AAcc &a) {
  const __m256 v = _mm256_sub_ps(a.prod, a.min);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_hadd_ps(s, s);
  s = _mm_hadd_ps(s, s);
  return _mm_cvtss_f32(s);
}

// As rows_fused and tile_rows/rows_tiled above.
template <int M>
AVX2 void rows_fused_avx2(const Problem &pb, int64_t n0, int64_t n1) {
  const int64_t nb = pb.k / QK, wbytes = pb.type == Q4_K ? Q4_K_BYTES : Q6_K_BYTES;
  const uint8_t *x[M];
  for (int m = 0; m < M; m++) x[m] = pb.xq + m * pb.xq_bytes();
  for (int64_t n = n0; n < n1; n++) {
    const uint8_t *wr = pb.w + n * pb.row_bytes();
    AAcc acc[M];
    for (int m = 0; m < M; m++) acc[m] = AAcc{_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
      const char *ahead = reinterpret_cast<const char *>(wr + (b + PREFETCH_BLOCKS) * wbytes);
      for (int64_t line = 0; line < wbytes; line += 64) _mm_prefetch(ahead + line, PREFETCH_HINT);
      ABlock w;
      aunpack(pb.type, wr + b * wbytes, w);
      for (int m = 0; m < M; m++) adot(w, x[m], pb.k, nb, b, acc[m]);
    }
    for (int m = 0; m < M; m++) pb.store(m, n, aresult(acc[m]));
  }
}

template <int MR>
AVX2 void tile_rows_avx2(const Problem &pb, const ABlock *tile, int64_t tn, int64_t t0, int64_t m0) {
  const int64_t nb = pb.k / QK;
  const uint8_t *x[MR];
  for (int m = 0; m < MR; m++) x[m] = pb.xq + (m0 + m) * pb.xq_bytes();
  for (int64_t r = 0; r < tn; r++) {
    AAcc acc[MR];
    for (int m = 0; m < MR; m++) acc[m] = AAcc{_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
      const ABlock &w = tile[r * nb + b];
      for (int m = 0; m < MR; m++) adot(w, x[m], pb.k, nb, b, acc[m]);
    }
    for (int m = 0; m < MR; m++) pb.store(m0 + m, t0 + r, aresult(acc[m]));
  }
}

AVX2 void rows_avx2(const Problem &pb, int64_t n0, int64_t n1) {
  switch (pb.rows) {
    case 1: return rows_fused_avx2<1>(pb, n0, n1);
    case 2: return rows_fused_avx2<2>(pb, n0, n1);
    case 3: return rows_fused_avx2<3>(pb, n0, n1);
    case 4: return rows_fused_avx2<4>(pb, n0, n1);
    default: break;
  }
  const int64_t nb = pb.k / QK, wbytes = pb.type == Q4_K ? Q4_K_BYTES : Q6_K_BYTES;
  const int64_t tile_rows_n = std::max<int64_t>(1, std::min<int64_t>(TILE_N, TILE_BYTES / (nb * int64_t(sizeof(ABlock)))));
  Aligned<ABlock> tile(tile_rows_n * nb);
  for (int64_t t0 = n0; t0 < n1; t0 += tile_rows_n) {
    const int64_t tn = std::min(tile_rows_n, n1 - t0);
    for (int64_t r = 0; r < tn; r++) {
      const uint8_t *wr = pb.w + (t0 + r) * pb.row_bytes();
      for (int64_t b = 0; b < nb; b++) aunpack(pb.type, wr + b * wbytes, tile[r * nb + b]);
    }
    int64_t m = 0;
    for (; m + 4 <= pb.rows; m += 4) tile_rows_avx2<4>(pb, &tile[0], tn, t0, m);
    for (; m < pb.rows; m++) tile_rows_avx2<1>(pb, &tile[0], tn, t0, m);
  }
}

bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}

// Which code multiplies: the caller's `path` (0: the best the CPU has; 1: scalar; 2: at most
// AVX2, for tests on CPUs that have VNNI too).
enum class Path { Scalar, Avx2, Vnni };

Path choose_path(int32_t path) {
  if (path == 1) return Path::Scalar;
  if (path == 0 && has_vnni()) return Path::Vnni;
  return has_avx2() ? Path::Avx2 : Path::Scalar;
}

bool has_vnni() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
                          __builtin_cpu_supports("avx512dq");
  return yes;
}

// Weight rows are claimed by the threads a chunk at a time, about CHUNKS_PER_THREAD chunks
// each and at least MIN_CHUNK_N rows: a thread that streams its rows more slowly than the other
// (on a 2-core EPYC the worker thread had 22.4 % of a batch-1 decode's perf samples in the
// one-row kernel against the main thread's 20.2 %) takes fewer chunks, instead of
// the other waiting for it at the end of every product, while each chunk stays one long run of
// memory for the prefetchers.
constexpr int64_t CHUNKS_PER_THREAD = 8;
constexpr int64_t MIN_CHUNK_N = 16;

// Matrices stacked along the output dimension (`parts`, each writing its own columns) as one
// problem: their rows are split over the threads together, so a step pays one parallel region
// (one fork, one join, one wait for the slowest thread) for q, k and v, not three.
void run(const std::vector<Problem> &parts, Path path) {
  int64_t total = 0;
  for (const Problem &p : parts) total += p.n;
  const int64_t rows = parts.front().rows;
  // tiles of activation rows, so that one tile of them stays in cache while weight tiles pass
  for (int64_t m0 = 0; m0 < rows; m0 += TILE_M) {
    std::vector<Problem> subs = parts;
    for (Problem &sub : subs) {
      sub.xq += m0 * sub.xq_bytes();
      sub.rows = std::min(TILE_M, rows - m0);
      if (sub.y) sub.y += m0 * sub.ldy;
      else sub.y16 += m0 * sub.ldy;
    }
    const int64_t threads = std::max<int64_t>(1, at::get_num_threads());
    const int64_t chunk = std::max(MIN_CHUNK_N, (total + threads * CHUNKS_PER_THREAD - 1) / (threads * CHUNKS_PER_THREAD));
    std::atomic<int64_t> next{0};
    at::parallel_for(0, std::min(threads, (total + chunk - 1) / chunk), 1, [&](int64_t, int64_t) {
      for (int64_t b; (b = next.fetch_add(chunk, std::memory_order_relaxed)) < total;) {
        const int64_t e = std::min(total, b + chunk);
        int64_t first = 0;  // the first row of this part among all parts' rows
        for (const Problem &sub : subs) {
          const int64_t lo = std::max(b, first) - first, hi = std::min(e, first + sub.n) - first;
          if (lo < hi) {
            switch (path) {
              case Path::Vnni: rows_vnni(sub, lo, hi); break;
              case Path::Avx2: rows_avx2(sub, lo, hi); break;
              case Path::Scalar: rows_scalar(sub, lo, hi); break;
            }
          }
          first += sub.n;
        }
      }
    });
  }
}

}  // namespace

// x [rows, k] (contiguous fp32 or bf16, CPU) quantized to 8 bits per 256 values: a uint8
// tensor [rows, k + k/64 + k/8] (values, scales, sums of 16). `path`: see choose_path.
extern "C" int docpipe_q8_quantize(const at::Tensor *x_, int32_t path, at::Tensor **out, char *err, size_t err_len) {
  try {
    const at::Tensor &x = *x_;
    if (!x.device().is_cpu() || !x.is_contiguous() || x.dim() != 2 || x.size(1) % QK != 0)
      throw std::invalid_argument("q8_quantize: x must be a contiguous 2-D CPU tensor with rows of whole 256-blocks");
    const int64_t rows = x.size(0), k = x.size(1), rb = Q8Row::bytes(k);
    at::Tensor q = at::empty({rows, rb}, x.options().dtype(at::kByte));
    uint8_t *o = q.data_ptr<uint8_t>();
    // (the AVX2 path takes the scalar quantization: the same bytes, and a small share of the work)
    const bool vector = choose_path(path) == Path::Vnni;
    if (x.scalar_type() == at::kFloat) {
      const float *p = x.data_ptr<float>();
      at::parallel_for(0, rows, 16, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; r++) {
          if (vector) quantize_row_vnni<F32>(p + r * k, k, o + r * rb);
          else quantize_row<F32>(p + r * k, k, o + r * rb);
        }
      });
    } else if (x.scalar_type() == at::kBFloat16) {
      const uint16_t *p = reinterpret_cast<const uint16_t *>(x.data_ptr<at::BFloat16>());
      at::parallel_for(0, rows, 16, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; r++) {
          if (vector) quantize_row_vnni<BF16>(p + r * k, k, o + r * rb);
          else quantize_row<BF16>(p + r * k, k, o + r * rb);
        }
      });
    } else {
      throw std::invalid_argument("q8_quantize: x must be fp32 or bf16");
    }
    *out = new at::Tensor(std::move(q));
    return 0;
  } catch (const std::exception &e) {
    return fail(e, err, err_len);
  }
}

// y = x · [W₀; W₁; …]ᵀ for xq from docpipe_q8_quantize and `nparts` matrices W_i [n_i, k] in
// GGUF blocks of `types[i]` (12 = Q4_K, 14 = Q6_K), each a uint8 tensor [n_i, k/256 · block
// bytes], stacked along the output dimension: y is a contiguous [rows, Σ n_i] fp32 or bf16 CPU
// tensor. `path`: see choose_path (tests force the scalar and the AVX2 code).
extern "C" int docpipe_kquant_matmul(const at::Tensor *xq_, const at::Tensor *const *ws, const int32_t *types,
                                     int64_t nparts, int64_t k, at::Tensor *y_, int32_t path, char *err,
                                     size_t err_len) {
  try {
    const at::Tensor &xq = *xq_;
    at::Tensor &y = *y_;
    if (nparts < 1) throw std::invalid_argument("kquant_matmul: no matrices");
    if (k <= 0 || k % QK != 0) throw std::invalid_argument("kquant_matmul: k must be a multiple of 256");
    if (xq.dim() != 2 || xq.scalar_type() != at::kByte || !xq.is_contiguous() || xq.size(1) != Q8Row::bytes(k))
      throw std::invalid_argument("kquant_matmul: xq is not a quantized [rows, " + std::to_string(k) + "] tensor");
    if (!xq.device().is_cpu() || !y.device().is_cpu()) throw std::invalid_argument("kquant_matmul: CPU tensors only");
    const int64_t rows = xq.size(0);
    const bool bf16 = y.scalar_type() == at::kBFloat16;
    if (!bf16 && y.scalar_type() != at::kFloat) throw std::invalid_argument("kquant_matmul: y must be fp32 or bf16");
    if (y.dim() != 2 || !y.is_contiguous() || y.size(0) != rows)
      throw std::invalid_argument("kquant_matmul: y is not a contiguous [rows, n] tensor");
    std::vector<Problem> parts;
    int64_t col = 0;
    for (int64_t i = 0; i < nparts; i++) {
      const at::Tensor &w = *ws[i];
      const int type = types[i];
      if (type != Q4_K && type != Q6_K) throw std::invalid_argument("kquant_matmul: type must be Q4_K or Q6_K");
      const int64_t wbytes = (k / QK) * (type == Q4_K ? Q4_K_BYTES : Q6_K_BYTES);
      if (!w.device().is_cpu() || w.dim() != 2 || w.scalar_type() != at::kByte || !w.is_contiguous() ||
          w.size(1) != wbytes)
        throw std::invalid_argument("kquant_matmul: weights are not [n, " + std::to_string(wbytes) + "] bytes");
      parts.push_back(Problem{xq.data_ptr<uint8_t>(), rows, k, w.data_ptr<uint8_t>(), type, w.size(0),
                              bf16 ? nullptr : y.data_ptr<float>() + col,
                              bf16 ? reinterpret_cast<uint16_t *>(y.data_ptr<at::BFloat16>()) + col : nullptr,
                              y.size(1)});
      col += w.size(0);
    }
    if (y.size(1) != col)
      throw std::invalid_argument("kquant_matmul: y has " + std::to_string(y.size(1)) + " columns for " +
                                  std::to_string(col) + " weight rows");
    run(parts, choose_path(path));
    return 0;
  } catch (const std::exception &e) {
    return fail(e, err, err_len);
  }
}
