// The split-KV kernel's merge (split_kv_kernel.cuh): the splits' normalised partial outputs of
// each packed row weighted by their log2-sum-exps, in split order (deterministic).
#pragma once

#include <cmath>
#include <cstdint>

#include "cuda/from_float.cuh"
#include "fused/fused_kernels.h"
#include "fused/ptx.cuh"
#include "fused/tiles.h"

namespace attn::fused {

// Splits a merge warp's lane loads at once (tiles.h's table).
template <int kHeadDim>
constexpr int kCombineUnroll = TilesOf(kHeadDim).combine_unroll;

// Merges the splits' partial outputs: `warps_per_row` warps (1, 2 or 4, a block's kCombineWarps
// taking kCombineWarps / warps_per_row packed rows of one (batch, K/V head)) share a row's splits,
// each a contiguous range of them in order, weighted by exp2(its log2-sum-exp - the row's largest);
// the warps' sums are then added in warp order through shared memory (deterministic). A lane's
// loads of kCombineUnroll splits go out together, so a warp of that many splits waits on memory
// twice (the log2-sum-exps, then O); one warp a row of B1 S32768's 16 splits waited about six
// times, 10.6 us (NOTES.md, "The merge's warps").
template <int kHeadDim, typename T>
__global__ void __launch_bounds__(kCombineWarps * 32)
    SplitKvCombineKernel(const FusedParams p, const FusedSplitKv plan, const int warps_per_row) {
  constexpr int kPerLane = kHeadDim / 32, kUnroll = kCombineUnroll<kHeadDim>;
  __shared__ float s_acc[kCombineWarps][kHeadDim];
  __shared__ float s_sum[kCombineWarps];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // The split kernel's partials are in (a no-op unless launched as its programmatic dependent).
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int rows = p.q_len * p.group, kv_heads = p.heads / p.group;
  const int64_t row_id =
      blockIdx.x * static_cast<int64_t>(kCombineWarps / warps_per_row) + warp / warps_per_row;
  // Rows past the end still reach the barrier below (their block's other rows need it).
  const bool live = row_id < static_cast<int64_t>(p.batch) * kv_heads * rows;
  const int packed = static_cast<int>(row_id % rows);
  const int kv_head = static_cast<int>(row_id / rows % kv_heads);
  const int batch = static_cast<int>(row_id / rows / kv_heads);
  const int block_rows = 16 * plan.row_tiles, row_group = packed / block_rows;
  const int64_t part0 =
      ((static_cast<int64_t>(batch) * kv_heads + kv_head) * plan.row_groups + row_group) *
      plan.splits;
  const int r = packed % block_rows;
  const int part = warp % warps_per_row,
            per_warp = (plan.splits + warps_per_row - 1) / warps_per_row;
  const int first = part * per_warp, last = live ? min(first + per_warp, plan.splits) : 0;

  // The row's largest log2-sum-exp over every split (each of its warps finds it), then this
  // warp's splits, 32 log2-sum-exps at a time with the O rows summed in split order, the weights
  // shuffled from their lanes. Empty splits wrote O = 0 and lse = -inf (weight 0).
  const float* lse = plan.partial_lse + part0 * block_rows + r;
  const float* o = plan.partial_out + (part0 * block_rows + r) * kHeadDim + lane;
  float mx = -INFINITY;
  for (int s = lane; live && s < plan.splits; s += 32) mx = fmaxf(mx, lse[s * block_rows]);
#pragma unroll
  for (int off = 16; off > 0; off /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  float acc[kPerLane] = {};
  float lane_sum = 0.f;
  for (int s0 = first; s0 < last; s0 += 32) {
    const int s = s0 + lane;
    const float lse_s = s < last ? lse[s * block_rows] : -INFINITY;
    const float weight = lse_s == -INFINITY ? 0.f : FastExp2(lse_s - mx);
    lane_sum += weight;
    const int n = min(32, last - s0);
    for (int k0 = 0; k0 < n; k0 += kUnroll) {
      float w[kUnroll], v[kUnroll][kPerLane];
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) {
        w[k] = __shfl_sync(0xffffffffu, weight, (k0 + k) % 32);
        const float* row = o + static_cast<int64_t>(s0 + k0 + k) * block_rows * kHeadDim;
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) v[k][i] = k0 + k < n ? row[32 * i] : 0.f;
      }
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) {
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) acc[i] += w[k] * v[k][i];
      }
    }
  }
  float sum = lane_sum;
#pragma unroll
  for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  if (warps_per_row > 1) {
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) s_acc[warp][lane + 32 * i] = acc[i];
    if (lane == 0) s_sum[warp] = sum;
    __syncthreads();
    if (part != 0) return;
    sum = 0.f;
    for (int i = 0; i < kPerLane; ++i) acc[i] = 0.f;
    for (int w = warp; w < warp + warps_per_row; ++w) {
      sum += s_sum[w];
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) acc[i] += s_acc[w][lane + 32 * i];
    }
  }
  if (!live) return;
  const float inv = sum > 0.f ? 1.f / sum : 0.f;
  T* out = static_cast<T*>(p.out) + batch * p.o_batch_stride + (packed / p.group) * p.o_row_stride +
           (kv_head * p.group + packed % p.group) * p.o_head_stride;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) out[lane + 32 * i] = FromFloat<T>(acc[i] * inv);
}

}  // namespace attn::fused
