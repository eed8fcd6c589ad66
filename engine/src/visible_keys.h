// Which keys a query row sees, for every implementation that reads per-sequence KV lengths
// (AttentionProblem::kv_lens): the host reference and the device kernels. Plain types only, so
// both host compilers and nvcc take it.
#pragma once

#include <cstdint>

#include "host_device.h"

namespace attn {

// Keys batch element `b` attends to: kv_lens[b] clamped to [0, kv_len], or kv_len when kv_lens is
// null (the problem has none). Never trust the lengths read here: ValidateProblem checked the
// problem's copy, but the buffer a call passes may hold anything, and a length beyond S would
// read past K and V. A row with 0 keys has no softmax; implementations write zeros for it.
ATTN_HOST_DEVICE inline int64_t ClampedKvLen(const int32_t* kv_lens, int64_t b, int64_t kv_len) {
  if (kv_lens == nullptr) return kv_len;
  const int64_t len = kv_lens[b];
  return len < 0 ? 0 : (len > kv_len ? kv_len : len);
}

// Keys 0 .. VisibleKeys(len, t, causal) - 1 are what query row `t` of a batch element with `len`
// keys sees. Causal masking is top-left aligned: query t sees keys s <= t (and s < len).
ATTN_HOST_DEVICE inline int64_t VisibleKeys(int64_t len, int64_t t, bool causal) {
  return causal && t + 1 < len ? t + 1 : len;
}

}  // namespace attn
