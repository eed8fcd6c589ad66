// Element types the engine moves and computes with, and host-side conversions for them.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace attn {

// Storage type of a tensor. Attention inputs and outputs share one dtype per problem.
enum class DType : uint8_t {
  kFloat32,
  kBFloat16,
  kFloat16,
};

// Bytes per element.
constexpr int64_t DTypeSize(DType dtype) { return dtype == DType::kFloat32 ? 4 : 2; }

// The codelab's spelling: "float32", "bfloat16", "float16".
absl::string_view DTypeName(DType dtype);

// Parses "float32"/"fp32"/"f32", "bfloat16"/"bf16", "float16"/"fp16"/"f16"; InvalidArgument
// otherwise, listing the accepted names.
absl::StatusOr<DType> ParseDType(absl::string_view name);

// Round-to-nearest-even conversions, bit-exact with the CUDA intrinsics for finite values.
inline float BFloat16BitsToFloat(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float out;
  std::memcpy(&out, &wide, sizeof(out));
  return out;
}

inline uint16_t FloatToBFloat16Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN stays a quiet NaN
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float Float16BitsToFloat(uint16_t bits);
uint16_t FloatToFloat16Bits(float value);

// Reads element `index` of a buffer of `dtype` as a double.
inline double LoadAsDouble(const void* data, DType dtype, int64_t index) {
  switch (dtype) {
    case DType::kFloat32:
      return static_cast<const float*>(data)[index];
    case DType::kBFloat16:
      return BFloat16BitsToFloat(static_cast<const uint16_t*>(data)[index]);
    case DType::kFloat16:
      return Float16BitsToFloat(static_cast<const uint16_t*>(data)[index]);
  }
  return 0.0;
}

// Writes `value` rounded to `dtype` into element `index`.
inline void StoreFromDouble(void* data, DType dtype, int64_t index, double value) {
  const float f = static_cast<float>(value);
  switch (dtype) {
    case DType::kFloat32:
      static_cast<float*>(data)[index] = f;
      return;
    case DType::kBFloat16:
      static_cast<uint16_t*>(data)[index] = FloatToBFloat16Bits(f);
      return;
    case DType::kFloat16:
      static_cast<uint16_t*>(data)[index] = FloatToFloat16Bits(f);
      return;
  }
}

}  // namespace attn
