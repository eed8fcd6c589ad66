// The fused backend: support rules and workspace (any machine), numerics, determinism and
// strided views on the GPU.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "attn/attention.h"
#include "attn/registry.h"
#include "engine/test_util.h"
#include "fused/heuristics.h"
#include "gtest/gtest.h"

namespace attn::testing {
namespace {

const Backend* Fused() { return BackendRegistry::Default().Find("fused"); }

#define ATTN_REQUIRE_FUSED()                                                      \
  do {                                                                            \
    if (!BuiltWithCuda()) GTEST_SKIP() << "built without CUDA: no fused backend"; \
  } while (0)

// The tensor-core kernels this GPU can run for `dtype` and `head_dim`: mma.sync and split-KV
// always (split-KV takes any shape when forced), the two wgmma kernels too on compute capability
// 9.0 where the build has them. float32 has one kernel (nullopt: automatic).
std::vector<std::optional<FusedPath>> PathsFor(DType dtype, int64_t head_dim) {
  if (dtype == DType::kFloat32) return {std::nullopt};
  std::vector<std::optional<FusedPath>> paths = {FusedPath::kMmaSync, FusedPath::kSplitKv};
  const DeviceInfo& d = SharedGpuContext()->info();
  if (FusedWgmmaBuilt(static_cast<int>(head_dim)) && d.cc_major == 9 && d.cc_minor == 0) {
    paths.push_back(FusedPath::kWgmma);
    paths.push_back(FusedPath::kWgmmaWs);
  }
  return paths;
}

std::string PathName(std::optional<FusedPath> path) {
  return path.has_value() ? std::string(FusedPathName(*path)) : "auto";
}

// Forces the fused backend onto one kernel for a scope.
class ScopedPath {
 public:
  explicit ScopedPath(std::optional<FusedPath> path) { SetFusedPathOverride(path); }
  ~ScopedPath() { SetFusedPathOverride(std::nullopt); }
};

// The fused output of `in` on `path` (nullopt: the automatic choice); empty if the call failed.
std::vector<double> RunOn(const Inputs& in, std::optional<FusedPath> path) {
  ScopedPath scoped(path);
  auto out = RunOnGpu(in, "fused");
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : std::vector<double>{};
}

TEST(FusedSupport, NeedsACudaDeviceOfAmpereOrNewer) {
  ATTN_REQUIRE_FUSED();
  const auto p = AttentionProblem::SelfAttention(1, 8, 1, 64, DType::kBFloat16);
  absl::Status s = Fused()->CheckSupport(p, CpuDeviceInfo());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "fused: needs a CUDA device");
  s = Fused()->CheckSupport(p, FakeGpu(7, 5));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(
      s.message(),
      "fused: needs compute capability >= 8.0 (cp.async, bf16/fp16 mma.sync); device has 7.5");
  EXPECT_TRUE(Fused()->CheckSupport(p, FakeGpu(8, 9)).ok());
  EXPECT_TRUE(Fused()->CheckSupport(p, FakeGpu(9, 0)).ok());
}

TEST(FusedSupport, TakesEveryDtypeAndTheCompiledHeadDimsOnly) {
  ATTN_REQUIRE_FUSED();
  for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    for (int64_t h : {32, 64, 96, 128, 256}) {
      const auto p = AttentionProblem::SelfAttention(2, 100, 4, h, dtype, true, 1);
      EXPECT_TRUE(Fused()->CheckSupport(p, FakeGpu(9, 0)).ok()) << p.ToString();
    }
    for (int64_t h : {8, 16, 80, 120, 160, 512}) {
      const auto p = AttentionProblem::SelfAttention(1, 16, 2, h, dtype);
      const absl::Status s = Fused()->CheckSupport(p, FakeGpu(9, 0));
      EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_EQ(s.message(), "fused: head_dim " + std::to_string(h) +
                                 " is not compiled; supported: 32, 64, 96, 128, 256");
    }
  }
}

TEST(FusedSupport, RefusesGridsBeyondCudasLimits) {
  ATTN_REQUIRE_FUSED();
  auto p = AttentionProblem::SelfAttention(1, 1, 65536, 32, DType::kBFloat16);
  ASSERT_TRUE(ValidateProblem(p).ok());
  EXPECT_EQ(Fused()->CheckSupport(p, FakeGpu(9, 0)).message(),
            "fused: batch (1) and num_heads (65536) must be <= 65535 (one grid dimension each)");
}

TEST(FusedWorkspace, IsZeroButForSplitKvPartials) {
  ATTN_REQUIRE_FUSED();
  // Prefill kernels need none; split-KV's partial outputs are sized by heuristics.h (its
  // tests), and on a device only: this machine's context has no shared memory to plan for.
  const auto p = AttentionProblem::SelfAttention(4, 8192, 16, 128, DType::kBFloat16, true);
  EXPECT_EQ(Fused()->WorkspaceBytes(p, SharedCpuContext()).value(), 0);
  AttentionProblem decode = ProblemOf({1, 1, 32768, 32, 1, 128}, DType::kFloat32, false);
  EXPECT_EQ(Fused()->WorkspaceBytes(decode, SharedCpuContext()).value(), 0);  // float32: one kernel
}

// The awkward sizes, H = 80 as 96 (80 is not compiled: see TakesEveryDtype...), then: long key
// sequences (many K/V tiles, S not a multiple of any tile); decode, a few queries against long
// keys with GQA groups packed into one block's rows; over 128 key splits (261 on 132 SMs, two
// blocks each), where the merge's warps take over 32 each.
const std::vector<Shape> kShapes = AwkwardShapes(96, {{1, 5, 2048, 2, 2, 64},
                                                      {1, 3, 13000, 2, 1, 32},
                                                      {1, 300, 300, 2, 1, 256},
                                                      {3, 1, 5000, 8, 2, 128},
                                                      {2, 16, 3000, 8, 2, 64},
                                                      {1, 4, 1500, 4, 4, 256},
                                                      {2, 2, 700, 6, 2, 96},
                                                      {1, 16, 100000, 2, 1, 64}});

class FusedVersusReference : public ::testing::TestWithParam<DtypeShapeCausal> {};

TEST_P(FusedVersusReference, WithinToleranceAndAtMostTwiceTheNaiveError) {
  ATTN_REQUIRE_GPU();
  const auto [dtype, sh, causal] = GetParam();
  const Inputs in = RandomInputs(ProblemOf(sh, dtype, causal), 31);
  const std::vector<double> ref = Reference(in);
  auto naive = NaiveComparison(in, ref);
  ASSERT_TRUE(naive.ok()) << naive.status();
  for (const auto path : PathsFor(dtype, sh.h)) {
    SCOPED_TRACE(PathName(path));
    ScopedPath scoped(path);
    auto checked = RunVersusReference("fused", in, ref, &*naive);
    ASSERT_TRUE(checked.ok()) << checked.status();
    RecordProperty("rel_l2_" + PathName(path), std::to_string(checked->comparison.rel_l2));
  }
  RecordProperty("naive_rel_l2", std::to_string(naive->rel_l2));
}

INSTANTIATE_TEST_SUITE_P(AwkwardShapes, FusedVersusReference,
                         ::testing::Combine(::testing::Values(DType::kFloat32, DType::kBFloat16,
                                                              DType::kFloat16),
                                            ::testing::ValuesIn(kShapes), ::testing::Bool()),
                         DtypeShapeCausalName);

// Sizes too large for the float64 loop: against the naive backend in true float32 on the same
// (exactly representable) values, whose error vs float64 is ~1e-6, far below bf16's.
class FusedVersusNaiveFloat32 : public ::testing::TestWithParam<DtypeShapeCausal> {};

TEST_P(FusedVersusNaiveFloat32, WithinTolerance) {
  ATTN_REQUIRE_GPU();
  const auto [dtype, sh, causal] = GetParam();
  const AttentionProblem p = ProblemOf(sh, dtype, causal);
  Inputs in = RandomInputs(p, 32);
  Inputs wide = in;
  wide.problem.dtype = DType::kFloat32;
  wide.q = MakeOperand(in.q.values, DType::kFloat32);
  wide.k = MakeOperand(in.k.values, DType::kFloat32);
  wide.v = MakeOperand(in.v.values, DType::kFloat32);
  auto ref = RunOnGpu(wide, "naive");
  ASSERT_TRUE(ref.ok()) << ref.status();
  for (const auto path : PathsFor(dtype, sh.h)) {
    SCOPED_TRACE(PathName(path));
    ScopedPath scoped(path);
    auto out = RunOnGpu(in, "fused");
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectWithin(*out, *ref, ToleranceFor(dtype),
                 "fused " + p.ToString() + " beside naive float32");
  }
}

const Shape kLargeShapes[] = {
    {2, 1536, 1536, 4, 1, 128},
    {1, 2000, 3000, 4, 2, 64},
    {1, 1100, 1100, 2, 2, 256},
    // More query tiles than an H100/H200 has SMs (512 and 384): the warp-specialised kernel is the
    // automatic choice, and its persistent builds' blocks take several items each, of different
    // lengths when causal.
    {8, 1000, 1000, 8, 2, 128},
    {4, 700, 900, 16, 4, 96},
    // Causal, 81 (head, batch) pairs of 8 query tiles: on 132 SMs the warp-specialised kernel's
    // items go out in two groups of 40 and 41 pairs (WsHeadGroup), the last taking the rest.
    {9, 1000, 1000, 9, 3, 64},
};

INSTANTIATE_TEST_SUITE_P(LargeShapes, FusedVersusNaiveFloat32,
                         ::testing::Combine(::testing::Values(DType::kBFloat16, DType::kFloat16),
                                            ::testing::ValuesIn(kLargeShapes), ::testing::Bool()),
                         DtypeShapeCausalName);

TEST(FusedBackend, ExplicitScaleMatchesReference) {
  ATTN_REQUIRE_GPU();
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    auto p = AttentionProblem::SelfAttention(2, 77, 4, 64, dtype, true, 2);
    p.scale = 0.31;
    Inputs in = RandomInputs(p, 33);
    auto out = RunOnGpu(in, "fused");
    ASSERT_TRUE(out.ok()) << out.status();
    const Comparison c = Compare(*out, Reference(in), ToleranceFor(p.dtype));
    EXPECT_TRUE(c.within) << p.ToString() << ": " << c.ToString();
  }
}

TEST(FusedBackend, RepeatedRunsAreBitwiseIdentical) {
  ATTN_REQUIRE_GPU();
  // No atomics and a fixed reduction order: the same inputs give the same bits.
  for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    const auto p = AttentionProblem::SelfAttention(2, 300, 8, 128, dtype, true, 2);
    Inputs in = RandomInputs(p, 34);
    for (const auto path : PathsFor(dtype, p.head_dim)) {
      ScopedPath scoped(path);
      auto a = RunOnGpu(in, "fused");
      auto b = RunOnGpu(in, "fused");
      ASSERT_TRUE(a.ok() && b.ok());
      EXPECT_EQ(*a, *b) << DTypeName(dtype) << " " << PathName(path);
    }
  }
}

TEST(FusedBackend, PicksAWgmmaKernelOnHopperWhereBuilt) {
  ATTN_REQUIRE_GPU();
  const auto small = AttentionProblem::SelfAttention(2, 300, 8, 128, DType::kBFloat16, true, 2);
  const auto paths = PathsFor(small.dtype, small.head_dim);
  if (std::find(paths.begin(), paths.end(), FusedPath::kWgmma) == paths.end()) {
    GTEST_SKIP() << "no wgmma kernel here: it needs compute capability 9.0 and a build for "
                    "sm_90a";
  }
  // The kernels round differently, so the automatic choice shows itself in the output bits:
  // the cp.async wgmma kernel below a wave of 128-row query tiles (3 x 8 x 2 = 48 here), the
  // warp-specialised one from a wave on (16 x 8 x 2 = 256, more than any H100/H200 has SMs).
  const Inputs few = RandomInputs(small, 37);
  const std::vector<double> automatic = RunOn(few, std::nullopt);
  EXPECT_EQ(automatic, RunOn(few, FusedPath::kWgmma));
  EXPECT_NE(automatic, RunOn(few, FusedPath::kMmaSync))
      << "the two kernels gave identical bits: is wgmma running?";
  const auto large = AttentionProblem::SelfAttention(2, 2048, 8, 128, DType::kBFloat16, true, 2);
  const Inputs many = RandomInputs(large, 39);
  const std::vector<double> automatic_large = RunOn(many, std::nullopt);
  EXPECT_EQ(automatic_large, RunOn(many, FusedPath::kWgmmaWs));
  EXPECT_NE(automatic_large, RunOn(many, FusedPath::kWgmma))
      << "identical bits: is the warp-specialised kernel running?";
}

TEST(FusedBackend, PicksSplitKvForShortQueries) {
  ATTN_REQUIRE_GPU();
  // Decode: T * group = 4 packed rows per K/V head. The kernels round differently, so the
  // automatic choice shows itself in the output bits.
  const AttentionProblem p = ProblemOf({2, 1, 4000, 16, 4, 128}, DType::kBFloat16, false);
  const Inputs in = RandomInputs(p, 38);
  const std::vector<double> automatic = RunOn(in, std::nullopt);
  EXPECT_EQ(automatic, RunOn(in, FusedPath::kSplitKv));
  EXPECT_NE(automatic, RunOn(in, FusedPath::kMmaSync))
      << "identical bits: is the split-KV kernel running?";
}

TEST(FusedBackend, SplitKvGivesTheSameBitsAtEveryForcedStageDepth) {
  ATTN_REQUIRE_GPU();
  // The stage depth only moves where tiles wait in shared memory, never the order of the
  // arithmetic, so every depth the TMA path may be forced to (SetSplitKvStagesOverride) must give
  // the automatic plan's bits: decode with one and with several splits, 16 queries (four row
  // slices), ragged lengths ending inside a tile, and one key. Where the plan has no TMA (other
  // GPUs), the override leaves it alone and the bits are trivially the same.
  const Shape shapes[] = {{16, 1, 4000, 16, 4, 128},
                          {1, 1, 9000, 32, 8, 128},
                          {2, 16, 2000, 16, 4, 64},
                          {3, 1, 1, 8, 2, 128}};
  for (const Shape& sh : shapes) {
    for (bool ragged : {false, true}) {
      AttentionProblem p = ProblemOf(sh, DType::kBFloat16, false);
      if (ragged) p = WithRandomKvLens(p, static_cast<uint64_t>(sh.s));
      const Inputs in = RandomInputs(p, 41);
      const std::vector<double> automatic = RunOn(in, FusedPath::kSplitKv);
      ASSERT_FALSE(automatic.empty()) << p.ToString();
      EXPECT_TRUE(Compare(automatic, Reference(in), ToleranceFor(p.dtype)).within) << p.ToString();
      for (int stages = 2; stages <= kSplitKvMaxTmaStages; ++stages) {
        SetSplitKvStagesOverride(stages);
        const std::vector<double> forced = RunOn(in, FusedPath::kSplitKv);
        SetSplitKvStagesOverride(std::nullopt);
        EXPECT_EQ(forced, automatic) << p.ToString() << " at " << stages << " stages";
      }
    }
  }
}

TEST(FusedBackend, KvLensOnEveryKernel) {
  ATTN_REQUIRE_GPU();
  // Per-sequence lengths (1 and S among them) on each tensor-core kernel this GPU has, decode and
  // prefill shapes, causal and not; kv_lens_test.cc covers the automatic choice per shape.
  const Shape shapes[] = {{4, 1, 700, 8, 2, 128},
                          {3, 16, 300, 8, 2, 64},
                          {3, 130, 260, 4, 4, 96},
                          {2, 70, 200, 4, 1, 256}};
  for (const Shape& sh : shapes) {
    for (bool causal : {false, true}) {
      const AttentionProblem p =
          WithRandomKvLens(ProblemOf(sh, DType::kBFloat16, causal), static_cast<uint64_t>(sh.s));
      const Inputs in = RandomInputs(p, 39);
      const std::vector<double> ref = Reference(in);
      for (const auto path : PathsFor(p.dtype, p.head_dim)) {
        SCOPED_TRACE(PathName(path));
        ScopedPath scoped(path);
        auto out = RunOnGpu(in, "fused");
        ASSERT_TRUE(out.ok()) << p.ToString() << ": " << out.status();
        const Comparison c = Compare(*out, ref, ToleranceFor(p.dtype));
        EXPECT_TRUE(c.within) << p.ToString() << ": " << c.ToString();
      }
    }
  }
}

TEST(FusedBackend, ReadsStridedKvWithoutCopies) {
  ATTN_REQUIRE_GPU();
  const auto p = AttentionProblem::SelfAttention(2, 140, 8, 64, DType::kBFloat16, true, 2);
  for (const auto path : PathsFor(p.dtype, p.head_dim)) {
    SCOPED_TRACE(PathName(path));
    ScopedPath scoped(path);
    ExpectStridedKvMatchesReference(*Fused(), p, 35);
  }
}

TEST(FusedBackend, RefusesHalfRowsThatAreNot16ByteAligned) {
  ATTN_REQUIRE_FUSED();
  // Refused before anything reaches a device, so host bytes stand in for device memory.
  const auto p = AttentionProblem::SelfAttention(1, 16, 2, 32, DType::kFloat16);
  const int64_t bytes = QueryElements(p) * 2;
  alignas(16) static char buffer[4 * 2048 + 64];
  auto view = [&](int i) {
    return TensorView::Contiguous(buffer + i * bytes, bytes, p.dtype, MemoryKind::kDevice, 1, 16, 2,
                                  32);
  };
  AttentionTensors t{view(0), view(1), view(2), view(3)};
  t.k.data = buffer + bytes + 2;  // one element off
  const absl::Status s = Fused()->Run({p, t, nullptr, 0, SharedCpuContext()});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "fused: k needs a 16-byte aligned base and batch/row/head strides that are multiples "
            "of 8 elements (16-byte cp.async copies); got strides (1024, 64, 32)");
}

TEST(FusedBackend, AgreesWithCpuBackendOnTheCodelabShape) {
  ATTN_REQUIRE_GPU();
  // The codelab's default (B, T, N, H) = (4, 128, 8, 64), float32 as its fused cell runs.
  const auto p = AttentionProblem::SelfAttention(4, 128, 8, 64, DType::kFloat32);
  Inputs in = RandomInputs(p, 36);
  auto gpu = RunOnGpu(in, "fused");
  auto cpu = RunOnCpu(in);
  ASSERT_TRUE(gpu.ok() && cpu.ok());
  const Comparison c = Compare(*gpu, *cpu, ToleranceFor(p.dtype));
  EXPECT_TRUE(c.within) << c.ToString();
}

}  // namespace
}  // namespace attn::testing
