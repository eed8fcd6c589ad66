#include "attn/dtype.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace attn {
namespace {

TEST(DType, ParsesTheCodelabNamesAndAliases) {
  EXPECT_EQ(ParseDType("float32").value(), DType::kFloat32);
  EXPECT_EQ(ParseDType("BF16").value(), DType::kBFloat16);
  EXPECT_EQ(ParseDType("fp16").value(), DType::kFloat16);
  EXPECT_EQ(ParseDType("int8").status().message(),
            "dtype: unknown 'int8'; expected float32, bfloat16 or float16");
}

TEST(DType, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(FloatToBFloat16Bits(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(FloatToBFloat16Bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties to even (1 + 2^-6).
  EXPECT_EQ(FloatToBFloat16Bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(BFloat16BitsToFloat(0xc040), -3.0f);
  EXPECT_TRUE(std::isnan(BFloat16BitsToFloat(FloatToBFloat16Bits(std::nanf("")))));
}

TEST(DType, Float16RoundTripsEveryFiniteValue) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    if ((h & 0x7c00) == 0x7c00) continue;  // inf and NaN
    ASSERT_EQ(FloatToFloat16Bits(Float16BitsToFloat(h)), h) << std::hex << bits;
  }
}

TEST(DType, Float16RoundsAndSaturates) {
  EXPECT_EQ(FloatToFloat16Bits(1.0f), 0x3c00);
  EXPECT_EQ(FloatToFloat16Bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie to even
  EXPECT_EQ(FloatToFloat16Bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie to even
  EXPECT_EQ(FloatToFloat16Bits(70000.0f), 0x7c00);                          // overflow: inf
  EXPECT_EQ(FloatToFloat16Bits(-std::ldexp(1.0f, -24)), 0x8001);            // smallest subnormal
  EXPECT_EQ(Float16BitsToFloat(0x3555), 0.333251953125f);
}

}  // namespace
}  // namespace attn
