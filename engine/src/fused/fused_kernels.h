// Kernels of the `fused` backend, launched from fused_backend.cc (the one launch file). Plain
// CUDA types only, so nvcc never compiles abseil. Each head dim is instantiated in its own
// fused_hdim<H>.cu, so the five instantiations build in parallel and each stays short.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>

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
  float scale_log2;  // softmax scale * log2(e): scores go through exp2f
  bool causal;       // top-left aligned: query t sees keys s <= t
};

enum class FusedHalfType { kBFloat16, kFloat16 };

// The tensor-core kernel a bf16/fp16 problem runs on: mma.sync (sm_80 and newer: fused_kernel.cuh)
// or warpgroup MMA (sm_90a, H100/H200, head dims 64 and 128: fused_wgmma.cuh).
enum class FusedPath { kMmaSync, kWgmma };

// Whether this build holds the wgmma kernel for `head_dim` (CMake defines ATTN_FUSED_WGMMA when
// CMAKE_CUDA_ARCHITECTURES names 90a).
bool FusedWgmmaBuilt(int head_dim);

// Forces one path where both can run (tests and side-by-side benchmarks); std::nullopt restores
// the automatic choice (wgmma on compute capability 9.0 where built). Without a call, the
// environment variable ATTN_FUSED_KERNEL=mma_sync|wgmma sets it for the process.
void SetFusedPathOverride(std::optional<FusedPath> path);

// bf16/fp16 on tensor cores (fp32 accumulation, cp.async loads) along `path`; kWgmma for a head
// dim without that kernel runs mma.sync. Needs 16-byte aligned tensors whose batch/row/head
// strides are multiples of 8 elements.
template <int kHeadDim>
cudaError_t LaunchFusedHalf(const FusedParams& params, FusedHalfType type, FusedPath path,
                            cudaStream_t stream);

// float32 on CUDA cores (fp32 FMA, no TF32): any alignment.
template <int kHeadDim>
cudaError_t LaunchFusedFloat(const FusedParams& params, cudaStream_t stream);

// The compiled head dims, one fused_hdim<H>.cu each.
#define ATTN_FUSED_DECLARE(H)                                                                  \
  extern template cudaError_t LaunchFusedHalf<H>(const FusedParams&, FusedHalfType, FusedPath, \
                                                 cudaStream_t);                                \
  extern template cudaError_t LaunchFusedFloat<H>(const FusedParams&, cudaStream_t);
ATTN_FUSED_DECLARE(32)
ATTN_FUSED_DECLARE(64)
ATTN_FUSED_DECLARE(96)
ATTN_FUSED_DECLARE(128)
ATTN_FUSED_DECLARE(256)
#undef ATTN_FUSED_DECLARE

}  // namespace attn
