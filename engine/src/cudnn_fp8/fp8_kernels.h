// Kernels of the `cudnn_fp8` backend, launched from cudnn_fp8_backend.cc: quantising Q, K and V
// to E4M3 (with their amaxes), dequantising O, and the DelayedScaling update on the device.
// Plain CUDA types only, so nvcc never compiles abseil.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "attn/fp8_scalars.h"

namespace attn::fp8 {

enum class HalfType { kBFloat16, kFloat16 };

// A (B, L, heads, H) bf16/fp16 view (element strides, strides[3] == 1) and its packed E4M3 copy,
// laid out (B, L, heads, H) or, with dst_heads_major, (B, heads, L, H).
struct Operand {
  const void* src;
  uint8_t* dst;
  int64_t shape[4];
  int64_t strides[4];
  bool dst_heads_major;
};

// amax[kFp8Q + i] = max(amax[...], max |operand i|) for the three operands, one launch. The
// caller zeroes the slots first.
cudaError_t LaunchAmax(HalfType type, const Operand (&ops)[3], fp8_internal::DeviceScalars* s,
                       cudaStream_t stream);

// The stateless scales, from the current amaxes: Q, K, V from their amax; S from amax 1 (softmax
// probabilities); O from V's amax (each output row is a convex combination of V's rows), each
// ComputeScale(amax, 1, 448, margin). With `descale_v_bound` (E4M3 inputs, no amax): S 448 and
// O 1 / *descale_v_bound.
cudaError_t LaunchCurrentScales(fp8_internal::DeviceScalars* s, int margin,
                                const float* descale_v_bound, cudaStream_t stream);

// dst_i = e4m3(src_i * scale[i]) for Q, K, V in one launch (16-byte loads, saturating RNE
// conversion), and amax[i] = max(amax[i], max |src_i|).
cudaError_t LaunchQuantize(HalfType type, const Operand (&ops)[3], fp8_internal::DeviceScalars* s,
                           cudaStream_t stream);

// out = e4m3 * descale[kFp8O], from packed E4M3 ((B, T, N, H), or (B, N, T, H) with
// src_heads_major) into a (B, T, N, H) view of `type`.
cudaError_t LaunchDequantize(HalfType type, const uint8_t* src, bool src_heads_major, void* out,
                             const int64_t (&shape)[4], const int64_t (&strides)[4],
                             const fp8_internal::DeviceScalars* s, cudaStream_t stream);

// TE's amax_and_scale_update for the five tensors, after a call: records amax[i] as the newest
// entry of history i, reduces the history (max, or the newest when most_recent), moves scale to
// used_scale and amax to seen_amax, sets scale = ComputeScale(reduced, scale, 448, margin) and
// descale = 1 / scale, and zeroes amax for the next call. A call run in chunks passes the other
// chunks' amaxes of S and O, `extra_chunks` pairs (S, O) at `chunk_amax`, folded in by max first.
cudaError_t LaunchRecipeUpdate(fp8_internal::DeviceScalars* s, float* history, int history_len,
                               bool most_recent, int margin, const fp8_internal::Scalar* chunk_amax,
                               int extra_chunks, cudaStream_t stream);

}  // namespace attn::fp8
