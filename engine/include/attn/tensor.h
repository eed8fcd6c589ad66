// Non-owning views of the rank-4 tensors attention reads and writes.
#pragma once

#include <array>
#include <cstdint>

#include "absl/status/status.h"
#include "attn/dtype.h"
#include "attn/problem.h"

namespace attn {

// Where a view's bytes live.
enum class MemoryKind : uint8_t { kHost, kDevice };

// A (B, L, heads, H) tensor ("BTNH"); L is T for Q/out and S for K/V. Strides count elements,
// so any layout whose innermost (H) dimension is contiguous can be described without a copy.
struct TensorView {
  void* data = nullptr;
  int64_t capacity_bytes = 0;  // bytes addressable from `data`; every element must lie inside
  DType dtype = DType::kFloat32;
  MemoryKind memory = MemoryKind::kHost;
  std::array<int64_t, 4> shape{};    // B, L, heads, H
  std::array<int64_t, 4> strides{};  // elements; strides[3] must be 1

  // A densely packed row-major BTNH view over `capacity_bytes` at `data`.
  static TensorView Contiguous(void* data, int64_t capacity_bytes, DType dtype, MemoryKind memory,
                               int64_t b, int64_t l, int64_t heads, int64_t h);

  // Offset in elements of [b, l, head, 0].
  int64_t Offset(int64_t b, int64_t l, int64_t head) const {
    return b * strides[0] + l * strides[1] + head * strides[2];
  }
};

// The tensors of one attention call.
struct AttentionTensors {
  TensorView q, k, v, out;
  // The problem's kv_lens (B int32 values) in the same memory kind as q, k, v and out, where the
  // kernels read them: set iff AttentionProblem::kv_lens is non-empty. Implementations never
  // trust what they read here (they clamp it to [0, S]); validation compares host copies only.
  const int32_t* kv_lens = nullptr;
};

// Packed BTNH views of one call's four buffers, each holding exactly its tensor: q and out
// (B, T, N, H), k and v (B, S, K, H), all of `p`'s dtype in `memory`, and the B lengths at
// `kv_lens` (null without them).
AttentionTensors PackedTensors(const AttentionProblem& p, MemoryKind memory, void* q, void* k,
                               void* v, void* out, const int32_t* kv_lens = nullptr);

// Checks that `view` (named `name` in messages: "q", "k", "v", "out") is a valid operand of `p`:
// data non-null, dtype equals the problem's, shape is (B, T, N, H) for q/out or (B, S, K, H) for
// k/v, strides are >= 1 with strides[3] == 1, and the furthest element lies within
// capacity_bytes (computed without int64 overflow). InvalidArgument naming the field and rule.
absl::Status ValidateTensor(const TensorView& view, const AttentionProblem& p, const char* name);

// ValidateTensor on all four, plus: all in the same memory kind, `out` overlapping none of q, k,
// v and kv_lens (a write through `out` must never destroy an input), and kv_lens set iff the
// problem has lengths; in host memory, its values equal the problem's.
absl::Status ValidateTensors(const AttentionTensors& t, const AttentionProblem& p);

}  // namespace attn
