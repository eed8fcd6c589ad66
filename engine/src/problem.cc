#include "attn/problem.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace attn {

AttentionProblem AttentionProblem::SelfAttention(int64_t b, int64_t t, int64_t n, int64_t h,
                                                 DType dtype, bool causal, int64_t kv_heads) {
  AttentionProblem p;
  p.batch = b;
  p.q_len = t;
  p.kv_len = t;
  p.num_heads = n;
  p.num_kv_heads = kv_heads > 0 ? kv_heads : n;
  p.head_dim = h;
  p.dtype = dtype;
  p.causal = causal;
  return p;
}

double AttentionProblem::EffectiveScale() const {
  return scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(head_dim));
}

std::string AttentionProblem::ToString() const {
  std::string s = absl::StrFormat("B=%d T=%d S=%d N=%d K=%d H=%d %s", batch, q_len, kv_len,
                                  num_heads, num_kv_heads, head_dim, DTypeName(dtype));
  if (causal) absl::StrAppend(&s, " causal");
  if (scale.has_value()) absl::StrAppend(&s, absl::StrFormat(" scale=%g", *scale));
  if (!kv_lens.empty()) absl::StrAppend(&s, " kv_lens=", KvLensLabel(kv_lens));
  return s;
}

std::string KvLensLabel(const std::vector<int32_t>& kv_lens) {
  if (kv_lens.empty()) return "";
  if (kv_lens.size() <= 8) return absl::StrCat("[", absl::StrJoin(kv_lens, ","), "]");
  const auto [lo, hi] = std::minmax_element(kv_lens.begin(), kv_lens.end());
  return *lo == *hi ? absl::StrCat("[all ", *lo, "]")
                    : absl::StrCat("[", *lo, "..", *hi, "] ragged");
}

int64_t QueryElements(const AttentionProblem& p) {
  return p.batch * p.q_len * p.num_heads * p.head_dim;
}
int64_t KeyValueElements(const AttentionProblem& p) {
  return p.batch * p.kv_len * p.num_kv_heads * p.head_dim;
}
int64_t ScoreElements(const AttentionProblem& p) {
  return p.batch * p.num_heads * p.q_len * p.kv_len;
}

int64_t TotalKvLen(const AttentionProblem& p) {
  if (p.kv_lens.empty()) return p.batch * p.kv_len;
  int64_t total = 0;
  for (int32_t len : p.kv_lens) total += len;
  return total;
}

double AttentionFlops(const AttentionProblem& p) {
  const double full = 4.0 * static_cast<double>(p.num_heads) * static_cast<double>(p.q_len) *
                      static_cast<double>(TotalKvLen(p)) * static_cast<double>(p.head_dim);
  return p.causal ? full / 2 : full;
}

double KeyValueBytesRead(const AttentionProblem& p) {
  return 2.0 * static_cast<double>(DTypeSize(p.dtype)) * static_cast<double>(TotalKvLen(p)) *
         static_cast<double>(p.num_kv_heads) * static_cast<double>(p.head_dim);
}

double AttentionMinBytes(const AttentionProblem& p) {
  return 2.0 * static_cast<double>(DTypeSize(p.dtype)) * static_cast<double>(QueryElements(p)) +
         KeyValueBytesRead(p);
}

AttentionProblem WithAllKeys(AttentionProblem p) {
  p.kv_lens.clear();
  return p;
}

absl::StatusOr<int64_t> CheckedMul(int64_t a, int64_t b, const char* what) {
  if (a != 0 && b > std::numeric_limits<int64_t>::max() / a) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s overflows int64 (%d * %d); use smaller dimensions", what, a, b));
  }
  return a * b;
}

namespace {

// Product of `dims` times `bytes_per_element`, or InvalidArgument naming `what`.
absl::Status CheckProduct(std::initializer_list<int64_t> dims, int64_t bytes_per_element,
                          const char* what) {
  int64_t product = bytes_per_element;
  for (int64_t d : dims) {
    auto next = CheckedMul(product, d, what);
    if (!next.ok()) return next.status();
    product = *next;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateProblem(const AttentionProblem& p) {
  const struct {
    const char* field;
    int64_t value;
  } dims[] = {{"batch", p.batch},
              {"q_len", p.q_len},
              {"kv_len", p.kv_len},
              {"num_heads", p.num_heads},
              {"num_kv_heads", p.num_kv_heads},
              {"head_dim", p.head_dim}};
  for (const auto& d : dims) {
    if (d.value < 1) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: must be >= 1, got %d", d.field, d.value));
    }
  }
  if (p.num_heads % p.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "num_kv_heads: num_heads (%d) must be a multiple of num_kv_heads (%d) for GQA/MQA",
        p.num_heads, p.num_kv_heads));
  }
  if (p.scale.has_value() && !(std::isfinite(*p.scale) && *p.scale > 0)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("scale: must be finite and > 0, got %g", *p.scale));
  }
  const int64_t elem = DTypeSize(p.dtype);
  if (auto s = CheckProduct({p.batch, p.q_len, p.num_heads, p.head_dim}, elem,
                            "q/out bytes (B*T*N*H*dtype size)");
      !s.ok())
    return s;
  if (auto s = CheckProduct({p.batch, p.kv_len, p.num_kv_heads, p.head_dim}, elem,
                            "k/v bytes (B*S*K*H*dtype size)");
      !s.ok())
    return s;
  // The score matrix is what the naive backend materialises in float32; every backend's FLOP
  // and mask arithmetic indexes it, so its byte count must be representable too.
  if (auto s =
          CheckProduct({p.batch, p.num_heads, p.q_len, p.kv_len}, 4, "score bytes (B*N*T*S*4)");
      !s.ok())
    return s;
  return ValidateKvLens(p);
}

absl::Status ValidateKvLensCount(int64_t count, int64_t batch) {
  if (count == 0 || count == batch) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "kv_lens has %d values; B = %d (one per batch element, or none)", count, batch));
}

absl::Status ValidateKvLens(const AttentionProblem& p) {
  if (p.kv_lens.empty()) return absl::OkStatus();
  if (auto s = ValidateKvLensCount(static_cast<int64_t>(p.kv_lens.size()), p.batch); !s.ok()) {
    return s;
  }
  for (size_t b = 0; b < p.kv_lens.size(); ++b) {
    if (p.kv_lens[b] < 1 || p.kv_lens[b] > p.kv_len) {
      return absl::InvalidArgumentError(
          absl::StrFormat("kv_lens[%d] = %d is outside 1..S (S = %d)", b, p.kv_lens[b], p.kv_len));
    }
  }
  return absl::OkStatus();
}

}  // namespace attn
