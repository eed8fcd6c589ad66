// The raw allocations behind Arena: from CUDA when built with it (device_cuda.cc), and a build
// without CUDA has no device memory (device_nocuda.cc); host memory is aligned operator new
// (device.cc).
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"

namespace attn {

absl::StatusOr<void*> AllocateDeviceMemory(int64_t bytes);  // cudaMalloc on the current device
absl::StatusOr<void*> AllocateHostMemory(int64_t bytes);    // aligned operator new
void FreeDeviceMemory(void* p);
void FreeHostMemory(void* p);

}  // namespace attn
