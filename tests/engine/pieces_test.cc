// Long calls in pieces: PlanPieces covers a problem exactly once with valid sub-problems, a call
// in pieces computes what the whole call does, and a stop (deadline, cancel) ends a call within
// about two pieces, leaving the device idle and the arena as it was.
#include <chrono>
#include <thread>
#include <vector>

#include "attn/attention.h"
#include "attn/bench.h"
#include "attn/registry.h"
#include "engine/test_util.h"
#include "gtest/gtest.h"

namespace attn::testing {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

void ExpectPlanIsExact(const AttentionProblem& p, double max_flops) {
  SCOPED_TRACE(p.ToString() + " max_flops " + std::to_string(max_flops));
  const std::vector<Piece> pieces = PlanPieces(p, max_flops);
  ASSERT_FALSE(pieces.empty());
  std::vector<int> covered(static_cast<size_t>(p.batch * p.num_heads * p.q_len), 0);
  double largest = 0;
  for (const Piece& c : pieces) {
    ASSERT_TRUE(c.b0 < c.b1 && c.b1 <= p.batch && c.n0 < c.n1 && c.n1 <= p.num_heads &&
                c.t0 < c.t1 && c.t1 <= p.q_len);
    const AttentionProblem sub = PieceProblem(p, c);
    ASSERT_TRUE(ValidateProblem(sub).ok()) << sub.ToString();
    // The piece's query heads read the K/V heads the whole problem gives them.
    EXPECT_EQ(sub.GroupSize() * sub.num_kv_heads, sub.num_heads);
    const int64_t g = p.GroupSize();
    if (sub.num_heads >= g) {
      EXPECT_EQ(c.n0 % g, 0);
      EXPECT_EQ(sub.num_heads % g, 0);
    } else {
      EXPECT_EQ(c.n0 / g, (c.n1 - 1) / g) << "a piece smaller than a group must lie inside one";
    }
    if (p.causal) {
      EXPECT_EQ(c.t0, 0) << "a causal head is never split over rows";
    }
    largest = std::max(largest, AttentionFlops(sub));
    for (int64_t b = c.b0; b < c.b1; ++b)
      for (int64_t n = c.n0; n < c.n1; ++n)
        for (int64_t t = c.t0; t < c.t1; ++t)
          ++covered[static_cast<size_t>((b * p.num_heads + n) * p.q_len + t)];
  }
  for (size_t i = 0; i < covered.size(); ++i) ASSERT_EQ(covered[i], 1) << "output row " << i;
  EXPECT_EQ(largest, LargestPieceFlops(p, max_flops));
  AttentionProblem head = p;
  head.batch = head.num_heads = head.num_kv_heads = 1;
  if (max_flops > 0 && (!p.causal || AttentionFlops(head) <= max_flops)) {
    EXPECT_LE(largest, std::max(max_flops, AttentionFlops(head) / static_cast<double>(p.q_len)));
  }
}

TEST(PlanPieces, CoversEveryOutputRowOnceWithValidGroupAlignedPieces) {
  const AttentionProblem problems[] = {
      AttentionProblem::SelfAttention(6, 300, 8, 64, DType::kBFloat16),
      AttentionProblem::SelfAttention(6, 300, 8, 64, DType::kBFloat16, /*causal=*/true),
      AttentionProblem::SelfAttention(5, 257, 12, 32, DType::kFloat32, false, /*kv_heads=*/4),
      AttentionProblem::SelfAttention(1, 1000, 32, 128, DType::kFloat16, true, /*kv_heads=*/1),
      AttentionProblem::SelfAttention(1, 4097, 1, 64, DType::kFloat32),
      AttentionProblem::SelfAttention(3, 1, 6, 16, DType::kFloat32, false, 3),
  };
  for (const AttentionProblem& p : problems) {
    const double whole = AttentionFlops(p);
    for (double fraction : {0.0, 2.0, 1.0, 0.5, 0.3, 0.1, 0.02, 0.001, 1e-6}) {
      ExpectPlanIsExact(p, whole * fraction);
    }
  }
}

TEST(PlanPieces, TheWholeProblemWhenWithinTheBudgetOrWithoutOne) {
  const auto p = AttentionProblem::SelfAttention(4, 128, 8, 64, DType::kBFloat16);
  const Piece whole{0, 4, 0, 8, 0, 128};
  EXPECT_EQ(PlanPieces(p, 0), std::vector<Piece>{whole});
  EXPECT_EQ(PlanPieces(p, AttentionFlops(p)), std::vector<Piece>{whole});
  // Unmasked: 64-row bands across every batch and head.
  EXPECT_EQ(PlanPieces(p, AttentionFlops(p) / 2),
            (std::vector<Piece>{{0, 4, 0, 8, 0, 64}, {0, 4, 0, 8, 64, 128}}));
  // Causal, or less than a 64-row band: batch first, in equal pieces (4 batches at a third of
  // the FLOPs each -> pieces of 1), then heads.
  auto c = p;
  c.causal = true;
  EXPECT_EQ(PlanPieces(c, AttentionFlops(c) / 3).size(), 4u);
  EXPECT_EQ(PlanPieces(c, AttentionFlops(c) / 2).size(), 2u);
  EXPECT_EQ(PlanPieces(p, AttentionFlops(p) / 3).size(), 4u);
  EXPECT_EQ(PlanPieces(c, AttentionFlops(c) / 8).size(), 8u);
  EXPECT_EQ(PlanPieces(c, AttentionFlops(c) / 8)[1], (Piece{0, 1, 4, 8, 0, 128}));
}

TEST(PlanPieces, OneCausalHeadIsOnePieceWhateverTheBudget) {
  const auto p = AttentionProblem::SelfAttention(1, 4096, 2, 64, DType::kBFloat16, true);
  const auto pieces = PlanPieces(p, 1);
  EXPECT_EQ(pieces.size(), 2u);
  EXPECT_EQ(LargestPieceFlops(p, 1), AttentionFlops(p) / 2);
}

// The cpu backend computes each output row on its own, so pieces give the whole call's bits.
TEST(Pieces, CpuPiecesGiveTheWholeCallsBits) {
  const AttentionProblem problems[] = {
      AttentionProblem::SelfAttention(3, 70, 6, 32, DType::kBFloat16, true, 2),
      AttentionProblem::SelfAttention(2, 130, 4, 16, DType::kFloat32, false, 1),
      AttentionProblem::SelfAttention(1, 200, 1, 16, DType::kFloat16),
  };
  uint64_t seed = 1;
  for (const AttentionProblem& p : problems) {
    SCOPED_TRACE(p.ToString());
    const Inputs in = RandomInputs(p, seed++);
    auto whole = RunOnCpu(in);
    ASSERT_TRUE(whole.ok()) << whole.status();
    StopToken stop;
    RunOptions options;
    options.stop = &stop;
    options.max_piece_flops = AttentionFlops(p) / 7;
    ASSERT_GT(PlanPieces(p, options.max_piece_flops).size(), 1u);
    auto pieces = RunOnCpu(in, "cpu", options);
    ASSERT_TRUE(pieces.ok()) << pieces.status();
    EXPECT_EQ(*pieces, *whole);
  }
}

// kv_lens: pieces are those of the problem without lengths (cut by every key's FLOPs), each
// piece's problem and views carry its batch rows' lengths, and the cpu's pieces give the whole
// call's bits.
TEST(Pieces, KvLensAreSlicedByTheBatchRowsOfEachPiece) {
  const AttentionProblem p =
      WithRandomKvLens(AttentionProblem::SelfAttention(5, 96, 4, 16, DType::kFloat32, true, 2), 3);
  const std::vector<int32_t> lens = p.kv_lens;
  const double max_flops = AttentionFlops(WithAllKeys(p)) / 9;
  const std::vector<Piece> pieces = PlanPieces(p, max_flops);
  EXPECT_EQ(pieces, PlanPieces(WithAllKeys(p), max_flops));
  EXPECT_EQ(LargestPieceFlops(p, max_flops), LargestPieceFlops(WithAllKeys(p), max_flops));
  ASSERT_GT(pieces.size(), 2u);
  std::vector<float> buffer(static_cast<size_t>(4 * QueryElements(p)));
  const AttentionTensors t = PackedTensors(p, MemoryKind::kHost, buffer.data(), buffer.data(),
                                           buffer.data(), buffer.data(), lens.data());
  for (const Piece& c : pieces) {
    const AttentionProblem sub = PieceProblem(p, c);
    EXPECT_EQ(sub.kv_lens, std::vector<int32_t>(lens.begin() + c.b0, lens.begin() + c.b1));
    EXPECT_TRUE(ValidateProblem(sub).ok()) << sub.ToString();
    EXPECT_EQ(PieceTensors(p, t, c).kv_lens, lens.data() + c.b0);
  }
  const Inputs in = RandomInputs(p, 9);
  auto whole = RunOnCpu(in);
  ASSERT_TRUE(whole.ok()) << whole.status();
  StopToken stop;
  RunOptions options;
  options.stop = &stop;
  options.max_piece_flops = max_flops;
  auto in_pieces = RunOnCpu(in, "cpu", options);
  ASSERT_TRUE(in_pieces.ok()) << in_pieces.status();
  EXPECT_EQ(*in_pieces, *whole);
}

TEST(Stop, AStoppedTokenRunsNothing) {
  const auto p = AttentionProblem::SelfAttention(1, 8, 1, 16, DType::kFloat32);
  StopToken stop;
  stop.RequestStop(absl::CancelledError("cancelled by the client"));
  stop.RequestStop(absl::UnavailableError("a later reason is ignored"));
  RunOptions options;
  options.stop = &stop;
  auto out = RunOnCpu(RandomInputs(p, 3), "cpu", options);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(out.status().message(), "cancelled by the client");
}

// A call of seconds on each host backend however many cores run it (one head: nothing to split
// but rows) ends soon after its deadline, inside the backend. 4.4 TFLOP: the cpu backend runs
// ~0.2 TFLOP/s on 2 cores (PERF.md), so even 16 cores take seconds; few elements (H = 16), so
// the inputs are quick to make.
TEST(Stop, AHostCallEndsSoonAfterItsDeadline) {
  const auto p = AttentionProblem::SelfAttention(1, 262144, 1, 16, DType::kFloat32);
  const Inputs in = RandomInputs(p, 4);
  for (const char* backend : {"cpu", "reference"}) {
    StopToken stop(Clock::now() + std::chrono::milliseconds(200));
    RunOptions options;
    options.stop = &stop;
    const auto start = Clock::now();
    auto out = RunOnCpu(in, backend, options);
    const double ms = MsSince(start);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << backend << out.status();
    EXPECT_LT(ms, 200 + 1000) << backend << ": the call ran " << ms << " ms past a 200 ms deadline";
  }
  // The same token no longer lets anything run; a fresh call is still correct.
  const auto small = AttentionProblem::SelfAttention(1, 9, 2, 8, DType::kFloat32);
  const Inputs in2 = RandomInputs(small, 5);
  auto ok = RunOnCpu(in2);
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(Compare(*ok, Reference(in2), ToleranceFor(small.dtype)).within);
}

TEST(Stop, ACpuCallStopsWhenAnotherThreadAsks) {
  const auto p = AttentionProblem::SelfAttention(1, 131072, 1, 16, DType::kBFloat16);  // 1.1 TFLOP
  const Inputs in = RandomInputs(p, 6);
  StopToken stop;
  RunOptions options;
  options.stop = &stop;
  options.max_piece_flops = AttentionFlops(p) / 4;
  Clock::time_point asked;
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    asked = Clock::now();
    stop.RequestStop(absl::UnavailableError("server is shutting down"));
  });
  auto out = RunOnCpu(in, "cpu", options);
  const auto returned = Clock::now();
  stopper.join();
  EXPECT_EQ(out.status().code(), absl::StatusCode::kUnavailable) << out.status();
  const double after_ms = std::chrono::duration<double, std::milli>(returned - asked).count();
  EXPECT_LT(after_ms, 1000);
}

// --- GPU backends -------------------------------------------------------------------------

class GpuPieces : public ::testing::TestWithParam<std::string> {};

// Pieces over batch, heads (GQA groups) and rows give the reference's values on every GPU
// backend, and the fused kernel's bits of the whole call (its rows do not depend on each other).
TEST_P(GpuPieces, MatchTheReferenceAndTheWholeCall) {
  ATTN_REQUIRE_GPU();
  const std::string name = GetParam();
  const AttentionProblem problems[] = {
      AttentionProblem::SelfAttention(4, 256, 8, 64, DType::kBFloat16, true, 2),
      AttentionProblem::SelfAttention(1, 640, 4, 128, DType::kFloat16, false, 1),
      AttentionProblem::SelfAttention(2, 192, 6, 64, DType::kBFloat16, false, 3),
  };
  uint64_t seed = 10;
  for (const AttentionProblem& p : problems) {
    for (double fraction : {0.3, 0.1, 0.01}) {
      SCOPED_TRACE(p.ToString() + " fraction " + std::to_string(fraction));
      const Backend* b = BackendRegistry::Default().Find(name);
      if (b == nullptr || !b->CheckSupport(p, SharedGpuContext()->info()).ok()) {
        GTEST_SKIP() << name << " cannot run " << p.ToString() << " here";
      }
      const Inputs in = RandomInputs(p, seed++);
      StopToken stop;
      RunOptions options;
      options.stop = &stop;
      options.max_piece_flops = AttentionFlops(p) * fraction;
      ASSERT_GT(PlanPieces(p, options.max_piece_flops).size(), 1u);
      const int64_t in_use = SharedGpuContext()->arena().bytes_in_use();
      auto pieces = RunOnGpu(in, name, *SharedGpuContext(), options);
      ASSERT_TRUE(pieces.ok()) << pieces.status();
      EXPECT_EQ(SharedGpuContext()->arena().bytes_in_use(), in_use);
      auto whole = RunOnGpu(in, name);
      ASSERT_TRUE(whole.ok()) << whole.status();
      if (name == "cudnn_fp8") {
        // Each piece quantises with its own amaxes, so its rounding differs from the whole
        // call's: held to the whole call's error at the same inputs (rel L2, at most 25% more)
        // and to FP8's relative-L2 bound.
        const Comparison c = Compare(*pieces, Reference(in), kFp8E4M3Tolerance);
        const Comparison w = Compare(*whole, Reference(in), kFp8E4M3Tolerance);
        EXPECT_LE(c.rel_l2, kFp8E4M3Tolerance.rel_l2) << c.ToString();
        EXPECT_LE(c.rel_l2, 1.25 * w.rel_l2)
            << "pieces " << c.ToString() << "; whole " << w.ToString();
        continue;
      }
      const Comparison c = Compare(*pieces, Reference(in), ToleranceFor(p.dtype));
      EXPECT_TRUE(c.within) << c.ToString();
      if (name == "fused") {
        EXPECT_EQ(*pieces, *whole);
      }
    }
  }
}

// A call of about a second, asked to stop after 100 ms: it returns the reason within about two
// pieces (~70 ms each here), the stream is idle, the arena as before, and the next call right.
TEST_P(GpuPieces, AStopEndsALongCallWithinTwoPiecesAndLeavesTheDeviceClean) {
  ATTN_REQUIRE_GPU();
  const std::string name = GetParam();
  if (name == "naive")
    GTEST_SKIP() << "naive's (T, S) score matrices make a long call too large to hold";
  const auto p = AttentionProblem::SelfAttention(2, 131072, 32, 128, DType::kBFloat16, false, 8);
  const Backend* b = BackendRegistry::Default().Find(name);
  if (b == nullptr || !b->CheckSupport(p, SharedGpuContext()->info()).ok()) {
    GTEST_SKIP() << name << " cannot run " << p.ToString() << " here";
  }
  DeviceContext& gpu = *SharedGpuContext();
  const int64_t in_use = gpu.arena().bytes_in_use();
  absl::Status status;
  Clock::time_point start, asked, returned;
  {
    // 5.4 GB of inputs, filled on the device with the runner's normal(0, 1) values.
    auto buffers = AllocatePacked(p, gpu);
    ASSERT_TRUE(buffers.ok()) << buffers.status();
    ASSERT_TRUE(FillInputs(gpu, p, buffers->tensors, 21).ok());
    ASSERT_TRUE(gpu.Synchronize().ok());
    StopToken stop;
    RunOptions options;
    options.stop = &stop;
    options.max_piece_flops = 3.5e13;  // bands of 8128 query rows (~70 ms each on an H200)
    // The pieces' plans first: a first-time cuDNN graph build (~0.6 s for FP8) runs on the host
    // before any piece is queued and is not what this test times (in a process of its own the
    // stop otherwise lands during the build: 662-730 ms, H200, 2026-12-04).
    for (const Piece& piece : PlanPieces(p, options.max_piece_flops)) {
      RunOptions warm = options;
      warm.whole_call = &p;
      ASSERT_TRUE(b->WorkspaceBytes(PieceProblem(p, piece), gpu, warm).ok());
    }
    std::thread stopper([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      asked = Clock::now();
      stop.RequestStop(absl::CancelledError("cancelled by the client"));
    });
    start = Clock::now();
    status = RunAttention(*b, p, buffers->tensors, gpu, options);
    returned = Clock::now();
    stopper.join();
  }
  ASSERT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
  const double after_ms = std::chrono::duration<double, std::milli>(returned - asked).count();
  std::printf("%s: asked to stop after %.0f ms, returned %.1f ms later\n", name.c_str(),
              std::chrono::duration<double, std::milli>(asked - start).count(), after_ms);
  EXPECT_LT(after_ms, 250) << "pieces of ~70 ms: at most two were queued";
  const auto sync = Clock::now();
  EXPECT_TRUE(gpu.Synchronize().ok());
  EXPECT_LT(MsSince(sync), 5) << "the stream still had work queued";
  EXPECT_EQ(gpu.arena().bytes_in_use(), in_use);
  const auto small = AttentionProblem::SelfAttention(2, 300, 8, 128, DType::kBFloat16, true, 8);
  const Inputs in2 = RandomInputs(small, 23);
  auto next = RunOnGpu(in2, name);
  ASSERT_TRUE(next.ok()) << next.status();
  const Tolerance tol = name == "cudnn_fp8" ? kFp8E4M3Tolerance : ToleranceFor(small.dtype);
  const Comparison c = Compare(*next, Reference(in2), tol);
  EXPECT_TRUE(c.within) << c.ToString();
}

INSTANTIATE_TEST_SUITE_P(Backends, GpuPieces,
                         ::testing::Values("naive", "fused", "cudnn", "cudnn_fp8"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           return param.param;
                         });

}  // namespace
}  // namespace attn::testing
