// The device layout of an FP8 recipe's scalars, shared by the host code and the CUDA kernels
// (plain C++: nvcc compiles it without abseil).
#pragma once

#include <cstdint>

namespace attn {

enum Fp8Tensor : int { kFp8Q = 0, kFp8K = 1, kFp8V = 2, kFp8S = 3, kFp8O = 4 };
inline constexpr int kNumFp8Tensors = 5;

namespace fp8_internal {

// One float per 16 bytes: every pointer handed to cuDNN is 16-byte aligned.
struct alignas(16) Scalar {
  float value;
  float pad[3];
};

// The scalars of one recipe state (or of one stateless call, in the backend's workspace),
// followed in memory by the histories, float[kNumFp8Tensors][amax_history_len] ring buffers
// whose next slot to write is `position`.
struct DeviceScalars {
  Scalar scale[kNumFp8Tensors];       // what the next call quantises with
  Scalar descale[kNumFp8Tensors];     // 1 / scale
  Scalar amax[kNumFp8Tensors];        // accumulated by the call in flight
  Scalar used_scale[kNumFp8Tensors];  // the last finished call's scales
  Scalar seen_amax[kNumFp8Tensors];   // the last finished call's amaxes
  int32_t updates;                    // calls recorded in the histories
  int32_t position;
  int32_t pad[2];
};
static_assert(sizeof(DeviceScalars) == 25 * 16 + 16, "no padding between the slots");

}  // namespace fp8_internal
}  // namespace attn
