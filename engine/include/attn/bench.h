// Benchmark jobs in the engine: cases, the codelab's named suites, statistics, and a runner that
// measures cases on one DeviceContext. No gRPC: the server, attn-bench and tests share it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "attn/backend.h"
#include "attn/device.h"
#include "attn/fp8.h"
#include "attn/inputs.h"
#include "attn/plan.h"
#include "attn/problem.h"
#include "attn/stop.h"
#include "attn/tensor.h"

namespace attn {

// One measurement to make: a problem on a named backend ("auto" allowed).
struct BenchCase {
  std::string section;  // the codelab table it belongs to, e.g. "sequence sweep"
  AttentionProblem problem;
  std::string backend;
};

// The named suites: "codelab" (the codelab's tables: sequence and batch sweeps, MHA/GQA/MQA,
// causal sweep, correctness rows) and "large" (datacenter GPUs: B=4, N=16, H=128, T up to 8192,
// GQA with N=32, and decode: B 1..64, T 1 (16 at B16), S 1024..32768, N32 K8 H128, also with
// ragged kv_lens). On a CPU device every table is measured with the cpu backend instead of
// the GPU implementations. InvalidArgument for other names.
absl::StatusOr<std::vector<BenchCase>> ExpandSuite(absl::string_view name,
                                                   const DeviceInfo& device);
// The names ExpandSuite takes: "codelab", "large".
std::vector<std::string> SuiteNames();

// Summary of per-repeat times in milliseconds.
struct SampleStats {
  int64_t count = 0;
  double min = 0, median = 0, mean = 0, p10 = 0, p90 = 0, p99 = 0, stddev = 0;
};

// Device time between the runner's checks of the stop token and the case budget, and the most
// one CUDA graph replay may hold the device (a replay cannot stop part-way).
inline constexpr double kCheckEveryMs = 50;

// Percentiles by linear interpolation between order statistics; stddev is the sample standard
// deviation (0 for one sample). An empty input gives count == 0 and zeros.
SampleStats Summarize(std::vector<double> samples_ms);

struct BenchOptions {
  int warmup = 10;             // untimed calls first (plan builds happen here)
  int repeats = 50;            // timed calls at most
  double case_budget_s = 2.0;  // stop timing a case after this much device time (>= 1 repeat)
  uint64_t seed = 0;           // the job's seed: case i's inputs come from CaseSeed(seed, i)
  RunOptions run;              // passed to every call (autotune)
  // Time replays of a CUDA graph of graph_calls calls (no launch gaps); eager calls otherwise
  // and on the CPU.
  bool cuda_graph = false;
  int graph_calls = 20;
  // Compare each output with a reference on the same inputs: the float64 reference backend for
  // problems of up to kMaxNumericsFlops, the naive backend in float32 on the GPU beyond.
  bool check_numerics = false;
  // Input sets cycled through call by call (1: the same buffers every call, as the peers time);
  // several sets keep small problems from being timed out of a warm L2 cache.
  int rotate_inputs = 1;
  // The DelayedScaling recipe of cudnn_fp8 cases. The job holds one recipe state per such case
  // (TE's per-module state: the case is one module called over and over), passed to every call
  // of the case (warm-up, numerics check, timed calls, graph replays), so after the first call
  // each one quantises with the delayed scales its predecessors' amaxes gave.
  DelayedScaling fp8_recipe;
};

inline constexpr double kMaxNumericsFlops = 4e9;

// Whether check_numerics compares a case of `p` with the float64 reference (on the host) rather
// than naive float32 on the GPU: at most kMaxNumericsFlops with every key counted (WithAllKeys),
// so the choice, and the cost admission estimates for it, do not depend on kv_lens.
bool NumericsOnHost(const AttentionProblem& p);

// What a benchmark case will run, planned before it runs (PlanCase): the server admits its cost
// and memory from this, and RunPlannedCase runs exactly these calls, within these bounds.
struct CasePlan {
  // The case's call (its backend resolved): the warm-up, timed and checked calls.
  CallPlan call;
  int warmup_calls = 0;      // at most; cut once they held the device half the case budget
  int timed_samples = 0;     // samples at most (repeats), each of calls_per_sample calls
  int calls_per_sample = 1;  // calls in one CUDA graph replay; 1 when eager
  bool cuda_graph = false;   // timed as graph replays (on a GPU when options.cuda_graph)
  double budget_s = 0;       // timing stops once the samples held the device this long
  int input_sets = 1;
  // With check_numerics: one more call of `call`, then beside it on the same inputs:
  bool check_numerics = false;
  std::optional<CallPlan> unmasked;             // causal T == S: the causal-effect rows' twin
  std::optional<CallPlan> full_precision_peer;  // an FP8 case's peer ("cudnn" in bf16/fp16)
  std::optional<CallPlan> reference;            // float64 on the host, or naive float32
  std::string no_reference;                     // why there is none (check_numerics without one)
  // Held at once while the case runs: host memory (the check's copies and the host reference's
  // inputs, output and scratch), and the context's arena beside the calls' workspaces (the
  // input sets, the outputs compared beside, the FP8 recipe's state, naive's float32 tensors).
  int64_t host_bytes = 0;
  int64_t arena_bytes = 0;

  // An upper bound on the case's device time when one call of a plan takes seconds(plan): the
  // warm-up cut at half the budget (plus the call that crosses it), the timed samples at the
  // budget (plus one check interval), the checked call and those beside it.
  double Seconds(const std::function<double(const CallPlan&)>& seconds) const;
  // The longest single call of the case (a numerics reference can be longer than the case's).
  double LongestCallSeconds(const std::function<double(const CallPlan&)>& seconds) const;
};

// The plan of case `c` run with `options` on `device`: its backend resolved (Resolve's error
// when none can run it; a problem that breaks ValidateProblem gets that), every call it makes
// with options.run.max_piece_flops pieces, and what it holds.
absl::StatusOr<CasePlan> PlanCase(const BenchCase& c, const BenchOptions& options,
                                  const DeviceInfo& device);

struct BenchResult {
  BenchCase bench_case;
  uint64_t seed = 0;        // the case's inputs (CaseSeed of the job's seed and the case's index)
  std::string backend;      // the backend that ran (auto resolved); empty when none could
  absl::Status status;      // OK, or why the case did not run (unsupported: FailedPrecondition)
  SampleStats stats;        // per-call device time, ms
  bool budget_cut = false;  // fewer than the requested repeats ran because of case_budget_s
  double tflops = 0;        // AttentionFlops / median
  double gbps = 0;          // AttentionMinBytes / median
  double kv_gbps = 0;       // KeyValueBytesRead / median: the effective K/V bandwidth
  int64_t workspace_bytes = 0;
  int64_t peak_arena_bytes = 0;  // inputs, output and workspace of this case
  std::string timing;            // "cuda events", "cuda graph (20 calls per replay)", "host clock"
  int input_sets = 1;            // input sets rotated through (BenchOptions::rotate_inputs)
  // With check_numerics: max |out - ref| and ||out - ref|| / ||ref|| against the float64 reference
  // backend (problems up to kMaxNumericsFlops) or the naive backend in float32 on the GPU
  // (larger ones), or why they were not computed.
  double max_abs_error = -1;
  double rel_l2_error = -1;
  std::string numerics_note;
  // With check_numerics on a causal case with T == S: max |causal - unmasked| output of the same
  // backend at the first query position (large: it sees only itself) and the last (~0: it sees
  // every key either way), the codelab's causal-effect rows. -1 when not computed.
  double causal_first_diff = -1;
  double causal_last_diff = -1;
  // cudnn_fp8 cases: the recipe (DelayedScaling::ToString) and its state after the case's last
  // call, read back from the device: the scales that call quantised Q, K, V, S and O with, the
  // amaxes it saw, the scales a next call would use, and the calls recorded. Empty recipe and
  // zeros for other backends.
  std::string fp8_recipe;
  Fp8Snapshot fp8_state;
  // The quantise step alone (Q, K, V to E4M3 with amaxes, one kernel; included in `stats`),
  // median device time in ms; -1 when not measured.
  double fp8_quantize_ms = -1;
  // With check_numerics: max |out - cudnn bf16/fp16 out| on the same inputs, the codelab's
  // "Max |TE bf16 - TE FP8 autocast|" row; -1 when not computed.
  double fp8_vs_cudnn_max_diff = -1;
};

// InvalidArgument naming the field: warmup in [0, 10000], repeats in [1, 100000],
// case_budget_s in (0, 3600], graph_calls in [1, 1000], rotate_inputs in [1, kMaxInputSets], the
// fp8_recipe's own rules (ValidateDelayedScaling).
absl::Status ValidateBenchOptions(const BenchOptions& options);

// Median device times in ms of the cudnn_fp8 backend's steps (VisitFp8Steps), each launched
// alone `repeats` times back to back after 3 warm-ups and event-timed. A whole call takes their
// sum plus the gaps between launches. With quantize_only the other steps are not timed (left 0).
// FailedPrecondition where cudnn_fp8 cannot run.
struct Fp8StepTimes {
  double quantize_ms = 0;
  double attention_ms = 0;
  double dequantize_ms = 0;
  double update_ms = 0;
  std::string plan;  // cuDNN's name of the sdpa_fp8 plan timed, e.g. "eng2_k24=32"
};
absl::StatusOr<Fp8StepTimes> TimeFp8Steps(const AttentionProblem& problem, const void* q,
                                          const void* k, const void* v, DeviceContext& context,
                                          int repeats, bool quantize_only = false);

// Runs case `c` by its plan (PlanCase on `context`'s device, or the error that refused it, which
// becomes the result's status) with inputs from `case_seed` (CaseSeed). `stop` as RunBenchmark's.
BenchResult RunPlannedCase(const BenchCase& c, const absl::StatusOr<CasePlan>& plan,
                           const BenchOptions& options, uint64_t case_seed, DeviceContext& context,
                           const StopToken* stop = nullptr);

// Called after each case with (index, total, result).
using BenchProgress = std::function<void(size_t, size_t, const BenchResult&)>;

// Runs `cases` in order on `context`. A case that cannot run becomes a result with its reason;
// the job goes on. `stop`, when set, is checked between cases, between chunks of about 50 ms of
// repeats, and by every call (options.run.max_piece_flops sizes its pieces) and numerics check:
// the case it stops and the remaining ones come back with its reason (CANCELLED,
// DEADLINE_EXCEEDED, ...), and CUDA graph replays are kept to about 50 ms each (calls longer
// than that are timed eagerly). Bad options fail the whole job.
absl::StatusOr<std::vector<BenchResult>> RunBenchmark(const std::vector<BenchCase>& cases,
                                                      const BenchOptions& options,
                                                      DeviceContext& context,
                                                      const BenchProgress& progress = nullptr,
                                                      const StopToken* stop = nullptr);

}  // namespace attn
