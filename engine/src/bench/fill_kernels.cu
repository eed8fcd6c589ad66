// Device-side input fill for the benchmark runner: one thread per element, NormalAt(seed, i).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "bench/fill_kernels.h"
#include "bench/normal_fill.h"
#include "cuda/from_float.cuh"

namespace attn {
namespace {

template <typename T>
__global__ void NormalFillKernel(T* dst, int64_t count, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    dst[i] = FromFloat<T>(NormalAt(seed, static_cast<uint64_t>(i)));
  }
}

}  // namespace

cudaError_t LaunchNormalFill(void* dst, int64_t count, FillType type, uint64_t seed,
                             cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  const int threads = 256;
  const int64_t want = (count + threads - 1) / threads;
  const unsigned blocks = static_cast<unsigned>(want < 65536 ? want : 65536);
  switch (type) {
    case FillType::kFloat32:
      NormalFillKernel<<<blocks, threads, 0, stream>>>(static_cast<float*>(dst), count, seed);
      break;
    case FillType::kBFloat16:
      NormalFillKernel<<<blocks, threads, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), count, seed);
      break;
    case FillType::kFloat16:
      NormalFillKernel<<<blocks, threads, 0, stream>>>(static_cast<__half*>(dst), count, seed);
      break;
  }
  return cudaGetLastError();
}

}  // namespace attn
