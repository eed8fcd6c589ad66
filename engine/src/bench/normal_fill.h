// The runner's input generator: element i of a tensor is a pure function of (seed, i), so the
// device fill and a host copy for numerics agree exactly, whatever the launch shape.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define ATTN_HOST_DEVICE __host__ __device__
#else
#define ATTN_HOST_DEVICE
#endif

#include <cmath>

namespace attn {

// splitmix64: a fast, well-mixed 64-bit hash of a counter.
ATTN_HOST_DEVICE inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// normal(0, 1) for element `i` of the stream `seed` (Box-Muller on two 24-bit uniforms; float
// arithmetic with correctly rounded logf/cosf so host and device agree to the last bit for
// the dtypes we store).
ATTN_HOST_DEVICE inline float NormalAt(uint64_t seed, uint64_t i) {
  const uint64_t h = SplitMix64(seed * 0xd1342543de82ef95ull + i);
  const float u1 = (static_cast<float>(h >> 40) + 1.0f) * (1.0f / 16777217.0f);  // (0, 1)
  const float u2 = static_cast<float>((h >> 16) & 0xffffffu) * (1.0f / 16777216.0f);
  const double r = std::sqrt(-2.0 * std::log(static_cast<double>(u1)));
  return static_cast<float>(r * std::cos(6.283185307179586 * static_cast<double>(u2)));
}

}  // namespace attn
