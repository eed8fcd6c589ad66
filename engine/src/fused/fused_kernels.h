// Kernels of the `fused` backend, launched from fused_backend.cc (the one launch file). Plain
// CUDA types only, so nvcc never compiles abseil. Each head dim is instantiated in its own
// fused_hdim<H>.cu, so the five instantiations build in parallel and each stays short.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

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

// bf16/fp16 on tensor cores (mma.sync m16n8k16, ldmatrix, cp.async; fp32 accumulation).
// Needs 16-byte aligned tensors whose batch/row/head strides are multiples of 8 elements.
template <int kHeadDim>
cudaError_t LaunchFusedHalf(const FusedParams& params, FusedHalfType type, cudaStream_t stream);

// float32 on CUDA cores (fp32 FMA, no TF32): any alignment.
template <int kHeadDim>
cudaError_t LaunchFusedFloat(const FusedParams& params, cudaStream_t stream);

// The compiled head dims, one fused_hdim<H>.cu each.
#define ATTN_FUSED_DECLARE(H)                                                                      \
  extern template cudaError_t LaunchFusedHalf<H>(const FusedParams&, FusedHalfType, cudaStream_t); \
  extern template cudaError_t LaunchFusedFloat<H>(const FusedParams&, cudaStream_t);
ATTN_FUSED_DECLARE(32)
ATTN_FUSED_DECLARE(64)
ATTN_FUSED_DECLARE(96)
ATTN_FUSED_DECLARE(128)
ATTN_FUSED_DECLARE(256)
#undef ATTN_FUSED_DECLARE

}  // namespace attn
