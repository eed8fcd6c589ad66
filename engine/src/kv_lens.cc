#include "attn/kv_lens.h"

#include <algorithm>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "inputs/normal.h"

namespace attn {
namespace {

absl::Status Bad(absl::string_view flag, absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": '", text, "' ", why, "; expected ",
                                                 "a comma list of lengths, one length, uniform "
                                                 "or uniform:LO:HI"));
}

}  // namespace

std::vector<int32_t> UniformKvLens(int64_t batch, int32_t lo, int32_t hi, uint64_t seed) {
  std::vector<int32_t> out(static_cast<size_t>(batch));
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) + 1;
  for (int64_t b = 0; b < batch; ++b) {
    // The stream of `seed` at b; the modulo's bias (span / 2^64) is far below anything measured.
    const uint64_t h =
        SplitMix64(SplitMix64(seed ^ 0x6b765f6c656e73ull) + static_cast<uint64_t>(b));
    out[static_cast<size_t>(b)] = static_cast<int32_t>(lo + static_cast<int64_t>(h % span));
  }
  return out;
}

absl::StatusOr<KvLensSpec> KvLensSpec::Parse(absl::string_view text, absl::string_view flag) {
  KvLensSpec spec;
  spec.flag_ = std::string(flag);
  if (text.empty()) return spec;
  const auto int32 = [](absl::string_view s, int32_t& out) { return absl::SimpleAtoi(s, &out); };
  if (text == "uniform" || absl::StartsWith(text, "uniform:")) {
    spec.kind_ = Kind::kUniform;
    if (text == "uniform") return spec;
    const std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
    if (parts.size() != 3 || !int32(parts[1], spec.lo_) || !int32(parts[2], spec.hi_)) {
      return Bad(flag, text, "is not uniform:LO:HI with integers LO and HI");
    }
    if (spec.lo_ < 1 || spec.hi_ < spec.lo_) {
      return Bad(flag, text, "needs 1 <= LO <= HI");
    }
    return spec;
  }
  spec.kind_ = Kind::kList;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int32_t v = 0;
    if (!int32(part, v)) return Bad(flag, text, absl::StrCat("has '", part, "', not an integer"));
    spec.values_.push_back(v);
  }
  return spec;
}

absl::StatusOr<std::vector<int32_t>> KvLensSpec::Lengths(int64_t batch, int64_t kv_len,
                                                         uint64_t seed) const {
  switch (kind_) {
    case Kind::kNone:
      return std::vector<int32_t>{};
    case Kind::kUniform: {
      // Plain "uniform" reaches S (at most int32's largest, the lengths' type).
      const int64_t hi =
          hi_ == 0 ? std::min<int64_t>(kv_len, std::numeric_limits<int32_t>::max()) : hi_;
      if (hi > kv_len) {
        return absl::InvalidArgumentError(
            absl::StrCat(flag_, ": uniform:", lo_, ":", hi, " reaches beyond kv_len ", kv_len));
      }
      return UniformKvLens(batch, lo_, static_cast<int32_t>(hi), seed);
    }
    case Kind::kList:
      if (values_.size() == 1) return std::vector<int32_t>(static_cast<size_t>(batch), values_[0]);
      if (static_cast<int64_t>(values_.size()) != batch) {
        return absl::InvalidArgumentError(absl::StrCat(flag_, ": ", values_.size(),
                                                       " lengths for batch ", batch,
                                                       "; give one per batch element, or one"));
      }
      return values_;
  }
  return std::vector<int32_t>{};
}

std::string KvLensSpec::Help() {
  return "per-sequence KV lengths (batch element b attends to its first L_b keys): a comma list "
         "of B lengths, one length for all, 'uniform' (each drawn from 1..S with --seed) or "
         "'uniform:LO:HI'; empty: all S";
}

}  // namespace attn
