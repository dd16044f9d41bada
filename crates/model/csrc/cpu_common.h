// What the CPU kernels (cpu_norm.cpp, cpu_geglu.cpp) share: bf16 <-> fp32 as libtorch
// rounds it, a precision policy for the row templates, the instruction-set clones, and the
// error convention of the shim (0, or 1 with a message; see src/shim.rs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>

namespace docpipe {

inline float bf16_to_float(uint16_t v) {
  uint32_t bits = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Round to nearest even, as c10::BFloat16 does; NaN stays NaN.
inline uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
  return f != f ? uint16_t(0x7FC0) : uint16_t(rounded);
}

struct F32 {
  using T = float;
  static float load(T v) { return v; }
  static T store(float f) { return f; }
};

struct BF16 {
  using T = uint16_t;
  static float load(T v) { return bf16_to_float(v); }
  static T store(float f) { return float_to_bf16(f); }
};

// Each row loop is compiled once per instruction set and chosen when the library loads.
// `flatten` inlines the row templates into each clone; without it a template called from a
// clone was compiled once, for the baseline ISA (SSE2).
#define CLONES __attribute__((target_clones("avx512f", "avx2", "default"), flatten))

inline int fail(const std::exception &e, char *err, size_t err_len) {
  if (err_len > 0) {
    std::strncpy(err, e.what(), err_len - 1);
    err[err_len - 1] = '\0';
  }
  return 1;
}

}  // namespace docpipe
