// The attention problem: shapes, dtype, masking and scale, with the rules every backend shares.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "attn/dtype.h"

namespace attn {

// out = softmax(scale * Q K^T [+ causal mask]) V, per batch and query head.
//
// Layout follows the codelab: Q and out are (B, T, N, H), K and V are (B, S, K, H). Query head n
// reads K/V head n / (N / K): K == N is multi-head attention, 1 < K < N grouped-query (GQA),
// K == 1 multi-query (MQA). Causal masking is top-left aligned: query t sees keys s <= t, as
// jax.nn.dot_product_attention(is_causal=True).
struct AttentionProblem {
  int64_t batch = 1;         // B
  int64_t q_len = 1;         // T, query positions
  int64_t kv_len = 1;        // S, key/value positions
  int64_t num_heads = 1;     // N, query heads
  int64_t num_kv_heads = 1;  // K, key/value heads; N % K == 0
  int64_t head_dim = 1;      // H
  DType dtype = DType::kFloat32;
  bool causal = false;
  std::optional<double> scale;  // softmax scale; 1/sqrt(H) when unset

  // Self-attention helper: S = T and K = N unless given.
  static AttentionProblem SelfAttention(int64_t b, int64_t t, int64_t n, int64_t h, DType dtype,
                                        bool causal = false, int64_t kv_heads = 0);

  double EffectiveScale() const;
  int64_t GroupSize() const { return num_heads / num_kv_heads; }  // query heads per K/V head

  // "B=4 T=1024 S=1024 N=8 K=8 H=64 bfloat16 causal"
  std::string ToString() const;
};

// Element counts of each tensor. Valid only after ValidateProblem succeeded (which proves
// that none of them overflows int64).
int64_t QueryElements(const AttentionProblem& p);     // B*T*N*H, also the output's count
int64_t KeyValueElements(const AttentionProblem& p);  // B*S*K*H, each of K and V
int64_t ScoreElements(const AttentionProblem& p);     // B*N*T*S

// FLOPs of one forward pass: 4*B*N*T*S*H (two GEMMs), halved when causal.
double AttentionFlops(const AttentionProblem& p);

// Fewest bytes a forward pass moves through device memory: Q, K, V read once, out written once.
double AttentionMinBytes(const AttentionProblem& p);

// Rules that hold for every backend. InvalidArgument naming the field and the rule:
//   every dimension >= 1; num_heads % num_kv_heads == 0; scale finite and > 0 when set;
//   B*T*N*H, B*S*K*H and B*N*T*S and their byte counts fit in int64.
absl::Status ValidateProblem(const AttentionProblem& p);

// a * b, or InvalidArgument("<what> overflows int64 ...") for non-negative operands.
absl::StatusOr<int64_t> CheckedMul(int64_t a, int64_t b, const char* what);

}  // namespace attn
