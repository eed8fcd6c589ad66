// Launcher of the runner's device-side input fill (plain CUDA types: nvcc sees no abseil).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace attn {

enum class FillType { kFloat32, kBFloat16, kFloat16 };

// dst[i] = NormalAt(seed, i) rounded to `rounded_to`, stored as `type`, for i < count. `type`
// equals `rounded_to`, or is kFloat32 (a float copy of a narrower tensor's exact values).
cudaError_t LaunchNormalFill(void* dst, int64_t count, FillType type, FillType rounded_to,
                             uint64_t seed, cudaStream_t stream);

}  // namespace attn
