// The naive CUDA backend: support rules and workspace (any machine), numerics on the GPU.
#include <cmath>
#include <string>
#include <vector>

#include "attn/attention.h"
#include "attn/registry.h"
#include "engine/test_util.h"
#include "gtest/gtest.h"

namespace attn::testing {
namespace {

const Backend* Naive() { return BackendRegistry::Default().Find("naive"); }

#define ATTN_REQUIRE_NAIVE()                                                      \
  do {                                                                            \
    if (!BuiltWithCuda()) GTEST_SKIP() << "built without CUDA: no naive backend"; \
  } while (0)

TEST(NaiveSupport, NeedsACudaDevice) {
  ATTN_REQUIRE_NAIVE();
  const auto p = AttentionProblem::SelfAttention(1, 8, 1, 8, DType::kFloat32);
  const absl::Status s = Naive()->CheckSupport(p, CpuDeviceInfo());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "naive: needs a CUDA device");
}

TEST(NaiveSupport, HalfTypesNeedAmpere) {
  ATTN_REQUIRE_NAIVE();
  const auto p = AttentionProblem::SelfAttention(1, 8, 1, 8, DType::kBFloat16);
  const absl::Status s = Naive()->CheckSupport(p, FakeGpu(7, 5));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "naive: bfloat16 GEMMs need compute capability >= 8.0; device has 7.5");
  EXPECT_TRUE(Naive()->CheckSupport(p, FakeGpu(8, 9)).ok());
  auto fp32 = p;
  fp32.dtype = DType::kFloat32;
  EXPECT_TRUE(Naive()->CheckSupport(fp32, FakeGpu(7, 5)).ok());
}

TEST(NaiveSupport, HeadDimAboveCublasLimitIsRefused) {
  ATTN_REQUIRE_NAIVE();
  auto p = AttentionProblem::SelfAttention(1, 1, 4, int64_t{1} << 30, DType::kFloat32);
  ASSERT_TRUE(ValidateProblem(p).ok());
  const absl::Status s = Naive()->CheckSupport(p, FakeGpu(9, 0));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "naive: num_heads * head_dim (leading dimension of q/out) = 4294967296 exceeds "
            "cuBLAS's int32 limit (2147483647)");
}

TEST(NaiveWorkspace, IsTheScoreMatrixPlusPointerArrays) {
  ATTN_REQUIRE_NAIVE();
  auto p = AttentionProblem::SelfAttention(4, 1024, 8, 64, DType::kBFloat16);
  // 4*8*1024*1024 float32 scores, then 5 pointers per (b, n).
  EXPECT_EQ(Naive()->WorkspaceBytes(p, SharedCpuContext()).value(),
            int64_t{4} * 8 * 1024 * 1024 * 4 + 5 * 8 * 32);
  p.kv_len = 17;  // 4*8*1024*17*4 = 2228224, a multiple of 256
  EXPECT_EQ(Naive()->WorkspaceBytes(p, SharedCpuContext()).value(), int64_t{2228224} + 5 * 8 * 32);
  p.q_len = 1;  // 4*8*17*4 = 2176 rounds up to 2304
  EXPECT_EQ(Naive()->WorkspaceBytes(p, SharedCpuContext()).value(), int64_t{2304} + 5 * 8 * 32);
}

// The awkward sizes, and one shape per softmax path beyond them: warp-resident rows of 16 and 32
// float4 per lane, the shared-memory row cache with S % 4 == 0, and a row too long to cache (two
// passes).
const std::vector<Shape> kShapes = AwkwardShapes(80, {{1, 5, 2048, 2, 2, 64},
                                                      {1, 9, 4000, 2, 1, 32},
                                                      {1, 4, 6000, 2, 2, 32},
                                                      {1, 3, 13000, 2, 1, 32}});

class NaiveVersusReference : public ::testing::TestWithParam<DtypeShapeCausal> {};

TEST_P(NaiveVersusReference, MatchesWithinDtypeTolerance) {
  ATTN_REQUIRE_GPU();
  const auto [dtype, sh, causal] = GetParam();
  const Inputs in = RandomInputs(ProblemOf(sh, dtype, causal), 11);
  auto checked = RunVersusReference("naive", in, Reference(in));
  ASSERT_TRUE(checked.ok()) << checked.status();
  RecordProperty("rel_l2", std::to_string(checked->comparison.rel_l2));
}

INSTANTIATE_TEST_SUITE_P(AwkwardShapes, NaiveVersusReference,
                         ::testing::Combine(::testing::Values(DType::kFloat32, DType::kBFloat16,
                                                              DType::kFloat16),
                                            ::testing::ValuesIn(kShapes), ::testing::Bool()),
                         DtypeShapeCausalName);

TEST(NaiveBackend, ExplicitScaleMatchesReference) {
  ATTN_REQUIRE_GPU();
  auto p = AttentionProblem::SelfAttention(2, 33, 4, 64, DType::kFloat32, true);
  p.scale = 0.37;
  Inputs in = RandomInputs(p, 12);
  auto out = RunOnGpu(in, "naive");
  ASSERT_TRUE(out.ok()) << out.status();
  const Comparison c = Compare(*out, Reference(in), ToleranceFor(p.dtype));
  EXPECT_TRUE(c.within) << c.ToString();
}

TEST(NaiveBackend, AgreesWithCpuBackendOnTheCodelabShape) {
  ATTN_REQUIRE_GPU();
  // The codelab's default (B, T, N, H) = (4, 128, 8, 64), in float32 as its naive cell runs.
  const auto p = AttentionProblem::SelfAttention(4, 128, 8, 64, DType::kFloat32);
  Inputs in = RandomInputs(p, 13);
  auto gpu = RunOnGpu(in, "naive");
  auto cpu = RunOnCpu(in);
  ASSERT_TRUE(gpu.ok() && cpu.ok());
  const Comparison c = Compare(*gpu, *cpu, ToleranceFor(p.dtype));
  EXPECT_TRUE(c.within) << c.ToString();
}

TEST(NaiveBackend, RepeatedRunsAreBitwiseIdentical) {
  ATTN_REQUIRE_GPU();
  const auto p = AttentionProblem::SelfAttention(2, 300, 8, 64, DType::kBFloat16, true, 2);
  Inputs in = RandomInputs(p, 14);
  auto a = RunOnGpu(in, "naive");
  auto b = RunOnGpu(in, "naive");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
}

TEST(NaiveBackend, RefusesAWorkspaceSmallerThanReported) {
  ATTN_REQUIRE_GPU();
  DeviceContext& gpu = *SharedGpuContext();
  const auto p = AttentionProblem::SelfAttention(1, 16, 2, 32, DType::kFloat32);
  const int64_t need = Naive()->WorkspaceBytes(p, SharedCpuContext()).value();
  auto ws = gpu.arena().Allocate(need);
  auto io = gpu.arena().Allocate(4 * QueryElements(p) * 4);
  ASSERT_TRUE(ws.ok() && io.ok());
  char* base = static_cast<char*>(io->data());
  const int64_t bytes = QueryElements(p) * 4;
  auto view = [&](int i) {
    return TensorView::Contiguous(base + i * bytes, bytes, p.dtype, MemoryKind::kDevice, 1, 16, 2,
                                  32);
  };
  AttentionTensors t{view(0), view(1), view(2), view(3)};
  const absl::Status s = Naive()->Run({p, t, ws->data(), need - 1, gpu});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("smaller than the"), absl::string_view::npos) << s;
}

TEST(NaiveBackend, ReadsStridedKvWithoutCopies) {
  ATTN_REQUIRE_GPU();
  ExpectStridedKvMatchesReference(
      *Naive(), AttentionProblem::SelfAttention(2, 40, 8, 64, DType::kBFloat16, true, 2), 15);
}

}  // namespace
}  // namespace attn::testing
