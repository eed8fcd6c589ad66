// The GEMM steps both wgmma kernels (wgmma_kernel.cuh, wgmma_ws_kernel.cuh) take for one
// warpgroup's 64 query rows: S = Q K^T from shared memory, P packed from the accumulator into
// wgmma's register-A fragments, O += P V with V read transposed.
#pragma once

#include <cstdint>

#include "fused/ptx.cuh"
#include "fused/wgmma_ptx.cuh"

namespace attn::fused {

// Issues S = Q K^T as one commit group: A = rows q_row0 .. q_row0 + 63 of the swizzled Q tile of
// kQRows rows at `q_tile`, B = the swizzled K tile of kBlockN keys at `k_tile`, both K-major.
template <int kHeadDim, int kQRows, int kBlockN, typename T>
__device__ __forceinline__ void IssueScores(float (&s)[kBlockN / 8][4], uint32_t q_tile, int q_row0,
                                            uint32_t k_tile) {
  WgmmaFence();
#pragma unroll
  for (int ks = 0; ks < kHeadDim / 16; ++ks) {
    const uint32_t k_offset = (ks % 4) * 32;  // 16 elements = 32 bytes into the atom
    const uint64_t a_desc =
        SwizzledDescriptor(q_tile + (ks / 4) * (kQRows * 128) + q_row0 * 128 + k_offset, 16, 1024);
    const uint64_t b_desc =
        SwizzledDescriptor(k_tile + (ks / 4) * (kBlockN * 128) + k_offset, 16, 1024);
    WgmmaSS<kBlockN, T>(Flat(s), a_desc, b_desc, ks > 0);
  }
  WgmmaCommit();
}

// P (the softmax's probabilities, in the accumulator layout) narrowed to T in wgmma's register-A
// layout, 16 keys a fragment: the same registers' values, no data moves between threads.
template <typename T, int kSBlocks>
__device__ __forceinline__ void PackProbabilities(uint32_t (&pa)[kSBlocks / 2][4],
                                                  const float (&s)[kSBlocks][4]) {
#pragma unroll
  for (int kk = 0; kk < kSBlocks / 2; ++kk) {
    pa[kk][0] = HalfOps<T>::Pack(s[2 * kk][0], s[2 * kk][1]);
    pa[kk][1] = HalfOps<T>::Pack(s[2 * kk][2], s[2 * kk][3]);
    pa[kk][2] = HalfOps<T>::Pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    pa[kk][3] = HalfOps<T>::Pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
  }
}

// Issues O += P V as one commit group, 16 keys a wgmma: A = pa, B = the swizzled V tile of kBlockN
// keys at `v_tile`, read MN-major (transposed).
template <int kHeadDim, int kBlockN, typename T>
__device__ __forceinline__ void IssuePv(float (&o)[kHeadDim / 8][4],
                                        const uint32_t (&pa)[kBlockN / 16][4], uint32_t v_tile) {
  WgmmaFence();
  FenceRegisters(Flat(o));
#pragma unroll
  for (int kk = 0; kk < kBlockN / 16; ++kk) {
    const uint64_t b_desc = SwizzledDescriptor(v_tile + kk * 16 * 128, kBlockN * 128, 1024);
    WgmmaRS<kHeadDim, T>(Flat(o), pa[kk], b_desc);
  }
  WgmmaCommit();
}

}  // namespace attn::fused
