// The split-KV planner (engine/src/fused/heuristics.h): host code, so these run on any machine.
// The H200 figures behind the expectations are in engine/src/fused/NOTES.md.
#include <numeric>
#include <optional>
#include <vector>

#include "engine/test_util.h"
#include "fused/heuristics.h"
#include "gtest/gtest.h"

namespace attn::testing {
namespace {

// The H200's 132 SMs and 227/228 KiB of shared memory a block/SM.
const DeviceInfo kH200 = FakeGpu(9, 0);

AttentionProblem Decode(int64_t b, int64_t t, int64_t s, bool causal = false) {
  return ProblemOf({b, t, s, 32, 8, 128}, DType::kBFloat16, causal);
}

// Every key of [0, S) in exactly one split, of whole tiles.
void ExpectCoversTheKeys(const FusedSplitKv& plan, int64_t keys) {
  EXPECT_EQ(plan.split_keys % kSplitKvTileKeys, 0) << plan.split_keys;
  EXPECT_GE(int64_t{plan.splits} * plan.split_keys, keys);
  EXPECT_LT(int64_t{plan.splits - 1} * plan.split_keys, keys);
}

TEST(SplitKvPlan, DecodeOfABatchFillsTheGpuWithOneSplit) {
  // B16 K8: 128 blocks a split on 132 SMs; splitting further only adds merges (H200, cp.async:
  // 1-2 splits 0.143-0.147 ms, 4: 0.149, 6: 0.152; H100, TMA: one split 4.8% faster than two).
  const FusedSplitKv plan = PlanSplitKv(Decode(16, 1, 8192), kH200);
  EXPECT_EQ(plan.row_tiles, 1);  // 4 packed rows (T1 x group 4): one 16-row slice
  EXPECT_EQ(plan.row_groups, 1);
  EXPECT_EQ(plan.stages, 3);  // three stages still leave two blocks an SM
  EXPECT_EQ(plan.splits, 1);
  ExpectCoversTheKeys(plan, 8192);
}

TEST(SplitKvPlan, OneLongSequenceIsSplitOverTheSms) {
  // B1 K8: 8 blocks without splits. 16 splits = 128 blocks of 32 tiles was the H200's best
  // (0.050 ms; 32 splits 0.053, 64 splits 0.071).
  const FusedSplitKv plan = PlanSplitKv(Decode(1, 1, 32768), kH200);
  EXPECT_EQ(plan.splits, 16);
  ExpectCoversTheKeys(plan, 32768);
}

TEST(SplitKvPlan, TwoSlicesOfOneLongSequenceTakeOver128Splits) {
  // Two blocks an SM and one block a split: fused_backend_test.cc's {1, 16, 100000, 2, 1, 64}
  // relies on this for a merge whose warps each sum more than 32 splits.
  const FusedSplitKv plan =
      PlanSplitKv(ProblemOf({1, 16, 100000, 2, 1, 64}, DType::kBFloat16, false), kH200);
  EXPECT_EQ(plan.row_tiles, 2);
  EXPECT_GT(plan.splits, 128);
  ExpectCoversTheKeys(plan, 100000);
}

TEST(SplitKvPlan, SixteenQueriesTakeFourSlicesAndKeepTwoBlocksAnSm) {
  const FusedSplitKv plan = PlanSplitKv(Decode(16, 16, 8192), kH200);
  EXPECT_EQ(plan.row_tiles, 4);  // 64 packed rows
  EXPECT_EQ(plan.stages, 2);     // three stages would leave one block an SM (H200: 0.227 -> 0.305)
  EXPECT_GE(plan.splits, 2);
  ExpectCoversTheKeys(plan, 8192);
}

TEST(SplitKvPlan, CausalTopLeftDecodeSeesOneKey) {
  // Query 0 of a top-left causal mask sees key 0 only: one tile, no split.
  const FusedSplitKv plan = PlanSplitKv(Decode(16, 1, 8192, /*causal=*/true), kH200);
  EXPECT_EQ(plan.splits, 1);
  EXPECT_EQ(plan.split_keys, kSplitKvTileKeys);
}

TEST(SplitKvPlan, ARaggedBatchIsSplitByItsOwnLengths) {
  // Lengths 512, 1024, ..., 8192: half the keys of S for all, most of them in the long
  // sequences. Counted as S each, one split looks best (its blocks' 128 tiles are each SM's
  // share); by their lengths the SMs' share is 66 tiles, and no block may stream more than that
  // or it alone sets the time (H200: 0.1426 ms with one split, 0.1099 with this plan).
  AttentionProblem ragged = Decode(16, 1, 8192);
  ragged.kv_lens.resize(16);
  std::iota(ragged.kv_lens.begin(), ragged.kv_lens.end(), 1);
  for (int32_t& len : ragged.kv_lens) len *= 512;
  ASSERT_TRUE(ValidateProblem(ragged).ok());
  int64_t work = 0;  // tiles all blocks stream
  for (int32_t len : ragged.kv_lens) work += 8 * ((len + kSplitKvTileKeys - 1) / kSplitKvTileKeys);
  const FusedSplitKv plan = PlanSplitKv(ragged, kH200);
  EXPECT_LE(plan.split_keys / kSplitKvTileKeys,
            (work + kH200.multiprocessors - 1) / kH200.multiprocessors);
  EXPECT_GT(plan.splits, 1);
  ExpectCoversTheKeys(plan, 8192);
  // Lengths of S are the problem without lengths.
  AttentionProblem full = Decode(16, 1, 8192);
  full.kv_lens.assign(16, 8192);
  EXPECT_EQ(PlanSplitKv(full, kH200).splits, PlanSplitKv(Decode(16, 1, 8192), kH200).splits);
}

TEST(SplitKvPlan, APieceKeepsTheWholeCallsSplits) {
  // A batch piece of a decode call: on its own it would be split further, which would change
  // its rounding; as a piece it keeps the whole call's key ranges.
  const AttentionProblem whole = Decode(64, 1, 8192);
  const AttentionProblem piece = Decode(2, 1, 8192);
  const FusedSplitKv alone = PlanSplitKv(piece, kH200);
  const FusedSplitKv as_piece = PlanSplitKvPiece(piece, whole, kH200);
  const FusedSplitKv of_whole = PlanSplitKv(whole, kH200);
  EXPECT_NE(alone.split_keys, of_whole.split_keys);
  EXPECT_EQ(as_piece.split_keys, of_whole.split_keys);
  EXPECT_EQ(as_piece.splits, of_whole.splits);
  EXPECT_EQ(as_piece.row_tiles, of_whole.row_tiles);
  // Row groups are the piece's own: a band of 20 of the whole's 200 packed rows.
  const AttentionProblem rows_whole = ProblemOf({1, 200, 4096, 4, 4, 64}, DType::kBFloat16, false);
  const AttentionProblem rows_piece = ProblemOf({1, 20, 4096, 4, 4, 64}, DType::kBFloat16, false);
  const FusedSplitKv band = PlanSplitKvPiece(rows_piece, rows_whole, kH200);
  EXPECT_EQ(band.row_tiles, 4);
  EXPECT_EQ(band.row_groups, 1);
  EXPECT_EQ(PlanSplitKv(rows_whole, kH200).row_groups, 4);
}

TEST(SplitKvPlan, TheL4GetsTwoStagesAndNoHeadDim256) {
  // The L4 (8.9): 99 KiB a block. Three 64-key stages of H = 128 rows take 107 KiB, two 73 KiB;
  // H = 256 does not fit even two (the fused backend runs mma.sync there instead).
  const DeviceInfo l4 = FakeGpu(8, 9);
  const AttentionProblem p = Decode(16, 1, 8192);
  ASSERT_TRUE(SplitKvFits(p, l4));
  EXPECT_EQ(PlanSplitKv(p, l4).stages, 2);
  EXPECT_LE(SplitKvSmemBytes(128, 1, 2), l4.shared_memory_per_block);
  EXPECT_GT(SplitKvSmemBytes(128, 1, 3), l4.shared_memory_per_block);
  const AttentionProblem h256 = ProblemOf({4, 1, 4096, 16, 4, 256}, DType::kBFloat16, false);
  EXPECT_FALSE(SplitKvFits(h256, l4));
  EXPECT_TRUE(SplitKvFits(h256, kH200));
}

TEST(SplitKvPlan, TmaOnHopperForWholeSwizzleRegions) {
  // TMA boxes are 64 columns (one 128-byte swizzle row): head dims of whole regions, and only
  // where the device has the accelerator (compute capability 9.0+).
  EXPECT_TRUE(PlanSplitKv(Decode(16, 1, 8192), kH200).tma);
  EXPECT_FALSE(PlanSplitKv(Decode(16, 1, 8192), FakeGpu(8, 9)).tma);
  for (int64_t h : {32, 96}) {
    EXPECT_FALSE(PlanSplitKv(ProblemOf({4, 1, 4096, 32, 8, h}, DType::kBFloat16, false), kH200).tma)
        << h;
  }
  for (int64_t h : {64, 256}) {
    EXPECT_TRUE(PlanSplitKv(ProblemOf({4, 1, 4096, 32, 8, h}, DType::kBFloat16, false), kH200).tma)
        << h;
  }
}

TEST(SplitKvPlan, DependentMergeLaunchOnHopperOnly) {
  // Programmatic dependent launch needs compute capability 9.0; the L4 (8.9) launches the merge
  // after the split kernel as a plain stream successor.
  EXPECT_TRUE(PlanSplitKv(Decode(1, 1, 32768), kH200).dependent_merge);
  EXPECT_FALSE(PlanSplitKv(Decode(1, 1, 32768), FakeGpu(8, 9)).dependent_merge);
}

TEST(SplitKvPlan, WorkspaceHoldsEachSplitsRowsOrNothing) {
  const AttentionProblem one = Decode(16, 1, 8192, /*causal=*/true);
  EXPECT_EQ(SplitKvWorkspaceBytes(PlanSplitKv(one, kH200), one), 0);
  const AttentionProblem p = Decode(1, 1, 32768);
  const FusedSplitKv plan = PlanSplitKv(p, kH200);
  ASSERT_GT(plan.splits, 1);
  // (B, K, row groups, splits, 16 * row_tiles) rows of H partial outputs and one log2-sum-exp.
  EXPECT_EQ(SplitKvWorkspaceBytes(plan, p), int64_t{1} * 8 * 1 * plan.splits * 16 * (128 + 1) * 4);
}

TEST(SplitKvPlan, SplitsStayWithinTheGridsLimit) {
  // 2^25 keys of one K/V head: 524,288 tiles, more than gridDim.y's 65,535 splits could hold.
  const AttentionProblem p = ProblemOf({1, 1, int64_t{1} << 25, 1, 1, 64}, DType::kBFloat16, false);
  DeviceInfo many = kH200;
  many.multiprocessors = 100000;
  const FusedSplitKv plan = PlanSplitKv(p, many);
  EXPECT_LE(plan.splits, 65535);
  ExpectCoversTheKeys(plan, int64_t{1} << 25);
}

// Restores the automatic stage choice when a test ends.
class ScopedStages {
 public:
  explicit ScopedStages(std::optional<int> stages) { SetSplitKvStagesOverride(stages); }
  ~ScopedStages() { SetSplitKvStagesOverride(std::nullopt); }
};

TEST(SplitKvPlan, ForcedStagesApplyToTmaPlansThatFit) {
  const AttentionProblem p = Decode(16, 1, 8192);
  for (int stages = 2; stages <= kSplitKvMaxTmaStages; ++stages) {
    ScopedStages scoped(stages);
    EXPECT_EQ(PlanSplitKv(p, kH200).stages, stages);
    // The pieces of a call keep the whole call's stages.
    EXPECT_EQ(PlanSplitKvPiece(Decode(4, 1, 8192), p, kH200).stages, stages);
  }
  EXPECT_EQ(PlanSplitKv(p, kH200).stages, 3);  // automatic again
}

TEST(SplitKvPlan, ForcedStagesLeaveOtherPlansAutomatic) {
  const AttentionProblem l4_decode = Decode(16, 1, 8192);
  const AttentionProblem h96 = ProblemOf({4, 1, 4096, 32, 8, 96}, DType::kBFloat16, false);
  const AttentionProblem h256 = ProblemOf({4, 1, 4096, 32, 8, 256}, DType::kBFloat16, false);
  const DeviceInfo l4 = FakeGpu(8, 9);
  const int automatic_l4 = PlanSplitKv(l4_decode, l4).stages;
  const int automatic_h96 = PlanSplitKv(h96, kH200).stages;
  const int automatic_h256 = PlanSplitKv(h256, kH200).stages;
  ScopedStages scoped(6);
  // cp.async plans (the L4; H = 96 on Hopper) keep their two or three stages.
  EXPECT_EQ(PlanSplitKv(l4_decode, l4).stages, automatic_l4);
  EXPECT_EQ(PlanSplitKv(h96, kH200).stages, automatic_h96);
  // Six stages of H = 256 rows do not fit a block's 227 KiB: the automatic choice stays.
  EXPECT_GT(SplitKvSmemBytes(256, 1, 6), kH200.shared_memory_per_block);
  EXPECT_EQ(PlanSplitKv(h256, kH200).stages, automatic_h256);
  EXPECT_EQ(PlanSplitKv(Decode(16, 1, 8192), kH200).stages, 6);
  // Numbers outside 2..kSplitKvMaxTmaStages mean automatic.
  for (int bad : {0, 1, kSplitKvMaxTmaStages + 1}) {
    SetSplitKvStagesOverride(bad);
    EXPECT_EQ(PlanSplitKv(Decode(16, 1, 8192), kH200).stages, 3) << bad;
  }
}

}  // namespace
}  // namespace attn::testing
