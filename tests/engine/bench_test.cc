// Benchmark runner pieces: statistics, suites, and a run end to end on the CPU backend.
#include "attn/bench.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <map>

#include "attn/attention.h"
#include "attn/registry.h"
#include "attn/timing.h"
#include "engine/test_util.h"
#include "gtest/gtest.h"
#include "inputs/normal.h"
#include "platform.h"

namespace attn::testing {
namespace {

TEST(Summarize, GivesOrderStatisticsMeanAndSampleStddev) {
  // 1..101 shuffled: median 51, p10 11, p90 91, p99 100, mean 51, stddev sqrt(858.5).
  std::vector<double> xs;
  for (int i = 101; i >= 1; --i) xs.push_back(i);
  const SampleStats s = Summarize(xs);
  EXPECT_EQ(s.count, 101);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.median, 51);
  EXPECT_DOUBLE_EQ(s.p10, 11);
  EXPECT_DOUBLE_EQ(s.p90, 91);
  EXPECT_DOUBLE_EQ(s.p99, 100);
  EXPECT_DOUBLE_EQ(s.mean, 51);
  EXPECT_NEAR(s.stddev, std::sqrt(858.5), 1e-12);
}

TEST(Summarize, InterpolatesBetweenSamples) {
  const SampleStats s = Summarize({4, 1, 3, 2});
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_NEAR(s.p10, 1.3, 1e-12);
  EXPECT_DOUBLE_EQ(Summarize({7}).stddev, 0);
  EXPECT_EQ(Summarize({}).count, 0);
}

TEST(NormalFill, IsStandardNormalAndAPureFunctionOfSeedAndIndex) {
  const int n = 200000;
  double sum = 0, sum2 = 0;
  int beyond3 = 0;
  for (int i = 0; i < n; ++i) {
    const double x = NormalAt(7, i);
    sum += x;
    sum2 += x * x;
    beyond3 += std::fabs(x) > 3;
  }
  const double mean = sum / n, var = sum2 / n - mean * mean;
  EXPECT_NEAR(mean, 0, 0.01);  // 4.5 standard errors
  EXPECT_NEAR(var, 1, 0.015);
  // Irwin-Hall(12) has P(|x| > 3) = 0.0024 (normal: 0.0027).
  EXPECT_NEAR(beyond3 / double(n), 0.0024, 0.0006);
  EXPECT_EQ(NormalAt(7, 12345), NormalAt(7, 12345));
  EXPECT_NE(NormalAt(7, 12345), NormalAt(8, 12345));
}

TEST(NormalFill, DeviceFillMatchesTheHostCopy) {
  ATTN_REQUIRE_GPU();
  DeviceContext& gpu = *SharedGpuContext();
  for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    const int64_t count = 1000003;
    auto block = gpu.arena().Allocate(count * DTypeSize(dtype));
    ASSERT_TRUE(block.ok());
    ASSERT_TRUE(FillNormalOnStream(gpu.stream(), block->data(), count, dtype, 99).ok());
    std::vector<uint8_t> got(static_cast<size_t>(block->size()));
    ASSERT_TRUE(gpu.CopyToHost(got.data(), block->data(), block->size()).ok());
    int64_t mismatches = 0;
    double worst = 0;
    for (int64_t i = 0; i < count; ++i) {
      const double want = LoadAsDouble(&got[0], dtype, i);
      std::vector<uint8_t> one(4);
      StoreFromDouble(one.data(), dtype, 0, NormalAt(99, static_cast<uint64_t>(i)));
      const double host = LoadAsDouble(one.data(), dtype, 0);
      if (host != want) ++mismatches;
      worst = std::fmax(worst, std::fabs(host - want) / std::fmax(std::fabs(want), 1e-3));
    }
    // Integer arithmetic and one correctly rounded conversion: identical bits.
    EXPECT_EQ(mismatches, 0) << DTypeName(dtype) << ", worst relative difference " << worst;

    // The float32 copy of the same stream (the naive float32 reference's inputs) holds exactly
    // the narrower tensor's values.
    auto wide = gpu.arena().Allocate(count * 4);
    ASSERT_TRUE(wide.ok());
    ASSERT_TRUE(
        FillNormalOnStream(gpu.stream(), wide->data(), count, DType::kFloat32, 99, dtype).ok());
    std::vector<float> widened(static_cast<size_t>(count));
    ASSERT_TRUE(gpu.CopyToHost(widened.data(), wide->data(), count * 4).ok());
    mismatches = 0;
    for (int64_t i = 0; i < count; ++i) {
      if (widened[static_cast<size_t>(i)] != LoadAsDouble(&got[0], dtype, i)) ++mismatches;
    }
    EXPECT_EQ(mismatches, 0) << "float32 copy of " << DTypeName(dtype);
  }
  auto block = gpu.arena().Allocate(64);
  ASSERT_TRUE(block.ok());
  EXPECT_EQ(
      FillNormalOnStream(gpu.stream(), block->data(), 16, DType::kBFloat16, 1, DType::kFloat16)
          .code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(Suites, CodelabHasTheCodelabsTables) {
  auto cases = ExpandSuite("codelab", FakeGpu(9, 0)).value();
  std::map<std::string, int> per_section;
  for (const auto& c : cases) per_section[c.section]++;
  EXPECT_EQ(per_section["sequence sweep"], 5 * 4);  // T = 64..1024 x 4 implementations
  EXPECT_EQ(per_section["batch sweep"], 5 * 3);     // B = 1..16 x 3 fused paths
  EXPECT_EQ(per_section["MHA/GQA/MQA"], 3);         // K = 8, 2, 1
  EXPECT_EQ(per_section["causal sweep"], 5 * 3);    // T = 128..2048 x fused, cudnn, cudnn_fp8
  EXPECT_EQ(per_section["correctness"], 4);
  EXPECT_EQ(per_section["FP8 vs bf16"], 2);
  std::map<std::string, int> large;
  const std::vector<BenchCase> large_cases = ExpandSuite("large", FakeGpu(9, 0)).value();
  for (const auto& c : large_cases) large[c.section]++;
  EXPECT_EQ(large["large"] + large["large causal"], 2 * 4 * 3);
  EXPECT_EQ(large["large GQA"], 3 * 2);
  EXPECT_EQ(ExpandSuite("huge", FakeGpu(9, 0)).status().message(),
            "suite: unknown 'huge'; expected codelab or large");
  // Without a GPU every table has one cpu column.
  auto cpu = ExpandSuite("codelab", CpuDeviceInfo()).value();
  EXPECT_EQ(cpu.size(), 5u + 5 + 3 + 5 + 1);  // and the causal-effect row
  for (const auto& c : cpu) EXPECT_EQ(c.backend, "cpu");
}

TEST(Suites, LargeHasADecodeSection) {
  std::vector<BenchCase> decode, ragged;
  const std::vector<BenchCase> large = ExpandSuite("large", FakeGpu(9, 0)).value();
  for (const auto& c : large) {
    if (c.section == "decode") decode.push_back(c);
    if (c.section == "decode ragged") ragged.push_back(c);
  }
  // B 1, 4, 16, 64 x S 1k..32k at T = 1 but B64 S32768, and T = 16 at B16; cudnn and fused.
  EXPECT_EQ(decode.size(), (4u * 4 - 1 + 4) * 2);
  int64_t largest = 0;
  for (const auto& c : decode) {
    const AttentionProblem& p = c.problem;
    EXPECT_TRUE(ValidateProblem(p).ok()) << p.ToString();
    EXPECT_TRUE(p.q_len == 1 || (p.q_len == 16 && p.batch == 16)) << p.ToString();
    EXPECT_EQ(p.num_heads, 32);
    EXPECT_EQ(p.num_kv_heads, 8);
    EXPECT_EQ(p.head_dim, 128);
    EXPECT_EQ(p.dtype, DType::kBFloat16);
    EXPECT_FALSE(p.causal);
    EXPECT_TRUE(p.kv_lens.empty());
    largest = std::max(largest, 2 * KeyValueElements(p) * 2);
  }
  // The two judged shapes are there.
  const auto has = [&](int64_t b, int64_t s) {
    return std::any_of(decode.begin(), decode.end(), [&](const BenchCase& c) {
      return c.problem.batch == b && c.problem.q_len == 1 && c.problem.kv_len == s;
    });
  };
  EXPECT_TRUE(has(16, 8192));
  EXPECT_TRUE(has(1, 32768));
  EXPECT_EQ(largest, int64_t{2} << 30) << "K and V of the largest decode case";
  ASSERT_EQ(ragged.size(), 4u);
  for (const auto& c : ragged) {
    EXPECT_TRUE(ValidateProblem(c.problem).ok()) << c.problem.ToString();
    EXPECT_EQ(static_cast<int64_t>(c.problem.kv_lens.size()), c.problem.batch);
  }
  // Seeded: the same lengths on every expansion.
  EXPECT_EQ(ragged[0].problem.kv_lens,
            ExpandSuite("large", CpuDeviceInfo()).value()[decode.size() + 30].problem.kv_lens);
}

TEST(RunBenchmark, RunsAKvLensCaseCheckedAgainstTheReference) {
  AttentionProblem p = AttentionProblem::SelfAttention(5, 3, 8, 32, DType::kBFloat16, true, 2);
  p.kv_len = 90;
  p.kv_lens = {1, 90, 45, 2, 60};
  BenchOptions options;
  options.warmup = 1;
  options.repeats = 3;
  options.check_numerics = true;
  auto results = RunBenchmark({{"decode", p, "cpu"}}, options, SharedCpuContext());
  ASSERT_TRUE(results.ok()) << results.status();
  const BenchResult& r = results->front();
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.numerics_note, "vs float64 reference on the host");
  EXPECT_LE(r.max_abs_error, ToleranceFor(p.dtype).atol * 2);
  EXPECT_NEAR(r.kv_gbps, KeyValueBytesRead(p) / (r.stats.median * 1e6), r.kv_gbps * 1e-12);
  EXPECT_NEAR(r.tflops, AttentionFlops(p) / (r.stats.median * 1e9), r.tflops * 1e-12);
  EXPECT_LT(KeyValueBytesRead(p), KeyValueBytesRead(WithAllKeys(p)));
}

TEST(RunBenchmark, TimesCpuCasesAndReportsTheOthersWithReasons) {
  std::vector<BenchCase> cases = {
      {"t", AttentionProblem::SelfAttention(2, 32, 4, 16, DType::kFloat32), "cpu"},
      {"t", AttentionProblem::SelfAttention(2, 32, 4, 16, DType::kBFloat16, true, 2), "auto"},
      {"t", AttentionProblem::SelfAttention(2, 32, 4, 16, DType::kBFloat16), "flash3"},
      {"t", AttentionProblem::SelfAttention(2, 32, 4, 16, DType::kBFloat16), "naive"},
      {"t", AttentionProblem::SelfAttention(2, 32, 4, 16, DType::kBFloat16), "fused"},
  };
  BenchOptions options;
  options.warmup = 1;
  options.repeats = 5;
  std::vector<size_t> seen;
  auto results = RunBenchmark(cases, options, SharedCpuContext(),
                              [&](size_t i, size_t total, const BenchResult&) {
                                EXPECT_EQ(total, cases.size());
                                seen.push_back(i);
                              });
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_EQ(seen, (std::vector<size_t>{0, 1, 2, 3, 4}));
  for (int i : {0, 1}) {
    const BenchResult& r = (*results)[i];
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.backend, "cpu");
    EXPECT_EQ(r.stats.count, 5);
    EXPECT_GT(r.stats.median, 0);
    EXPECT_LE(r.stats.min, r.stats.median);
    EXPECT_NEAR(r.tflops, AttentionFlops(r.bench_case.problem) / (r.stats.median * 1e9), 1e-12);
    EXPECT_GT(r.peak_arena_bytes, 0);
  }
  // A name the project never had is invalid; GPU backends on the CPU are unsupported, whether
  // or not this build has them.
  EXPECT_EQ((*results)[2].status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*results)[2].status.message().substr(0, 26), "backend: unknown 'flash3';");
  EXPECT_TRUE(IsUnsupported((*results)[3].status)) << (*results)[3].status;
  EXPECT_TRUE(IsUnsupported((*results)[4].status)) << (*results)[4].status;
  EXPECT_EQ((*results)[3].status.message().substr(0, 26), "naive: needs a CUDA device");
  EXPECT_EQ((*results)[4].status.message().substr(0, 26), "fused: needs a CUDA device");
  for (size_t i = 0; i < results->size(); ++i) EXPECT_EQ((*results)[i].seed, CaseSeed(0, i));
}

TEST(RunBenchmark, BudgetCutsRepeatsAndSaysSo) {
  std::vector<BenchCase> cases = {
      {"t", AttentionProblem::SelfAttention(1, 256, 4, 64, DType::kFloat32), "cpu"}};
  BenchOptions options;
  options.warmup = 0;
  options.repeats = 100000;
  options.case_budget_s = 0.05;
  auto results = RunBenchmark(cases, options, SharedCpuContext());
  ASSERT_TRUE(results.ok());
  const BenchResult& r = results->front();
  EXPECT_TRUE(r.status.ok()) << r.status;
  EXPECT_TRUE(r.budget_cut);
  EXPECT_LT(r.stats.count, 100000);
  EXPECT_GE(r.stats.count, 1);
}

TEST(RunBenchmark, CancelStopsTheRemainingCases) {
  std::vector<BenchCase> cases(
      3, {"t", AttentionProblem::SelfAttention(1, 16, 2, 16, DType::kFloat32), "cpu"});
  StopToken stop;
  BenchOptions options;
  options.warmup = 0;
  options.repeats = 3;
  auto results = RunBenchmark(
      cases, options, SharedCpuContext(),
      [&](size_t i, size_t, const BenchResult&) {
        if (i == 0) stop.RequestStop(absl::CancelledError("cancelled by the test"));
      },
      &stop);
  ASSERT_TRUE(results.ok());
  EXPECT_TRUE((*results)[0].status.ok());
  EXPECT_EQ((*results)[1].status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ((*results)[2].status.code(), absl::StatusCode::kCancelled);
}

TEST(RunBenchmark, ChecksNumericsAgainstTheFloat64Reference) {
  std::vector<BenchCase> cases = {
      {"t", AttentionProblem::SelfAttention(1, 40, 4, 32, DType::kBFloat16, true), "cpu"},
      {"t", AttentionProblem::SelfAttention(4, 4096, 16, 128, DType::kBFloat16), "fused"}};
  BenchOptions options;
  options.warmup = 0;
  options.repeats = 2;
  options.check_numerics = true;
  auto results = RunBenchmark(cases, options, SharedCpuContext());
  ASSERT_TRUE(results.ok());
  const BenchResult& r = results->front();
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.numerics_note, "vs float64 reference on the host");
  // bf16 output of the cpu backend: only its final rounding, at most half a bf16 ulp.
  EXPECT_GT(r.max_abs_error, 0);
  EXPECT_LT(r.max_abs_error, 8e-3);
  EXPECT_LT(r.rel_l2_error, 3e-3);
  EXPECT_EQ(r.timing, "host clock");
}

TEST(RunBenchmark, RotatesInputSetsAndChecksTheFirst) {
  std::vector<BenchCase> cases = {
      {"t", AttentionProblem::SelfAttention(1, 24, 2, 16, DType::kFloat32), "cpu"}};
  BenchOptions options;
  options.warmup = 1;
  options.repeats = 7;
  options.rotate_inputs = 3;
  options.check_numerics = true;
  auto results = RunBenchmark(cases, options, SharedCpuContext());
  ASSERT_TRUE(results.ok());
  const BenchResult& r = results->front();
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.input_sets, 3);
  EXPECT_EQ(r.stats.count, 7);
  EXPECT_LT(r.max_abs_error, 1e-6);  // float32 cpu vs its float32-stored reference
  // Three sets of q, k, v and out are held at once.
  const int64_t one_set = 4 * 24 * 2 * 16 * 4;
  EXPECT_GE(r.peak_arena_bytes, 3 * one_set);
  options.rotate_inputs = 0;
  EXPECT_EQ(RunBenchmark(cases, options, SharedCpuContext()).status().message(),
            "rotate_inputs: must be in [1, 64], got 0");
}

TEST(RunBenchmark, ReportsTheCausalEffectAtTheFirstAndLastPosition) {
  std::vector<BenchCase> cases = {
      {"t", AttentionProblem::SelfAttention(2, 64, 4, 32, DType::kBFloat16, true), "cpu"},
      {"t", AttentionProblem::SelfAttention(2, 64, 4, 32, DType::kBFloat16, false), "cpu"}};
  BenchOptions options;
  options.warmup = 0;
  options.repeats = 1;
  options.check_numerics = true;
  auto results = RunBenchmark(cases, options, SharedCpuContext());
  ASSERT_TRUE(results.ok());
  const BenchResult& causal = (*results)[0];
  ASSERT_TRUE(causal.status.ok()) << causal.status;
  // Position 0 sees one key instead of 64: its output is one row of V, not an average.
  EXPECT_GT(causal.causal_first_diff, 0.5);
  // The last position sees every key either way: equal up to bf16 output rounding.
  EXPECT_GE(causal.causal_last_diff, 0);
  EXPECT_LT(causal.causal_last_diff, 8e-3);
  EXPECT_EQ((*results)[1].causal_first_diff, -1);  // only causal cases have the row
}

// Problems beyond the float64 reference's limit are checked against the naive backend in float32 on
// the GPU, one batch and kv-head group at a time through strided views; the naive float32 run of
// the whole problem must agree with it to float32 rounding, and cudnn bf16 to bf16's tolerance.
TEST(RunBenchmarkGpu, ChecksLargeProblemsAgainstNaiveFloat32) {
  ATTN_REQUIRE_GPU();
  const auto p32 = AttentionProblem::SelfAttention(2, 2048, 8, 128, DType::kFloat32, true, 2);
  ASSERT_GT(AttentionFlops(p32), kMaxNumericsFlops);
  auto p16 = p32;
  p16.dtype = DType::kBFloat16;
  std::vector<BenchCase> cases = {{"t", p32, "naive"}, {"t", p16, "cudnn"}};
  BenchOptions options;
  options.warmup = 1;
  options.repeats = 2;
  options.check_numerics = true;
  auto results = RunBenchmark(cases, options, *SharedGpuContext());
  ASSERT_TRUE(results.ok()) << results.status();
  const BenchResult& naive = (*results)[0];
  ASSERT_TRUE(naive.status.ok()) << naive.status;
  EXPECT_EQ(naive.numerics_note, "vs naive float32 on the GPU");
  EXPECT_GE(naive.max_abs_error, 0);
  EXPECT_LT(naive.max_abs_error, ToleranceFor(DType::kFloat32).atol);
  const BenchResult& cudnn = (*results)[1];
  if (!cudnn.status.ok()) GTEST_SKIP() << "cudnn: " << cudnn.status.message();
  EXPECT_EQ(cudnn.numerics_note, "vs naive float32 on the GPU");
  const Tolerance bf16 = ToleranceFor(DType::kBFloat16);
  EXPECT_GT(cudnn.max_abs_error, 0);
  EXPECT_LT(cudnn.max_abs_error, bf16.atol + 4 * bf16.rtol);  // |out| <= ~4
  EXPECT_LT(cudnn.rel_l2_error, bf16.rel_l2);
  EXPECT_GT(cudnn.causal_first_diff, 0.5);
  EXPECT_LT(cudnn.causal_last_diff, 2 * bf16.atol);
}

// The runner's median for a large cudnn case against a plain loop around the same call: one pair
// of events around 50 calls (no per-call events, no chunking). Interleaved over rounds, because
// the H200's clocks settle into different states over a long run.
TEST(RunBenchmarkGpu, MedianAgreesWithAPlainEventTimedLoop) {
  ATTN_REQUIRE_GPU();
  DeviceContext& gpu = *SharedGpuContext();
  const auto p = AttentionProblem::SelfAttention(4, 8192, 16, 128, DType::kBFloat16, true);
  const Backend* cudnn = BackendRegistry::Default().Find("cudnn");
  if (!ATTN_HAVE_CUDNN) GTEST_SKIP() << "built without cuDNN";
  if (auto s = cudnn->CheckSupport(p, gpu.info()); !s.ok()) GTEST_SKIP() << s.message();
  BenchOptions options;  // the defaults: 10 warm-ups, 50 repeats
  const std::vector<BenchCase> cases = {{"t", p, "cudnn"}};
  auto buffers = AllocatePacked(p, gpu);
  ASSERT_TRUE(buffers.ok()) << buffers.status();
  const AttentionTensors& t = buffers->tensors;
  // The runner's first case reads seeds seed + 0, 1, 2: the same inputs.
  ASSERT_TRUE(FillInputs(gpu, p, t, options.seed).ok());
  const auto call = [&] { return RunAttention(*cudnn, p, t, gpu); };
  constexpr int kCalls = 50;
  std::vector<double> runner, plain;
  for (int round = 0; round < 3; ++round) {
    auto results = RunBenchmark(cases, options, gpu);
    ASSERT_TRUE(results.ok() && results->front().status.ok());
    runner.push_back(results->front().stats.median);
    auto loop = TimeOnDevice(
        gpu,
        [&] {
          for (int i = 0; i < kCalls; ++i) {
            if (auto s = call(); !s.ok()) return s;
          }
          return absl::OkStatus();
        },
        1, 1);
    ASSERT_TRUE(loop.ok()) << loop.status();
    plain.push_back(loop->front() / kCalls);
  }
  const double r = Summarize(runner).median, l = Summarize(plain).median;
  std::printf("runner medians %.4f %.4f %.4f ms; plain loop means %.4f %.4f %.4f ms; ratio %.4f\n",
              runner[0], runner[1], runner[2], plain[0], plain[1], plain[2], r / l);
  EXPECT_NEAR(r / l, 1.0, 0.03);
}

TEST(RunBenchmark, RejectsBadOptionsNamingTheField) {
  BenchOptions options;
  options.repeats = 0;
  EXPECT_EQ(RunBenchmark({}, options, SharedCpuContext()).status().message(),
            "repeats: must be in [1, 100000], got 0");
  options.repeats = 5;
  options.warmup = -1;
  EXPECT_EQ(RunBenchmark({}, options, SharedCpuContext()).status().message(),
            "warmup: must be in [0, 10000], got -1");
  options.warmup = 1;
  options.case_budget_s = 0;
  EXPECT_EQ(RunBenchmark({}, options, SharedCpuContext()).status().message(),
            "case_budget_s: must be in (0, 3600], got 0");
}

}  // namespace
}  // namespace attn::testing
