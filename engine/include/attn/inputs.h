// Generated inputs (AttendRequest.generated, benchmark cases): element i of a tensor generated
// from seed s is an approximately normal(0, 1) value that is a pure function of (s, i), the same
// on the host and every device. Part of the host-only attn_host library.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "attn/dtype.h"
#include "attn/stop.h"

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

}  // namespace attn
