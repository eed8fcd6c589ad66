// The `fused` backend's cp.async wgmma kernel (sm_90a, FusedPath::kWgmma): FlashAttention's
// forward on warpgroup MMA (wgmma). One block of two warpgroups per (128-row query tile, head,
// batch); each warpgroup owns 64 rows:
//  - Q, and K/V tiles of kBlockN keys (double-buffered, cp.async one tile ahead: tile j + 1's
//    copies are issued while the tensor cores compute tile j's S, and awaited while they compute
//    its P V), sit in shared memory in the 128-byte-swizzled layout that wgmma reads through
//    matrix descriptors: rows of 64 elements (128 bytes), the 16-byte chunks of row r
//    XOR-permuted by r % 8, head dims past 64 in a second region;
//  - S = Q K^T: H/16 wgmma m64nBNk16 with A (Q) and B (K) from shared memory, both K-major;
//  - the mask and the online softmax (mask.cuh, softmax.cuh) run on S in registers: the wgmma
//    accumulator layout is mma.sync's per 8-column block, so P packs into wgmma's register-A
//    fragments without moving data between threads;
//  - O += P V: BN/16 wgmma m64nHk16 with A = P from registers and B = V from shared memory,
//    read transposed (MN-major: V's rows are keys, its contiguous dim is the head dim).
// Shared memory written by cp.async (the generic proxy) is fenced to the async proxy before
// the barrier that publishes it to wgmma. It runs problems with per-sequence lengths (kv_lens),
// which the warp-specialised kernel cannot, and H = 256.
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
#include "fused/wgmma_gemms.cuh"
#include "fused/wgmma_ptx.cuh"

namespace attn::fused {

template <int kHeadDim_, int kBlockN_, int kMinBlocksPerSm_>
struct WgmmaTraits {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = 128;  // two warpgroups of 64 rows
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kMinBlocksPerSm = kMinBlocksPerSm_;
  static constexpr int kThreads = 256;
  static constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row
  // A tile is ceil(H / 64) regions of 128-byte rows (the swizzle atom's width); H = 96 leaves
  // the second region's rows half used.
  static constexpr int kRegions = (kHeadDim + 63) / 64;
  static constexpr int kQBytes = kBlockM * kRegions * 128;
  static constexpr int kKvBytes = kBlockN * kRegions * 128;
  // + 1 KiB: the base is rounded up to the swizzle atom's 1024-byte alignment.
  static constexpr int kSmemBytes = kQBytes + 4 * kKvBytes + 1024;
  static_assert(kHeadDim % 32 == 0 && kHeadDim <= 256, "wgmma N = head dim: 64, 96, 128 or 256");
  static_assert(kBlockN == 64 || kBlockN == 128, "wgmma N = kBlockN: 64 or 128");
  static_assert(kMinBlocksPerSm * kSmemBytes <= 227 * 1024, "shared memory of the resident blocks");
};

// Copies kRows rows (row stride `stride` elements) into a swizzled tile at shared address
// `tile`; rows >= valid_rows are zero-filled.
template <typename Traits, int kRows, typename T>
__device__ __forceinline__ void LoadSwizzled(uint32_t tile, const T* gmem, int64_t stride,
                                             int valid_rows, int tid) {
  CopyRows<Traits::kThreads, Traits::kChunks, kRows>(
      gmem, stride, valid_rows, tid,
      [&](int r, int c) { return tile + SwizzledOffset<kRows>(r, c); });
}

template <typename Traits, typename T>
__global__ void __launch_bounds__(Traits::kThreads, Traits::kMinBlocksPerSm)
    FusedWgmmaKernel(const FusedParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kBlockM = Traits::kBlockM, kBlockN = Traits::kBlockN, kHeadDim = Traits::kHeadDim;
  constexpr int kSBlocks = kBlockN / 8, kOBlocks = kHeadDim / 8;  // n8 blocks of S and O

  extern __shared__ unsigned char smem_raw[];
  const uint32_t s_q = SwizzleAlignedBase(smem_raw);
  const uint32_t s_k = s_q + Traits::kQBytes;
  const uint32_t s_v = s_k + 2 * Traits::kKvBytes;

  const int head = blockIdx.y, batch = blockIdx.z;
  const int tid = threadIdx.x, wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
  // This thread's two rows of the tile (the accumulator layout): r0 and r0 + 8.
  const int r0 = wg * 64 + warp * 16 + lane / 4;

  const QueryTile<T> tile = TileOfBlock<T, kBlockM, kBlockN>(p);
  const int q0 = tile.q0, n_tiles = tile.n_tiles, kv_len = tile.kv_len;
  const T *q = tile.q, *k = tile.k, *v = tile.v;

  LoadSwizzled<Traits, kBlockM>(s_q, q, p.q_row_stride, min(kBlockM, p.q_len - q0), tid);
  auto load_kv = [&](int tile) {
    const int key0 = tile * kBlockN, valid = min(kBlockN, kv_len - key0);
    const uint32_t buffer = (tile % 2) * Traits::kKvBytes;
    LoadSwizzled<Traits, kBlockN>(s_k + buffer, k + key0 * p.k_row_stride, p.k_row_stride, valid,
                                  tid);
    LoadSwizzled<Traits, kBlockN>(s_v + buffer, v + key0 * p.v_row_stride, p.v_row_stride, valid,
                                  tid);
  };
  load_kv(0);
  CpAsyncCommit();

  // The accumulators in the m16n8 layout the shared softmax and epilogue take; the wgmma
  // wrappers see the same registers as one flat array (Flat).
  float o[kOBlocks][4];
#pragma unroll
  for (int d = 0; d < kOBlocks; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.f;
  RowSoftmax softmax;

  // Each thread's copies of a tile land and are fenced to the async proxy before the barrier
  // that publishes them: here for tile 0, at the end of iteration j - 1 for tile j, while the
  // tensor cores run that iteration's P V.
  CpAsyncWait<0>();
  FenceAsyncProxy();
  for (int j = 0; j < n_tiles; ++j) {
    __syncthreads();  // tile j is in for every warpgroup; tile j - 1's buffers are free
    const uint32_t buffer = (j % 2) * Traits::kKvBytes;

    // S = Q K^T for this warpgroup's 64 rows.
    float s[kSBlocks][4];
    IssueScores<kHeadDim, kBlockM, kBlockN, T>(s, s_q, wg * 64, s_k + buffer);
    // Tile j + 1's copies go out while the tensor cores compute S (they fill the other buffer).
    if (j + 1 < n_tiles) load_kv(j + 1);
    CpAsyncCommit();
    WgmmaWait<0>();
    FenceRegisters(Flat(s));

    // Mask keys past S and (causal) after the query, only in tiles that have any.
    const int key0 = j * kBlockN;
    if (key0 + kBlockN > kv_len || (p.causal && key0 + kBlockN - 1 > q0)) {
      MaskScores(s, key0, {q0 + r0, q0 + r0 + 8}, kv_len, p.causal);
    }
    float alpha[2];
    if (__any_sync(0xffffffffu, OnlineSoftmax(s, softmax, p.scale_log2, alpha))) {
      RescaleRows(o, alpha);
    }

    // O += P V, 16 keys per wgmma; P's accumulator layout is wgmma's register-A layout.
    uint32_t pa[kBlockN / 16][4];
    PackProbabilities<T>(pa, s);
    IssuePv<kHeadDim, kBlockN, T>(o, pa, s_v + buffer);
    CpAsyncWait<0>();
    FenceAsyncProxy();
    WgmmaWait<0>();
    FenceRegisters(Flat(o));
  }

  // out = O / sum, written once; rows past T are dropped.
  StoreSlice(static_cast<T*>(p.out) + batch * p.o_batch_stride + head * p.o_head_stride, p, q0 + r0,
             2 * (lane % 4), o, softmax);
#endif  // __CUDA_ARCH_FEAT_SM90_ALL
}

// Head dim H's tile: its row of tiles.h's table.
template <int kHeadDim>
struct WgmmaTileFor {
  static constexpr WgmmaTile kTile = TilesOf(kHeadDim).wgmma;
  using Traits = WgmmaTraits<kHeadDim, kTile.block_n, kTile.min_blocks_per_sm>;
};

template <typename Traits, typename T>
cudaError_t LaunchWgmma(const FusedParams& p, cudaStream_t stream) {
  return LaunchTiles(FusedWgmmaKernel<Traits, T>, Traits::kBlockM, Traits::kThreads,
                     Traits::kSmemBytes, p, stream);
}

}  // namespace attn::fused
