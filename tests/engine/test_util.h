// Shared helpers of the engine tests: random operands, running a backend, comparing outputs.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
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
