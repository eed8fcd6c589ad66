// The host backends: `reference` (float64, what every backend is checked against) and `cpu`
// (float32 flash attention, the default without a GPU). Both on hand-checkable cases; the
// reference against an independent float64 triple loop; cpu against the reference over awkward
// shapes (T != S, H = 1 and 257, row and key tails, GQA/MQA, kv_lens, causal).
#include <algorithm>
#include <cmath>

#include "attn/attention.h"
#include "attn/registry.h"
#include "engine/test_util.h"
#include "gtest/gtest.h"

namespace attn::testing {
namespace {

// Index of element [b, l, head, h] of a packed (B, L, heads, H) tensor.
int64_t At(int64_t L, int64_t heads, int64_t H, int64_t b, int64_t l, int64_t head, int64_t h) {
  return ((b * L + l) * heads + head) * H + h;
}

// The hand-checkable cases, on each host backend.
class HostBackend : public ::testing::TestWithParam<std::string> {};

TEST_P(HostBackend, IdenticalKeysGiveTheMeanOfV) {
  auto p = AttentionProblem::SelfAttention(2, 9, 3, 16, DType::kFloat32);
  p.kv_len = 13;
  Inputs in = RandomInputs(p, 1);
  // Every key row equal: all scores of a query are equal, so the weights are uniform.
  std::vector<double> k = in.k.values;
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t s = 0; s < p.kv_len; ++s)
      for (int64_t n = 0; n < p.num_kv_heads; ++n)
        for (int64_t h = 0; h < p.head_dim; ++h)
          k[At(p.kv_len, p.num_kv_heads, p.head_dim, b, s, n, h)] =
              in.k.values[At(p.kv_len, p.num_kv_heads, p.head_dim, b, 0, n, h)];
  in.k = MakeOperand(k, p.dtype);
  auto out = RunOnCpu(in, GetParam());
  ASSERT_TRUE(out.ok()) << out.status();
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t t = 0; t < p.q_len; ++t)
      for (int64_t n = 0; n < p.num_heads; ++n)
        for (int64_t h = 0; h < p.head_dim; ++h) {
          double mean = 0;
          for (int64_t s = 0; s < p.kv_len; ++s)
            mean += in.v.values[At(p.kv_len, p.num_kv_heads, p.head_dim, b, s, n, h)];
          mean /= static_cast<double>(p.kv_len);
          EXPECT_NEAR((*out)[At(p.q_len, p.num_heads, p.head_dim, b, t, n, h)], mean, 1e-6);
        }
}

TEST_P(HostBackend, OneHotScoresPickOneRowOfV) {
  // Keys are the unit vectors e_s; query t is 1 * e_{(3t + 1) % S}; with scale 60 the chosen
  // key's logit beats every other by 60, so its weight is 1 - ~1e-25.
  const int64_t S = 8;
  AttentionProblem p = AttentionProblem::SelfAttention(1, 5, 2, S, DType::kFloat32);
  p.kv_len = S;
  p.scale = 60.0;
  Inputs in = RandomInputs(p, 2);
  std::vector<double> q(in.q.values.size(), 0.0), k(in.k.values.size(), 0.0);
  for (int64_t n = 0; n < p.num_heads; ++n) {
    for (int64_t s = 0; s < S; ++s) k[At(S, p.num_kv_heads, S, 0, s, n, s)] = 1.0;
    for (int64_t t = 0; t < p.q_len; ++t)
      q[At(p.q_len, p.num_heads, S, 0, t, n, (3 * t + 1) % S)] = 1.0;
  }
  in.q = MakeOperand(q, p.dtype);
  in.k = MakeOperand(k, p.dtype);
  auto out = RunOnCpu(in, GetParam());
  ASSERT_TRUE(out.ok()) << out.status();
  for (int64_t t = 0; t < p.q_len; ++t)
    for (int64_t n = 0; n < p.num_heads; ++n)
      for (int64_t h = 0; h < p.head_dim; ++h)
        EXPECT_NEAR((*out)[At(p.q_len, p.num_heads, S, 0, t, n, h)],
                    in.v.values[At(S, p.num_kv_heads, S, 0, (3 * t + 1) % S, n, h)], 1e-6);
}

TEST_P(HostBackend, CausalRowZeroEqualsFirstValueRow) {
  auto p = AttentionProblem::SelfAttention(2, 17, 4, 32, DType::kFloat32, /*causal=*/true);
  Inputs in = RandomInputs(p, 3);
  auto out = RunOnCpu(in, GetParam());
  ASSERT_TRUE(out.ok()) << out.status();
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t n = 0; n < p.num_heads; ++n)
      for (int64_t h = 0; h < p.head_dim; ++h)
        EXPECT_NEAR((*out)[At(p.q_len, p.num_heads, p.head_dim, b, 0, n, h)],
                    in.v.values[At(p.kv_len, p.num_kv_heads, p.head_dim, b, 0, n, h)], 1e-7);
  // And masking matters: the unmasked output of row 0 differs.
  p.causal = false;
  in.problem = p;
  auto full = RunOnCpu(in, GetParam());
  ASSERT_TRUE(full.ok());
  EXPECT_NE((*full)[0], (*out)[0]);
}

TEST_P(HostBackend, GqaEqualsMhaWithRepeatedKvHeads) {
  for (int64_t kv_heads : {2, 1}) {
    auto gqa = AttentionProblem::SelfAttention(2, 11, 8, 16, DType::kFloat32, false, kv_heads);
    gqa.kv_len = 7;
    Inputs in = RandomInputs(gqa, 4);
    auto mha = gqa;
    mha.num_kv_heads = gqa.num_heads;
    Inputs rep{mha, in.q, {}, {}};
    std::vector<double> k(KeyValueElements(mha)), v(KeyValueElements(mha));
    const int64_t group = gqa.num_heads / kv_heads;
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t s = 0; s < gqa.kv_len; ++s)
        for (int64_t n = 0; n < mha.num_heads; ++n)
          for (int64_t h = 0; h < 16; ++h) {
            k[At(gqa.kv_len, 8, 16, b, s, n, h)] =
                in.k.values[At(gqa.kv_len, kv_heads, 16, b, s, n / group, h)];
            v[At(gqa.kv_len, 8, 16, b, s, n, h)] =
                in.v.values[At(gqa.kv_len, kv_heads, 16, b, s, n / group, h)];
          }
    rep.k = MakeOperand(k, mha.dtype);
    rep.v = MakeOperand(v, mha.dtype);
    auto a = RunOnCpu(in, GetParam());
    auto b = RunOnCpu(rep, GetParam());
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(*a, *b) << "K=" << kv_heads;
  }
}

TEST_P(HostBackend, StridedViewsMatchPackedOnes) {
  // q, k and v as slices of one packed (B, T, 3, N, H) buffer, the layout a fused QKV
  // projection produces: strides describe it, nothing is copied.
  const auto p = AttentionProblem::SelfAttention(2, 10, 4, 16, DType::kFloat32, true);
  Inputs in = RandomInputs(p, 6);
  auto packed_out = RunOnCpu(in, GetParam());
  ASSERT_TRUE(packed_out.ok());

  const int64_t row = 3 * p.num_heads * p.head_dim;
  std::vector<float> qkv(static_cast<size_t>(p.batch * p.q_len * row));
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t t = 0; t < p.q_len; ++t)
      for (int64_t n = 0; n < p.num_heads; ++n)
        for (int64_t h = 0; h < p.head_dim; ++h) {
          const int64_t src = At(p.q_len, p.num_heads, p.head_dim, b, t, n, h);
          float* base = qkv.data() + (b * p.q_len + t) * row + n * p.head_dim + h;
          base[0] = static_cast<float>(in.q.values[src]);
          base[p.num_heads * p.head_dim] = static_cast<float>(in.k.values[src]);
          base[2 * p.num_heads * p.head_dim] = static_cast<float>(in.v.values[src]);
        }
  std::vector<float> out(static_cast<size_t>(QueryElements(p)), NAN);
  auto view = [&](float* data) {
    TensorView v;
    v.data = data;
    v.capacity_bytes = static_cast<int64_t>(qkv.size() * sizeof(float)) -
                       (data - qkv.data()) * static_cast<int64_t>(sizeof(float));
    v.dtype = p.dtype;
    v.shape = {p.batch, p.q_len, p.num_heads, p.head_dim};
    v.strides = {p.q_len * row, row, p.head_dim, 1};
    return v;
  };
  const int64_t nh = p.num_heads * p.head_dim;
  AttentionTensors t{
      view(qkv.data()), view(qkv.data() + nh), view(qkv.data() + 2 * nh),
      TensorView::Contiguous(out.data(), static_cast<int64_t>(out.size() * 4), p.dtype,
                             MemoryKind::kHost, p.batch, p.q_len, p.num_heads, p.head_dim)};
  auto ctx = DeviceContext::CreateCpu({int64_t{64} << 20});
  ASSERT_TRUE(ctx.ok());
  const Backend* backend = BackendRegistry::Default().Find(GetParam());
  ASSERT_TRUE(RunAttention(*backend, p, t, **ctx).ok());
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], (*packed_out)[i]) << i;
}

TEST_P(HostBackend, ExplicitScaleIsUsed) {
  auto p = AttentionProblem::SelfAttention(1, 6, 2, 8, DType::kFloat32);
  p.scale = 0.9;
  Inputs in = RandomInputs(p, 7);
  auto out = RunOnCpu(in, GetParam());
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(Compare(*out, Reference(in), ToleranceFor(p.dtype)).within);
  auto default_scale = in;
  default_scale.problem.scale.reset();
  const Comparison c = Compare(*out, Reference(default_scale), ToleranceFor(p.dtype));
  EXPECT_FALSE(c.within) << "scale 0.9 and 1/sqrt(8) gave the same output";
}

TEST_P(HostBackend, RepeatedRunsAndThreadCountsGiveTheSameBits) {
  const auto p = AttentionProblem::SelfAttention(3, 70, 4, 32, DType::kBFloat16, true, 2);
  Inputs in = RandomInputs(p, 8);
  auto a = RunOnCpu(in, GetParam());
  auto b = RunOnCpu(in, GetParam());
  RunOptions one_thread;
  one_thread.host_threads = 1;
  auto c = RunOnCpu(in, GetParam(), one_thread);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(*a, *c);
}

INSTANTIATE_TEST_SUITE_P(CpuAndReference, HostBackend, ::testing::Values("cpu", "reference"));

struct Shape {
  int64_t b, t, s, n, k, h;
  bool causal;
};
void PrintTo(const Shape& s, std::ostream* os) {
  *os << "B=" << s.b << " T=" << s.t << " S=" << s.s << " N=" << s.n << " K=" << s.k << " H=" << s.h
      << (s.causal ? " causal" : "");
}

std::string ShapeParamName(DType dtype, const Shape& s) {
  return ShapeName(dtype, s.b, s.t, s.s, s.n, s.k, s.h, s.causal);
}

class ReferenceVersusTripleLoop : public ::testing::TestWithParam<std::tuple<DType, Shape>> {};

TEST_P(ReferenceVersusTripleLoop, MatchesWithinDtypeTolerance) {
  const auto [dtype, sh] = GetParam();
  const AttentionProblem p =
      ProblemOf(attn::testing::Shape{sh.b, sh.t, sh.s, sh.n, sh.k, sh.h}, dtype, sh.causal);
  const Inputs in = RandomInputs(p, 5);
  // The reference's only rounding is the final one to the dtype.
  auto checked = RunVersusReference("reference", in, Reference(in));
  ASSERT_TRUE(checked.ok()) << checked.status();
}

INSTANTIATE_TEST_SUITE_P(AwkwardShapes, ReferenceVersusTripleLoop,
                         ::testing::Combine(::testing::Values(DType::kFloat32, DType::kBFloat16,
                                                              DType::kFloat16),
                                            ::testing::Values(Shape{1, 1, 1, 1, 1, 8, false},
                                                              Shape{2, 17, 17, 4, 4, 32, true},
                                                              Shape{1, 17, 40, 4, 1, 80, true},
                                                              Shape{2, 40, 17, 8, 2, 64, true},
                                                              Shape{1, 127, 127, 2, 2, 128, false},
                                                              Shape{1, 33, 20, 4, 4, 256, false})),
                         [](const auto& param_info) {
                           return ShapeParamName(std::get<0>(param_info.param),
                                                 std::get<1>(param_info.param));
                         });

// cpu against the reference backend on the same inputs, with and without kv_lens (batch element
// 0 sees 1 key, element 1 all S, others a random length; one element alone sees 2/3 of S).
class CpuVersusReference : public ::testing::TestWithParam<std::tuple<DType, Shape, bool>> {};

TEST_P(CpuVersusReference, WithinCpuTolerance) {
  const auto [dtype, sh, ragged] = GetParam();
  AttentionProblem p =
      ProblemOf(attn::testing::Shape{sh.b, sh.t, sh.s, sh.n, sh.k, sh.h}, dtype, sh.causal);
  if (ragged) {
    p = WithRandomKvLens(p, static_cast<uint64_t>(sh.t + sh.s));
    if (p.batch == 1) p.kv_lens[0] = static_cast<int32_t>((2 * sh.s + 2) / 3);
  }
  const Inputs in = RandomInputs(p, 9);
  auto want = RunOnCpu(in, "reference");
  ASSERT_TRUE(want.ok()) << want.status();
  auto got = RunOnCpu(in, "cpu");
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectWithin(*got, *want, ToleranceFor(dtype), "cpu " + p.ToString() + " beside reference");
  if (dtype == DType::kFloat32) return;
  const Tolerance f32 = ToleranceFor(DType::kFloat32);
  int64_t beyond = 0, first = -1;
  for (size_t i = 0; i < got->size(); ++i) {
    const double a = (*got)[i], b = (*want)[i];
    const double bound =
        kCpuMaxUlpsFromReference * UlpOf(std::max(std::abs(a), std::abs(b)), dtype) + f32.atol +
        f32.rtol * std::abs(b);
    if (!(std::abs(a - b) <= bound) && beyond++ == 0) {
      first = static_cast<int64_t>(i);
    }
  }
  EXPECT_EQ(beyond, 0) << p.ToString() << ": " << beyond << " of " << got->size()
                       << " elements more than " << kCpuMaxUlpsFromReference
                       << " ulp (+ the float32 bound) from the reference's; the first at " << first
                       << ": " << (first >= 0 ? (*got)[first] : 0.0) << " vs "
                       << (first >= 0 ? (*want)[first] : 0.0);
}

// Rows per task are (t, query head) pairs in blocks of up to 64, keys go in blocks of 64: the
// shapes cut both anywhere (1, 17, 65, 127, 1000 rows or keys), reach every head dim the GPU
// backends take and the odd ones (1, 80, 257), and put GQA groups across block edges.
INSTANTIATE_TEST_SUITE_P(
    AwkwardShapes, CpuVersusReference,
    ::testing::Combine(
        ::testing::Values(DType::kFloat32, DType::kBFloat16, DType::kFloat16),
        ::testing::Values(Shape{1, 1, 1, 1, 1, 8, false}, Shape{2, 17, 17, 4, 4, 32, true},
                          Shape{1, 17, 40, 4, 1, 80, true}, Shape{2, 40, 17, 8, 2, 64, true},
                          Shape{1, 127, 127, 2, 2, 128, false}, Shape{1, 33, 20, 4, 4, 256, false},
                          Shape{2, 65, 129, 3, 3, 1, true}, Shape{1, 70, 45, 2, 1, 257, false},
                          Shape{1, 70, 45, 2, 1, 257, true}, Shape{3, 1, 300, 8, 2, 128, false},
                          Shape{2, 5, 700, 16, 1, 64, false}, Shape{1, 200, 1000, 4, 2, 16, true},
                          Shape{1, 1000, 1000, 1, 1, 64, true}, Shape{1, 1000, 65, 2, 2, 96, false},
                          Shape{1, 64, 8192, 2, 1, 64, false}),
        ::testing::Bool()),
    [](const auto& param_info) {
      return ShapeParamName(std::get<0>(param_info.param), std::get<1>(param_info.param)) +
             (std::get<2>(param_info.param) ? "_kv_lens" : "");
    });

TEST(CpuBackend, WorkspaceIsOneScratchPerThreadTheCallMayUse) {
  const Backend& cpu = *BackendRegistry::Default().Find("cpu");
  const auto p = AttentionProblem::SelfAttention(2, 300, 4, 64, DType::kFloat32);
  RunOptions one, all;
  one.host_threads = 1;
  auto ws_one = cpu.WorkspaceBytes(p, SharedCpuContext(), one);
  auto ws_all = cpu.WorkspaceBytes(p, SharedCpuContext(), all);
  ASSERT_TRUE(ws_one.ok() && ws_all.ok());
  EXPECT_GT(*ws_one, 0);
  EXPECT_GE(*ws_all, *ws_one);
  // Independent of the sequence lengths: memory is O(block) per thread, never O(T x S).
  auto longer = p;
  longer.q_len = longer.kv_len = 30000;
  EXPECT_EQ(*cpu.WorkspaceBytes(longer, SharedCpuContext(), one), *ws_one);

  // Less than that is refused, naming the sizes.
  const Inputs in = RandomInputs(p, 10);
  std::vector<uint8_t> q = in.q.bytes, k = in.k.bytes, v = in.v.bytes, out(q.size());
  std::vector<uint8_t> scratch(static_cast<size_t>(*ws_one));
  const AttentionTensors t =
      PackedTensors(p, MemoryKind::kHost, q.data(), k.data(), v.data(), out.data());
  RunArgs args{p, t, scratch.data(), *ws_one - 1, SharedCpuContext(), one};
  const absl::Status s = cpu.Run(args);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  args.workspace_bytes = *ws_one;
  EXPECT_TRUE(cpu.Run(args).ok());
}

TEST(CpuBackend, DescriptionNamesTheSimdTargetItRuns) {
  const std::string d = BackendRegistry::Default().Find("cpu")->description();
  EXPECT_NE(d.find("float32 flash attention"), std::string::npos) << d;
  EXPECT_NE(d.find(" SIMD"), std::string::npos) << d;
}

}  // namespace
}  // namespace attn::testing
