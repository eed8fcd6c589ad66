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
  constexpr uint64_t kElement = 2;
  const bool q = which == FusedOperand::kQ;
  const void* base = q ? p.q : which == FusedOperand::kK ? p.k : p.v;
  const int64_t head_stride = q                           ? p.q_head_stride
                              : which == FusedOperand::kK ? p.k_head_stride
                                                          : p.v_head_stride;
  const int64_t row_stride = q                           ? p.q_row_stride
                             : which == FusedOperand::kK ? p.k_row_stride
                                                         : p.v_row_stride;
  const int64_t batch_stride = q                           ? p.q_batch_stride
                               : which == FusedOperand::kK ? p.k_batch_stride
                                                           : p.v_batch_stride;
  const uint64_t sizes[4] = {
      static_cast<uint64_t>(head_dim), static_cast<uint64_t>(q ? p.heads : p.heads / p.group),
      static_cast<uint64_t>(q ? p.q_len : p.kv_len), static_cast<uint64_t>(p.batch)};
  const uint64_t strides[3] = {head_stride * kElement, row_stride * kElement,
                               batch_stride * kElement};
  const uint32_t box[4] = {64, 1, rows, 1};
  return EncodeSwizzledTensorMap(map, base, 4, sizes, strides, box);
}

}  // namespace attn::fused
