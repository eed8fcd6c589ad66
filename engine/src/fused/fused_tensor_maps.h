// The fused kernels' operands as TMA tensor maps (Hopper's bulk tensor copies): the one place
// that turns FusedParams' pointers and strides into a map, for the split-KV and the
// warp-specialised kernels.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "cuda/tensor_map.h"
#include "fused/fused_kernels.h"

namespace attn::fused {

enum class FusedOperand { kQ, kK, kV };

// Q as (H, heads, T, B) or K/V as (H, K/V heads, S, B), bf16/fp16, for boxes of 64 columns (one
// 128-byte swizzle row) by `rows` rows of one head of one batch element; rows past T or S, and
// columns past H, read as zeros. False where the driver refuses (see EncodeSwizzledTensorMap).
inline bool EncodeOperandMap(CUtensorMap* map, const FusedParams& p, FusedOperand which,
                             int head_dim, uint32_t rows) {
  auto encode = [&](const void* base, int64_t head_stride, int64_t row_stride, int64_t batch_stride,
                    int heads, int len) {
    constexpr uint64_t kElement = 2;
    const uint64_t sizes[4] = {static_cast<uint64_t>(head_dim), static_cast<uint64_t>(heads),
                               static_cast<uint64_t>(len), static_cast<uint64_t>(p.batch)};
    const uint64_t strides[3] = {head_stride * kElement, row_stride * kElement,
                                 batch_stride * kElement};
    const uint32_t box[4] = {64, 1, rows, 1};
    return EncodeSwizzledTensorMap(map, base, 4, sizes, strides, box);
  };
  switch (which) {
    case FusedOperand::kQ:
      return encode(p.q, p.q_head_stride, p.q_row_stride, p.q_batch_stride, p.heads, p.q_len);
    case FusedOperand::kK:
      return encode(p.k, p.k_head_stride, p.k_row_stride, p.k_batch_stride, p.heads / p.group,
                    p.kv_len);
    case FusedOperand::kV:
      return encode(p.v, p.v_head_stride, p.v_row_stride, p.v_batch_stride, p.heads / p.group,
                    p.kv_len);
  }
  return false;
}

}  // namespace attn::fused
