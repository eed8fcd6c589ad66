// The engine's work on a device stream: timing and input generation, from CUDA when built with
// it (device_cuda.cc) and refused otherwise (device_nocuda.cc). The raw allocations behind Arena
// are raw_memory.h's.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "attn/device.h"

namespace attn {

// Times `repeats` calls of `work` on `stream` with CUDA events, after `warmup` untimed ones.
absl::StatusOr<std::vector<double>> TimeOnStream(CudaStream stream,
                                                 const std::function<absl::Status()>& work,
                                                 int warmup, int repeats);

// Fills `count` elements of device memory at `dst` with NormalAt(seed, i) in `dtype`, on `stream`.
// With `rounded_to` set, the values are those of a `rounded_to` tensor from the same stream,
// stored as float32 (`dtype` must then be float32): a widened copy for a float32 reference.
absl::Status FillNormalOnStream(CudaStream stream, void* dst, int64_t count, DType dtype,
                                uint64_t seed, std::optional<DType> rounded_to = std::nullopt);

// The CUDA side of TimeGraphReplays.
absl::StatusOr<std::vector<double>> TimeGraphOnStream(CudaStream stream,
                                                      const std::function<absl::Status()>& work,
                                                      int calls_per_replay, int replays);

}  // namespace attn
