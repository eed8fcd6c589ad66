// The fused backend's path choice, the merge's warps and the tile table (engine/src/fused/
// heuristics.h, tiles.h): host code, so these run on any machine. The measurements behind each
// rule are in engine/src/fused/NOTES.md.
#include <optional>
#include <string_view>

#include "attn/overrides.h"
#include "engine/test_util.h"
#include "fused/heuristics.h"
#include "fused/tiles.h"
#include "gtest/gtest.h"

namespace attn::testing {
namespace {

const DeviceInfo kH100 = FakeGpu(9, 0);  // 132 SMs
const DeviceInfo kL4 = FakeGpu(8, 9);

// B4 N16 T4096 (judged), B1 N1 T256 (two query tiles: under a wave), decode B16 T1 N32 K8.
AttentionProblem Prefill(int64_t h, bool causal = false) {
  return ProblemOf({4, 4096, 4096, 16, 16, h}, DType::kBFloat16, causal);
}
AttentionProblem Small(int64_t h) {
  return ProblemOf({1, 256, 256, 1, 1, h}, DType::kBFloat16, false);
}
AttentionProblem Decode(int64_t h) {
  return ProblemOf({16, 1, 8192, 32, 8, h}, DType::kBFloat16, false);
}

TEST(FusedPath, NamesRoundTrip) {
  for (FusedPath path : kFusedPaths) {
    EXPECT_EQ(FusedPathNamed(FusedPathName(path)), path) << FusedPathName(path);
  }
  EXPECT_EQ(FusedPathNamed("wgmma-ws"), std::nullopt);
  EXPECT_EQ(FusedPathNamed(""), std::nullopt);
}

TEST(FusedChoosePath, ShortQueriesTakeSplitKvEverywhere) {
  for (int64_t h : {64, 128, 256}) {
    EXPECT_EQ(ChoosePath(Decode(h), kH100, std::nullopt), FusedPath::kSplitKv) << h;
  }
  EXPECT_EQ(ChoosePath(Decode(128), kL4, std::nullopt), FusedPath::kSplitKv);
  // 65 packed rows of a K/V head (T 65, no GQA) are past the split kernel's largest block.
  const AttentionProblem rows65 = ProblemOf({1, 65, 8192, 8, 8, 128}, DType::kBFloat16, false);
  EXPECT_NE(ChoosePath(rows65, kH100, std::nullopt), FusedPath::kSplitKv);
  // H = 256 does not fit the L4's shared memory even at two stages: mma.sync.
  EXPECT_EQ(ChoosePath(Decode(256), kL4, std::nullopt), FusedPath::kMmaSync);
}

TEST(FusedChoosePath, MmaSyncOffHopperOrWithoutWgmma) {
  EXPECT_EQ(ChoosePath(Prefill(128), kL4, std::nullopt), FusedPath::kMmaSync);
  EXPECT_EQ(ChoosePath(Prefill(128), FakeGpu(9, 0), FusedPath::kMmaSync), FusedPath::kMmaSync);
  // H = 32 has no wgmma kernel in any build.
  EXPECT_EQ(ChoosePath(Prefill(32), kH100, std::nullopt), FusedPath::kMmaSync);
}

TEST(FusedChoosePath, HopperTakesTheWarpSpecialisedKernelFromAWaveOfTiles) {
  if (!FusedWgmmaBuilt(128)) GTEST_SKIP() << "this build has no sm_90a (wgmma) kernels";
  for (int64_t h : {64, 96, 128}) {
    EXPECT_EQ(ChoosePath(Prefill(h), kH100, std::nullopt), FusedPath::kWgmmaWs) << h;
    EXPECT_EQ(ChoosePath(Prefill(h, true), kH100, std::nullopt), FusedPath::kWgmmaWs) << h;
    // Two query tiles of one head: under a wave of the 132 SMs.
    EXPECT_EQ(ChoosePath(Small(h), kH100, std::nullopt), FusedPath::kWgmma) << h;
  }
  // H = 256: the table's warp-specialised tile is not the automatic choice.
  EXPECT_EQ(ChoosePath(Prefill(256), kH100, std::nullopt), FusedPath::kWgmma);
  EXPECT_EQ(ChoosePath(Prefill(256), kH100, FusedPath::kWgmmaWs), FusedPath::kWgmmaWs);
  // Per-sequence lengths never take the warp-specialised kernel, forced or not.
  AttentionProblem ragged = Prefill(128);
  ragged.kv_lens = {4096, 100, 4000, 1};
  EXPECT_EQ(ChoosePath(ragged, kH100, std::nullopt), FusedPath::kWgmma);
  EXPECT_EQ(ChoosePath(ragged, kH100, FusedPath::kWgmmaWs), FusedPath::kWgmma);
  EXPECT_EQ(ChoosePath(Prefill(128), kH100, FusedPath::kWgmma), FusedPath::kWgmma);
  // Forced split-KV takes a prefill shape too.
  EXPECT_EQ(ChoosePath(Prefill(128), kH100, FusedPath::kSplitKv), FusedPath::kSplitKv);
}

TEST(FusedCombineWarps, OneWarpARowUpToTheUnrollThenTwoThenFour) {
  FusedSplitKv plan;
  const int unroll = TilesOf(128).combine_unroll;
  for (int splits : {1, unroll}) {
    plan.splits = splits;
    EXPECT_EQ(CombineWarps(plan, 128), 1) << splits;
  }
  plan.splits = unroll + 1;
  EXPECT_EQ(CombineWarps(plan, 128), 2);
  plan.splits = 2 * unroll + 1;
  EXPECT_EQ(CombineWarps(plan, 128), 4);
  plan.splits = 3;  // H = 256 loads two splits at once: two warps
  EXPECT_EQ(CombineWarps(plan, 256), 2);
}

TEST(FusedTiles, EveryHeadDimHasARowAndTheirKernelsFit) {
  for (int h : {32, 64, 96, 128, 256}) EXPECT_TRUE(FusedHeadDim(h)) << h;
  for (int h : {0, 16, 80, 160, 512}) EXPECT_FALSE(FusedHeadDim(h)) << h;
  EXPECT_FALSE(WgmmaHeadDim(32));
  for (const FusedTiles& t : kFusedTiles) {
    SCOPED_TRACE(t.head_dim);
    EXPECT_GE(t.mma_sync.block_m, 16 * t.mma_sync.warps);
    EXPECT_EQ(t.wgmma.block_n > 0, t.wgmma_ws.block_n > 0);
    if (t.wgmma_ws.block_n > 0) {
      EXPECT_GE(t.wgmma_ws.stages, 2);
    }
    EXPECT_TRUE(t.combine_unroll == 2 || t.combine_unroll == 4);
  }
}

}  // namespace
}  // namespace attn::testing
