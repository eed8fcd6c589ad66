// The inputs of a call, shared by serving (Attend) and benchmarking (the runner): generated inputs
// (AttendRequest.generated, benchmark cases), where element i of a tensor generated from seed s is
// an approximately normal(0, 1) value that is a pure function of (s, i), the same on the host and
// every device; and the packed buffers a call's tensors live in. The seeds and the host fill are
// in the host-only attn_host library; what takes a DeviceContext is in attn_engine.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "attn/device.h"
#include "attn/dtype.h"
#include "attn/problem.h"
#include "attn/stop.h"
#include "attn/tensor.h"

namespace attn {

// Input sets one benchmark case may rotate through (BenchOptions::rotate_inputs is 1..this).
inline constexpr int kMaxInputSets = 64;

// The seed of tensor `tensor` (0 q, 1 k, 2 v) of input set `set` generated from `seed`; set 0 is
// what an Attend with GeneratedInputs{seed} uses.
constexpr uint64_t InputSeed(uint64_t seed, int set, int tensor) {
  return seed + uint64_t{3} * static_cast<uint64_t>(set) + static_cast<uint64_t>(tensor);
}

// The seed of case `index` of a benchmark job with options.seed `job_seed`. Every case draws
// from its own streams (3 tensors x kMaxInputSets input sets), so a case's inputs depend only on
// the job's seed and the case's index in the job, however the job's cases are split over calls.
constexpr uint64_t CaseSeed(uint64_t job_seed, int64_t index) {
  return job_seed + uint64_t{3} * kMaxInputSets * static_cast<uint64_t>(index);
}

// Fills `count` host elements of `dtype` at `dst` from `seed`, checking `stop` as it goes.
absl::Status FillNormalHost(void* dst, int64_t count, DType dtype, uint64_t seed,
                            const StopToken* stop = nullptr);

// Fills `count` elements of `dtype` at `dst`, memory of `context`, with the runner's inputs:
// approximately normal(0, 1) values that are a pure function of (seed, element index), the same
// on the host and the device. A kernel on the context's stream for a GPU context; on the host,
// a loop that checks `stop` as it goes.
absl::Status FillNormal(DeviceContext& context, void* dst, int64_t count, DType dtype,
                        uint64_t seed, const StopToken* stop = nullptr);

// One call's four packed BTNH buffers (PackedTensors of `p`) taken from `context`'s arena, and
// with kv_lens a fifth holding p.kv_lens (copied there: tensors.kv_lens); the blocks go back to
// the arena when this is destroyed. q, k, v and `out` are left as they are.
struct PackedBuffers {
  std::vector<ArenaBlock> blocks;
  AttentionTensors tensors;
};
absl::StatusOr<PackedBuffers> AllocatePacked(const AttentionProblem& p, DeviceContext& context);

// Fills q, k and v of `t` with FillNormal from seeds seed, seed + 1 and seed + 2: the runner's
// inputs for one input set, and what AttendRequest.generated documents.
absl::Status FillInputs(DeviceContext& context, const AttentionProblem& p,
                        const AttentionTensors& t, uint64_t seed, const StopToken* stop = nullptr);

}  // namespace attn
