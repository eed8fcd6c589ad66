// Every tile the fused kernels are built with: one row per compiled head dim, the one list of
// head dims that instantiations, dispatch, support checks and messages read, and the constants of
// the kernels whose tile does not depend on the head dim. The kernels' traits take their template
// arguments from here, the host heuristics (heuristics.h) read the same numbers. Plain C++ that
// nvcc and the host compiler both read. Why each number is what it is: NOTES.md, "Tiles and
// paths, by head dim".
#pragma once

#include <cstdint>

namespace attn {

// The mma.sync kernel (sm_80 and newer): kBlockM query rows of kWarps warps, K/V tiles of
// kBlockN keys, two buffers each.
struct MmaSyncTile {
  int block_m, block_n, warps, min_blocks_per_sm;
};
// The cp.async wgmma kernel (sm_90a): 128 query rows (two warpgroups of 64), K/V tiles of block_n
// keys; block_n 0 where the head dim has no wgmma kernel.
struct WgmmaTile {
  int block_n, min_blocks_per_sm;
};
// The warp-specialised wgmma kernel (sm_90a): kWgmmaWsBlockM query rows, a ring of `stages` K/V
// tiles of block_n keys; by_default: the automatic choice takes it (heuristics.h), else only a
// forced path runs it.
struct WgmmaWsTile {
  int block_n, stages;
  bool by_default;
};
struct FusedTiles {
  int head_dim;
  MmaSyncTile mma_sync;
  WgmmaTile wgmma;
  WgmmaWsTile wgmma_ws;
  // Splits whose partial rows a lane of the split-KV merge loads at once (split_kv_combine.cuh):
  // 4 x H / 32 floats, 2 x 8 at H = 256 (eight at once, 112 registers a thread, cost 2%).
  int combine_unroll;
};

// {H, mma.sync {M, N, warps, blocks an SM}, wgmma {N, blocks an SM}, warp-specialised {N, stages,
// automatic}, merge unroll}. Why, one figure each (NOTES.md, "Tiles and paths, by head dim"):
// mma.sync takes 32-key tiles at H = 128 (+3-8% over 64: S in half the registers); the cp.async
// wgmma kernel two blocks an SM of 64-key tiles at H = 96 and 128 (1.07-1.10x over one block of
// 128 keys); the warp-specialised one three stages of 128 keys (two: 12-20% slower, the next load
// waits for a stage), not the automatic choice at H = 256, where only two stages of 64 keys fit
// (5-8% slower than the cp.async kernel). H = 32 has no wgmma kernel: its 64-byte rows would leave
// half of every 128-byte swizzle row empty, and mma.sync serves it well.
inline constexpr FusedTiles kFusedTiles[] = {
    {32, {128, 64, 4, 2}, {0, 0}, {0, 0, false}, 4},
    {64, {128, 64, 4, 2}, {128, 1}, {128, 3, true}, 4},
    {96, {128, 64, 4, 2}, {64, 2}, {128, 3, true}, 4},
    {128, {128, 32, 4, 2}, {64, 2}, {128, 3, true}, 4},
    {256, {64, 32, 4, 2}, {64, 1}, {64, 2, false}, 2},
};

// The row of head dim `h`; a head dim without one has head_dim 0.
constexpr FusedTiles TilesOf(int h) {
  for (const FusedTiles& t : kFusedTiles) {
    if (t.head_dim == h) return t;
  }
  return {};
}
constexpr bool FusedHeadDim(int h) { return h != 0 && TilesOf(h).head_dim == h; }
// The head dims with the two wgmma kernels (the cp.async one and the warp-specialised one).
constexpr bool WgmmaHeadDim(int h) { return TilesOf(h).wgmma.block_n > 0; }
constexpr bool WgmmaTilesPaired() {
  for (const FusedTiles& t : kFusedTiles) {
    if ((t.wgmma.block_n > 0) != (t.wgmma_ws.block_n > 0)) return false;
  }
  return true;
}
static_assert(WgmmaTilesPaired(), "a head dim has both wgmma kernels or neither");

// The warp-specialised kernel: query rows a block (two consumer warpgroups of 64), registers a
// thread of the producer and of the consumers keep (setmaxnreg: the producer needs few; at 32 the
// consumers' claim did not fit the block's registers and every forced-WS test hung), and its
// workspace (a tile counter, 16 bytes to keep what follows aligned).
constexpr int kWgmmaWsBlockM = 128;
constexpr int kWsProducerRegisters = 24;
constexpr int kWsConsumerRegisters = 240;
constexpr int64_t kWgmmaWsWorkspaceBytes = 16;

// The split-KV kernel: K/V tiles of kSplitKvTileKeys keys, kSplitKvWarps warps a block, up to
// kSplitKvMaxTmaStages stages where forced (SetSplitKvStagesOverride); kSplitKvMaxRows packed
// (query, group) rows of one K/V head at most (its largest block, four 16-row slices).
constexpr int kSplitKvTileKeys = 64;
constexpr int kSplitKvMaxTmaStages = 6;
constexpr int kSplitKvWarps = 4;
constexpr int64_t kSplitKvMaxRows = 64;
// The merge kernel: warps a block; a row takes 1, 2 or 4 of them.
constexpr int kCombineWarps = 4;

// The float32 kernel: kFloatRows query rows a block (a warp each), K/V tiles of kFloatKeys keys.
constexpr int kFloatRows = 8;
constexpr int kFloatKeys = 32;

}  // namespace attn
