// The cudnn backend: cuDNN's rules as reasons (any machine), numerics and the plan cache on the
// GPU.
#include <cmath>
#include <vector>

#include "attn/attention.h"
#include "attn/registry.h"
#include "engine/test_util.h"
#include "gtest/gtest.h"

namespace attn::testing {
namespace {

const Backend* Cudnn() { return BackendRegistry::Default().Find("cudnn"); }

#define ATTN_REQUIRE_CUDNN()                                                         \
  do {                                                                               \
    if (!ATTN_HAVE_CUDNN) GTEST_SKIP() << "built without cuDNN (ATTN_ENABLE_CUDNN)"; \
  } while (0)

TEST(CudnnSupport, Float32IsRefusedWithTheCodelabsReason) {
  ATTN_REQUIRE_CUDNN();
  const auto p = AttentionProblem::SelfAttention(4, 128, 8, 64, DType::kFloat32);
  const absl::Status s = Cudnn()->CheckSupport(p, FakeGpu(9, 0));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "cudnn: cuDNN SDPA requires bfloat16 or float16 input; got float32");
  // "auto" does not fail: it falls through to a backend that takes float32.
  auto picked = BackendRegistry::Default().Resolve("auto", p, FakeGpu(9, 0));
  ASSERT_TRUE(picked.ok());
  EXPECT_NE((*picked)->name(), "cudnn");
}

TEST(CudnnSupport, StatesDeviceAndHeadDimRules) {
  ATTN_REQUIRE_CUDNN();
  auto p = AttentionProblem::SelfAttention(1, 64, 4, 64, DType::kBFloat16);
  EXPECT_EQ(Cudnn()->CheckSupport(p, FakeGpu(7, 5)).message(),
            "cudnn: cuDNN flash attention needs compute capability >= 8.0; device has 7.5");
  EXPECT_EQ(Cudnn()->CheckSupport(p, CpuDeviceInfo()).message(), "cudnn: needs a CUDA device");
  p.head_dim = 20;
  EXPECT_EQ(Cudnn()->CheckSupport(p, FakeGpu(9, 0)).message(),
            "cudnn: head_dim must be a multiple of 8; got 20");
  p.head_dim = 256;
  EXPECT_TRUE(Cudnn()->CheckSupport(p, FakeGpu(9, 0)).ok());
  EXPECT_EQ(Cudnn()->CheckSupport(p, FakeGpu(8, 9)).message(),
            "cudnn: head_dim must be <= 128 on compute capability 8.9; got 256");
  p.head_dim = 264;
  EXPECT_EQ(Cudnn()->CheckSupport(p, FakeGpu(9, 0)).message(),
            "cudnn: head_dim must be <= 256 on compute capability 9.0; got 264");
}

class CudnnVersusReference : public ::testing::TestWithParam<DtypeShapeCausal> {};

TEST_P(CudnnVersusReference, WithinToleranceAndAtMostTwiceTheNaiveError) {
  ATTN_REQUIRE_CUDNN();
  ATTN_REQUIRE_GPU();
  const auto [dtype, sh, causal] = GetParam();
  const AttentionProblem p = ProblemOf(sh, dtype, causal);
  // H = 256 is Hopper's only (an L4, or a run capped at sm_89, refuses it).
  if (auto s = Cudnn()->CheckSupport(p, SharedGpuContext()->info()); IsUnsupported(s)) {
    GTEST_SKIP() << s.message();
  }
  const Inputs in = RandomInputs(p, 21);
  const std::vector<double> ref = Reference(in);
  auto naive = NaiveComparison(in, ref);
  ASSERT_TRUE(naive.ok()) << naive.status();
  auto checked = RunVersusReference("cudnn", in, ref, &*naive);
  ASSERT_TRUE(checked.ok()) << checked.status();
}

INSTANTIATE_TEST_SUITE_P(AwkwardShapes, CudnnVersusReference,
                         ::testing::Combine(::testing::Values(DType::kBFloat16, DType::kFloat16),
                                            ::testing::ValuesIn(kAwkwardShapes), ::testing::Bool()),
                         DtypeShapeCausalName);

TEST(CudnnBackend, CloseToNaiveBf16AtTheCodelabShape) {
  ATTN_REQUIRE_CUDNN();
  ATTN_REQUIRE_GPU();
  // The seed's check: cuDNN vs naive-bf16 outputs close at rtol = atol = 1e-2.
  const auto p = AttentionProblem::SelfAttention(4, 128, 8, 64, DType::kBFloat16);
  Inputs in = RandomInputs(p, 22);
  auto a = RunOnGpu(in, "cudnn");
  auto b = RunOnGpu(in, "naive");
  ASSERT_TRUE(a.ok() && b.ok());
  const Comparison c = Compare(*a, *b, {1e-2, 1e-2, 1.0});
  EXPECT_TRUE(c.within) << c.ToString();
}

TEST(CudnnBackend, CausalChangesRowZeroAndKeepsTheLastRow) {
  ATTN_REQUIRE_CUDNN();
  ATTN_REQUIRE_GPU();
  auto p = AttentionProblem::SelfAttention(2, 256, 4, 64, DType::kBFloat16);
  Inputs in = RandomInputs(p, 23);
  auto full = RunOnGpu(in, "cudnn");
  in.problem.causal = true;
  auto causal = RunOnGpu(in, "cudnn");
  ASSERT_TRUE(full.ok() && causal.ok());
  const int64_t T = p.q_len, NH = p.num_heads * p.head_dim;
  double first = 0, last = 0;
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t i = 0; i < NH; ++i) {
      first = std::fmax(first, std::fabs((*full)[(b * T) * NH + i] - (*causal)[(b * T) * NH + i]));
      last = std::fmax(
          last, std::fabs((*full)[(b * T + T - 1) * NH + i] - (*causal)[(b * T + T - 1) * NH + i]));
    }
  EXPECT_GT(first, 0.1) << "masking did not change the first position";
  EXPECT_LE(last, 1e-2) << "the last position sees every key either way";
}

TEST(CudnnBackend, PlanCacheBuildsOncePerKey) {
  ATTN_REQUIRE_CUDNN();
  ATTN_REQUIRE_GPU();
  DeviceContext& gpu = *SharedGpuContext();
  const auto p = AttentionProblem::SelfAttention(1, 96, 2, 64, DType::kFloat16, true);
  Inputs in = RandomInputs(p, 24);
  const PlanCacheStats before = Cudnn()->plan_cache_stats(gpu).value();
  ASSERT_TRUE(RunOnGpu(in, "cudnn").ok());
  const PlanCacheStats once = Cudnn()->plan_cache_stats(gpu).value();
  ASSERT_TRUE(RunOnGpu(in, "cudnn").ok());
  const PlanCacheStats twice = Cudnn()->plan_cache_stats(gpu).value();
  EXPECT_EQ(once.misses, before.misses + 1);  // built once (by WorkspaceBytes)
  EXPECT_EQ(twice.misses, once.misses);       // then only hits
  EXPECT_GE(twice.hits, once.hits + 2);       // workspace query and run
  EXPECT_GT(once.build_seconds, before.build_seconds);
  EXPECT_EQ(twice.entries, once.entries);
}

TEST(CudnnBackend, AutotuneGivesTheSameResult) {
  ATTN_REQUIRE_CUDNN();
  ATTN_REQUIRE_GPU();
  DeviceContext& gpu = *SharedGpuContext();
  const auto p = AttentionProblem::SelfAttention(2, 512, 4, 128, DType::kBFloat16, true, 2);
  Inputs in = RandomInputs(p, 25);
  auto heuristic = RunOnGpu(in, "cudnn");
  ASSERT_TRUE(heuristic.ok());
  const int64_t e = DTypeSize(p.dtype), qb = QueryElements(p) * e, kvb = KeyValueElements(p) * e;
  auto block = gpu.arena().Allocate(2 * qb + 2 * kvb);
  ASSERT_TRUE(block.ok());
  char* base = static_cast<char*>(block->data());
  ASSERT_TRUE(gpu.CopyToDevice(base, in.q.bytes.data(), qb).ok());
  ASSERT_TRUE(gpu.CopyToDevice(base + qb, in.k.bytes.data(), kvb).ok());
  ASSERT_TRUE(gpu.CopyToDevice(base + qb + kvb, in.v.bytes.data(), kvb).ok());
  const AttentionTensors t =
      PackedTensors(p, MemoryKind::kDevice, base, base + qb, base + qb + kvb, base + qb + 2 * kvb);
  RunOptions tuned;
  tuned.autotune = true;
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(RunAttention(*Cudnn(), p, t, gpu, tuned).ok());
  std::vector<uint8_t> out(static_cast<size_t>(qb));
  ASSERT_TRUE(gpu.CopyToHost(out.data(), base + qb + 2 * kvb, qb).ok());
  const Comparison c = Compare(Decode(out, p.dtype), *heuristic, ToleranceFor(p.dtype));
  EXPECT_TRUE(c.within) << c.ToString();
  EXPECT_TRUE(Compare(Decode(out, p.dtype), Reference(in), ToleranceFor(p.dtype)).within);
}

TEST(CudnnBackend, ExplicitScaleMatchesReference) {
  ATTN_REQUIRE_CUDNN();
  ATTN_REQUIRE_GPU();
  auto p = AttentionProblem::SelfAttention(2, 77, 4, 64, DType::kBFloat16, true, 2);
  p.scale = 0.31;
  Inputs in = RandomInputs(p, 26);
  auto out = RunOnGpu(in, "cudnn");
  ASSERT_TRUE(out.ok()) << out.status();
  const Comparison c = Compare(*out, Reference(in), ToleranceFor(p.dtype));
  EXPECT_TRUE(c.within) << c.ToString();
}

TEST(CudnnBackend, ReadsAPackedQkvBufferByStrides) {
  ATTN_REQUIRE_CUDNN();
  ATTN_REQUIRE_GPU();
  // q, k, v as slices of one (B, T, 3, N, H) buffer, the output of a fused QKV projection:
  // described to cuDNN by strides, nothing transposed or copied.
  DeviceContext& gpu = *SharedGpuContext();
  const auto p = AttentionProblem::SelfAttention(2, 130, 4, 64, DType::kFloat16, true);
  Inputs in = RandomInputs(p, 27);
  const int64_t nh = p.num_heads * p.head_dim, row = 3 * nh;
  std::vector<uint16_t> qkv(static_cast<size_t>(p.batch * p.q_len * row));
  const auto* q16 = reinterpret_cast<const uint16_t*>(in.q.bytes.data());
  const auto* k16 = reinterpret_cast<const uint16_t*>(in.k.bytes.data());
  const auto* v16 = reinterpret_cast<const uint16_t*>(in.v.bytes.data());
  for (int64_t bt = 0; bt < p.batch * p.q_len; ++bt)
    for (int64_t i = 0; i < nh; ++i) {
      qkv[bt * row + i] = q16[bt * nh + i];
      qkv[bt * row + nh + i] = k16[bt * nh + i];
      qkv[bt * row + 2 * nh + i] = v16[bt * nh + i];
    }
  const int64_t bytes = static_cast<int64_t>(qkv.size() * 2), out_bytes = QueryElements(p) * 2;
  auto block = gpu.arena().Allocate(bytes);
  auto out_block = gpu.arena().Allocate(out_bytes);
  ASSERT_TRUE(block.ok() && out_block.ok());
  ASSERT_TRUE(gpu.CopyToDevice(block->data(), qkv.data(), bytes).ok());
  char* base = static_cast<char*>(block->data());
  auto slice = [&](int which) {
    TensorView v;
    v.data = base + which * nh * 2;
    v.capacity_bytes = bytes - which * nh * 2;
    v.dtype = p.dtype;
    v.memory = MemoryKind::kDevice;
    v.shape = {p.batch, p.q_len, p.num_heads, p.head_dim};
    v.strides = {p.q_len * row, row, p.head_dim, 1};
    return v;
  };
  AttentionTensors t{
      slice(0), slice(1), slice(2),
      TensorView::Contiguous(out_block->data(), out_bytes, p.dtype, MemoryKind::kDevice, p.batch,
                             p.q_len, p.num_heads, p.head_dim)};
  ASSERT_TRUE(RunAttention(*Cudnn(), p, t, gpu).ok());
  std::vector<uint8_t> out(static_cast<size_t>(out_bytes));
  ASSERT_TRUE(gpu.CopyToHost(out.data(), out_block->data(), out_bytes).ok());
  const Comparison c = Compare(Decode(out, p.dtype), Reference(in), ToleranceFor(p.dtype));
  EXPECT_TRUE(c.within) << c.ToString();
}

}  // namespace
}  // namespace attn::testing
