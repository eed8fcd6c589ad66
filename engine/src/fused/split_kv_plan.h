// The split-KV kernel's plan: how it cuts a problem (heuristics.h makes it, the launchers in
// fused_kernels.h take it) and the shared memory a block of it needs. Plain C++ without CUDA
// headers, so the planner and its tests build without CUDA and nvcc reads the same definitions.
#pragma once

#include <cstdint>

#include "fused/tiles.h"

namespace attn {

// How the split-KV kernel cuts a problem (heuristics.h plans it), and its workspace.
struct FusedSplitKv {
  int row_tiles = 1;   // 16-row mma slices of packed (query, group) rows per block: 1, 2 or 4
  int row_groups = 1;  // blocks along the packed rows: ceil(T * group / (16 * row_tiles))
  int splits = 1;      // key ranges per (batch, K/V head, row group), one block each
  int split_keys = 0;  // keys per range: a multiple of kSplitKvTileKeys
  int stages = 2;      // K/V tile pairs in shared memory: 2 or 3, up to kSplitKvMaxTmaStages forced
  bool tma = false;    // K/V through TMA bulk tensor copies (compute capability 9.0+, H % 64 == 0)
  // The merge kernel launched as a programmatic dependent of the split kernel (compute capability
  // 9.0+): it starts while the split kernel's last blocks run and waits for their memory.
  bool dependent_merge = false;
  // splits > 1: (B, K, row_groups, splits, 16 * row_tiles) rows of normalised partial O (H
  // floats each) and their log2-sum-exp, which a second kernel merges.
  float* partial_out = nullptr;
  float* partial_lse = nullptr;
};

constexpr int64_t kMaxGridYz = 65535;  // CUDA's limit on gridDim.y and gridDim.z

// The split-KV kernel's shared memory: 16 * row_tiles padded Q rows, `stages` K/V tile pairs of
// kSplitKvTileKeys keys (all but one in flight while one is computed), and the warps' row
// statistics.
constexpr int SplitKvSmemBytes(int head_dim, int row_tiles, int stages) {
  return (16 * row_tiles + 2 * stages * kSplitKvTileKeys) * (head_dim + 8) * 2 +
         kSplitKvWarps * 16 * 2 * 4;
}

}  // namespace attn
