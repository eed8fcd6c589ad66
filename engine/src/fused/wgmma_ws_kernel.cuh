// The `fused` backend's warp-specialised Hopper kernel (sm_90a, FusedPath::kWgmmaWs):
// FlashAttention-3's producer/consumer schedule on the wgmma wrappers (wgmma_ptx.cuh,
// wgmma_gemms.cuh) and the shared mask, online softmax and epilogue.
//
// Three warpgroups a block, persistent blocks one an SM, each taking work items (a 128-row query
// tile of one head of one batch element) one after another, the next claimed from a counter
// (FusedParams::tile_counter) while this one's Q is under way:
//  - warpgroup 0 produces: one thread issues TMA box copies (tensor maps over Q as (H, heads, T,
//    B) and K/V as (H, K/V heads, S, B)) of each item's Q and of its K/V tiles into a ring of
//    kStages stages; the warpgroup gives its registers up (setmaxnreg) to the two consumers;
//  - warpgroups 1 and 2 consume 64 query rows each. mbarriers (WsBarrier): full[s] completes
//    when stage s's K and V have landed (transaction bytes), empty[s] when the consumers' eight
//    warps are done with it; q_full and q_empty do the same for Q, so a next item's Q and first
//    K/V tiles load while the consumers finish this item's last tiles and write its output;
//  - a consumer issues tile j's S = Q K^T, then tile j - 1's O += P V, and runs tile j's softmax
//    while the tensor cores work through both (and through the other consumer's GEMMs). The
//    wait for that P V is pinned after the softmax (WgmmaWaitAfter): left to itself, ptxas
//    hoists it above, and the softmax runs with the tensor cores idle (NOTES.md, "The P V wait,
//    where ptxas put it"; bench/sass_order.sh checks it).
// Items go out in groups of (head, batch) pairs (ws_schedule.h; the group size is heuristics.h's
// WsHeadGroup), each group's query tiles last-first (causal: the most keys first) across its
// pairs, so blocks running at the same time read a few heads' K/V (L2 reuse) and the last items
// any block claims are the shortest. Problems with kv_lens keep the cp.async kernel (the path
// heuristic never picks this one for them): a box reads whole tiles, and V rows past a
// sequence's length may hold NaN, which 0 * NaN would carry into O.
#pragma once

#include <cuda.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cuda/tma.cuh"
#include "fused/epilogue.cuh"
#include "fused/fused_kernels.h"
#include "fused/fused_tensor_maps.h"
#include "fused/mask.cuh"
#include "fused/query_tile.cuh"
#include "fused/smem_tiles.cuh"
#include "fused/softmax.cuh"
#include "fused/tiles.h"
#include "fused/wgmma_gemms.cuh"
#include "fused/wgmma_ptx.cuh"
#include "fused/ws_schedule.h"

namespace attn::fused {

template <int kHeadDim_, int kBlockN_, int kStages_>
struct WgmmaWsTraits {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kWgmmaWsBlockM;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kStages = kStages_;
  static constexpr int kThreads = 384;
  // setmaxnreg.inc waits until what it asks for is free in the block's allocation at launch (64 Ki
  // / 384 rounded down to 8: 168 a thread): more than that and the consumers wait forever.
  static_assert(128 * kWsProducerRegisters + (kThreads - 128) * kWsConsumerRegisters <=
                    65536 / kThreads / 8 * 8 * kThreads,
                "the consumers' setmaxnreg.inc must fit the block's registers at launch");
  static constexpr int kRegions = (kHeadDim + 63) / 64;  // 128-byte swizzle regions a row
  static constexpr int kQBytes = kBlockM * kRegions * 128;
  static constexpr int kKvBytes = kBlockN * kRegions * 128;
  // + 1 KiB: the base is rounded up to the swizzle atom's 1024-byte alignment.
  static constexpr int kSmemBytes = kQBytes + 2 * kStages * kKvBytes + 1024;
  static_assert(kHeadDim % 32 == 0 && kHeadDim <= 256, "wgmma N = head dim: 64, 96, 128 or 256");
  static_assert(kBlockN == 64 || kBlockN == 128, "wgmma N = kBlockN: 64 or 128");
  static_assert(kStages >= 2, "one stage loads while another is computed");
  static_assert(kSmemBytes <= 227 * 1024, "one block an SM");
};

// The block's mbarriers, 8 bytes each in one shared array: Q's full and empty, then the K/V
// ring's full[kStages] and its empty[kStages].
enum WsBarrier : int { kQFull = 0, kQEmpty = 1, kKvFull = 2 };

struct WgmmaWsMaps {
  CUtensorMap q, k, v;
};

// Work item w: its query tile, head, batch element and K/V tiles (up to the causal limit), in
// ws_schedule.h's order.
struct WsItem {
  int q0, head, batch, n_tiles;
};
template <int kBlockM, int kBlockN>
__device__ __forceinline__ WsItem WsItemAt(const FusedParams& p, int64_t w, int head_group) {
  const int m_blocks = (p.q_len + kBlockM - 1) / kBlockM;
  const WsItemPosition at =
      WsItemPositionAt(w, m_blocks, static_cast<int64_t>(p.heads) * p.batch, head_group);
  WsItem item;
  item.q0 = (m_blocks - 1 - static_cast<int>(at.rank)) * kBlockM;
  item.batch = static_cast<int>(at.head_batch / p.heads);
  item.head = static_cast<int>(at.head_batch - static_cast<int64_t>(item.batch) * p.heads);
  item.n_tiles = KeyTiles<kBlockM, kBlockN>(p, item.q0, p.kv_len);
  return item;
}

template <typename Traits, typename T>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    FusedWgmmaWsKernel(const FusedParams p, const __grid_constant__ WgmmaWsMaps maps,
                       const int64_t items, const int head_group) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kBlockM = Traits::kBlockM, kBlockN = Traits::kBlockN, kHeadDim = Traits::kHeadDim;
  constexpr int kStages = Traits::kStages;
  constexpr int kSBlocks = kBlockN / 8, kOBlocks = kHeadDim / 8;  // n8 blocks of S and O

  extern __shared__ unsigned char smem_raw[];
  const uint32_t s_q = SwizzleAlignedBase(smem_raw);
  const uint32_t s_k = s_q + Traits::kQBytes;
  const uint32_t s_v = s_k + kStages * Traits::kKvBytes;
  __shared__ uint64_t s_bars[kKvFull + 2 * kStages];
  const uint32_t bars = static_cast<uint32_t>(__cvta_generic_to_shared(s_bars));
  const uint32_t q_full = bars + 8 * kQFull, q_empty = bars + 8 * kQEmpty;
  const uint32_t full0 = bars + 8 * kKvFull, empty0 = full0 + 8 * kStages;

  const int tid = threadIdx.x, wg = tid / 128;
  if (tid == 0) {
    tma::MbarrierInit(q_full, 1);
    tma::MbarrierInit(q_empty, Traits::kThreads - 128);  // one arrival per consumer thread
    for (int s = 0; s < kStages; ++s) {
      tma::MbarrierInit(full0 + 8 * s, 1);
      tma::MbarrierInit(empty0 + 8 * s, 8);
    }
  }
  __syncthreads();  // the barriers are set up; no block-wide barrier after this point

  // The block's first item is blockIdx.x; the producer claims each next one and hands its number
  // to the consumers in s_item, a number >= items ending the block: written before the
  // producer's arrival on q_full (a release), read once that phase has completed (an acquire),
  // rewritten only after q_empty says every consumer thread is past reading it, the end
  // signalled with a plain arrival on q_full. Every consumer thread arrives on q_empty itself:
  // one arrival a warp after __syncwarp is ordered as well, but racecheck counts an arrival as
  // ordering only its own thread's accesses, and reported the other lanes' reads (NOTES.md,
  // "racecheck and the item hand-off, settled").
  __shared__ int64_t s_item;
  // 8 bytes a consumer warp for WgmmaWaitAfter.
  __shared__ __align__(8) float s_after_words[2 * 8];
  const uint32_t s_after = static_cast<uint32_t>(__cvta_generic_to_shared(s_after_words));
  if (wg == 0) {  // the producer
    ReleaseRegisters<kWsProducerRegisters>();
    if (tid != 0) return;
    uint32_t it = 0;  // K/V tiles loaded so far, over all items: the ring's position
    int64_t w = blockIdx.x, claimed = 0;
    for (int local = 0;; ++local) {
      if (local > 0) {
        tma::MbarrierWait(q_empty, (local - 1) % 2);  // the last item's S are done, s_item read
        w = claimed;
      }
      s_item = w;
      if (w >= items) {
        tma::MbarrierArrive(q_full);
        return;
      }
      const WsItem item = WsItemAt<kBlockM, kBlockN>(p, w, head_group);
      tma::MbarrierArriveExpectTx(q_full, Traits::kQBytes);
#pragma unroll
      for (int r = 0; r < Traits::kRegions; ++r) {
        tma::TmaLoad4d(s_q + r * kBlockM * 128, &maps.q, q_full, r * 64, item.head, item.q0,
                       item.batch);
      }
      // Claim the next item now, the atomic's latency under this item's tiles (the counter
      // starts at 0 each launch; the first gridDim.x items went to the blocks in order).
      claimed = gridDim.x + atomicAdd(p.tile_counter, 1);
      const int kv_head = item.head / p.group;
      for (int j = 0; j < item.n_tiles; ++j, ++it) {
        const uint32_t stage = it % kStages;
        // The stage's previous tile, it - kStages, must be released by both consumers.
        if (it >= kStages) tma::MbarrierWait(empty0 + 8 * stage, (it / kStages - 1) % 2);
        const uint32_t full = full0 + 8 * stage;
        tma::MbarrierArriveExpectTx(full, 2 * Traits::kKvBytes);
#pragma unroll
        for (int r = 0; r < Traits::kRegions; ++r) {
          const uint32_t at = stage * Traits::kKvBytes + r * kBlockN * 128;
          tma::TmaLoad4d(s_k + at, &maps.k, full, r * 64, kv_head, j * kBlockN, item.batch);
          tma::TmaLoad4d(s_v + at, &maps.v, full, r * 64, kv_head, j * kBlockN, item.batch);
        }
      }
    }
  }

  ClaimRegisters<kWsConsumerRegisters>();
  const int c = wg - 1;  // this consumer: rows 64c .. 64c + 63 of the tile
  const int warp = (tid % 128) / 32, lane = tid % 32;
  const int r0 = c * 64 + warp * 16 + lane / 4;  // this thread's rows: r0 and r0 + 8

  uint32_t it = 0;  // as the producer's
  for (int local = 0;; ++local) {
    tma::MbarrierWait(q_full, local % 2);  // this item's Q is in (or the block is done)
    // The item the producer handed over; this thread's arrival on q_empty, after it, lets the
    // producer rewrite s_item.
    const int64_t w = s_item;
    if (w >= items) break;
    const WsItem item = WsItemAt<kBlockM, kBlockN>(p, w, head_group);
    const int q0 = item.q0, n_tiles = item.n_tiles;
    float o[kOBlocks][4];
#pragma unroll
    for (int d = 0; d < kOBlocks; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.f;
    RowSoftmax softmax;
    uint32_t pa[kBlockN / 16][4];  // P of the tile before, waiting for its P V

    if (n_tiles == 0) tma::MbarrierArrive(q_empty);
    // Tile j (ring position it + j): S = Q K^T issued, with tile j - 1's P V behind it where
    // kWithPv, awaited, masked and turned into P; O rescaled once that P V is in.
    auto step = [&](int j, auto with_pv) {
      constexpr bool kWithPv = decltype(with_pv)::value;
      const uint32_t stage = (it + j) % kStages, prev = (it + j + kStages - 1) % kStages;
      tma::MbarrierWait(full0 + 8 * stage, ((it + j) / kStages) % 2);
      float s[kSBlocks][4];
      IssueScores<kHeadDim, kBlockM, kBlockN, T>(s, s_q, c * 64, s_k + stage * Traits::kKvBytes);
      if constexpr (kWithPv) IssuePv<kHeadDim, kBlockN, T>(o, pa, s_v + prev * Traits::kKvBytes);
      WgmmaWait<kWithPv ? 1 : 0>();  // S is in; tile j - 1's P V may still run
      FenceRegisters(Flat(s));
      if (j == n_tiles - 1) tma::MbarrierArrive(q_empty);  // Q read for the last time

      const int key0 = j * kBlockN;
      if (key0 + kBlockN > p.kv_len || (p.causal && key0 + kBlockN - 1 > q0)) {
        MaskScores(s, key0, {q0 + r0, q0 + r0 + 8}, p.kv_len, p.causal);
      }
      float alpha[2];
      const bool moved = __any_sync(0xffffffffu, OnlineSoftmax(s, softmax, p.scale_log2, alpha));
      if constexpr (kWithPv) {
        // Tile j - 1's P V is in O: its stage is free, O may be rescaled. The wait stays here,
        // after the softmax (WgmmaWaitAfter), for the softmax to run under that P V.
        WgmmaWaitAfter<0>(softmax.sum, s_after + 8 * (warp + 4 * c));
        FenceRegisters(Flat(o));
        if (lane == 0) tma::MbarrierArrive(empty0 + 8 * prev);
      }
      if (moved) RescaleRows(o, alpha);
      PackProbabilities<T>(pa, s);
    };
    // The first tile has no P V before it (a separate instantiation: a run-time condition around
    // the wgmma would make ptxas serialise them).
    if (n_tiles > 0) step(0, std::false_type{});
    for (int j = 1; j < n_tiles; ++j) step(j, std::true_type{});
    if (n_tiles > 0) {
      const uint32_t last = (it + n_tiles - 1) % kStages;
      IssuePv<kHeadDim, kBlockN, T>(o, pa, s_v + last * Traits::kKvBytes);
      WgmmaWait<0>();
      FenceRegisters(Flat(o));
      if (lane == 0) tma::MbarrierArrive(empty0 + 8 * last);
    }
    it += n_tiles;

    // out = O / sum, written once; rows past T are dropped.
    StoreSlice(static_cast<T*>(p.out) + item.batch * p.o_batch_stride + item.head * p.o_head_stride,
               p, q0 + r0, 2 * (lane % 4), o, softmax);
  }
#endif  // __CUDA_ARCH_FEAT_SM90_ALL
}

// Head dim H's tile: its row of tiles.h's table.
template <int kHeadDim>
struct WgmmaWsTileFor {
  static constexpr WgmmaWsTile kTile = TilesOf(kHeadDim).wgmma_ws;
  using Traits = WgmmaWsTraits<kHeadDim, kTile.block_n, kTile.stages>;
};

// Runs the warp-specialised kernel with items in groups of `head_group` (head, batch) pairs
// (heuristics.h's WsHeadGroup) and returns true with its launch status in *error, or returns
// false having launched nothing where it does not apply (a tensor the driver's TMA refuses, or no
// tile counter), for the caller's fallback.
template <typename Traits, typename T>
bool LaunchWgmmaWs(const FusedParams& p, int head_group, cudaStream_t stream, cudaError_t* error) {
  WgmmaWsMaps maps;
  if (p.tile_counter == nullptr ||
      !EncodeOperandMap(&maps.q, p, FusedOperand::kQ, Traits::kHeadDim, Traits::kBlockM) ||
      !EncodeOperandMap(&maps.k, p, FusedOperand::kK, Traits::kHeadDim, Traits::kBlockN) ||
      !EncodeOperandMap(&maps.v, p, FusedOperand::kV, Traits::kHeadDim, Traits::kBlockN)) {
    return false;
  }
  auto* kernel = FusedWgmmaWsKernel<Traits, T>;
  *error =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Traits::kSmemBytes);
  if (*error != cudaSuccess) return true;
  const int64_t m_blocks = (p.q_len + Traits::kBlockM - 1) / Traits::kBlockM;
  const int64_t items = m_blocks * p.heads * p.batch;
  *error = cudaMemsetAsync(p.tile_counter, 0, sizeof(int32_t), stream);
  if (*error != cudaSuccess) return true;
  const int64_t blocks = std::min<int64_t>(items, std::max(1, p.multiprocessors));
  kernel<<<static_cast<unsigned>(blocks), Traits::kThreads, Traits::kSmemBytes, stream>>>(
      p, maps, items, head_group);
  *error = cudaGetLastError();
  return true;
}

}  // namespace attn::fused
