// The `fused` backend's kernels as fused_backend.cc (the one launch file) calls them: the params
// every kernel takes and one head dim's launchers (the split-KV plan they take is
// split_kv_plan.h's). Plain CUDA types only, so nvcc never compiles abseil. Each head dim's
// launchers are instantiated in its own fused_hdim<H>.cu (fused_launch.cuh defines them), so the
// instantiations build in parallel and each stays short; tiles.h lists the head dims.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "attn/overrides.h"
#include "fused/split_kv_plan.h"
#include "fused/tiles.h"

namespace attn {

// One params struct per launch, passed by value. Strides are in elements; the head dimension is
// contiguous (stride 1). Query head n reads K/V head n / group (GQA/MQA without copies).
struct FusedParams {
  const void* q;
  const void* k;
  const void* v;
  void* out;
  int64_t q_batch_stride, q_row_stride, q_head_stride;
  int64_t k_batch_stride, k_row_stride, k_head_stride;
  int64_t v_batch_stride, v_row_stride, v_head_stride;
  int64_t o_batch_stride, o_row_stride, o_head_stride;
  int batch, heads, group, q_len, kv_len;
  // Keys batch element b sees: kv_lens[b] (device memory, clamped to [0, kv_len] on read), or all
  // kv_len when null.
  const int32_t* kv_lens;
  float scale_log2;  // softmax scale * log2(e): scores go through exp2f
  bool causal;       // top-left aligned: query t sees keys s <= t
  // The warp-specialised kernel's tile counter (kWgmmaWsWorkspaceBytes of workspace; its launch
  // zeroes it), null on the other paths; that kernel's persistent grid is one block per SM of the
  // device's `multiprocessors`.
  int32_t* tile_counter;
  int multiprocessors;
};

enum class FusedHalfType { kBFloat16, kFloat16 };

// One head dim's launchers (fused_launch.cuh), explicitly instantiated in fused_hdim<H>.cu.
template <int kHeadDim>
struct FusedLaunch {
  // bf16/fp16 on tensor cores (fp32 accumulation) along `path` (not kSplitKv): kWgmma or kWgmmaWs
  // for a head dim or build without those kernels runs mma.sync, kWgmmaWs falls back to kWgmma
  // where the driver refuses its tensor maps. kWgmmaWs takes its items in groups of
  // `ws_head_group` pairs (WsHeadGroup) and needs FusedParams::tile_counter. Needs 16-byte
  // aligned tensors whose batch/row/head strides are multiples of 8 elements.
  static cudaError_t Half(const FusedParams& params, FusedHalfType type, FusedPath path,
                          int ws_head_group, cudaStream_t stream);
  // float32 on CUDA cores (fp32 FMA, no TF32): any alignment.
  static cudaError_t Float(const FusedParams& params, cudaStream_t stream);
  // bf16/fp16 split-KV (mma.sync) along `plan`, its workspace pointers set, the merge with
  // `combine_warps` warps a row (CombineWarps); same alignment rules.
  static cudaError_t SplitKv(const FusedParams& params, const FusedSplitKv& plan, int combine_warps,
                             FusedHalfType type, cudaStream_t stream);
};

}  // namespace attn
