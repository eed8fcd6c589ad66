// An independent float64 attention: the plainest triple loop, kept apart from the cpu backend
// so the two check each other.
#pragma once

#include <vector>

#include "attn/problem.h"

namespace attn::testing {

// q is (B, T, N, H), k and v (B, S, K, H), packed row-major; returns out (B, T, N, H). Batch
// element b sees its first p.kv_lens[b] keys (all S without kv_lens), and with p.causal, query t
// keys s <= t.
std::vector<double> ReferenceAttention(const AttentionProblem& p, const std::vector<double>& q,
                                       const std::vector<double>& k, const std::vector<double>& v);

}  // namespace attn::testing
