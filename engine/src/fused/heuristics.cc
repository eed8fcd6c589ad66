// See heuristics.h.
#include "fused/heuristics.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "fused/tiles.h"
#include "visible_keys.h"

namespace attn {

namespace {

// 16-row slices of packed (query, group) rows a block takes: 1, 2 or 4.
int RowTiles(const AttentionProblem& p) {
  const int64_t rows = p.q_len * p.GroupSize();
  return rows <= 16 ? 1 : rows <= 32 ? 2 : 4;
}

// Blocks along `p`'s packed rows with `row_tiles` slices a block.
int RowGroups(const AttentionProblem& p, int row_tiles) {
  const int64_t rows = p.q_len * p.GroupSize();
  return static_cast<int>((rows + 16 * row_tiles - 1) / (16 * row_tiles));
}

// Blocks of `bytes` of shared memory resident on one SM (up to two: the kernel asks for no more
// registers than two blocks leave); each takes 1 KiB more for the system.
int BlocksPerSm(int64_t bytes, const DeviceInfo& device) {
  return device.shared_memory_per_sm / (bytes + 1024) >= 2 ? 2 : 1;
}

// Three stages where a block of them fits and as many blocks stay resident as with two (H200:
// three stages that left one block an SM cost 25% at T16), else two; 0 when not even two fit
// (H = 256 on an L4's 99 KiB).
int Stages(const AttentionProblem& p, const DeviceInfo& device) {
  const int h = static_cast<int>(p.head_dim), tiles = RowTiles(p);
  const int64_t two = SplitKvSmemBytes(h, tiles, 2), three = SplitKvSmemBytes(h, tiles, 3);
  if (three <= device.shared_memory_per_block &&
      BlocksPerSm(three, device) >= BlocksPerSm(two, device)) {
    return 3;
  }
  return two <= device.shared_memory_per_block ? 2 : 0;
}

// What the merge costs a plan of more than one split, in tiles streamed by one SM: the second
// kernel's launch and its pass over the partial outputs, ~5 us, against ~1.1 us for a 64-key
// H = 128 tile of K and V at an SM's share of the bandwidth. B16 T1 S8192 ran 4.8% faster with one
// split than with the two the model picked without this term (NOTES.md, "TMA loads, splits and
// the merge").
constexpr int64_t kMergeTiles = 4;

// The stages SetSplitKvStagesOverride forced; 0: automatic.
std::atomic<int> forced_stages{0};

// -1: automatic; otherwise the FusedPath SetFusedPathOverride forced.
std::atomic<int> forced_path{-1};

}  // namespace

bool FusedWgmmaBuilt(int head_dim) {
#if defined(ATTN_HAVE_SM90A)
  return WgmmaHeadDim(head_dim);
#else
  (void)head_dim;
  return false;
#endif
}

void SetSplitKvStagesOverride(std::optional<int> stages) {
  const int n = stages.value_or(0);
  forced_stages.store(n >= 2 && n <= kSplitKvMaxTmaStages ? n : 0, std::memory_order_relaxed);
}

void SetFusedPathOverride(std::optional<FusedPath> path) {
  forced_path.store(path.has_value() ? static_cast<int>(*path) : -1, std::memory_order_relaxed);
}

std::optional<FusedPath> FusedPathOverride() {
  const int forced = forced_path.load(std::memory_order_relaxed);
  return forced < 0 ? std::nullopt : std::optional(static_cast<FusedPath>(forced));
}

FusedPath ChoosePath(const AttentionProblem& p, const DeviceInfo& device,
                     std::optional<FusedPath> forced) {
  // Forced split-KV takes any half-precision shape it fits; forced mma.sync runs anywhere.
  if (forced == FusedPath::kSplitKv && SplitKvFits(p, device)) return FusedPath::kSplitKv;
  if (forced == FusedPath::kMmaSync) return FusedPath::kMmaSync;
  // Short queries: at most kSplitKvMaxRows packed (query, group) rows of a K/V head (decode:
  // T = 1..16 with groups of up to 4).
  if (!forced && SplitKvFits(p, device) && p.q_len * p.GroupSize() <= kSplitKvMaxRows) {
    return FusedPath::kSplitKv;
  }
  const int h = static_cast<int>(p.head_dim);
  if (!FusedWgmmaBuilt(h) || device.cc_major != 9 || device.cc_minor != 0) {
    return FusedPath::kMmaSync;
  }
  // The warp-specialised kernel's whole-tile boxes cannot stop at a sequence's length: problems
  // with kv_lens run the cp.async wgmma kernel, forced or not.
  const bool ws = p.kv_lens.empty();
  if (forced == FusedPath::kWgmmaWs && ws) return FusedPath::kWgmmaWs;
  if (forced == FusedPath::kWgmma || forced == FusedPath::kWgmmaWs) return FusedPath::kWgmma;
  // The warp-specialised kernel where its tile is the automatic choice and there is at least a
  // wave of its query tiles (below that it lost 2-6% to the cp.async kernel).
  const int64_t tiles = WsQueryTiles(p) * p.num_heads * p.batch;
  return ws && TilesOf(h).wgmma_ws.by_default && tiles >= device.multiprocessors
             ? FusedPath::kWgmmaWs
             : FusedPath::kWgmma;
}

int64_t WsQueryTiles(const AttentionProblem& p) {
  return (p.q_len + kWgmmaWsBlockM - 1) / kWgmmaWsBlockM;
}

bool SplitKvFits(const AttentionProblem& p, const DeviceInfo& device) {
  const int64_t rows = p.q_len * p.GroupSize();
  return p.dtype != DType::kFloat32 &&
         p.num_kv_heads * ((rows + kSplitKvMaxRows - 1) / kSplitKvMaxRows) <=
             std::numeric_limits<int>::max() &&
         Stages(p, device) > 0;
}

// How the split-KV kernel cuts `p` for `multiprocessors` SMs. Packed rows go in blocks of up to
// 64; the keys (up to the last query when causal) in `splits` ranges of whole tiles, at least two
// tiles each. Modelled time, in tiles streamed by one lane: the larger of the tiles all blocks
// stream shared over the lanes and one block's tiles (a split cannot end sooner), plus one tile
// of start for each wave of blocks and kMergeTiles where there is a merge; the cheapest split
// wins, the fewest splits on a tie. With kv_lens only the keys within each length count, so a
// ragged batch gets the splits its longest sequences need. Lanes: the SMs for blocks of one row
// slice, whose time is the SM's share of memory bandwidth (B1 S32768: 16 splits 0.050 ms, 64
// splits 0.071; NOTES.md, "Split-KV kernel for short queries"); the resident block slots for
// larger slices, whose compute the second block of an SM hides.
FusedSplitKv PlanSplitKv(const AttentionProblem& p, const DeviceInfo& device) {
  FusedSplitKv plan;
  plan.row_tiles = RowTiles(p);
  plan.row_groups = RowGroups(p, plan.row_tiles);
  plan.stages = Stages(p, device);
  plan.tma = device.cc_major >= 9 && p.head_dim % 64 == 0;
  if (const int forced = forced_stages.load(std::memory_order_relaxed);
      plan.tma && forced > 0 &&
      SplitKvSmemBytes(static_cast<int>(p.head_dim), plan.row_tiles, forced) <=
          device.shared_memory_per_block) {
    plan.stages = forced;
  }
  plan.dependent_merge = device.cc_major >= 9;
  const int multiprocessors = device.multiprocessors;
  // Keys the last query sees (top-left causal), the most any block streams.
  const int64_t kv_end = VisibleKeys(p.kv_len, p.q_len - 1, p.causal);
  const int64_t tiles = (kv_end + kSplitKvTileKeys - 1) / kSplitKvTileKeys;
  const int64_t blocks_per_split = p.batch * p.num_kv_heads * plan.row_groups;
  const int64_t lanes = std::max<int64_t>(
      1, int64_t{multiprocessors} *
             (plan.row_tiles == 1 ? 1
                                  : BlocksPerSm(SplitKvSmemBytes(static_cast<int>(p.head_dim),
                                                                 plan.row_tiles, plan.stages),
                                                device)));
  // The tiles all blocks stream (each batch element's own with kv_lens), and the blocks that
  // have keys for a split of `per_split` tiles (the grid's others exit at once).
  int64_t work = blocks_per_split * tiles;
  std::vector<int64_t> tiles_of;  // per batch element, with kv_lens
  if (!p.kv_lens.empty()) {
    work = 0;
    for (int64_t b = 0; b < p.batch; ++b) {
      const int64_t keys = VisibleKeys(p.KvLenAt(b), p.q_len - 1, p.causal);
      tiles_of.push_back((keys + kSplitKvTileKeys - 1) / kSplitKvTileKeys);
      work += tiles_of.back() * p.num_kv_heads * plan.row_groups;
    }
  }
  auto working_blocks = [&](int64_t per_split) {
    if (tiles_of.empty()) return blocks_per_split * ((tiles + per_split - 1) / per_split);
    int64_t sum = 0;
    for (int64_t t : tiles_of) sum += (t + per_split - 1) / per_split;
    return sum * p.num_kv_heads * plan.row_groups;
  };
  int64_t best_cost = std::numeric_limits<int64_t>::max(), best_tiles = tiles;
  const int64_t most_splits = std::clamp<int64_t>(tiles / 2, 1, kMaxGridYz);  // grid y: splits
  // Every split count up to 16, then steps of 1/8 (a few dozen candidates however long S).
  for (int64_t splits = 1; splits <= most_splits; splits += std::max<int64_t>(1, splits / 8)) {
    const int64_t per_split = (tiles + splits - 1) / splits;
    const int64_t waves = (working_blocks(per_split) + lanes - 1) / lanes;
    const int64_t cost = std::max((work + lanes - 1) / lanes, per_split) + waves +
                         (per_split < tiles ? kMergeTiles : 0);
    if (cost < best_cost) best_cost = cost, best_tiles = per_split;
  }
  plan.split_keys = static_cast<int>(best_tiles * kSplitKvTileKeys);
  plan.splits = static_cast<int>((tiles + best_tiles - 1) / best_tiles);
  return plan;
}

int CombineWarps(const FusedSplitKv& plan, int head_dim) {
  const int unroll = TilesOf(head_dim).combine_unroll;
  return plan.splits <= unroll ? 1 : plan.splits <= 2 * unroll ? 2 : 4;
}

// Causal items run from 1 to m_blocks K/V tiles; a group of at least two items an SM has its
// longest items claimed early enough to end with the rest (their mean is half the longest), and
// the last group, taking the remainder, is no smaller (a smaller one cost H64 T8192 causal 4% on
// the H100: its longest items were claimed too late again; NOTES.md, "Causal items in groups of
// heads, longest first").
int WsHeadGroup(bool causal, int64_t pairs, int64_t m_blocks, int multiprocessors) {
  if (!causal || pairs <= 1 || m_blocks < 1) return 1;
  const int64_t sms = multiprocessors > 1 ? multiprocessors : 1;
  const int64_t enough = (2 * sms + m_blocks - 1) / m_blocks;
  const int64_t want = enough < pairs ? enough : pairs;
  return static_cast<int>(pairs / (pairs / want));
}

int64_t SplitKvPartialRows(const FusedSplitKv& plan, const AttentionProblem& p) {
  if (plan.splits <= 1) return 0;
  return p.batch * p.num_kv_heads * plan.row_groups * plan.splits * 16 * plan.row_tiles;
}

int64_t SplitKvWorkspaceBytes(const FusedSplitKv& plan, const AttentionProblem& p) {
  return SplitKvPartialRows(plan, p) * (p.head_dim + 1) * static_cast<int64_t>(sizeof(float));
}

// The split of `piece`, a part (batch elements, heads or query rows) of `whole`: the whole call's
// row slices and key ranges, so every row is computed as in the whole call; the piece's own
// count of row groups.
FusedSplitKv PlanSplitKvPiece(const AttentionProblem& piece, const AttentionProblem& whole,
                              const DeviceInfo& device) {
  FusedSplitKv plan = PlanSplitKv(whole, device);
  plan.row_groups = RowGroups(piece, plan.row_tiles);
  return plan;
}

}  // namespace attn
