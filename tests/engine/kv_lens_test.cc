// Per-sequence KV lengths (AttentionProblem::kv_lens): batch element b attends to its first
// kv_lens[b] keys (top-left causal on top). Every backend that takes them against the float64
// reference with random lengths including 1 and S, causal and not, GQA/MQA, T = 1 and T > 1,
// T != S; the support rules of those that do not; and the spec tools and suites write lengths in.
#include "attn/kv_lens.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "attn/attention.h"
#include "attn/dtype.h"
#include "attn/registry.h"
#include "engine/reference.h"
#include "engine/test_util.h"
#include "gtest/gtest.h"

namespace attn::testing {
namespace {

// Element [b, l, head, h] of a packed (B, L, heads, H) tensor.
int64_t At(int64_t L, int64_t heads, int64_t H, int64_t b, int64_t l, int64_t head, int64_t h) {
  return ((b * L + l) * heads + head) * H + h;
}

// The definition, independent of every implementation: batch element b of a problem with
// lengths is the one-element problem whose K and V are cut to their first kv_lens[b] rows.
TEST(KvLensReference, EachBatchElementIsTheProblemCutToItsLength) {
  for (bool causal : {false, true}) {
    AttentionProblem p = AttentionProblem::SelfAttention(4, 6, 4, 8, DType::kFloat32, causal, 2);
    p.kv_len = 9;
    p = WithRandomKvLens(p, 1);
    const Inputs in = RandomInputs(p, 1);
    const std::vector<double> ref = Reference(in);
    for (int64_t b = 0; b < p.batch; ++b) {
      AttentionProblem cut = p;
      cut.batch = 1;
      cut.kv_len = p.kv_lens[b];
      cut.kv_lens.clear();
      std::vector<double> q, k, v;
      for (int64_t i = 0; i < p.q_len * p.num_heads * p.head_dim; ++i)
        q.push_back(in.q.values[b * p.q_len * p.num_heads * p.head_dim + i]);
      for (int64_t s = 0; s < cut.kv_len; ++s)
        for (int64_t i = 0; i < p.num_kv_heads * p.head_dim; ++i) {
          k.push_back(in.k.values[At(p.kv_len, 1, p.num_kv_heads * p.head_dim, b, s, 0, i)]);
          v.push_back(in.v.values[At(p.kv_len, 1, p.num_kv_heads * p.head_dim, b, s, 0, i)]);
        }
      const std::vector<double> want = ReferenceAttention(cut, q, k, v);
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_NEAR(ref[b * want.size() + i], want[i], 1e-12)
            << p.ToString() << ": batch element " << b << " element " << i;
      }
    }
  }
}

TEST(KvLensCpu, LengthsOfSGiveTheOutputWithoutLengths) {
  AttentionProblem p = AttentionProblem::SelfAttention(3, 5, 4, 16, DType::kBFloat16, true, 1);
  p.kv_len = 21;
  const Inputs dense = RandomInputs(p, 2);
  Inputs full = dense;
  full.problem.kv_lens.assign(3, 21);
  auto a = RunOnCpu(dense);
  auto b = RunOnCpu(full);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << " " << b.status();
  EXPECT_EQ(*a, *b);
}

// Keys at or past a length are never read: NaN there leaves the cpu's output bitwise unchanged.
TEST(KvLensCpu, KeysPastALengthAreNeverRead) {
  AttentionProblem p = AttentionProblem::SelfAttention(3, 7, 4, 16, DType::kFloat32, false, 2);
  p.kv_len = 30;
  p.kv_lens = {1, 30, 12};
  const Inputs in = RandomInputs(p, 3);
  Inputs poisoned = in;
  std::vector<double> k = in.k.values, v = in.v.values;
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t s = p.kv_lens[b]; s < p.kv_len; ++s)
      for (int64_t i = 0; i < p.num_kv_heads * p.head_dim; ++i) {
        k[At(p.kv_len, 1, p.num_kv_heads * p.head_dim, b, s, 0, i)] = NAN;
        v[At(p.kv_len, 1, p.num_kv_heads * p.head_dim, b, s, 0, i)] = NAN;
      }
  poisoned.k = MakeOperand(k, p.dtype);
  poisoned.v = MakeOperand(v, p.dtype);
  auto a = RunOnCpu(in);
  auto b = RunOnCpu(poisoned);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_TRUE(Compare(*a, Reference(in), ToleranceFor(p.dtype)).within);
}

// --- every backend against the reference ------------------------------------------------------

// (backend, dtype): each backend in the dtypes it runs.
using BackendDtype = std::pair<const char*, DType>;
using KvCase = std::tuple<BackendDtype, Shape, bool>;

constexpr auto kF32 = DType::kFloat32, kBf16 = DType::kBFloat16, kF16 = DType::kFloat16;
const BackendDtype kBackends[] = {{"reference", kF32}, {"reference", kBf16}, {"reference", kF16},
                                  {"cpu", kF32},       {"cpu", kBf16},       {"cpu", kF16},
                                  {"naive", kF32},     {"naive", kBf16},     {"naive", kF16},
                                  {"cudnn", kBf16},    {"cudnn", kF16},      {"fused", kF32},
                                  {"fused", kBf16},    {"fused", kF16}};
// Decode (T = 1, the N32 K8 H128 too), T > 1 with T != S either way, T = S, GQA and
// MQA, B = 1 (its one length is 1).
const Shape kKvShapes[] = {
    {4, 1, 256, 8, 2, 64},   {3, 1, 1000, 32, 8, 128}, {4, 16, 333, 8, 8, 64},
    {3, 17, 17, 4, 1, 32},   {2, 127, 40, 4, 2, 128},  {1, 1, 77, 4, 4, 64},
    {3, 64, 200, 2, 2, 256},
};

std::string KvCaseName(const ::testing::TestParamInfo<KvCase>& info) {
  const auto& [bd, s, causal] = info.param;
  return std::string(bd.first) + "_" + ShapeName(bd.second, s.b, s.t, s.s, s.n, s.k, s.h, causal);
}

// Skips, with the reason, where this machine or `backend` cannot run `p`: GPU backends without
// a GPU, and a backend whose support rules refuse it here (never counted as a pass).
#define ATTN_REQUIRE_SUPPORT(backend, p)                                                           \
  do {                                                                                             \
    if (!IsHostBackend(backend)) {                                                                 \
      ATTN_REQUIRE_GPU();                                                                          \
      const absl::Status support =                                                                 \
          BackendRegistry::Default().Find(backend)->CheckSupport((p), SharedGpuContext()->info()); \
      if (IsUnsupported(support)) GTEST_SKIP() << support.message();                               \
    }                                                                                              \
  } while (0)

class KvLensVersusReference : public ::testing::TestWithParam<KvCase> {};

TEST_P(KvLensVersusReference, WithinTheDtypesTolerance) {
  const auto& [bd, sh, causal] = GetParam();
  const auto& [backend, dtype] = bd;
  const AttentionProblem p =
      WithRandomKvLens(ProblemOf(sh, dtype, causal), static_cast<uint64_t>(sh.s + sh.t));
  ATTN_REQUIRE_SUPPORT(backend, p);
  const Inputs in = RandomInputs(p, 31);
  const std::vector<double> ref = Reference(in);
  // The fast paths hold to about twice the same-precision naive path's error.
  std::optional<Comparison> naive;
  if (std::string(backend) == "cudnn" || std::string(backend) == "fused") {
    auto n = NaiveComparison(in, ref);
    ASSERT_TRUE(n.ok()) << n.status();
    naive = *n;
  }
  auto checked = RunVersusReference(backend, in, ref, naive ? &*naive : nullptr);
  // cuDNN knows whether it has an engine only when it builds the plan.
  if (IsUnsupported(checked.status())) GTEST_SKIP() << checked.status().message();
  ASSERT_TRUE(checked.ok()) << p.ToString() << ": " << checked.status();
  const std::vector<double>& out = checked->out;
  // A second call on the same inputs: our kernels (fixed reduction order, no atomics) give the
  // same bits. cuDNN promises no bitwise repeatability here, and does not keep it: on an H100
  // (cuDNN 9, 2026-12-07) fp16 B3 T1 S1000 N32 K8 H128 with lengths gave other bits on the second
  // call in 4 of 16 runs (bf16 in none), as a summation order that changes between calls would.
  // Its float32 sums then differ far below a 16-bit ulp, so no element may move by more than one.
  if (!IsHostBackend(backend)) {
    auto again = RunOnGpu(in, backend);
    ASSERT_TRUE(again.ok());
    const bool bitwise = std::string(backend) != "cudnn";
    int64_t differ = 0, beyond_ulp = 0, first = -1;
    double largest = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      const double a = out[i], b = (*again)[i];
      if (a == b) continue;
      if (differ++ == 0) first = static_cast<int64_t>(i);
      largest = std::max(largest, std::abs(a - b));
      if (!bitwise && std::abs(a - b) > UlpOf(std::max(std::abs(a), std::abs(b)), dtype)) {
        ++beyond_ulp;
      }
    }
    const int64_t wrong = bitwise ? differ : beyond_ulp;
    EXPECT_EQ(wrong, 0) << backend << " " << p.ToString() << ": a second call changed " << differ
                        << " of " << out.size() << " elements ("
                        << (bitwise ? "the same bits expected"
                                    : std::to_string(beyond_ulp) + " by more than an ulp")
                        << "), by up to " << largest << "; the first at " << first << ": "
                        << (first >= 0 ? out[first] : 0.0) << " then "
                        << (first >= 0 ? (*again)[first] : 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(RandomLengths, KvLensVersusReference,
                         ::testing::Combine(::testing::ValuesIn(kBackends),
                                            ::testing::ValuesIn(kKvShapes), ::testing::Bool()),
                         KvCaseName);

// --- the GPU backends' own cases ------------------------------------------------------------

// Runs `backend` with q, k, v from `in` and `device_lens` in the device's kv_lens buffer, while
// the problem keeps its own (valid) lengths: what a kernel sees when a caller's buffer disagrees.
absl::StatusOr<std::vector<double>> RunWithDeviceLengths(const Inputs& in,
                                                         const std::string& backend,
                                                         const std::vector<int32_t>& device_lens) {
  DeviceContext& gpu = *SharedGpuContext();
  const AttentionProblem& p = in.problem;
  AttentionProblem shown = p;
  shown.kv_lens = device_lens;
  auto lens = UploadKvLens(shown, gpu);
  if (!lens.ok()) return lens.status();
  std::vector<ArenaBlock> blocks;
  for (const auto* bytes : {&in.q.bytes, &in.k.bytes, &in.v.bytes, &in.q.bytes}) {
    auto block = gpu.arena().Allocate(static_cast<int64_t>(bytes->size()));
    if (!block.ok()) return block.status();
    if (auto s = gpu.CopyToDevice(block->data(), bytes->data(), block->size()); !s.ok()) return s;
    blocks.push_back(*std::move(block));
  }
  const Backend* b = BackendRegistry::Default().Find(backend);
  if (auto s =
          RunAttention(*b, p,
                       PackedTensors(p, MemoryKind::kDevice, blocks[0].data(), blocks[1].data(),
                                     blocks[2].data(), blocks[3].data(), lens->data),
                       gpu);
      !s.ok()) {
    return s;
  }
  std::vector<uint8_t> out(in.q.bytes.size());
  if (auto s = gpu.CopyToHost(out.data(), blocks[3].data(), blocks[3].size()); !s.ok()) return s;
  return Decode(out, p.dtype);
}

class KvLensGpu : public ::testing::TestWithParam<std::string> {};

// Device lengths are clamped to [0, S], never trusted: beyond S reads as S, below 1 gives that
// batch element zeros on naive; no backend reads outside K and V or fails.
TEST_P(KvLensGpu, DeviceLengthsAreClampedNotTrusted) {
  const std::string backend = GetParam();
  AttentionProblem p = AttentionProblem::SelfAttention(3, 4, 8, 64, DType::kBFloat16, false, 2);
  p.kv_len = 200;
  p.kv_lens = {7, 8, 9};
  ATTN_REQUIRE_SUPPORT(backend, p);
  const Inputs in = RandomInputs(p, 41);
  auto out =
      RunWithDeviceLengths(in, backend, {200 + 1000, std::numeric_limits<int32_t>::max(), 9});
  ASSERT_TRUE(out.ok()) << out.status();
  Inputs as_s = in;
  as_s.problem.kv_lens = {200, 200, 9};
  const Comparison c = Compare(*out, Reference(as_s), ToleranceFor(p.dtype));
  EXPECT_TRUE(c.within) << backend << ": " << c.ToString();

  auto negative = RunWithDeviceLengths(in, backend, {-5, 0, 9});
  ASSERT_TRUE(negative.ok()) << negative.status();
  const int64_t per_batch = p.q_len * p.num_heads * p.head_dim;
  if (backend == "naive") {
    for (int64_t i = 0; i < 2 * per_batch; ++i) ASSERT_EQ((*negative)[i], 0.0) << i;
  }
  // The valid batch element is unaffected by its neighbours' lengths.
  const std::vector<double> ref = Reference(in);
  const std::vector<double> last(negative->end() - per_batch, negative->end());
  const std::vector<double> want(ref.end() - per_batch, ref.end());
  EXPECT_TRUE(Compare(last, want, ToleranceFor(p.dtype)).within) << backend;
}

// One cuDNN graph serves every set of lengths of a shape: it depends on having them only.
TEST(KvLensCudnn, OnePlanForEveryLengthsOfAShape) {
  ATTN_REQUIRE_GPU();
  if (!ATTN_HAVE_CUDNN) GTEST_SKIP() << "built without cuDNN (ATTN_ENABLE_CUDNN)";
  DeviceContext& gpu = *SharedGpuContext();
  const Backend* cudnn = BackendRegistry::Default().Find("cudnn");
  AttentionProblem p = AttentionProblem::SelfAttention(4, 1, 32, 128, DType::kBFloat16, false, 8);
  p.kv_len = 4096;
  // A key no other test builds, nor an earlier run of this one (--gtest_repeat): the plan cache
  // lives as long as the process.
  static int runs = 0;
  p.scale = 0.0883883 + 1e-6 * runs++;
  const auto before = cudnn->plan_cache_stats(gpu);
  ASSERT_TRUE(before.has_value());
  for (uint64_t seed : {1, 2, 3}) {
    const Inputs in = RandomInputs(WithRandomKvLens(p, seed), seed);
    auto out = RunOnGpu(in, "cudnn");
    ASSERT_TRUE(out.ok()) << out.status();
    const Comparison c = Compare(*out, Reference(in), ToleranceFor(p.dtype));
    EXPECT_TRUE(c.within) << in.problem.ToString() << ": " << c.ToString();
  }
  const auto after = cudnn->plan_cache_stats(gpu);
  EXPECT_EQ(after->misses - before->misses, 1) << "one graph for three sets of lengths";
  // The same shape without lengths is another graph.
  auto dense = RunOnGpu(RandomInputs(p, 4), "cudnn");
  ASSERT_TRUE(dense.ok()) << dense.status();
  EXPECT_EQ(cudnn->plan_cache_stats(gpu)->misses - before->misses, 2);
}

// Pieces over the batch on a GPU backend carry each piece's lengths (sliced problem, offset
// device pointer).
TEST_P(KvLensGpu, PiecesCarryTheirBatchRowsLengths) {
  const std::string backend = GetParam();
  const AttentionProblem p =
      WithRandomKvLens(AttentionProblem::SelfAttention(6, 96, 8, 64, DType::kFloat16, true, 2), 5);
  ATTN_REQUIRE_SUPPORT(backend, p);
  const Inputs in = RandomInputs(p, 51);
  StopToken stop;
  RunOptions options;
  options.stop = &stop;
  options.max_piece_flops = AttentionFlops(WithAllKeys(p)) / 5;
  ASSERT_GT(PlanPieces(p, options.max_piece_flops).size(), 2u);
  auto out = RunOnGpu(in, backend, *SharedGpuContext(), options);
  ASSERT_TRUE(out.ok()) << out.status();
  const Comparison c = Compare(*out, Reference(in), ToleranceFor(p.dtype));
  EXPECT_TRUE(c.within) << backend << ": " << c.ToString();
}

INSTANTIATE_TEST_SUITE_P(Backends, KvLensGpu, ::testing::Values("naive", "cudnn", "fused"),
                         [](const auto& param) { return param.param; });

// --- support rules (any machine) ------------------------------------------------------------

TEST(KvLensSupport, Fp8RefusesLengthsWithTheReason) {
  if (!ATTN_HAVE_CUDNN) GTEST_SKIP() << "built without cuDNN (ATTN_ENABLE_CUDNN)";
  AttentionProblem p = AttentionProblem::SelfAttention(2, 128, 8, 64, DType::kBFloat16);
  const Backend* fp8 = BackendRegistry::Default().Find("cudnn_fp8");
  ASSERT_TRUE(fp8->CheckSupport(p, FakeGpu(9, 0)).ok());
  p.kv_lens = {5, 128};
  const absl::Status s = fp8->CheckSupport(p, FakeGpu(9, 0));
  EXPECT_TRUE(IsUnsupported(s)) << s;
  EXPECT_EQ(s.message(),
            "cudnn_fp8: kv_lens not supported: its K and V scales are per tensor, their amaxes "
            "taken over all S rows (padding included); use cudnn");
  // cudnn and naive take them.
  for (const char* name : {"cudnn", "naive"}) {
    EXPECT_TRUE(BackendRegistry::Default().Find(name)->CheckSupport(p, FakeGpu(9, 0)).ok()) << name;
  }
  // "auto" never lands on a backend that cannot.
  auto picked = BackendRegistry::Default().Resolve("auto", p, FakeGpu(9, 0));
  ASSERT_TRUE(picked.ok()) << picked.status();
  EXPECT_TRUE((*picked)->CheckSupport(p, FakeGpu(9, 0)).ok());
}

// --- the flag tools and suites write lengths in -----------------------------------------------

TEST(KvLensSpec, TakesAListOneLengthOrASeededUniformDraw) {
  auto none = KvLensSpec::Parse("", "--kv-lens");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_TRUE(none->Lengths(4, 100, 0)->empty());

  auto list = KvLensSpec::Parse("1,5,100", "--kv-lens");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list->Lengths(3, 100, 0), (std::vector<int32_t>{1, 5, 100}));
  EXPECT_EQ(list->Lengths(4, 100, 0).status().message(),
            "--kv-lens: 3 lengths for batch 4; give one per batch element, or one");
  EXPECT_EQ(*KvLensSpec::Parse("7", "--kv-lens")->Lengths(3, 100, 0),
            (std::vector<int32_t>{7, 7, 7}));

  auto uniform = KvLensSpec::Parse("uniform:2:50", "--kv-lens");
  ASSERT_TRUE(uniform.ok());
  const std::vector<int32_t> drawn = *uniform->Lengths(500, 100, 9);
  EXPECT_EQ(drawn, *uniform->Lengths(500, 100, 9)) << "a pure function of the seed";
  EXPECT_NE(drawn, *uniform->Lengths(500, 100, 10));
  EXPECT_EQ(*std::min_element(drawn.begin(), drawn.end()), 2);
  EXPECT_EQ(*std::max_element(drawn.begin(), drawn.end()), 50);
  EXPECT_EQ(drawn, UniformKvLens(500, 2, 50, 9));
  EXPECT_EQ(uniform->Lengths(4, 40, 0).status().message(),
            "--kv-lens: uniform:2:50 reaches beyond kv_len 40");
  const std::vector<int32_t> to_s = *KvLensSpec::Parse("uniform", "--kv-lens")->Lengths(300, 8, 1);
  EXPECT_EQ(*std::min_element(to_s.begin(), to_s.end()), 1);
  EXPECT_EQ(*std::max_element(to_s.begin(), to_s.end()), 8);

  for (const char* bad : {"uniform:0:5", "uniform:9:5", "uniform:1", "1,x", "1,,2", "normal"}) {
    const auto s = KvLensSpec::Parse(bad, "--kv-lens");
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(s.status().message().substr(0, 13 + std::string(bad).size()),
              std::string("--kv-lens: '") + bad + "'")
        << s.status();
  }
}

}  // namespace
}  // namespace attn::testing
