// The `fused` backend's float32 kernel on CUDA cores, sm_80 and newer: one warp per query row,
// kFloatRows rows per block, K/V tiles of kFloatKeys keys in shared memory (plain loads; any
// alignment). Lane j scores key j of the tile, the warp's online softmax runs once per tile
// (shuffles), and lane l accumulates output dims l, l + 32, ... Exact fp32 FMAs throughout (no
// TF32), so it matches the naive fp32 path's accuracy.
#pragma once

#include <cmath>
#include <cstdint>

#include "fused/fused_kernels.h"
#include "fused/query_tile.cuh"
#include "fused/tiles.h"

namespace attn::fused {

template <int kHeadDim>
struct FloatTraits {
  static constexpr int kKStride = kHeadDim + 4;  // float4 rows; 8 lanes' rows hit 8 bank groups
  static constexpr int kPerLane = kHeadDim / 32;
  static constexpr int kSmemBytes =
      (kFloatKeys * kKStride + kFloatKeys * kHeadDim + kFloatRows * kHeadDim) * 4;
  static_assert(kHeadDim % 32 == 0, "each lane owns kHeadDim / 32 output dims");
};

// (hi, lo) = (hi, lo) * alpha + x, compensated; _rn intrinsics keep nvcc from contracting the
// steps into FMAs, which would break the compensation.
__device__ __forceinline__ void KahanScaleAdd(float& hi, float& lo, float alpha, float x) {
  hi = __fmul_rn(hi, alpha);
  lo = __fmul_rn(lo, alpha);
  const float y = __fsub_rn(x, lo);
  const float t = __fadd_rn(hi, y);
  lo = __fsub_rn(__fsub_rn(t, hi), y);
  hi = t;
}

template <int kHeadDim>
__global__ void __launch_bounds__(kFloatRows * 32) FusedFloatKernel(const FusedParams p) {
  using Traits = FloatTraits<kHeadDim>;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  float* const s_k = reinterpret_cast<float*>(smem_raw);   // [keys][kKStride]
  float* const s_v = s_k + kFloatKeys * Traits::kKStride;  // [keys][kHeadDim]
  float* const s_q = s_v + kFloatKeys * kHeadDim;          // [rows][kHeadDim]

  const int head = blockIdx.y, batch = blockIdx.z;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int q0 = blockIdx.x * kFloatRows;
  const int t = q0 + warp;
  const HeadSlices<float> in = SliceHead<float>(p, batch, head);
  const float *q = in.q, *k = in.k, *v = in.v;

  for (int i = tid; i < kFloatRows * kHeadDim; i += kFloatRows * 32) {
    const int r = i / kHeadDim, d = i % kHeadDim;
    s_q[i] = q0 + r < p.q_len ? q[(q0 + r) * p.q_row_stride + d] : 0.f;
  }
  const int kv_len = KvLength(p, batch);
  const int kv_end = p.causal ? min(kv_len, q0 + kFloatRows) : kv_len;

  // O and the running sum are compensated (Kahan) sums of per-tile partials: over S = 13000
  // keys a plain running sum lost ~2e-6 relative, 5x the naive path's blocked GEMM.
  float acc[Traits::kPerLane], acc_lo[Traits::kPerLane];
#pragma unroll
  for (int i = 0; i < Traits::kPerLane; ++i) acc[i] = acc_lo[i] = 0.f;
  float row_max = -INFINITY, lane_sum = 0.f, lane_sum_lo = 0.f;

  for (int key0 = 0; key0 < kv_end; key0 += kFloatKeys) {
    __syncthreads();  // the previous tile is consumed (and s_q is written, first time)
    for (int i = tid; i < kFloatKeys * kHeadDim; i += kFloatRows * 32) {
      const int r = i / kHeadDim, d = i % kHeadDim;
      const bool valid = key0 + r < kv_len;
      s_k[r * Traits::kKStride + d] = valid ? k[(key0 + r) * p.k_row_stride + d] : 0.f;
      s_v[i] = valid ? v[(key0 + r) * p.v_row_stride + d] : 0.f;
    }
    __syncthreads();

    const float4* kr = reinterpret_cast<const float4*>(s_k + lane * Traits::kKStride);
    const float4* qr = reinterpret_cast<const float4*>(s_q + warp * kHeadDim);
    float score = 0.f;
#pragma unroll 8
    for (int d = 0; d < kHeadDim / 4; ++d) {
      const float4 a = qr[d], b = kr[d];
      score = fmaf(a.x, b.x, score);
      score = fmaf(a.y, b.y, score);
      score = fmaf(a.z, b.z, score);
      score = fmaf(a.w, b.w, score);
    }
    const int key = key0 + lane;
    if (key >= kv_len || (p.causal && key > t)) score = -INFINITY;

    float mx = score;
#pragma unroll
    for (int off = 16; off > 0; off /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    mx = fmaxf(mx, row_max);
    // Same rounded products as the half kernel (why: there). Measured by a CPU emulation of this
    // arithmetic at S = 13000: rel L2 9e-6 with an FMA here and plain sums, 2.6e-7 with both fixes.
    const float max_scaled = mx == -INFINITY ? 0.f : __fmul_rn(mx, p.scale_log2);
    const float alpha = exp2f(__fmul_rn(row_max, p.scale_log2) - max_scaled);
    row_max = mx;
    const float pr = exp2f(fmaf(score, p.scale_log2, -max_scaled));
    KahanScaleAdd(lane_sum, lane_sum_lo, alpha, pr);
    float part[Traits::kPerLane];
#pragma unroll
    for (int i = 0; i < Traits::kPerLane; ++i) part[i] = 0.f;
#pragma unroll 8
    for (int jk = 0; jk < kFloatKeys; ++jk) {
      const float pj = __shfl_sync(0xffffffffu, pr, jk);
#pragma unroll
      for (int i = 0; i < Traits::kPerLane; ++i)
        part[i] = fmaf(pj, s_v[jk * kHeadDim + lane + 32 * i], part[i]);
    }
#pragma unroll
    for (int i = 0; i < Traits::kPerLane; ++i) KahanScaleAdd(acc[i], acc_lo[i], alpha, part[i]);
  }

  float sum = lane_sum - lane_sum_lo;  // lo holds what hi overshot
#pragma unroll
  for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  if (t < p.q_len) {
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    float* out = static_cast<float*>(p.out) + batch * p.o_batch_stride + head * p.o_head_stride +
                 static_cast<int64_t>(t) * p.o_row_stride;
#pragma unroll
    for (int i = 0; i < Traits::kPerLane; ++i) out[lane + 32 * i] = (acc[i] - acc_lo[i]) * inv;
  }
}

template <int kHeadDim>
cudaError_t LaunchFloat(const FusedParams& p, cudaStream_t stream) {
  return LaunchTiles(FusedFloatKernel<kHeadDim>, kFloatRows, kFloatRows * 32,
                     FloatTraits<kHeadDim>::kSmemBytes, p, stream);
}

}  // namespace attn::fused
