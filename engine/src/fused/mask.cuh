// The mask of one tile's scores in the m16n8 accumulator layout (softmax.cuh describes it): keys
// past the sequence's end, and (causal) keys after the query. The kernels call it only for the
// tiles that cross the diagonal or the end of S.
#pragma once

#include <cmath>

namespace attn::fused {

// -inf for the scores of keys at or past `key_end` and (causal, top-left) keys after the
// thread's query rows t[0] (row g) and t[1] (row g + 8). `key0` is the first key of s's column 0.
template <int kNBlocks>
__device__ __forceinline__ void MaskScores(float (&s)[kNBlocks][4], int key0, const int (&t)[2],
                                           int key_end, bool causal) {
  const int col = 2 * (threadIdx.x % 4);
#pragma unroll
  for (int nb = 0; nb < kNBlocks; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = key0 + nb * 8 + col + (e % 2);
      if (key >= key_end || (causal && key > t[e / 2])) s[nb][e] = -INFINITY;
    }
}

}  // namespace attn::fused
