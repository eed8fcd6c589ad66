// The attention problem: shapes, dtype, masking and scale, with the rules every backend shares.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "attn/dtype.h"

namespace attn {

// out = softmax(scale * Q K^T [+ masks]) V, per batch and query head.
//
// Layout follows the codelab: Q and out are (B, T, N, H), K and V are (B, S, K, H). Query head n
// reads K/V head n / (N / K): K == N is multi-head attention, 1 < K < N grouped-query (GQA),
// K == 1 multi-query (MQA).
//
// Masks: with kv_lens, batch element b attends to its first kv_lens[b] keys only (a KV cache
// whose sequences have different lengths, padded to S). Causal masking is top-left aligned:
// query t sees keys s <= t, and with kv_lens, s <= t and s < kv_lens[b]. That is
// jax.nn.dot_product_attention(is_causal=True, key_value_seq_lengths=kv_lens) and PyTorch's
// is_causal=True (top-left too; PyTorch takes no lengths beside is_causal, but an explicit boolean
// mask of s <= t && s < kv_lens[b] is this problem). Key 0 is always visible (kv_lens[b] >= 1), so
// no row is empty. For decode (T < S) with a cache, bottom-right alignment (query t at position
// kv_lens[b] - T + t) is what PyTorch's causal_lower_right gives; this engine does not offer it:
// a decode step is usually unmasked (T = 1 sees the whole cache).
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
  // Per-sequence KV lengths: empty, every batch element sees all S keys; else exactly B values,
  // each in 1..S. The tensors carry the same values where the kernels read them
  // (AttentionTensors::kv_lens); these are what validation, FLOPs and messages use.
  std::vector<int32_t> kv_lens;

  // Self-attention helper: S = T and K = N unless given.
  static AttentionProblem SelfAttention(int64_t b, int64_t t, int64_t n, int64_t h, DType dtype,
                                        bool causal = false, int64_t kv_heads = 0);

  double EffectiveScale() const;
  int64_t GroupSize() const { return num_heads / num_kv_heads; }  // query heads per K/V head

  // Keys batch element b attends to: kv_lens[b], or S without kv_lens.
  int64_t KvLenAt(int64_t b) const { return kv_lens.empty() ? kv_len : kv_lens[b]; }

  // "B=4 T=1024 S=1024 N=8 K=8 H=64 bfloat16 causal", plus " kv_lens=" KvLensLabel when set.
  std::string ToString() const;
};

// The lengths in a few characters: "[1,5,8192]" for up to 8 values, else "[1..8192] ragged" (the
// least and the most) or "[all 4096]"; empty for none. ToString and the clients' tables use it.
std::string KvLensLabel(const std::vector<int32_t>& kv_lens);

// Element counts of each tensor. Valid only after ValidateProblem succeeded (which proves
// that none of them overflows int64).
int64_t QueryElements(const AttentionProblem& p);     // B*T*N*H, also the output's count
int64_t KeyValueElements(const AttentionProblem& p);  // B*S*K*H, each of K and V
int64_t ScoreElements(const AttentionProblem& p);     // B*N*T*S

// Keys attended over the batch: the sum over b of KvLenAt(b) (B*S without kv_lens).
int64_t TotalKvLen(const AttentionProblem& p);

// FLOPs of one forward pass, counting the keys each batch element attends to:
// 4*N*T*H * TotalKvLen (two GEMMs; 4*B*N*T*S*H without kv_lens), halved when causal. With causal
// and kv_lens the halving is the same approximation as without (a top-left causal row t sees
// min(t + 1, kv_lens[b]) keys), so lengths of S give the figure of a problem without them.
double AttentionFlops(const AttentionProblem& p);

// Fewest bytes a forward pass moves through device memory: Q read once, out written once, and
// of K and V the first kv_lens[b] rows of each batch element (KeyValueBytesRead).
double AttentionMinBytes(const AttentionProblem& p);

// Bytes of K and V a forward pass must read: 2 * TotalKvLen * K * H * dtype size. Over a call's
// time, the effective K/V bandwidth that decode (T << S) is bound by.
double KeyValueBytesRead(const AttentionProblem& p);

// `p` without kv_lens: every batch element sees all S keys. Its FLOPs and bytes bound p's, and
// some backends (naive) compute every score and mask, so cost admission, the numerics check's
// choice of reference and the pieces of a long call (PlanPieces) use it: conservative, and the
// same for any lengths.
AttentionProblem WithAllKeys(AttentionProblem p);

// Rules that hold for every backend. InvalidArgument naming the field and the rule:
//   every dimension >= 1; num_heads % num_kv_heads == 0; scale finite and > 0 when set;
//   B*T*N*H, B*S*K*H and B*N*T*S and their byte counts fit in int64; ValidateKvLens.
absl::Status ValidateProblem(const AttentionProblem& p);

// kv_lens: empty, or B values each in 1..S ("kv_lens has 3 values; B = 4 (one per batch element,
// or none)", "kv_lens[3] = 0 is outside 1..S (S = 8192)"). Assumes B and S are >= 1.
absl::Status ValidateKvLens(const AttentionProblem& p);

// ValidateKvLens's count rule alone, for `count` lengths before they are copied anywhere (a
// request can name millions in a few bytes each).
absl::Status ValidateKvLensCount(int64_t count, int64_t batch);

// a * b, or InvalidArgument("<what> overflows int64 ...") for non-negative operands.
absl::StatusOr<int64_t> CheckedMul(int64_t a, int64_t b, const char* what);

}  // namespace attn
