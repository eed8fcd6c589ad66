// The input generator (attn/inputs.h): element i of a tensor is a pure function of (seed, i), so
// the device fill and a host copy for numerics agree exactly, whatever the launch shape.
#pragma once

#include <cstdint>

#include "host_device.h"

namespace attn {

// splitmix64: a fast, well-mixed 64-bit hash of a counter.
ATTN_HOST_DEVICE inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Approximately normal(0, 1) for element `i` of the stream `seed`: the Irwin-Hall sum of twelve
// 24-bit uniforms minus 6 (mean 0, variance 1, |x| <= 6). The sum is exact in integers and its
// one conversion to float is correctly rounded everywhere, so host and device agree to the bit
// (transcendental functions, as in Box-Muller, differ between the host and device libraries).
ATTN_HOST_DEVICE inline float NormalAt(uint64_t seed, uint64_t i) {
  uint64_t sum = 0;
  const uint64_t base = seed * 0xd1342543de82ef95ull + i * 6;
  for (uint64_t j = 0; j < 6; ++j) {
    const uint64_t h = SplitMix64(base + j);
    sum += (h >> 40) + ((h >> 8) & 0xffffffu);  // two 24-bit uniforms
  }
  // sum < 12 * 2^24 < 2^28; subtracting 6 * 2^24 is exact, as is the scaling by 2^-24.
  return static_cast<float>(static_cast<int64_t>(sum) - (int64_t{6} << 24)) * (1.0f / 16777216.0f);
}

}  // namespace attn
