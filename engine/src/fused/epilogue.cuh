// The epilogue of the tensor-core kernels: O divided by the softmax's sum, narrowed to the input
// type and written once, rows past T dropped (the m16n8 accumulator layout: softmax.cuh).
#pragma once

#include <cstdint>

#include "fused/fused_kernels.h"
#include "fused/ptx.cuh"
#include "fused/softmax.cuh"

namespace attn::fused {

// The epilogue: row h of the thread's pair, O / sum (sum: the quad's total; 0 for a row that saw
// no key), narrowed to T at `row` (the output row at this thread's first column).
template <typename T, int kDBlocks>
__device__ __forceinline__ void StoreRow(T* row, const float (&o)[kDBlocks][4], int h, float sum) {
  const float inv = sum > 0.f ? 1.f / sum : 0.f;
#pragma unroll
  for (int d = 0; d < kDBlocks; ++d) {
    *reinterpret_cast<uint32_t*>(row + d * 8) =
        HalfOps<T>::Pack(o[d][2 * h] * inv, o[d][2 * h + 1] * inv);
  }
}

// The epilogue of one 16-row slice: the thread's rows t0 and t0 + 8 (t0: the slice's first row
// + lane / 4) of the head's output `out` (its row 0) at its columns from `col` (2 * (lane % 4)),
// O / sum, rows past T dropped.
template <typename T, int kDBlocks>
__device__ __forceinline__ void StoreSlice(T* out, const FusedParams& p, int t0, int col,
                                           const float (&o)[kDBlocks][4],
                                           const RowSoftmax& softmax) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float sum = QuadSum(softmax.sum[h]);
    const int t = t0 + h * 8;
    if (t < p.q_len) StoreRow(out + static_cast<int64_t>(t) * p.o_row_stride + col, o, h, sum);
  }
}

}  // namespace attn::fused
