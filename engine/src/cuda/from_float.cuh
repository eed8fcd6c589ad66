// Round-to-nearest narrowing of a float to a kernel's storage type (float, bf16, fp16).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace attn {

template <typename T>
__device__ T FromFloat(float x);
template <>
__device__ inline float FromFloat<float>(float x) {
  return x;
}
template <>
__device__ inline __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ inline __half FromFloat<__half>(float x) {
  return __float2half_rn(x);
}

}  // namespace attn
