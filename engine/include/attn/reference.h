// The float64 attention on the host: what the `reference` backend runs and what numerics checks
// (attn-bench and attn-client --check, the benchmark runner's) compare with. Part of the
// host-only attn_host library (no CUDA).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "attn/problem.h"
#include "attn/stop.h"
#include "attn/tensor.h"

namespace attn {

// Scratch bytes ReferenceAttention needs for `p`: Q, K and V widened to double, packed BTNH.
absl::StatusOr<int64_t> ReferenceScratchBytes(const AttentionProblem& p);

// t.out = softmax(scale * Q K^T [+ masks]) V with every product and sum in double, rounded
// once to out's dtype; batch element b sees its first t.kv_lens[b] keys (clamped to [0, S]) when
// t.kv_lens is set, and only those scores are computed. Host views that ValidateTensors accepted;
// `scratch` holds ReferenceScratchBytes(p) bytes. Rows are spread over a thread pool kept for the
// process, on at most `max_threads` threads, the caller's included (0: all); `stop`, when set, is
// checked as rows go and its reason returned.
absl::Status ReferenceAttention(const AttentionProblem& p, const AttentionTensors& t, void* scratch,
                                const StopToken* stop = nullptr, int max_threads = 0);

}  // namespace attn
