// Per-sequence KV lengths (AttentionProblem::kv_lens) as tools and suites write them: a list, or
// a seeded uniform draw. Part of the host-only attn_host library (attn-client parses the same
// flag as attn-bench).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace attn {

// B lengths drawn uniformly from [lo, hi] (1 <= lo <= hi): element b is a pure function of
// (seed, b), the same on every machine.
std::vector<int32_t> UniformKvLens(int64_t batch, int32_t lo, int32_t hi, uint64_t seed);

// What a --kv-lens flag asks for, before B and S are known (a sweep has several):
//   ""                 none: every batch element sees all S keys
//   "5,1,8192,..."     these lengths, one per batch element
//   "4096"             every batch element 4096
//   "uniform"          a seeded uniform draw from 1..S per batch element
//   "uniform:LO:HI"    a seeded uniform draw from LO..HI
class KvLensSpec {
 public:
  // InvalidArgument naming `flag` ("--kv-lens: ...") for text of none of the forms above.
  static absl::StatusOr<KvLensSpec> Parse(absl::string_view text, absl::string_view flag);

  bool empty() const { return kind_ == Kind::kNone; }

  // The lengths for a problem of `batch` elements and `kv_len` keys: empty for none; a list must
  // have one value or `batch` values (InvalidArgument naming the flag otherwise). Whether each
  // lies in 1..S is ValidateProblem's to say.
  absl::StatusOr<std::vector<int32_t>> Lengths(int64_t batch, int64_t kv_len, uint64_t seed) const;

  // The flag's help text: the forms above, in one line each.
  static std::string Help();

 private:
  enum class Kind { kNone, kList, kUniform };
  Kind kind_ = Kind::kNone;
  std::string flag_;
  std::vector<int32_t> values_;  // kList
  int32_t lo_ = 1, hi_ = 0;      // kUniform; hi_ 0: up to S
};

}  // namespace attn
