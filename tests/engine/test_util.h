// Shared helpers of the engine tests: random operands, running a backend, comparing outputs.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "attn/arena.h"
#include "attn/backend.h"
#include "attn/device.h"
#include "attn/problem.h"
#include "engine/tolerances.h"
#include "gtest/gtest.h"

namespace attn {
// gtest prints parameters with these instead of their bytes.
inline void PrintTo(DType dtype, std::ostream* os) { *os << DTypeName(dtype); }
}  // namespace attn

namespace attn::testing {

// A host operand: raw bytes in the problem's dtype and the exact values they hold.
struct HostOperand {
  std::vector<double> values;
  std::vector<uint8_t> bytes;
};

// Rounds `values` to `dtype`; `values` afterwards holds what the bytes represent exactly.
HostOperand MakeOperand(std::vector<double> values, DType dtype);
// normal(0, 1) values rounded to `dtype`, reproducible from `seed`.
HostOperand RandomOperand(int64_t count, DType dtype, uint64_t seed);
std::vector<double> Decode(const std::vector<uint8_t>& bytes, DType dtype);

struct Inputs {
  AttentionProblem problem;
  HostOperand q, k, v;
};
Inputs RandomInputs(const AttentionProblem& p, uint64_t seed);

// Float64 reference (reference.h) of the inputs' exact values.
std::vector<double> Reference(const Inputs& in);

// Runs `backend` on host tensors through a CPU context (with in.problem.kv_lens as the tensors'
// lengths); returns the decoded output.
absl::StatusOr<std::vector<double>> RunOnCpu(const Inputs& in, const std::string& backend = "cpu",
                                             const RunOptions& options = {});

// Uploads the inputs (and in.problem.kv_lens), fills the output with NaN bit patterns (so
// unwritten elements fail any comparison), runs `backend` on the shared GPU context (or `gpu`) and
// returns the decoded output.
absl::StatusOr<std::vector<double>> RunOnGpu(const Inputs& in, const std::string& backend);
absl::StatusOr<std::vector<double>> RunOnGpu(const Inputs& in, const std::string& backend,
                                             DeviceContext& gpu, const RunOptions& options = {});

// p.kv_lens copied into `gpu`'s arena (data null without kv_lens); the block is freed with this.
struct DeviceKvLens {
  const int32_t* data = nullptr;
  ArenaBlock block;
};
absl::StatusOr<DeviceKvLens> UploadKvLens(const AttentionProblem& p, DeviceContext& gpu);

// `p` with B per-sequence KV lengths: batch element 0 sees 1 key, element 1 all S, the others a
// uniform draw from 1..S (reproducible from `seed`).
AttentionProblem WithRandomKvLens(AttentionProblem p, uint64_t seed);

// A CPU context shared by all tests (1 GiB host arena).
DeviceContext& SharedCpuContext();

// A context on GPU 0 shared by all tests (creating one costs ~100 ms); null without a GPU.
DeviceContext* SharedGpuContext();

// A test-name-safe label: "bfloat16_B2_T17_S40_N8_K2_H64_causal".
std::string ShapeName(DType dtype, int64_t b, int64_t t, int64_t s, int64_t n, int64_t k, int64_t h,
                      bool causal);

// A CUDA device description for support-rule tests (no GPU needed).
DeviceInfo FakeGpu(int cc_major, int cc_minor);

// A problem shape for parameterised GPU tests: (B, T, S, N, K, H).
struct Shape {
  int64_t b, t, s, n, k, h;
};
void PrintTo(const Shape& s, std::ostream* os);
// The problem of `s` in `dtype`, causal or not, with the default scale and no kv_lens.
AttentionProblem ProblemOf(const Shape& s, DType dtype, bool causal);

// Test-name generator for (dtype, shape, causal) parameters.
using DtypeShapeCausal = std::tuple<DType, Shape, bool>;
std::string DtypeShapeCausalName(const ::testing::TestParamInfo<DtypeShapeCausal>& info);

// The awkward sizes every GPU backend is held to against the float64 reference: T in {1, 17, 127,
// 1000}, S != T either way, H from 32 to 256 (80: no power of two), K in {N, N/4, 1}.
inline constexpr Shape kAwkwardShapes[] = {
    {1, 1, 1, 4, 4, 32},       {2, 1, 127, 8, 2, 64},    {2, 17, 17, 8, 8, 80},
    {1, 17, 1000, 8, 1, 128},  {2, 127, 127, 4, 1, 64},  {1, 127, 33, 8, 2, 256},
    {1, 1000, 1000, 4, 4, 64}, {1, 1000, 127, 8, 2, 32}, {2, 64, 256, 8, 8, 128},
    {1, 256, 1000, 4, 1, 80},
};

// One backend's list: kAwkwardShapes with head dim 80 as `h80` where the backend takes no 80,
// then the backend's own `extra` shapes.
std::vector<Shape> AwkwardShapes(int64_t h80 = 80, std::initializer_list<Shape> extra = {});

// One unit in the last place at `value`, a non-negative bf16 or fp16 number: the step to the next
// one up, through the dtype's own conversions.
double UlpOf(double value, DType dtype);

struct Comparison {
  double max_abs_error = 0;
  int64_t worst_index = -1;  // element with the largest error relative to its tolerance
  double worst_out = 0, worst_ref = 0;
  double rel_l2 = 0;
  bool within = true;  // every element and the L2 bound met; false for any NaN
  std::string ToString() const;
};
Comparison Compare(const std::vector<double>& out, const std::vector<double>& ref, Tolerance tol);

// `out` within `tol` of `ref` (every element and the L2 bound), failing the test with `what`
// (the backend and the problem) otherwise. Returns the comparison.
Comparison ExpectWithin(const std::vector<double>& out, const std::vector<double>& ref,
                        Tolerance tol, const std::string& what);

// `c`'s rel-L2 error at most `ratio` x `peer`'s + `floor`, failing the test with `what`
// otherwise: a fast path beside the naive path of the same precision (kFastVsNaiveErrorRatio),
// FP8 beside its emulation (kFp8VsEmulatedErrorRatio).
void ExpectErrorWithinRatio(const Comparison& c, const Comparison& peer, double ratio, double floor,
                            const std::string& what);

// The host backends (cpu, reference) run on the CPU context, the others on the GPU.
bool IsHostBackend(const std::string& backend);

// A backend's output beside the float64 reference.
struct Checked {
  std::vector<double> out;
  Comparison comparison;
};

// The check of every "versus reference" test: `backend` runs `in` (RunOnCpu for a host backend,
// RunOnGpu otherwise) and its output is within ToleranceFor(dtype) of `ref`, the float64
// reference of `in`; with `naive` (NaiveComparison on the same inputs), a fast path of the same
// precision also has at most kFastVsNaiveErrorRatio x the naive path's error. Returns the output,
// or the run's error (the caller asserts, or skips an Unsupported).
absl::StatusOr<Checked> RunVersusReference(const std::string& backend, const Inputs& in,
                                           const std::vector<double>& ref,
                                           const Comparison* naive = nullptr);

// The naive backend on `in` compared with `ref`: the error a fast path is held to.
absl::StatusOr<Comparison> NaiveComparison(const Inputs& in, const std::vector<double>& ref);

// Runs `backend` on the GPU with K and V interleaved in one (B, S, 2, K, H) buffer, as a KV
// cache stores them (strided views, no copies), and compares with the float64 reference.
// `p` must be a 16-bit problem. Call after ATTN_REQUIRE_GPU().
void ExpectStridedKvMatchesReference(const Backend& backend, const AttentionProblem& p,
                                     uint64_t seed);

}  // namespace attn::testing

// Skips the current test with the reason when this machine has no usable CUDA device.
#define ATTN_REQUIRE_GPU()                                                                 \
  do {                                                                                     \
    if (::attn::testing::SharedGpuContext() == nullptr) {                                  \
      GTEST_SKIP() << (::attn::BuiltWithCuda() ? "no CUDA device on this machine"          \
                                               : "built without CUDA (ATTN_ENABLE_CUDA)"); \
    }                                                                                      \
  } while (0)
