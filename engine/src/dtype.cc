#include "attn/dtype.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace attn {

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat16:
      return "float16";
  }
  return "unknown";
}

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  if (n == "float32" || n == "fp32" || n == "f32") return DType::kFloat32;
  if (n == "bfloat16" || n == "bf16") return DType::kBFloat16;
  if (n == "float16" || n == "fp16" || n == "f16" || n == "half") return DType::kFloat16;
  return absl::InvalidArgumentError(
      absl::StrCat("dtype: unknown '", name, "'; expected float32, bfloat16 or float16"));
}

float Float16BitsToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // zero or subnormal
  } else if (exponent == 31) {
    magnitude =
        mantissa ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400u), static_cast<int>(exponent) - 25);
  }
  uint32_t out;
  std::memcpy(&out, &magnitude, sizeof(out));
  out |= sign;
  float result;
  std::memcpy(&result, &out, sizeof(result));
  return result;
}

uint16_t FloatToFloat16Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const float magnitude = std::fabs(value);
  if (std::isnan(value)) return static_cast<uint16_t>(sign | 0x7e00u);
  if (magnitude >= 65520.0f) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (magnitude < std::ldexp(1.0f, -14)) {
    // Subnormal half: a multiple of 2^-24; nearbyint rounds half to even.
    const float units = std::nearbyint(magnitude * std::ldexp(1.0f, 24));
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(units));
  }
  // Normal: keep 10 mantissa bits of the float's 23 with round-to-nearest-even.
  const uint32_t abs_bits = bits & 0x7fffffffu;
  const uint32_t exponent = (abs_bits >> 23) - 127 + 15;
  uint32_t mantissa = abs_bits & 0x7fffffu;
  uint32_t half = (exponent << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // may carry into the exponent
  return static_cast<uint16_t>(sign | half);
}

}  // namespace attn
