// The `fused` backend's mma.sync kernel (FlashAttention-2's algorithm), sm_80 and newer: bf16
// and fp16 on tensor cores, one block per (query tile, head, batch):
//  - the block's kBlockM query rows are copied to shared memory once (cp.async);
//  - K/V tiles of kBlockN keys stream through two shared-memory buffers: tile j + 1 is in
//    flight (cp.async) while tile j is computed, one barrier per tile;
//  - each warp owns kMAtoms 16-row slices of the query tile; S = Q K^T (mma.sync m16n8k16,
//    ldmatrix for Q and K) stays in registers, masked (mask.cuh) only in tiles that cross the
//    diagonal or the end of S, the online softmax (softmax.cuh) turns it into P in place, P is
//    narrowed to the input type in registers and O += P V (ldmatrix.trans for V) accumulates in
//    fp32;
//  - causal: key tiles wholly above the diagonal are never loaded;
//  - the output is normalised and written once (epilogue.cuh).
// Shared-memory rows are padded by one 16-byte chunk: eight consecutive rows then start in
// eight different bank groups for every head dim (H = 96 has 12 chunks per row, which an XOR
// swizzle over 8 chunks cannot cover), so ldmatrix and the cp.async stores are conflict-free.
#pragma once

#include <cstdint>

#include "fused/epilogue.cuh"
#include "fused/fused_kernels.h"
#include "fused/mask.cuh"
#include "fused/ptx.cuh"
#include "fused/query_tile.cuh"
#include "fused/smem_tiles.cuh"
#include "fused/softmax.cuh"
#include "fused/tiles.h"

namespace attn::fused {

template <int kHeadDim_, int kBlockM_, int kBlockN_, int kWarps_, int kMinBlocksPerSm_>
struct HalfTraits {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;  // query rows per block
  static constexpr int kBlockN = kBlockN_;  // keys per K/V tile
  static constexpr int kWarps = kWarps_;
  static constexpr int kMinBlocksPerSm = kMinBlocksPerSm_;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kMAtoms = kBlockM / (16 * kWarps);  // 16-row mma slices per warp
  static constexpr int kNBlocks = kBlockN / 8;             // n8 column blocks of S
  static constexpr int kDBlocks = kHeadDim / 8;            // n8 column blocks of O
  static constexpr int kChunks = kHeadDim / 8;             // 16-byte chunks per row
  static constexpr int kRowElems = kHeadDim + 8;           // padded shared-memory row
  static constexpr int kQElems = kBlockM * kRowElems;
  static constexpr int kKvElems = kBlockN * kRowElems;
  static constexpr int kSmemBytes = (kQElems + 4 * kKvElems) * 2;  // Q, 2 x K, 2 x V
  static_assert(kHeadDim % 16 == 0, "head dim must be a multiple of the mma k (16)");
  static_assert(kBlockM % (16 * kWarps) == 0, "each warp owns whole 16-row mma slices");
  static_assert(kBlockN % 16 == 0, "P V consumes keys 16 at a time");
  static_assert(kNBlocks % 2 == 0 && kDBlocks % 2 == 0, "ldmatrix.x4 loads n8 blocks in pairs");
  static_assert(kBlockM * kChunks % kThreads == 0 && kBlockN * kChunks % kThreads == 0,
                "every thread copies the same number of 16-byte chunks");
  static_assert(kMinBlocksPerSm * kSmemBytes <= 227 * 1024, "shared memory of the resident blocks");
};

template <typename Traits, typename T>
__global__ void __launch_bounds__(Traits::kThreads, Traits::kMinBlocksPerSm)
    FusedHalfKernel(const FusedParams p) {
  using Ops = HalfOps<T>;
  constexpr int kBlockM = Traits::kBlockM, kBlockN = Traits::kBlockN;
  constexpr int kMAtoms = Traits::kMAtoms, kNBlocks = Traits::kNBlocks;
  constexpr int kDBlocks = Traits::kDBlocks, kRowElems = Traits::kRowElems;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* const s_q = reinterpret_cast<T*>(smem_raw);
  T* const s_k = s_q + Traits::kQElems;
  T* const s_v = s_k + 2 * Traits::kKvElems;

  const int head = blockIdx.y, batch = blockIdx.z;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const QueryTile<T> tile = TileOfBlock<T, kBlockM, kBlockN>(p);
  const int q0 = tile.q0, n_tiles = tile.n_tiles, kv_len = tile.kv_len;
  const T *q = tile.q, *k = tile.k, *v = tile.v;

  // Q joins the first commit group below.
  LoadTile<Traits, kBlockM>(s_q, q, p.q_row_stride, min(kBlockM, p.q_len - q0), tid);

  float o[kMAtoms][kDBlocks][4];
  RowSoftmax softmax[kMAtoms];  // rows g and g + 8 of each slice
#pragma unroll
  for (int ma = 0; ma < kMAtoms; ++ma)
#pragma unroll
    for (int d = 0; d < kDBlocks; ++d) o[ma][d][0] = o[ma][d][1] = o[ma][d][2] = o[ma][d][3] = 0.f;

  const int warp_row0 = warp * kMAtoms * 16;
  const int quad_row = lane / 4, quad_col = 2 * (lane % 4);
  // ldmatrix row addresses: A (Q) rows lane % 16 at k chunk lane / 16; B (K) keys lane % 8 +
  // 8 * (lane / 16) at k chunk (lane / 8) % 2; B (V, transposed) keys lane % 8 + 8 * ((lane / 8) %
  // 2) at d chunk lane / 16.
  const int a_row = lane % 16, a_col = (lane / 16) * 8;
  const int k_row = lane % 8 + 8 * (lane / 16), k_col = ((lane / 8) % 2) * 8;
  const int v_row = lane % 8 + 8 * ((lane / 8) % 2), v_col = (lane / 16) * 8;

  // S = Q K^T for this warp's rows, from the K tile at `ck`.
  auto compute_scores = [&](float(&s)[kMAtoms][kNBlocks][4], const T* ck) {
#pragma unroll
    for (int ma = 0; ma < kMAtoms; ++ma)
#pragma unroll
      for (int nb = 0; nb < kNBlocks; ++nb)
        s[ma][nb][0] = s[ma][nb][1] = s[ma][nb][2] = s[ma][nb][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < Traits::kHeadDim / 16; ++ks) {
      uint32_t a[kMAtoms][4];
#pragma unroll
      for (int ma = 0; ma < kMAtoms; ++ma) {
        LdMatrixX4(a[ma], s_q + (warp_row0 + ma * 16 + a_row) * kRowElems + ks * 16 + a_col);
      }
#pragma unroll
      for (int nb = 0; nb < kNBlocks; nb += 2) {
        uint32_t b[4];
        LdMatrixX4(b, ck + (nb * 8 + k_row) * kRowElems + ks * 16 + k_col);
#pragma unroll
        for (int ma = 0; ma < kMAtoms; ++ma) {
          Ops::Mma(s[ma][nb], a[ma], b[0], b[1]);
          Ops::Mma(s[ma][nb + 1], a[ma], b[2], b[3]);
        }
      }
    }
  };

  // Masks tile `key0`'s scores, updates the online softmax and accumulates O += P V from `cv`.
  auto softmax_and_pv = [&](float(&s)[kMAtoms][kNBlocks][4], const T* cv, int key0) {
    // Mask keys past S, and (causal) keys after the query, only in tiles that have any.
    if (key0 + kBlockN > kv_len || (p.causal && key0 + kBlockN - 1 > q0)) {
#pragma unroll
      for (int ma = 0; ma < kMAtoms; ++ma) {
        const int t0 = q0 + warp_row0 + ma * 16 + quad_row;
        MaskScores(s[ma], key0, {t0, t0 + 8}, kv_len, p.causal);
      }
    }
    float alpha[kMAtoms][2];
    bool moved = false;
#pragma unroll
    for (int ma = 0; ma < kMAtoms; ++ma)
      moved |= OnlineSoftmax(s[ma], softmax[ma], p.scale_log2, alpha[ma]);
    if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
      for (int ma = 0; ma < kMAtoms; ++ma) RescaleRows(o[ma], alpha[ma]);
    }

    // O += P V: P's accumulator layout is the A-fragment layout of the next mma.
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      uint32_t pa[kMAtoms][4];
#pragma unroll
      for (int ma = 0; ma < kMAtoms; ++ma) {
        pa[ma][0] = Ops::Pack(s[ma][2 * kk][0], s[ma][2 * kk][1]);
        pa[ma][1] = Ops::Pack(s[ma][2 * kk][2], s[ma][2 * kk][3]);
        pa[ma][2] = Ops::Pack(s[ma][2 * kk + 1][0], s[ma][2 * kk + 1][1]);
        pa[ma][3] = Ops::Pack(s[ma][2 * kk + 1][2], s[ma][2 * kk + 1][3]);
      }
#pragma unroll
      for (int d = 0; d < kDBlocks; d += 2) {
        uint32_t b[4];
        LdMatrixX4Trans(b, cv + (kk * 16 + v_row) * kRowElems + d * 8 + v_col);
#pragma unroll
        for (int ma = 0; ma < kMAtoms; ++ma) {
          Ops::Mma(o[ma][d], pa[ma], b[0], b[1]);
          Ops::Mma(o[ma][d + 1], pa[ma], b[2], b[3]);
        }
      }
    }
  };

  auto load_k = [&](int tile) {
    const int key0 = tile * kBlockN;
    LoadTile<Traits, kBlockN>(s_k + (tile % 2) * Traits::kKvElems, k + key0 * p.k_row_stride,
                              p.k_row_stride, min(kBlockN, kv_len - key0), tid);
  };
  auto load_v = [&](int tile) {
    const int key0 = tile * kBlockN;
    LoadTile<Traits, kBlockN>(s_v + (tile % 2) * Traits::kKvElems, v + key0 * p.v_row_stride,
                              p.v_row_stride, min(kBlockN, kv_len - key0), tid);
  };
  // Tile j + 1 (K and V) is in flight while tile j is computed.
  load_k(0);
  load_v(0);
  CpAsyncCommit();
  for (int j = 0; j < n_tiles; ++j) {
    CpAsyncWait<0>();
    __syncthreads();  // tile j is in; every warp is done with tile j - 1's buffers
    if (j + 1 < n_tiles) {
      load_k(j + 1);
      load_v(j + 1);
    }
    CpAsyncCommit();
    float s[kMAtoms][kNBlocks][4];
    compute_scores(s, s_k + (j % 2) * Traits::kKvElems);
    softmax_and_pv(s, s_v + (j % 2) * Traits::kKvElems, j * kBlockN);
  }
  CpAsyncWait<0>();

  // out = O / sum, written once; rows past T are dropped.
  T* out = static_cast<T*>(p.out) + batch * p.o_batch_stride + head * p.o_head_stride;
#pragma unroll
  for (int ma = 0; ma < kMAtoms; ++ma) {
    StoreSlice(out, p, q0 + warp_row0 + ma * 16 + quad_row, quad_col, o[ma], softmax[ma]);
  }
}

template <typename Traits, typename T>
cudaError_t LaunchHalf(const FusedParams& p, cudaStream_t stream) {
  return LaunchTiles(FusedHalfKernel<Traits, T>, Traits::kBlockM, Traits::kThreads,
                     Traits::kSmemBytes, p, stream);
}

// Head dim H's tile: its row of tiles.h's table.
template <int kHeadDim>
struct HalfTileFor {
  static constexpr MmaSyncTile kTile = TilesOf(kHeadDim).mma_sync;
  using Traits =
      HalfTraits<kHeadDim, kTile.block_m, kTile.block_n, kTile.warps, kTile.min_blocks_per_sm>;
};

}  // namespace attn::fused
