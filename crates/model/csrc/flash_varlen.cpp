// Variable-length (packed) FlashAttention-2 forward with an optional sliding window, through
// ATen's `_flash_attention_forward`. tch does not expose that op, so this shim calls it and
// hands the output back as the same heap `at::Tensor*` handle that tch's own C API uses.
// The op is registered for CUDA only (in libtorch_cuda); anywhere else it returns an error.
#include <ATen/core/Tensor.h>
#include <ATen/ops/_flash_attention_forward.h>

#include <cstring>
#include <exception>
#include <optional>

extern "C" int docpipe_flash_varlen(const at::Tensor *q, const at::Tensor *k, const at::Tensor *v,
                                    const at::Tensor *cu_seqlens, int64_t max_len, double scale,
                                    int64_t window, at::Tensor **out, char *err, size_t err_len) {
  try {
    std::optional<int64_t> left, right;
    if (window >= 0) {
      left = window;
      right = window;
    }
    auto res = at::_flash_attention_forward(*q, *k, *v, *cu_seqlens, *cu_seqlens, max_len, max_len,
                                            /*dropout_p=*/0.0, /*is_causal=*/false,
                                            /*return_debug_mask=*/false, scale, left, right);
    *out = new at::Tensor(std::get<0>(res));
    return 0;
  } catch (const std::exception &e) {
    if (err_len > 0) {
      std::strncpy(err, e.what(), err_len - 1);
      err[err_len - 1] = '\0';
    }
    return 1;
  }
}
