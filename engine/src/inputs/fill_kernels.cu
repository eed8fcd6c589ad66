// Device-side input fill for the benchmark runner: one thread per element, NormalAt(seed, i).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/from_float.cuh"
#include "inputs/fill_kernels.h"
#include "inputs/normal.h"

namespace attn {
namespace {

// Stores NormalAt rounded to R in T (R = T, or T = float holding R's values exactly).
template <typename T, typename R>
__global__ void NormalFillKernel(T* dst, int64_t count, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    dst[i] =
        FromFloat<T>(static_cast<float>(FromFloat<R>(NormalAt(seed, static_cast<uint64_t>(i)))));
  }
}

}  // namespace

cudaError_t LaunchNormalFill(void* dst, int64_t count, FillType type, FillType rounded_to,
                             uint64_t seed, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  if (type != rounded_to && type != FillType::kFloat32) return cudaErrorInvalidValue;
  const int threads = 256;
  const int64_t want = (count + threads - 1) / threads;
  const unsigned blocks = static_cast<unsigned>(want < 65536 ? want : 65536);
  float* f32 = static_cast<float*>(dst);
  switch (type == FillType::kFloat32 ? rounded_to : type) {
    case FillType::kFloat32:
      NormalFillKernel<float, float><<<blocks, threads, 0, stream>>>(f32, count, seed);
      break;
    case FillType::kBFloat16:
      if (type == FillType::kFloat32) {
        NormalFillKernel<float, __nv_bfloat16><<<blocks, threads, 0, stream>>>(f32, count, seed);
      } else {
        NormalFillKernel<__nv_bfloat16, __nv_bfloat16>
            <<<blocks, threads, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), count, seed);
      }
      break;
    case FillType::kFloat16:
      if (type == FillType::kFloat32) {
        NormalFillKernel<float, __half><<<blocks, threads, 0, stream>>>(f32, count, seed);
      } else {
        NormalFillKernel<__half, __half>
            <<<blocks, threads, 0, stream>>>(static_cast<__half*>(dst), count, seed);
      }
      break;
  }
  return cudaGetLastError();
}

}  // namespace attn
