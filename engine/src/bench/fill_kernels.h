// Launcher of the runner's device-side input fill (plain CUDA types: nvcc sees no abseil).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace attn {

enum class FillType { kFloat32, kBFloat16, kFloat16 };

// dst[i] = NormalAt(seed, i) rounded to `type`, for i < count.
cudaError_t LaunchNormalFill(void* dst, int64_t count, FillType type, uint64_t seed,
                             cudaStream_t stream);

}  // namespace attn
