// The online softmax every tensor-core kernel (mma.sync, wgmma, warp-specialised, split-KV)
// composes, written once, with the mask (mask.cuh) before it and the epilogue (epilogue.cuh)
// after it. These pieces work on one thread's share of a 16-row slice in the m16n8 accumulator
// layout: per n8 column block four values, rows g = lane / 4 (elements 0, 1) and g + 8 (elements
// 2, 3), columns 2 * (lane % 4) + {0, 1}. wgmma's accumulator is the same layout per warp.
#pragma once

#include <cmath>

#include "fused/ptx.cuh"

namespace attn::fused {

// The half kernel moves a row's running max only when a tile's max exceeds it by more than this
// many powers of two (FlashAttention-4's conditional rescale), so probabilities stay <= 2^8:
// exact in fp32 sums, and bf16/fp16 keep their relative precision at any magnitude.
constexpr float kLazyRescaleLog2 = 8.0f;

// One thread's running softmax state for its two rows of a slice: the max of the raw scores and
// the sum of this thread's probabilities (its columns only: QuadSum completes it).
struct RowSoftmax {
  float max[2] = {-INFINITY, -INFINITY};
  float sum[2] = {0.f, 0.f};
};

// The online softmax of one tile with the lazy rescale: turns the scores s into probabilities in
// place and sets alpha, the factor O's rows must be scaled by. The running max moves (alpha < 1)
// only when a tile's max exceeds it by more than kLazyRescaleLog2 in log2 units; otherwise the
// stale max stays and P = exp2(S * scale * log2e - max * scale * log2e) <= 2^kLazyRescaleLog2. O
// and the sum share that max, so the final O / sum is the same softmax. Returns whether a row of
// this thread moved (the caller skips the rescale of O unless one in its warp did, which after
// the first tiles is rare).
template <int kNBlocks>
__device__ __forceinline__ bool OnlineSoftmax(float (&s)[kNBlocks][4], RowSoftmax& state,
                                              float scale_log2, float (&alpha)[2]) {
  bool moved = false;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = -INFINITY;
#pragma unroll
    for (int nb = 0; nb < kNBlocks; ++nb) mx = fmaxf(mx, fmaxf(s[nb][2 * h], s[nb][2 * h + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    // The old tiles' probabilities were taken relative to the rounded product
    // __fmul_rn(old max, scale_log2); alpha must use that same value (an FMA here would use the
    // exact product and bias every rescale by up to half an ulp of max * scale_log2). A row with
    // no visible key yet keeps max -inf (-inf - -inf is NaN: no move).
    const float old_scaled = __fmul_rn(state.max[h], scale_log2);
    const float tile_scaled = __fmul_rn(mx, scale_log2);
    alpha[h] = 1.f;
    if (tile_scaled - old_scaled > kLazyRescaleLog2) {
      alpha[h] = FastExp2(old_scaled - tile_scaled);
      state.max[h] = mx;
      moved = true;
    }
    // Subtract 0 for a row whose max is still -inf, so exp2 gives 0, not NaN.
    const float max_scaled = state.max[h] == -INFINITY ? 0.f : __fmul_rn(state.max[h], scale_log2);
    float sum = 0.f;
#pragma unroll
    for (int nb = 0; nb < kNBlocks; ++nb)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float pr = FastExp2(fmaf(s[nb][2 * h + e], scale_log2, -max_scaled));
        s[nb][2 * h + e] = pr;
        sum += pr;
      }
    state.sum[h] = state.sum[h] * alpha[h] + sum;
  }
  return moved;
}

// O's rows times alpha (OnlineSoftmax's factors).
template <int kDBlocks>
__device__ __forceinline__ void RescaleRows(float (&o)[kDBlocks][4], const float (&alpha)[2]) {
#pragma unroll
  for (int d = 0; d < kDBlocks; ++d) {
    o[d][0] *= alpha[0];
    o[d][1] *= alpha[0];
    o[d][2] *= alpha[1];
    o[d][3] *= alpha[1];
  }
}

// A row's value summed over the four threads of its quad.
__device__ __forceinline__ float QuadSum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

}  // namespace attn::fused
