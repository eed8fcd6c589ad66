// The FP8 pieces that need no GPU: E4M3 on the host, the DelayedScaling reference, and reading a
// recipe state back from its device.
#include "attn/fp8.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_format.h"
#include "attn/unsupported.h"

namespace attn {

uint8_t FloatToE4M3(float value) {
  const uint8_t sign = std::signbit(value) ? 0x80 : 0x00;
  if (std::isnan(value)) return sign | 0x7f;
  const float a = std::fabs(value);
  if (a >= kE4M3Max) return sign | 0x7e;  // saturate (infinities too)
  // The spacing of representable values around `a`: 2^(e - 3) for a in [2^e, 2^(e+1)), e >= -6,
  // and the subnormal spacing 2^-9 below 2^-6. Scaling by a power of two is exact, so rounding
  // the quotient to an integer (nearbyint: half to even) is E4M3's rounding.
  int e2 = 0;
  std::frexp(a, &e2);  // a = m * 2^e2, m in [0.5, 1): a in [2^(e2-1), 2^e2)
  const int e = std::max(e2 - 1, -6);
  const float units = std::nearbyint(std::ldexp(a, 3 - e));  // in [0, 16]
  if (units == 0) return sign;
  const float rounded = std::ldexp(units, e - 3);
  if (rounded < std::ldexp(1.0f, -6)) return sign | static_cast<uint8_t>(units);  // subnormal
  int r2 = 0;
  const float m = std::frexp(rounded, &r2);  // rounded = m * 2^r2, m in [0.5, 1)
  const int exponent = r2 - 1 + 7;           // biased
  const int mantissa = static_cast<int>(m * 16.0f) - 8;
  return sign | static_cast<uint8_t>(exponent << 3) | static_cast<uint8_t>(mantissa);
}

float E4M3ToFloat(uint8_t bits) {
  const int exponent = (bits >> 3) & 0xf, mantissa = bits & 0x7;
  float magnitude;
  if (exponent == 0xf && mantissa == 0x7) {
    magnitude = std::numeric_limits<float>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -9);
  } else {
    magnitude = std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);
  }
  return (bits & 0x80) ? -magnitude : magnitude;
}

std::string DelayedScaling::ToString() const {
  const char* format = fp8_format == Fp8Format::kE4M3     ? "E4M3"
                       : fp8_format == Fp8Format::kHybrid ? "HYBRID"
                                                          : "E5M2";
  return absl::StrFormat("margin=%d fp8_format=%s amax_history_len=%d amax_compute_algo=%s", margin,
                         format, amax_history_len,
                         amax_compute_algo == AmaxComputeAlgo::kMax ? "max" : "most_recent");
}

absl::Status ValidateDelayedScaling(const DelayedScaling& r) {
  if (r.margin < 0 || r.margin > 64) {
    return absl::InvalidArgumentError(
        absl::StrFormat("fp8_recipe.margin: must be in [0, 64], got %d", r.margin));
  }
  if (r.amax_history_len < 1 || r.amax_history_len > 65536) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "fp8_recipe.amax_history_len: must be in [1, 65536], got %d", r.amax_history_len));
  }
  if (r.fp8_format == Fp8Format::kE5M2) {
    return absl::InvalidArgumentError(
        "fp8_recipe.fp8_format: E5M2 has no forward attention in cuDNN; use HYBRID (E4M3 "
        "forward) or E4M3");
  }
  return absl::OkStatus();
}

float ComputeScale(float amax, float previous, float fp8_max, int margin) {
  if (!(amax > 0.0f) || !std::isfinite(amax)) return previous;
  return std::ldexp(fp8_max / amax,
                    -margin);  // the kernels' arithmetic: float division, exact 2^-m
}

const char* Fp8TensorName(int tensor) {
  static const char* const kNames[kNumFp8Tensors] = {"q", "k", "v", "s", "o"};
  return tensor >= 0 && tensor < kNumFp8Tensors ? kNames[tensor] : "?";
}

AmaxHistory::AmaxHistory(const DelayedScaling& recipe) : recipe_(recipe) {
  for (auto& h : history_)
    h.assign(static_cast<size_t>(std::max(1, recipe.amax_history_len)), 0.0f);
  scale_.fill(1.0f);
}

void AmaxHistory::Update(const Fp8Values& amax) {
  const size_t len = history_[0].size();
  const size_t slot = static_cast<size_t>(updates_ % static_cast<int64_t>(len));
  for (int i = 0; i < kNumFp8Tensors; ++i) {
    history_[i][slot] = amax[i];
    const float reduced = recipe_.amax_compute_algo == AmaxComputeAlgo::kMostRecent
                              ? amax[i]
                              : *std::max_element(history_[i].begin(), history_[i].end());
    scale_[i] = ComputeScale(reduced, scale_[i], kE4M3Max, recipe_.margin);
  }
  ++updates_;
}

float AmaxHistory::history(int tensor, int age) const {
  const int64_t len = static_cast<int64_t>(history_[0].size());
  if (age < 0 || age >= len || age >= updates_) return 0.0f;
  const int64_t slot = ((updates_ - 1 - age) % len + len) % len;
  return history_[tensor][static_cast<size_t>(slot)];
}

int64_t Fp8RecipeState::DeviceBytes(const DelayedScaling& recipe) {
  return static_cast<int64_t>(sizeof(fp8_internal::DeviceScalars)) +
         int64_t{kNumFp8Tensors} * std::max(1, recipe.amax_history_len) * 4;
}

absl::StatusOr<Fp8Snapshot> Fp8RecipeState::Read(DeviceContext& context) const {
  if (block_.data() == nullptr || context_ != &context) {
    return absl::FailedPreconditionError("fp8 recipe state: no call has used it on this context");
  }
  fp8_internal::DeviceScalars s;
  if (auto st = context.CopyToHost(&s, block_.data(), sizeof(s)); !st.ok()) return st;
  Fp8Snapshot out;
  for (int i = 0; i < kNumFp8Tensors; ++i) {
    out.used_scale[i] = s.used_scale[i].value;
    out.seen_amax[i] = s.seen_amax[i].value;
    out.next_scale[i] = s.scale[i].value;
  }
  out.updates = s.updates;
  return out;
}

#if !ATTN_HAVE_CUDNN
absl::Status RunAttentionE4M3(const AttentionProblem&, const Fp8AttentionTensors&, DeviceContext&) {
  return Unsupported("cudnn_fp8: not built into this engine (needs cuDNN)");
}

absl::StatusOr<std::string> VisitFp8Steps(const AttentionProblem&, const void*, const void*,
                                          const void*, DeviceContext&, const Fp8StepVisitor&) {
  return Unsupported("cudnn_fp8: not built into this engine (needs cuDNN)");
}
#endif

}  // namespace attn
